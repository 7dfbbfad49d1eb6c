"""`bhandar demo`: every classroom demo runs to the end on a live cluster with its expectations met,
and a demo that stops teaching its lesson (a changed script or a broken store) fails loudly.

Everything runs on trio's MockClock (--virtual-time): the demos' `sleep 4s` take no real time.
"""

from __future__ import annotations

import dataclasses
import io
import re
import subprocess
import sys
from typing import Any

import pytest
import trio
import trio.testing
import typer
from rich.console import Console
from typer.testing import CliRunner

import bhandar_cli.core.model.records
import bhandar_cli.core.roles.write_path
from bhandar_cli.cli.demo_cmd import demo as demo_command
from bhandar_cli.client.exit_status import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK
from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.core.model.versions import lww_merge
from bhandar_cli.repl.batch import open_session
from bhandar_cli.teach.demo_kit import Demo, DemoContext, Expect, Step, get_values
from bhandar_cli.teach.demo_runner import Outcome, play, run_demo
from bhandar_cli.teach.demos import DEMOS
from bhandar_cli.teach.demos_versions import SIBLINGS

UNEXPECTED = "this demo did not behave as expected"


def run(demo: Demo, stdin: Any = None, auto: bool = True) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_demo(demo, auto=auto, virtual_time=True, stdin=stdin, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def tiny(*steps: Step, nodes: int = 3) -> Demo:
    return Demo("tiny", "A tiny demo", "for tests", "nowhere", ClusterOptions(nodes=nodes), steps)


@pytest.mark.parametrize("name", list(DEMOS))
def test_every_demo_runs_to_the_end_with_its_expectations_met(name: str) -> None:
    demo = DEMOS[name]
    code, out, err = run(demo)
    assert (code, err) == (EXIT_OK, ""), out
    total = len(demo.steps)
    assert [f"step {i}/{total}" for i in range(1, total + 1)] == re.findall(r"step \d+/\d+", out)
    assert out.count("✓ ") == sum(len(step.expect) + (step.until is not None) for step in demo.steps)
    assert "✗" not in out and "internal error" not in out
    assert f"demo {name} done: {total} steps, every expectation met" in out


def test_siblings_demo_tells_the_seed_story() -> None:
    code, out, _ = run(SIBLINGS)
    assert code == EXIT_OK
    assert 'bhandar> put carts cart:42 \'["rice","oil"]\' via=A c=ONE' in out
    assert "2 siblings: concurrent writes" in out
    # The merged write carries the clock the course text prints: put via C ... clock {A:2, B:1, C:1}.
    assert re.search(r'\["oil", "rice", "salt"\]\s+C:1\s+\{A:2, B:1, C:1\}', out)


def test_every_demo_has_narration_commands_and_checks() -> None:
    for demo in DEMOS.values():
        assert demo.summary and demo.title and len(demo.steps) >= 4
        assert any(step.expect for step in demo.steps), demo.name
    narration = " ".join(s.say for d in DEMOS.values() for s in d.steps if isinstance(s.say, str))
    for concept in (
        "preference list",
        "sloppy quorum",
        "hinted handoff",
        "vector clock",
        "dotted version vector",
        "sibling",
        "context",
        "tombstone",
        "PN-Counter",
        "read repair",
    ):
        assert concept.lower() in narration.lower(), concept


def test_altered_expectation_stops_the_demo_with_exit_1() -> None:
    steps = list(SIBLINGS.steps)
    steps[5] = dataclasses.replace(steps[5], expect=(Expect("three siblings", get_values([1, 2, 3])),))
    code, out, err = run(dataclasses.replace(SIBLINGS, steps=tuple(steps)))
    assert code == EXIT_FAILED
    assert f"{UNEXPECTED}: step 6/8: expected three siblings, but the get returned" in err
    assert "✗ expected three siblings" in out
    assert "step 7/8" not in out  # later steps build on this one: the demo stops here


@pytest.mark.patches_compiled
def test_a_store_that_drops_concurrent_writes_fails_the_siblings_demo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Break the store on purpose: merge siblings as last-write-wins, silently dropping one write.
    monkeypatch.setattr(bhandar_cli.core.model.records, "merge_siblings", lww_merge)
    monkeypatch.setattr(bhandar_cli.core.roles.write_path, "merge_siblings", lww_merge)
    code, out, err = run(SIBLINGS)
    assert code == EXIT_FAILED
    assert "✓ A holds {A:2}, B and C hold {A:1, B:1}: concurrent" in out  # replicas still diverge
    assert f"{UNEXPECTED}: step 6/8: expected the get shows two siblings" in err
    assert err.count("\n") == 1  # one line, no traceback


def test_an_unexpected_failed_command_is_shown_and_fails_the_demo() -> None:
    code, out, err = run(tiny(Step("Kill a node that does not exist.", ["put kv k v", "kill Z", "status"])))
    assert code == EXIT_FAILED
    assert "bhandar> kill Z" in out and "error (bad_input): unknown node 'Z'" in out
    assert "bhandar> status" not in out
    assert f"{UNEXPECTED}: step 1/1: `kill Z` failed: unknown node 'Z'" in err


def test_an_expected_failure_is_part_of_the_lesson() -> None:
    step = Step("Z does not exist.", ["kill Z"], failures_expected=True)
    assert run(tiny(step))[0] == EXIT_OK


def test_a_step_that_cannot_be_computed_fails_without_a_traceback() -> None:
    step = Step("Kill the second replica.", lambda ctx: [f"kill {ctx.replicas()[1]}"])
    code, _, err = run(tiny(step))
    assert code == EXIT_FAILED
    assert (
        f"{UNEXPECTED}: step 1/1: could not prepare it from the earlier replies (no prefs reply yet)" in err
    )


def test_a_check_that_raises_is_a_failed_expectation() -> None:
    step = Step("Look at status.", ["status"], (Expect("a get", lambda ctx: str(ctx.reply("get"))),))
    code, _, err = run(tiny(step))
    assert code == EXIT_FAILED
    assert "could not be checked (DemoError: this step has no get reply" in err


def test_enter_runs_the_next_step_and_q_quits() -> None:
    code, out, _ = run(SIBLINGS, stdin=io.StringIO("\n\nq\n"), auto=False)
    assert code == EXIT_OK
    assert "── step 2/8 " in out and "── step 3/8 " not in out
    assert "stopped before step 3/8" in out


def test_end_of_input_plays_the_rest_without_pausing() -> None:
    code, out, _ = run(SIBLINGS, stdin=io.StringIO("\n"), auto=False)
    assert code == EXIT_OK
    assert out.count("Enter: step") == 2  # the first Enter, then end of input
    assert "every expectation met" in out


class CtrlC:
    """Standard input (not a terminal) on which the person presses Ctrl-C. Not an io class:
    typeshed types _IOBase.readline as bytes, which no text stream's override can match."""

    def isatty(self) -> bool:
        return False

    def readline(self) -> str:
        raise KeyboardInterrupt


def test_ctrl_c_stops_cleanly_with_130() -> None:
    code, out, err = run(SIBLINGS, stdin=CtrlC(), auto=False)
    assert code == EXIT_INTERRUPTED
    assert "stopped (Ctrl-C) after step 0/8" in out
    assert err == ""


def test_real_time_mode_reads_the_answer_in_a_thread() -> None:
    # The classroom path (no --virtual-time) waits for Enter in a worker thread so the cluster
    # keeps running; here it runs on the mock clock, which only needs the thread to answer.
    answers = iter(["", "q"])

    async def main() -> Outcome:
        async with open_session(SIBLINGS.options) as session:
            out = Console(file=io.StringIO())
            return await play(SIBLINGS, session, out, out, lambda: next(answers), ask_in_thread=True)

    outcome = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert outcome == Outcome(EXIT_OK, 1)


def test_context_helpers_find_replies() -> None:
    ctx = DemoContext(
        [("prefs x y", {"cmd": "prefs", "ok": True, "replicas": ["B", "C", "A"], "fallbacks": []})]
    )
    ctx.step_start = 1
    assert ctx.replicas() == ["B", "C", "A"]
    ctx.history.append(("get x y", {"cmd": "get", "ok": True, "values": [1]}))
    assert ctx.reply("get")["values"] == [1]
    assert get_values([1])(ctx) is None and get_values([2])(ctx) == "the get returned [1]"


# --- the command line ---------------------------------------------------------------------------------


def cli() -> typer.Typer:
    # Until the lead registers `demo` on the root app (cli/app.py), test it through an app of its own.
    app = typer.Typer()
    app.command("demo")(demo_command)

    @app.callback()
    def root() -> None:
        pass

    return app


def test_cli_runs_a_demo() -> None:
    result = CliRunner().invoke(cli(), ["demo", "counter", "--auto", "--virtual-time"])
    assert result.exit_code == EXIT_OK, result.output
    assert "demo counter done: 6 steps, every expectation met" in result.stdout


@pytest.mark.parametrize("args", [["demo"], ["demo", "--list"], ["demo", "quorum", "--list"]])
def test_cli_lists_the_demos(args: list[str]) -> None:
    result = CliRunner().invoke(cli(), args)
    assert result.exit_code == EXIT_OK
    for demo in DEMOS.values():
        assert demo.name in result.stdout and demo.summary[:40] in result.stdout
    assert "bhandar> " not in result.stdout  # listing starts no cluster


@pytest.mark.parametrize(("typo", "nearest"), [("sibling", "siblings"), ("hand-off", "handoff"), ("xyz", "")])
def test_cli_unknown_demo_is_a_one_line_usage_error(typo: str, nearest: str) -> None:
    result = CliRunner().invoke(cli(), ["demo", typo, "--auto", "--virtual-time"])
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"bhandar: no demo named '{typo}'; did you mean {nearest}")
    assert re.search(r"did you mean [a-z]+\?", line)


@pytest.mark.patches_compiled
def test_cli_failing_demo_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bhandar_cli.core.model.records, "merge_siblings", lww_merge)
    monkeypatch.setattr(bhandar_cli.core.roles.write_path, "merge_siblings", lww_merge)
    result = CliRunner().invoke(cli(), ["demo", "siblings", "--auto", "--virtual-time"])
    assert result.exit_code == EXIT_FAILED
    assert UNEXPECTED in result.stderr


def test_join_demo_runs_to_the_end() -> None:
    from bhandar_cli.teach.demos import DEMOS

    assert "join" in DEMOS
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "bhandar_cli", "demo", "join", "--auto", "--virtual-time"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "every expectation met" in proc.stdout


def test_a_long_run_of_commands_shows_its_first_few_unless_verbose() -> None:
    short = CliRunner().invoke(cli(), ["demo", "join", "--auto", "--virtual-time"])
    full = CliRunner().invoke(cli(), ["demo", "join", "--auto", "--virtual-time", "--verbose"])
    assert short.exit_code == full.exit_code == EXIT_OK, short.output + full.output
    # Step 1 writes 30 keys and step 4 reads them: three of each are shown, the rest counted.
    assert short.stdout.count("bhandar> put kv k") == 3 and full.stdout.count("bhandar> put kv k") == 30
    assert "… and 27 more commands like these, not shown: 27 of 27 succeeded" in short.stdout
    assert "… and 27 more commands like these, not shown: 27 of 27 found" in short.stdout
    assert "not shown" not in full.stdout
    assert len(short.stdout.splitlines()) < len(full.stdout.splitlines()) / 3
    assert "slept" not in short.stdout  # the command line above already says it
