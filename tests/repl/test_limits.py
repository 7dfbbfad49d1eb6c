"""Input limits and delete-reads-first in the REPL (an in-process cluster on a virtual clock)."""

from __future__ import annotations

import base64
from typing import Any

import cbor2
import trio
import trio.testing
from rich.console import Console

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.client.outcomes import WriteOutcome
from bhandar_cli.core.model.limits import MAX_CONTEXT_ACTORS, MAX_CONTEXT_CHARS, MAX_INTEGER
from bhandar_cli.repl.batch import open_session
from bhandar_cli.repl.views_data import render_write

Run = Any


def token(vv: dict[str, int]) -> str:
    return base64.urlsafe_b64encode(cbor2.dumps(vv)).rstrip(b"=").decode("ascii")


BAD_LINES = [
    "put kv k NaN",
    "put kv k '[1, Infinity]'",
    "put kv k -Infinity",
    "put kv k 1e400",
    "put kv k '" + "[" * 65 + "]" * 65 + "'",
    "put kv k '" + "[" * 50_000 + "'",
    "put kv " + "k" * 1025 + " v",
    "get kv " + "k" * 1025,
    f"put kv k v ctx={token({'A': MAX_INTEGER + 1})}",
    f"put kv k v ctx={token({f'N{i}': 1 for i in range(MAX_CONTEXT_ACTORS + 1)})}",
    "put kv k v ctx=" + "A" * (MAX_CONTEXT_CHARS + 1),
    f"incr counters c {2**53}",
    f"incr counters c -{2**53}",
    f"incr counters c {10**40}",
    "incr counters c 1 id=" + "r" * 129,
    "put counters c 1",
    "delete kv k ctx=%%%",
]


def test_every_bad_input_is_a_one_line_error_and_changes_nothing(repl: Run) -> None:
    setup = ["put kv k '\"kept\"' c=ALL", "incr counters c 5 c=ALL"]
    check = ["get kv k c=ALL", "get counters c c=ALL"]
    out = repl([*setup, *check, *BAD_LINES, *check, f"incr counters c {MAX_INTEGER - 5}"])
    assert all(o["ok"] for o in out[:4])
    bad = out[4 : 4 + len(BAD_LINES)]
    for line, reply in zip(BAD_LINES, bad, strict=True):
        assert reply["ok"] is False, line[:60]
        assert reply["code"] in ("bad_input", "too_large"), (line[:60], reply)
        assert reply["error"] and "\n" not in reply["error"] and "Traceback" not in reply["error"]
    after = out[4 + len(BAD_LINES) : 6 + len(BAD_LINES)]
    assert after[0]["values"] == ["kept"] and after[0]["siblings"] == 1
    assert after[0]["context"] == out[2]["context"]  # not even a tombstone was added
    assert after[1]["values"] == [5]
    assert out[-1]["ok"] and out[-1]["value"] == MAX_INTEGER  # the edge of the range is fine


def test_a_counter_cannot_be_pushed_past_the_range(repl: Run) -> None:
    out = repl([f"incr counters big {MAX_INTEGER}", "incr counters big 1", "incr counters big -2"])
    assert out[0]["value"] == MAX_INTEGER
    assert out[1]["ok"] is False and out[1]["code"] == "bad_input" and "outside" in out[1]["error"]
    assert out[2]["value"] == MAX_INTEGER - 2


def test_delete_without_a_context_reads_first_and_says_what_it_removed(repl: Run) -> None:
    out = repl(
        [
            "put kv cart one via=A",
            "put kv cart two via=B",  # blind and concurrent: two siblings
            "delete kv cart",
            "get kv cart c=ALL",
        ],
        nodes=3,
    )
    delete, gone = out[2], out[3]
    assert delete["ok"] and delete["blind"] is False and delete["context"] == "read"
    assert sorted(delete["removed"]) == ["one", "two"]
    assert gone["found"] is False and gone["values"] == []


def test_delete_uses_the_sessions_last_get(repl: Run) -> None:
    out = repl(["put kv k one", "get kv k", "delete kv k", "get kv k c=ALL"], nodes=3)
    assert out[2]["context"] == "auto" and "removed" not in out[2]
    assert out[3]["found"] is False


def test_a_blind_delete_warns_and_leaves_the_value(repl: Run) -> None:
    out = repl(["put kv k one c=ALL", "delete kv k ctx=none", "get kv k c=ALL"], nodes=3)
    delete, after = out[1], out[2]
    assert delete["ok"] and delete["blind"] is True
    assert any("blind delete" in w and "survives" in w for w in delete["warnings"])
    assert after["values"] == ["one"]  # the tombstone covered nothing: the value survived it


def test_a_value_that_starts_like_json_but_does_not_parse_is_stored_as_a_string_with_a_warning(
    repl: Run,
) -> None:
    lines = ["put kv a '{\"x\":'", "put kv b '[1, 2'", "put kv c hello", "put kv d '{\"x\": 1}'", "get kv a"]
    broken_object, broken_array, word, good, got = repl(lines, nodes=3)
    for broken, text in ((broken_object, '{"x":'), (broken_array, "[1, 2")):
        assert broken["ok"], broken
        (warning,) = broken["warnings"]
        assert warning.startswith(f"stored as the string {text!r}: it starts like JSON") and "(" in warning
    assert "warnings" not in word and "warnings" not in good  # a bare word, and real JSON: no warning
    assert got["values"] == ['{"x":']


def test_the_delete_line_names_what_was_removed() -> None:
    async def main() -> list[Any]:
        async with open_session(ClusterOptions(nodes=3), "table") as session:
            lines = ["put kv k one via=A", "put kv k two via=B", "delete kv k", "delete kv nothing"]
            return [r.data for line in lines for r in await session.run_line(line)]

    data = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    console = Console(width=200, record=True)
    for outcome in data[2:]:
        assert isinstance(outcome, WriteOutcome)
        console.print(render_write(outcome))
    text = console.export_text()
    assert 'deleted 2 siblings: "one", "two"' in text or 'deleted 2 siblings: "two", "one"' in text
    assert "nothing to delete: kv/nothing had no value" in text
