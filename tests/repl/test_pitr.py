"""Point-in-time restore on an in-process cluster: snapshot, WAL archive, restore until=TIME,
checksums, and a restore to the snapshot itself that keeps nothing written after it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import trio
import trio.testing

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session

BATCH = 12


def _run(steps: list[Any], data_dir: Path) -> list[dict[str, Any]]:
    """Run REPL lines in order; a callable step is called (no reply) and may return more lines
    to run right away (it sees the wall clock between two lines)."""

    async def main() -> list[dict[str, Any]]:
        async with open_session(ClusterOptions(data_dir=str(data_dir)), "json") as session:
            out: list[dict[str, Any]] = []
            for step in steps:
                lines = step() if callable(step) else [step]
                for line in lines:
                    out.extend(reply.to_json() for reply in await session.run_line(line))
            return out

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def _puts(batch: int) -> list[str]:
    return [f"put kv b{batch}-{i} {batch * 100 + i}" for i in range(BATCH)]


def _gets() -> list[str]:
    return [f"get kv b{batch}-{i} c=ALL" for batch in (1, 2, 3) for i in range(BATCH)]


def test_restore_until_a_time_brings_back_the_snapshot_and_the_writes_before_it(tmp_path: Path) -> None:
    noted: list[float] = []

    def note_time() -> list[str]:
        noted.append(time.time())
        return []

    out = _run(
        [
            *_puts(1),
            "snapshot s1",
            *_puts(2),
            "wait converged",  # every replica has logged batch 2 before the time is noted
            note_time,
            *_puts(3),
            lambda: [f"restore s1 until=@{noted[0]}"],
            *_gets(),
        ],
        tmp_path,
    )
    assert all(o["ok"] for o in out), [o for o in out if not o["ok"]]
    restore = next(o for o in out if o["cmd"] == "restore")
    gets = [o for o in out if o["cmd"] == "get"]
    found = {o["key"] for o in gets if o["found"]}
    assert found == {f"b{b}-{i}" for b in (1, 2) for i in range(BATCH)}
    assert restore["replayed"] == BATCH and restore["discarded"] == BATCH
    assert restore["quiesced"] is True and restore["rto_ms"] >= restore["ms"] > 0
    assert restore["until"] is not None and 0 < restore["rpo_s"] < 60
    assert restore["verified_files"] > 0
    # The archive is on disk with the snapshot, and checksummed.
    archived = list((tmp_path / "snapshots" / "s1" / "A" / "wal").glob("*.log"))
    assert archived, "node A archived no WAL"
    sums = json.loads((tmp_path / "snapshots" / "s1" / "A" / "CHECKSUMS").read_text())["files"]
    assert {f"wal/{p.name}" for p in archived} <= set(sums)


def test_restore_to_the_snapshot_itself_keeps_no_later_write(tmp_path: Path) -> None:
    # No pause before the restore: it must wait for the third replica's copy itself, then roll
    # every copy back.
    out = _run([*_puts(1), "snapshot s1", *_puts(2), "restore s1", *_gets()[: 2 * BATCH]], tmp_path)
    assert all(o["ok"] for o in out), [o for o in out if not o["ok"]]
    restore = next(o for o in out if o["cmd"] == "restore")
    found = {o["key"] for o in out if o["cmd"] == "get" and o["found"]}
    assert found == {f"b1-{i}" for i in range(BATCH)}
    assert restore["replayed"] == 0 and restore["discarded"] == BATCH and restore["until"] is None


def test_restoring_a_snapshot_again_replays_its_timeline_and_warns_of_the_writes_since(
    tmp_path: Path,
) -> None:
    """A restore ends the timeline its snapshot's archive recorded, and keeps it: restoring the
    same snapshot again, to another time, replays that timeline (batch 2, which the first restore
    threw away). What the nodes wrote after the first restore (batch 3) was never archived for
    the snapshot: the second restore discards it too, and says so, since it cannot count it."""
    out = _run(
        [*_puts(1), "snapshot s1", *_puts(2), "wait converged", "restore s1", *_puts(3), "wait converged"],
        tmp_path,
    )
    assert all(o["ok"] for o in out), [o for o in out if not o["ok"]]
    first = next(o for o in out if o["cmd"] == "restore")
    assert first["warnings"] == [] and first["discarded"] == BATCH
    out = _run(["restore s1 until=now", *_gets()], tmp_path)
    assert all(o["ok"] for o in out), [o for o in out if not o["ok"]]
    again = out[0]
    found = {o["key"] for o in out if o["cmd"] == "get" and o["found"]}
    assert found == {f"b{b}-{i}" for b in (1, 2) for i in range(BATCH)}
    assert again["replayed"] == BATCH and again["discarded"] == 0
    (warning,) = again["warnings"]
    assert warning.startswith("the WAL archive of A, B, C, D, E ended with the restore at ")
    assert "the writes made since were never archived for this snapshot" in warning


def test_a_damaged_snapshot_file_refuses_the_restore_and_names_it(tmp_path: Path) -> None:
    out = _run([*_puts(1), "snapshot s1"], tmp_path)
    assert all(o["ok"] for o in out)
    table = sorted((tmp_path / "snapshots" / "s1" / "B").glob("*.sst"))[0]
    # A hard link shares the live table's bytes: replace the snapshot's name with a damaged copy.
    data = bytearray(table.read_bytes())
    data[len(data) // 2] ^= 0xFF
    table.unlink()
    table.write_bytes(bytes(data))
    out = _run(["restore s1", "get kv b1-0 c=ALL"], tmp_path)
    assert out[0]["ok"] is False and out[0]["code"] == "refused"
    assert str(table) in out[0]["error"] and "checksum mismatch" in out[0]["error"]
    assert out[1]["ok"] and out[1]["values"] == [100]  # nothing was stopped or changed


def test_a_bad_time_is_one_clear_error(tmp_path: Path) -> None:
    out = _run(["snapshot s1", "restore s1 until=yesterday-ish"], tmp_path)
    assert out[1]["ok"] is False and out[1]["code"] == "bad_input"
    assert "bad time 'yesterday-ish'" in out[1]["error"]


def test_a_time_before_the_snapshot_is_refused_before_anything_stops(tmp_path: Path) -> None:
    before = time.time() - 3600
    out = _run([*_puts(1), "snapshot s1", f"restore s1 until=@{before}", "get kv b1-0 c=ALL"], tmp_path)
    refused = next(o for o in out if o["cmd"] == "restore")
    assert refused["ok"] is False and refused["code"] == "bad_input"
    assert "before snapshot s1 was taken" in refused["error"]
    assert out[-1]["values"] == [100]


def test_a_damaged_archived_wal_refuses_the_restore_and_names_it(tmp_path: Path) -> None:
    out = _run([*_puts(1), "snapshot s1", *_puts(2), "flush"], tmp_path)  # the flush archives the WALs
    assert all(o["ok"] for o in out)
    archived = sorted((tmp_path / "snapshots" / "s1").glob("*/wal/*.log"))
    assert archived, "no node archived a WAL at the flush"
    victim = archived[0]
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    out = _run(["restore s1 until=@" + str(time.time())], tmp_path)
    assert out[0]["ok"] is False and out[0]["code"] == "refused"
    assert str(victim) in out[0]["error"] and "restore refused" in out[0]["error"]
