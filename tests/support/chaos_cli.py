"""`bhandar chaos` alone in a typer app, invoked in-process: what the chaos and swarm tests run."""

from __future__ import annotations

import typer
from typer.testing import CliRunner, Result

from bhandar_cli.cli.chaos_cmd import chaos


def make_app() -> typer.Typer:
    app = typer.Typer(add_completion=False)

    @app.callback()
    def root() -> None:
        """Test harness."""

    app.command("chaos")(chaos)
    return app


def invoke(*args: str) -> Result:
    """Run `bhandar chaos ARGS` and return what it printed and its exit code."""
    return CliRunner().invoke(make_app(), ["chaos", *args])
