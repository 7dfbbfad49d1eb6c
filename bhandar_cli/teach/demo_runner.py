"""Plays a classroom demo (`demos.py`) step by step on a live in-process cluster.

This module owns the presentation and the checking: a panel of narration per step ("step 2/7"),
each command echoed as `bhandar> ...` with its rendered reply, then the step's expectations, ticked
or crossed. Between steps it waits for Enter (q quits) unless it runs with --auto; at the end of
input it carries on as if --auto. Nothing a command does can crash it: a failed command is shown
like any other reply. When a command fails that should not have, or an expectation does not hold,
the demo stops with "this demo did not behave as expected: ..." on standard error and exit status 1,
because a demo that teaches the wrong thing must not look like it worked.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol, TextIO

import trio
from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from bhandar_cli.client import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, cluster_clock
from bhandar_cli.core.model import BhandarError, sole_exception
from bhandar_cli.core.model import count as counted
from bhandar_cli.repl import Session, open_session, render
from bhandar_cli.teach.demo_kit import Demo, DemoContext, Expect, Json, Step, lines, text
from bhandar_cli.teach.demos import DEMOS
from bhandar_cli.teach.narration import Narration

PANEL_WIDTH = 100  # narration is read aloud: keep its lines short even on a wide terminal
SHOWN_COMMANDS = 3  # of a long run of commands in one step, without --verbose

Ask = Callable[[], str | None]  # one line typed by the person, None at the end of input


@dataclass(frozen=True)
class Outcome:
    code: int
    steps_done: int
    failure: str | None = None


def demo_table(demos: dict[str, Demo] | None = None) -> Table:
    table = Table("demo", "steps", "what it shows", box=box.SIMPLE_HEAD, show_edge=False)
    for demo in (demos or DEMOS).values():
        table.add_row(Text(demo.name, "bold cyan"), str(len(demo.steps)), demo.summary)
    return table


def _header(demo: Demo, interactive: bool) -> Panel:
    o = demo.options
    last = chr(ord("A") + o.nodes - 1)
    parts = [
        Text(demo.summary),
        Text(
            f"cluster: {o.nodes} nodes (A-{last}) in {o.zones} zones, {o.vnodes} tokens each, "
            f"N = {o.replicas} replicas per key"
            + (", background anti-entropy off" if o.repair_interval == 0 else ""),
            style="dim",
        ),
        Text(f"read more: {demo.guide}", style="dim"),
    ]
    if interactive:
        parts.append(Text("Enter runs the next step; q then Enter quits; Ctrl-C stops.", style="dim"))
    return Panel(
        Group(*parts),
        title=Text(demo.title, "bold"),
        title_align="left",
        border_style="blue",
        width=PANEL_WIDTH,
    )


def _is_interrupt(exc: BaseException) -> bool:
    # Ctrl-C inside a command may come out of one of trio's nurseries wrapped in an exception group.
    if isinstance(exc, KeyboardInterrupt):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(KeyboardInterrupt)[0] is not None
    return False


async def _ask(out: Console, prompt: str, ask: Ask, in_thread: bool) -> str | None:
    out.print(Text(prompt, style="dim"), end="")
    out.file.flush()
    if in_thread:
        # Real time: the cluster keeps running (pings, hint delivery) while the class reads.
        # abandon_on_cancel lets Ctrl-C through while the thread still waits for a line.
        answer = await trio.to_thread.run_sync(ask, abandon_on_cancel=True)
        # A Ctrl-C that woke the reading thread is delivered here, before the next step starts.
        await trio.lowlevel.checkpoint()
        return answer
    # Virtual time: block the whole loop, so the virtual clock does not race ahead while we wait.
    return ask()


async def play(
    demo: Demo,
    session: Session,
    out: Console,
    err: Console,
    ask: Ask | None = None,
    ask_in_thread: bool = False,
    verbose: bool = False,
    narration: Narration | None = None,
) -> Outcome:
    """Run every step of `demo` on `session`; pause before each step when `ask` is given. A
    `narration` is told everything shown (the web view's Narration panel)."""
    ctx = DemoContext()
    said = narration or Narration(demo.name, demo.title, demo.summary, len(demo.steps))
    total = len(demo.steps)
    started = trio.current_time()
    out.print(_header(demo, ask is not None))
    done = 0
    try:
        for number, step in enumerate(demo.steps, 1):
            if ask is not None:
                answer = await _ask(out, f"Enter: step {number}/{total}  (q: quit) ", ask, ask_in_thread)
                if answer is None:
                    ask = None  # end of input: play the rest without pausing
                    out.print()
                elif answer.strip().lower() in ("q", "quit", "exit"):
                    out.print(Text(f"stopped before step {number}/{total}", style="yellow"))
                    said.end("stopped")
                    return Outcome(EXIT_OK, done)
            failure = await play_step(step, f"{number}/{total}", session, ctx, out, verbose, said)
            if failure is not None:
                said.end("failed", failure)
                err.print(Text(f"bhandar: this demo did not behave as expected: {failure}"))
                err.file.flush()
                return Outcome(EXIT_FAILED, done, failure)
            done = number
            said.end("passed")
    except BaseException as exc:
        if not _is_interrupt(exc):
            raise
        out.print()
        out.print(Text(f"stopped (Ctrl-C) after step {done}/{total}", style="yellow"))
        said.end("stopped")
        return Outcome(EXIT_INTERRUPTED, done)
    said.end("done")
    seconds = trio.current_time() - started
    out.print(
        Text(
            f"demo {demo.name} done: {total} steps, every expectation met ({seconds:.1f} s of cluster time)",
            style="bold green",
        )
    )
    return Outcome(EXIT_OK, total)


async def play_step(
    step: Step,
    label: str,
    session: Session,
    ctx: DemoContext,
    out: Console,
    verbose: bool = False,
    said: Narration | None = None,
) -> str | None:
    """One step: narration, commands and replies, then the checks. Returns why it failed, if it did."""
    ctx.step_start = len(ctx.history)
    try:
        say, commands = text(step.say, ctx), lines(step.run, ctx)
    except Exception as exc:  # a step computed from a reply that did not come as planned
        return f"step {label}: could not prepare it from the earlier replies ({exc})"
    said = said or Narration("", "", "", 0)
    said.step(int(label.split("/")[0]), say)
    # A rule and the narration under it (not a box): a demo is read on one screen at a time.
    width = min(out.width, PANEL_WIDTH)
    title = f" step {label} "
    out.print(Text.assemble(("──", "cyan"), (title, "bold"), ("─" * (width - len(title) - 2), "cyan")))
    out.print(Text(say), width=width)
    if step.until is None:
        failure = await _run_commands(commands, step, label, session, ctx, out, verbose, said)
    else:
        failure = await _run_until(commands, step, label, session, ctx, out, said)
    if failure is not None:
        return failure
    for expect in step.expect:
        seen = _checked(expect, ctx)
        if seen is not None:
            out.print(Text(f"✗ expected {expect.what}, but {seen}", style="bold red"))
            said.check(False, f"✗ expected {expect.what}, but {seen}")
            return f"step {label}: expected {expect.what}, but {seen}"
        out.print(Text(f"✓ {expect.what}", style="green"))
        said.check(True, f"✓ {expect.what}")
    if step.then is not None:
        try:
            then = text(step.then, ctx)
            out.print(Text(then, style="italic"))
            said.conclude(then)
        except Exception as exc:
            return f"step {label}: could not tell the conclusion ({exc})"
    out.file.flush()
    return None


def folded(commands: list[str], verbose: bool = False) -> dict[int, int]:
    """Which commands run unseen: {index of the last command of a long run: how many of the run
    are not shown}. Only a long run of the same command (30 puts, 30 gets) folds, after its first
    few; any other command stays in sight, as a check's evidence may be its reply."""
    if verbose:
        return {}
    runs: dict[int, int] = {}
    start = 0
    for i in range(1, len(commands) + 1):
        if i == len(commands) or commands[i].split()[0] != commands[start].split()[0]:
            if i - start > SHOWN_COMMANDS + 1:
                runs[i - 1] = i - start - SHOWN_COMMANDS
            start = i
    return runs


def _unseen(runs: dict[int, int]) -> set[int]:
    return {i for last, n in runs.items() for i in range(last - n + 1, last + 1)}


def _fold_line(replies: list[Json]) -> Text:
    """What the unseen replies of a run came to: the evidence of a check over all of them."""
    n = len(replies)
    if all(r.get("cmd") == "get" for r in replies):
        came = f"{sum(1 for r in replies if r.get('found'))} of {n} found"
    else:
        came = f"{sum(1 for r in replies if r.get('ok'))} of {n} succeeded"
    return Text(
        f"… and {counted(n, 'more command')} like these, not shown: {came} "
        "(--verbose shows every command and reply)",
        style="dim",
    )


async def _run_commands(
    commands: list[str],
    step: Step,
    label: str,
    session: Session,
    ctx: DemoContext,
    out: Console,
    verbose: bool,
    said: Narration,
) -> str | None:
    """Run and show the step's commands (a long run of one command folded); why it failed, if it did."""
    runs = folded(commands, verbose)
    unseen = _unseen(runs)
    began: dict[int, int] = {}  # each command's first reply's place in the history
    for number, line in enumerate(commands):
        began[number] = len(ctx.history)
        visible = number not in unseen
        if visible:
            out.print(Text.assemble(("bhandar> ", "bold blue"), (line, "bold")))
        said.command(line)  # every one: the page has room to scroll
        for reply in await session.run_line(line):
            # "slept 4s" only repeats the command the line above shows.
            if (visible and reply.to_json().get("cmd") != "sleep") or not reply.ok:
                out.print(render(reply))
            data = reply.to_json()
            if visible:
                ctx.shown.add(len(ctx.history))
            ctx.history.append((line, data))
            if not reply.ok and not step.failures_expected:
                out.file.flush()
                return f"step {label}: `{line}` failed: {data.get('error')}"
        if number in runs:
            out.print(_fold_line([d for _, d in ctx.history[began[number - runs[number] + 1] :]]))
        out.file.flush()
    return None


async def _run_until(
    commands: list[str],
    step: Step,
    label: str,
    session: Session,
    ctx: DemoContext,
    out: Console,
    said: Narration,
) -> str | None:
    """Run the step's commands every `step.poll` seconds until `step.until` holds, at most
    `step.within` seconds; show the last round, and how long the wait took."""
    assert step.until is not None
    until = step.until
    out.print(Text(f"waiting until {until.what} (at most {step.within:g} s)…", style="dim"))
    out.file.flush()
    started = trio.current_time()
    while True:
        del ctx.history[ctx.step_start :]
        shown: list[tuple[str, list[RenderableType]]] = []
        for line in commands:
            rendered = []
            for reply in await session.run_line(line):
                data = reply.to_json()
                ctx.history.append((line, data))
                if data.get("cmd") != "sleep" or not reply.ok:
                    rendered.append(render(reply))
                if not reply.ok and not step.failures_expected:
                    return f"step {label}: `{line}` failed: {data.get('error')}"
            shown.append((line, rendered))
        seen = _checked(until, ctx)
        waited = trio.current_time() - started
        if seen is None or waited >= step.within:
            break
        await trio.sleep(step.poll)
    ctx.shown.update(range(ctx.step_start, len(ctx.history)))
    for line, rendered in shown:
        out.print(Text.assemble(("bhandar> ", "bold blue"), (line, "bold")))
        said.command(line)
        for each in rendered:
            out.print(each)
    if seen is not None:
        wrong = f"✗ expected {until.what} within {step.within:g} s, but {seen}"
        out.print(Text(wrong, style="bold red"))
        said.check(False, wrong)
        return f"step {label}: expected {until.what} within {step.within:g} s, but {seen}"
    ok = f"✓ {until.what} (after {waited:.1f} s of waiting)"
    out.print(Text(ok, style="green"))
    said.check(True, ok)
    return None


def _checked(expect: Expect, ctx: DemoContext) -> str | None:
    try:
        return expect.check(ctx)
    except Exception as exc:  # a reply without the expected shape is a failed expectation too
        return f"the replies could not be checked ({type(exc).__name__}: {exc})"


class EndAware:
    """A line reader that remembers reaching the end of input (a demo run from a script)."""

    def __init__(self, ask: Ask) -> None:
        self.ask = ask
        self.ended = False

    def __call__(self) -> str | None:
        line = None if self.ended else self.ask()
        self.ended = line is None
        return line


class DemoPage(Protocol):
    """A page shown beside a demo while it plays (`bhandar demo --web`: web/demo_page.py's
    `WebPage`), handed to `run_demo` by whoever starts the demo; the demo does not know how it is
    served."""

    def serving(
        self, session: Session, narration: Narration, out: Console, reader: EndAware
    ) -> AbstractAsyncContextManager[None]: ...


def line_reader(stream: TextIO, echo: Console | None = None) -> Ask:
    """Lines from `stream`; with `echo`, show each line read, as a terminal would have."""

    def ask() -> str | None:
        line = stream.readline()
        if echo is not None:
            echo.print(Text(line.rstrip("\n")))
        return None if line == "" else line.rstrip("\n")

    return ask


def make_consoles(stdout: TextIO, stderr: TextIO) -> tuple[Console, Console]:
    # Unlike batch mode's consoles these wrap long lines: narration panels must wrap to be read,
    # and nothing parses this output.
    width = None if stdout.isatty() else 120
    return Console(file=stdout, width=width), Console(file=stderr, width=width, soft_wrap=True)


def run_demo(
    demo: Demo,
    auto: bool = False,
    virtual_time: bool = False,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    verbose: bool = False,
    page: DemoPage | None = None,
) -> int:
    """Start a cluster for `demo`, play it, stop the cluster; returns the exit status. With a
    `page`, it is served for the demo's session while the demo plays, with the narration."""
    out, err = make_consoles(stdout or sys.stdout, stderr or sys.stderr)
    source = stdin or sys.stdin
    reader = EndAware(line_reader(source, None if source.isatty() else out))
    ask = None if auto else reader
    narration = Narration(demo.name, demo.title, demo.summary, len(demo.steps))

    async def main() -> int:
        async with open_session(demo.options) as session:
            if page is None:
                outcome = await play(
                    demo, session, out, err, ask, ask_in_thread=not virtual_time, verbose=verbose
                )
                return outcome.code
            async with page.serving(session, narration, out, reader):
                outcome = await play(demo, session, out, err, ask, True, verbose, narration)
        return outcome.code

    # Sleeps and timeouts take no real time on the virtual clock, which jumps as soon as every
    # task waits: that is what makes the demos instant in tests.
    try:
        return trio.run(main, clock=cluster_clock(virtual_time))
    except BaseException as exc:
        if _is_interrupt(exc):  # Ctrl-C while the cluster starts or stops
            out.print(Text("stopped (Ctrl-C)", style="yellow"))
            return EXIT_INTERRUPTED
        exit_ = _only_system_exit(exc)
        if exit_ is not None:  # rich exits on a closed pipe (`bhandar demo x | head`): no traceback
            raise exit_ from None
        sole = sole_exception(exc)
        if isinstance(sole, BhandarError) and sole is not exc:  # the --web port is taken
            raise sole from None
        raise


def _only_system_exit(exc: BaseException) -> SystemExit | None:
    sole = sole_exception(exc)
    return sole if isinstance(sole, SystemExit) else None
