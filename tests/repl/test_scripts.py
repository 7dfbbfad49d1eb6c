"""Script semantics in batch mode, row by row: each row of the man page's SCRIPTS table is run as
its example shows (on a virtual clock) and must give the row's exit status, run the commands it
says and attribute every error to the command it belongs to, with that command's place."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from bhandar_cli.cli.app import app
from bhandar_cli.repl.script import place_of
from bhandar_cli.repl.script_rules import SCRIPT_FILE, SCRIPT_RULES, ScriptRule

# Per row: what stdout shows, one entry per command that printed (see `printed`), and the start
# of each error line on stderr: the command's place, its name, its error code.
EXPECTED: dict[str, tuple[list[str], list[str]]] = {
    "success": (["put", "get found"], []),
    "failure": (["put"], ["command 2 (put): error (unknown_keyspace)"]),
    "keep-going": (["put", "get found"], ["command 1 (put): error (unknown_keyspace)"]),
    "unparsed": ([], ["command 3 (keyspaces): error (bad_input)"]),
    "unparsed-script": ([], ["line 3 (keyspaces): error (bad_input)"]),
    "unparsed-stdin": (["put"], ["line 2 (keyspaces): error (bad_input)"]),
    "unparsed-stdin-keep-going": (["put", "get found"], ["line 2 (keyspaces): error (bad_input)"]),
    "not-found": (["get not found", "put"], []),
    "not-found-last": (["put", "get not found"], []),
    "quit": (["put", "quit"], []),
    "json": (
        ["put failed at line 1, command 1 (unknown_keyspace)", "get not found"],
        ["command 1 (put): error (unknown_keyspace)"],
    ),
}


def run_repl(args: list[str], stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, ["repl", "--virtual-time", *args], input=stdin)


def printed(stdout: str) -> list[str]:
    """What each command printed on stdout, one entry per command: JSON objects or table text."""
    seen = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            obj = json.loads(line)
            if not obj["ok"]:
                place = f"line {obj['line']}, command {obj['command']}"
                seen.append(f"{obj['cmd']} failed at {place} ({obj['code']})")
            elif obj["cmd"] == "get":
                seen.append("get found" if obj["found"] else "get not found")
            else:
                seen.append(obj["cmd"])
        elif line.startswith("OK put"):
            seen.append("put")
        elif line.startswith("context "):  # the last line of a get that found values
            seen.append("get found")
        elif line.startswith("(not found)"):
            seen.append("get not found")
        elif line == "bye":
            seen.append("quit")
    return seen


@pytest.mark.parametrize("rule", SCRIPT_RULES, ids=lambda rule: rule.name)
def test_a_script_does_what_its_row_says(
    rule: ScriptRule, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if rule.script is not None:
        monkeypatch.chdir(tmp_path)
        Path(SCRIPT_FILE).write_text(rule.script, encoding="utf-8")
    result = run_repl(list(rule.args), rule.stdin)
    stdout_says, errors = EXPECTED[rule.name]
    assert result.exit_code == rule.status, (result.stdout, result.stderr)
    assert printed(result.stdout) == stdout_says, result.stdout
    error_lines = result.stderr.splitlines()
    assert len(error_lines) == len(errors), result.stderr
    for line, start in zip(error_lines, errors, strict=True):
        assert line.startswith(start + ": "), line


def test_every_row_is_checked_and_every_check_is_a_row() -> None:
    assert [rule.name for rule in SCRIPT_RULES] == list(EXPECTED)


def test_every_row_is_in_the_man_page() -> None:
    page = (Path(__file__).parents[2] / "man" / "bhandar.1").read_text(encoding="utf-8")
    section = page.split('.SH "SCRIPTS"\n', 1)[1].split("\n.SH ", 1)[0]
    plain = section.replace("\\-", "-").replace("\\(aq", "'").replace("\\e", "\\")
    for rule in SCRIPT_RULES:
        assert rule.example() in plain, rule.name
        assert f"Exit {rule.status}." in plain


def test_keep_going_does_not_run_a_text_that_does_not_parse() -> None:
    result = run_repl(["--keep-going", "-e", "put kv k1 x\nget kv k1; put kv 'k2 x"])
    assert result.exit_code == 2
    assert printed(result.stdout) == []
    assert result.stderr.startswith("line 2, command 2 (put): error (bad_input): unclosed ' quote")


def test_fail_fast_is_the_default_and_overrides_an_earlier_keep_going() -> None:
    result = run_repl(["--keep-going", "--fail-fast", "-e", "put nosuch k1 x; put kv k1 x"])
    assert result.exit_code == 1
    assert printed(result.stdout) == []


def test_a_failure_after_the_last_get_found_nothing_still_exits_1() -> None:
    result = run_repl(["--keep-going", "-e", "get kv k1; put nosuch k1 x"])
    assert result.exit_code == 1
    assert printed(result.stdout) == ["get not found"]


def test_json_names_the_command_that_does_not_parse_on_a_line_of_several() -> None:
    result = run_repl(["-o", "json"], "put kv k1 x\nget kv k1; keyspaces\n")
    assert result.exit_code == 2
    *ran, failed = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["cmd"] for r in ran] == ["put"]
    assert failed["cmd"] == "keyspaces" and failed["code"] == "bad_input"
    assert (failed["line"], failed["command"]) == (2, 2)
    assert result.stderr.startswith("line 2, command 2 (keyspaces): ")


@pytest.mark.parametrize(
    ("line", "command", "count", "one_line", "label"),
    [
        (1, 3, 3, True, "command 3"),
        (4, 1, 1, False, "line 4"),
        (4, 2, 3, False, "line 4, command 2"),
    ],
)
def test_a_place_is_said_as_the_source_numbers_it(
    line: int, command: int, count: int, one_line: bool, label: str
) -> None:
    assert place_of(line, command, count, one_line).label == label


def test_standard_input_streams_one_reply_per_line_before_the_next_is_written() -> None:
    """A program drives the REPL through a pipe: it writes a line only after reading the reply to
    the one before, so a REPL that read all of stdin first would never answer."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bhandar_cli", "repl", "--virtual-time", "-o", "json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout
    replies: queue.Queue[str] = queue.Queue()

    def read_replies() -> None:
        for reply in stdout:
            replies.put(reply)

    threading.Thread(target=read_replies, daemon=True).start()
    try:
        for line, cmd in (("put kv k1 x", "put"), ("get kv k1", "get"), ("keyspaces", "keyspaces")):
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            reply = json.loads(replies.get(timeout=60))
            assert reply["cmd"] == cmd, reply
        # The bad line stopped the script: the REPL exits without waiting for more input.
        assert proc.wait(timeout=60) == 2
        assert reply["ok"] is False and reply["line"] == 3
    finally:
        proc.kill()
        proc.wait()


def test_a_line_that_does_not_parse_is_named_after_the_command_that_does_not(repl: Any) -> None:
    """Interactive sessions too: the reply names `keyspaces`, not the line's first command."""
    (reply,) = repl(["get kv k1; keyspaces"])
    assert (reply["cmd"], reply["code"]) == ("keyspaces", "bad_input")
    assert "keyspaces" in reply["error"]
    assert [r["cmd"] for r in repl(["get kv k1; put kv 'k1"])] == ["put"]


def test_an_error_with_a_trace_keeps_its_place_on_its_first_line() -> None:
    result = run_repl(["-e", "trace on; kill A; kill B; kill C; put kv k1 x c=ALL"])
    assert result.exit_code == 1
    first, *trace = result.stderr.splitlines()
    assert first.startswith("command 5 (put): error (timeout): ")
    assert trace[0] == "trace"


def test_quit_after_a_get_that_found_nothing_keeps_its_exit_3() -> None:
    result = run_repl(["-e", "get kv k1; quit"])
    assert result.exit_code == 3
    assert printed(result.stdout) == ["get not found", "quit"]
