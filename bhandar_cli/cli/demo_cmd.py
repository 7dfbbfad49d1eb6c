"""`bhandar demo [NAME]`: scripted classroom demos on a live in-process cluster.

This module only parses and chooses; the scripts are in `bhandar_cli/teach/demos.py` and the player
in `bhandar_cli/teach/demo_runner.py`, imported inside the command so `bhandar --help` stays fast.
"""

from __future__ import annotations

import difflib
import sys

import typer

from bhandar_cli.cli.output import fail
from bhandar_cli.client import EXIT_FAILED, EXIT_USAGE


def demo(
    name: str | None = typer.Argument(
        None, metavar="NAME", help="The demo to run; without it, list the demos."
    ),
    auto: bool = typer.Option(False, "--auto", help="Run every step without waiting for Enter."),
    verbose: bool = typer.Option(
        False, "--verbose", help="Show every command and reply (a long run of commands shows its first few)."
    ),
    list_: bool = typer.Option(False, "--list", help="List the demos with a one-line summary and exit."),
    virtual_time: bool = typer.Option(
        False, "--virtual-time", help="Run on a virtual clock: sleeps and timeouts take no real time."
    ),
    web: bool = typer.Option(
        False, "--web", help="Serve the live web view of the demo's cluster, with its narration on the page."
    ),
    port: int = typer.Option(8700, "--port", "-p", help="Port of the --web page (0: any free port)."),
    open_browser: bool = typer.Option(False, "--open", help="Open the --web page in the default browser."),
) -> None:
    """Run a classroom demo: narration, commands and live replies, step by step.

    Each step checks that the store did what the narration says, else the demo stops with exit status 1.

    Enter runs the next step, q then Enter quits, Ctrl-C stops (exit status 130).

    With --web the page (as `bhandar web` serves it) shows each step's narration and checks; after
    the last step it stays up until Enter, or stops at once at the end of input.
    """
    from rich.console import Console

    from bhandar_cli.core.model import BhandarError
    from bhandar_cli.teach import DEMOS, demo_table, run_demo

    if list_ or name is None:
        # Piped, rich would wrap at 80 columns: keep each demo on one line for grep and friends.
        console = Console(width=None if sys.stdout.isatty() else 120)
        console.print(demo_table())
        console.print(
            "run one with: bhandar demo NAME [--auto] [--virtual-time | --web]; "
            "--web also shows it on the live page",
            style="dim",
        )
        return
    chosen = DEMOS.get(name.strip().lower())
    if chosen is None:
        # cutoff=0 always finds the nearest name, so the error can always suggest one.
        (nearest,) = difflib.get_close_matches(name.lower(), list(DEMOS), n=1, cutoff=0.0)
        fail(f"no demo named {name!r}; did you mean {nearest}? (bhandar demo --list)", EXIT_USAGE)
    if (web or open_browser) and virtual_time:
        fail("--web serves the page in real time: drop --virtual-time", EXIT_USAGE)
    if not 0 <= port <= 65535:
        fail(f"--port must be between 0 and 65535 (got {port})", EXIT_USAGE)
    from bhandar_cli.web import WebPage

    page = WebPage(port, open_browser) if web or open_browser else None
    try:
        code = run_demo(chosen, auto=auto, virtual_time=virtual_time, verbose=verbose, page=page)
    except BhandarError as exc:  # the port is taken
        fail(str(exc), EXIT_FAILED)
    raise typer.Exit(code)
