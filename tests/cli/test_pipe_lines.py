"""`bhandar pipe`'s engine (cmd/pipe.run_pipe) on an in-process cluster on a virtual clock: what each
kind of line answers, the order of results, one key's commands in input order."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import trio
import trio.testing

from bhandar_cli.cli.pipe_cmd import InputFormat, ResultWriter, run_pipe
from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session


def pipe(text: str, fmt: InputFormat = InputFormat.text, window: int = 8, ordered: bool = True) -> Any:
    """(results, writer) of `text` piped through an in-process cluster of 5 nodes."""
    out = io.StringIO()
    writer = ResultWriter(out)

    async def main() -> None:
        async with open_session(ClusterOptions(memory=True), "json") as session:
            await run_pipe(session.client, io.BytesIO(text.encode()), writer, fmt, window, ordered)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return [json.loads(line) for line in out.getvalue().splitlines()], writer


def test_bad_lines_are_results_at_their_line_and_the_rest_succeed() -> None:
    lines = [
        "put kv a 1",  # 1
        "",  # 2: blank, no result
        "# a comment",  # 3: no result
        "put kv 'unclosed",  # 4: does not parse
        "frobnicate kv a",  # 5: not a data command
        "put nosuch a 1",  # 6: unknown keyspace
        "get kv missing",  # 7: not found
        "get kv a",  # 8
        "incr counters hits 3",  # 9
        "put kv b [1,2]; get kv b",  # 10: two commands, two results
    ]
    results, writer = pipe("\n".join(lines) + "\n")
    assert [r["line"] for r in results] == [1, 4, 5, 6, 7, 8, 9, 10, 10]
    by_line = {(r["line"], r["cmd"]): r for r in results}
    failed = {line for line, _ in by_line if not by_line[line, _]["ok"]}
    assert failed == {4, 5, 6, 7}
    assert by_line[4, "put"]["code"] == "bad_input" and "unclosed" in by_line[4, "put"]["error"]
    assert by_line[5, "frobnicate"]["code"] == "bad_input"
    assert by_line[6, "put"]["code"] == "unknown_keyspace"
    missing = by_line[7, "get"]
    assert (missing["code"], missing["found"], missing["values"]) == ("not_found", False, [])
    assert by_line[8, "get"]["values"] == [1] and by_line[8, "get"]["ok"]
    assert by_line[9, "incr"]["value"] == 3
    assert by_line[10, "get"]["values"] == [[1, 2]]
    assert (writer.total, writer.failed) == (9, 4)


def test_one_keys_commands_run_in_input_order() -> None:
    """A put after a get writes with the context that get read (ctx=auto), as in the REPL, even
    with many lines in flight: the value is replaced, not joined by a sibling."""
    text = "put kv k old\nget kv k\nput kv k new\nget kv k\ndelete kv k\nget kv k\n"
    results, _ = pipe(text, window=64)
    assert [r["cmd"] for r in results] == ["put", "get", "put", "get", "delete", "get"]
    assert results[2]["context"] == "auto"
    assert results[3]["values"] == ["new"]
    assert results[5]["found"] is False


def test_keyspace_create_is_done_before_the_lines_after_it() -> None:
    text = "keyspace create fresh\nput fresh k 1\nget fresh k\n"
    results, writer = pipe(text, window=64)
    assert writer.failed == 0, results
    assert results[0]["cmd"] == "keyspace" and results[2]["values"] == [1]


def test_unordered_answers_every_line_once() -> None:
    lines = [f"put kv u{i} {i}" for i in range(40)] + [f"get kv u{i}" for i in range(40)]
    results, writer = pipe("\n".join(lines), window=16, ordered=False)
    assert sorted(r["line"] for r in results) == list(range(1, 81))
    assert writer.failed == 0
    gets = {r["key"]: r["values"] for r in results if r["cmd"] == "get"}
    assert gets == {f"u{i}": [i] for i in range(40)}


def test_ordered_output_is_input_order() -> None:
    lines = [f"put kv o{i} {i}" if i % 2 else f"get kv o{i - 1}" for i in range(1, 60)]
    results, _ = pipe("\n".join(lines), window=32)
    assert [r["line"] for r in results] == list(range(1, 60))
    assert [r["cmd"] for r in results] == [line.split()[0] for line in lines]


def test_json_input_takes_the_same_operations() -> None:
    lines = [
        {"op": "put", "ks": "kv", "key": "j", "value": {"a": [1]}},
        {"op": "get", "ks": "kv", "key": "j"},
        {"op": "put", "ks": "kv", "key": "bin", "base64": "AAH/", "ctype": "application/octet-stream"},
        {"op": "get", "ks": "kv", "key": "bin", "c": "ALL"},
        {"op": "incr", "ks": "counters", "key": "n", "delta": -4},
        {"op": "delete", "ks": "kv", "key": "j"},
        {"op": "scan", "ks": "kv", "key": "j"},
        {"op": "put", "ks": "kv", "key": "nothing"},
        {"op": "get", "ks": "kv", "key": "j", "c": "SOME"},
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\nnot json\n[1]\n"
    results, writer = pipe(text, InputFormat.json)
    assert [r["line"] for r in results] == list(range(1, 12))
    assert results[1]["values"] == [{"a": [1]}]
    assert results[3]["values"] == [{"base64": "AAH/"}] and results[3]["replies"] == 3
    assert results[4]["value"] == -4
    assert results[5]["cmd"] == "delete" and results[5]["context"] == "auto"  # what line 2 read
    assert [r["ok"] for r in results[6:]] == [False] * 5
    assert all(r["code"] == "bad_input" for r in results[6:]), results[6:]
    assert writer.failed == 5


@pytest.mark.parametrize("fmt", list(InputFormat))
def test_a_line_that_is_not_utf8_is_one_failed_result(fmt: InputFormat) -> None:
    out = io.StringIO()
    writer = ResultWriter(out)

    async def main() -> None:
        async with open_session(ClusterOptions(memory=True), "json") as session:
            source = io.BytesIO(b"\xff\xfe\n" + b"put kv x 1\n" if fmt is InputFormat.text else b"\xff\n")
            await run_pipe(session.client, source, writer, fmt, 4, True)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    first = json.loads(out.getvalue().splitlines()[0])
    assert (first["line"], first["ok"], first["code"]) == (1, False, "bad_input")
    assert "UTF-8" in first["error"]


class ClosingOut:
    """Standard output whose reader goes away after `keep` lines (`bhandar pipe | head`)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        if len(self.lines) >= self.keep:
            raise BrokenPipeError
        self.lines.append(text)

    def flush(self) -> None:
        pass


def test_a_closed_output_stops_the_input() -> None:
    out = ClosingOut(3)
    writer = ResultWriter(out)
    text = "".join(f"put kv h{i} {i}\n" for i in range(2000))

    async def main() -> None:
        async with open_session(ClusterOptions(memory=True), "json") as session:
            await run_pipe(session.client, io.BytesIO(text.encode()), writer, InputFormat.text, 8, True)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert writer.closed and len(out.lines) == 3
    assert writer.total < 100  # stopped after the window's worth, not after 2000 commands
