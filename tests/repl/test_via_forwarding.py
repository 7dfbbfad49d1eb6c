"""A write sent via= a node that is not a replica of its key says who coordinated it, and why."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from bhandar_cli.client.outcomes import WriteOutcome
from bhandar_cli.repl.views_data import render_write


def test_a_put_via_a_non_replica_says_it_forwarded_and_to_whom(repl: Any) -> None:
    prefs, counter_prefs = repl(["prefs kv k", "prefs counters c"])
    outsider = next(n for n in "ABCDE" if n not in prefs["replicas"])
    counter_outsider = next(n for n in "ABCDE" if n not in counter_prefs["replicas"])
    home = prefs["replicas"][0]
    lines = [f"put kv k 1 via={outsider}", f"put kv k 2 via={home}"]
    lines.append(f"incr counters c via={counter_outsider}")
    put, own, incr = repl(lines)
    assert put["ok"] and put["coordinator"] in prefs["replicas"] and put["coordinator"] != outsider
    assert put["forwarded_by"] == outsider
    assert put["note"] == (
        f"{outsider} is not a replica of kv/k ({', '.join(prefs['replicas'])}): "
        f"it forwarded to {put['coordinator']}"
    )
    assert own["coordinator"] == home and "forwarded_by" not in own and "note" not in own
    assert incr["forwarded_by"] == counter_outsider and f"forwarded to {incr['coordinator']}" in incr["note"]


def test_the_note_is_shown_under_the_write() -> None:
    note = "E is not a replica of kv/k"
    out = WriteOutcome(
        cmd="put",
        keyspace="kv",
        key="k",
        coordinator="B",
        acks=3,
        needed=2,
        context_used="none",
        forwarded_by="E",
        note=note,
    )
    console = Console(width=120, record=True, color_system=None)
    console.print(render_write(out))
    text = console.export_text()
    assert "via B" in text and "E is not a replica of kv/k" in text
    plain = WriteOutcome(
        cmd="put", keyspace="kv", key="k", coordinator="B", acks=3, needed=2, context_used="none"
    )
    console = Console(width=120, record=True, color_system=None)
    console.print(render_write(plain))
    assert "replica" not in console.export_text()
