"""Point-in-time restore on a process cluster: a snapshot copied off with to=DIR, the WALs each
node archives after it, and `restore NAME until=TIME` over `repl --connect`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import trio

from bhandar_cli.fleet.cluster_file import ClusterFile
from bhandar_cli.repl.batch import open_tcp_session

BATCH = 10


def test_restore_until_a_time_over_processes(fresh_cluster: ClusterFile, tmp_path: Path) -> None:
    backup = tmp_path / "backup"

    async def main() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with open_tcp_session(fresh_cluster.dir, "json") as session:
            replies: list[dict[str, Any]] = []

            async def run(*lines: str) -> None:
                for line in lines:
                    replies.extend(r.to_json() for r in await session.run_line(line))

            await run(*[f"put kv p1-{i} {i}" for i in range(BATCH)], f"snapshot s1 to={backup}")
            await run(*[f"put kv p2-{i} {i}" for i in range(BATCH)], "wait converged")
            noted = time.time()
            await run(*[f"put kv p3-{i} {i}" for i in range(BATCH)])
            restore = next(r.to_json() for r in await session.run_line(f"restore s1 until=@{noted}"))
            await run(*[f"get kv p{b}-{i} c=ALL" for b in (1, 2, 3) for i in range(BATCH)])
            return replies, restore

    replies, restore = trio.run(main)
    assert all(r["ok"] for r in replies), [r for r in replies if not r["ok"]]
    assert restore["ok"], restore
    found = {r["key"] for r in replies if r["cmd"] == "get" and r["found"]}
    assert found == {f"p{b}-{i}" for b in (1, 2) for i in range(BATCH)}
    assert restore["replayed"] == BATCH and restore["discarded"] == BATCH, restore
    assert restore["nodes"] == sorted(fresh_cluster.names) and restore["verified_files"] > 0
    assert restore["quiesced"] is True and restore["rto_ms"] > 0 and restore["rpo_s"] > 0
    # The snapshot went to the backup directory, with its checksums and the archived WALs.
    assert all((backup / "s1" / n / "CHECKSUMS").is_file() for n in fresh_cluster.names)
    assert any((backup / "s1" / n / "wal").glob("*.log") for n in fresh_cluster.names)
