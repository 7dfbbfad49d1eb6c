"""The lean entry point reads the plain data command lines, and leaves every other one to typer."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bhandar_cli.cli.launch import read_oneshot


def test_plain_data_commands_are_read_with_every_option_spelling() -> None:
    line = read_oneshot(["get", "kv", "k", "-c", "ONE", "--via=B", "--cluster", "/c", "-ojson"])
    assert line is not None and line.cmd == "get" and line.arguments == ["kv", "k"]
    assert line.options == {"consistency": "ONE", "via": "B", "cluster": "/c", "output": "json"}
    put = read_oneshot(["put", "--context", "auto", "kv", "k", "-", "--output", "raw"])
    assert put is not None and put.arguments == ["kv", "k", "-"]  # "-": the value from stdin
    assert put.options["context"] == "auto" and put.options["output"] == "raw"
    delete = read_oneshot(["delete", "kv", "k"])
    assert delete is not None and delete.options["context"] == "auto" and delete.options["output"] == "table"
    incr = read_oneshot(["incr", "counters", "c", "7", "--id", "r1"])
    assert incr is not None and incr.options["delta"] == 7 and incr.options["request_id"] == "r1"
    assert incr.arguments == ["counters", "c"]
    one = read_oneshot(["incr", "counters", "c"])
    assert one is not None and one.options["delta"] == 1


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["repl"],
        ["cluster", "status"],
        ["get", "kv"],  # a missing argument: typer's usage error
        ["get", "kv", "k", "extra"],
        ["get", "kv", "k", "--help"],
        ["get", "-h"],
        ["get", "kv", "k", "--context", "auto"],  # an option get does not take
        ["get", "kv", "k", "-o", "yaml"],
        ["get", "kv", "k", "-o"],  # an option without its value
        ["get", "kv", "k", "--via", "--cluster"],
        ["get", "--", "kv", "-k"],
        ["incr", "counters", "c", "-5"],  # typer decides what a leading dash means
        ["incr", "counters", "c", "five"],
    ],
)
def test_anything_else_goes_to_typer(argv: list[str]) -> None:
    assert read_oneshot(argv) is None


@pytest.mark.parametrize(
    ("code", "status", "stderr"), [(None, 0, ""), (3, 3, ""), ("bad line", 1, "bad line\n")]
)
def test_a_oneshot_command_exits_as_sys_exit_would_with_its_output_flushed(
    code: object, status: int, stderr: str
) -> None:
    # Piped, stdout is block-buffered: what was printed is lost unless exit_now flushes it.
    script = f"from bhandar_cli.cli.launch import exit_now\nprint('said', end='')\nexit_now({code!r})"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, env=env, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr.decode()) == (status, b"said", stderr)


def bhandar(*argv: str) -> subprocess.CompletedProcess[bytes]:
    command = [sys.executable, "-m", "bhandar_cli", *argv]
    return subprocess.run(command, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(
    ("argv", "starts"),
    [
        (["get", "kv"], "bhandar get: missing argument 'KEY' (usage: bhandar get [OPTIONS] KS KEY;"),
        (["get", "kv", "k", "extra"], "bhandar get: got unexpected extra argument"),
        (["get", "kv", "k", "--consistancy", "ONE"], "bhandar get: no such option: --consistancy"),
        (["incr", "counters", "c", "five"], "bhandar incr: invalid value for 'DELTA'"),
        (["cluster", "up", "--nodes", "x"], "bhandar cluster up: invalid value for '--nodes'"),
        (["nosuch"], "bhandar: no such command 'nosuch'"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(argv: list[str], starts: str) -> None:
    proc = bhandar(*argv)
    lines = proc.stderr.decode().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(starts), (proc.returncode, lines)
    assert lines[0].endswith(" -h explains)") and proc.stdout == b""


def test_help_and_a_group_without_its_command_still_print_the_help() -> None:
    helped = bhandar("get", "-h")
    assert helped.returncode == 0 and b"Usage: bhandar get" in helped.stdout and helped.stderr == b""
    bare = bhandar("cluster")
    assert bare.returncode == 2 and b"Usage: bhandar cluster" in bare.stdout + bare.stderr


def test_every_command_in_a_list_is_summed_up_in_one_line() -> None:
    # Typer's rich mode keeps a docstring's line breaks in a group's command list: `bhandar --help`
    # showed summaries broken where the source wrapped them.
    import typer

    from bhandar_cli.cli.app import app

    def summaries(group: typer.Typer) -> list[str]:
        found = [info.short_help or "" for info in group.registered_commands]
        for sub in group.registered_groups:
            assert sub.typer_instance is not None
            found += summaries(sub.typer_instance)
        return found

    lines = summaries(app)
    assert len(lines) > 30 and all(line and "\n" not in line for line in lines), lines
