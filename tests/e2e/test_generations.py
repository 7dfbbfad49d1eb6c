"""A node process started on an older copy of its data directory: peers take it back at once.

The copy remembers an older generation than the life the peers last heard of. Before the fix the
peers took every gossip state of the new life for old news and kept the node down (while hints
for it piled up) until its heartbeat outgrew the one they remembered. Now it must be up in every
peer's view within 10 s, and the hints written while it was down must drain.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import trio

from bhandar_cli.client.openers import open_tcp_client
from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.values import encode_json
from bhandar_cli.fleet.cluster_file import ClusterFile

VICTIM = "D"


async def until(condition: Any, timeout: float, what: str) -> float:
    """Poll the async `condition` until it holds; returns the seconds it took."""
    started = time.monotonic()
    with trio.fail_after(timeout):
        while not await condition():
            await trio.sleep(0.05)
    return time.monotonic() - started


def test_a_node_started_on_an_older_copy_of_its_data_is_up_within_10_s_and_its_hints_drain(
    fresh_cluster: ClusterFile, tmp_path: Path
) -> None:
    data = Path(fresh_cluster.node(VICTIM).data_dir)
    older = tmp_path / "older"
    peers = [n for n in fresh_cluster.names if n != VICTIM]

    async def main() -> tuple[float, int]:
        async with open_tcp_client(fresh_cluster.dir) as client:
            backend = client.backend

            async def seen_up_by_all(up: bool) -> bool:
                views = [await backend.node_info(p, counts=False) for p in peers]
                return all(v.get("peers", {}).get(VICTIM) is up for v in views)

            async def state_seen_by_a() -> tuple[int, int]:
                rows = await backend.node_members("A")
                row = next(r for r in rows if r["id"] == VICTIM)
                return int(row["generation"]), int(row["heartbeat"])

            assert await client.admin.kill(VICTIM)
            shutil.copytree(data, older)  # the copy remembers this generation
            assert await client.admin.revive(VICTIM)  # a later generation the peers will remember
            await until(lambda: seen_up_by_all(True), 30, f"{VICTIM} up after its restart")

            async def lived_a_while() -> bool:
                return (await state_seen_by_a())[1] >= 20

            await until(lived_a_while, 60, f"{VICTIM}'s heartbeat to climb")
            remembered, _ = await state_seen_by_a()
            assert await client.admin.kill(VICTIM)
            await until(lambda: seen_up_by_all(False), 30, f"{VICTIM} seen down")
            keys = [f"g{i}" for i in range(60)]
            for key in keys:
                await client.data.put("kv", key, encode_json(key), "application/json", "none", "QUORUM", "A")
            mine = [k for k in keys if VICTIM in backend.ring.preference_list(key_token("kv", k), 3)]

            async def hints_held() -> bool:
                return int((await client.views.hints())["pending"]) >= len(mine)

            await until(hints_held, 30, "hints for the stopped node")
            shutil.rmtree(data)
            shutil.copytree(older, data)
            assert await client.admin.revive(VICTIM)
            took = await until(lambda: seen_up_by_all(True), 10, f"{VICTIM} up in every peer's view")

            async def regenerated() -> bool:
                return (await state_seen_by_a())[0] > remembered

            # Up because it took a generation above the life they remember, not because its
            # heartbeat happened to outgrow that life's.
            await until(regenerated, 10, f"{VICTIM} to take a generation above {remembered}")

            async def drained() -> bool:
                return int((await client.views.hints())["pending"]) == 0

            await until(drained, 60, "the hints to drain")
            for key in mine:
                own, _ = await backend.node_records(VICTIM, "kv", key)
                assert own is not None, f"{key} never reached {VICTIM}"
            return took, len(mine)

    took, handed = trio.run(main)
    assert took <= 10 and handed > 0
