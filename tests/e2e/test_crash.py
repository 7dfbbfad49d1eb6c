"""kill -9 a node in the middle of a stream of QUORUM writes: nothing acknowledged is lost.

Writes go through client/client.py over TCP to a 5-process cluster; one replica is SIGKILLed mid-stream
and restarted with its data directory a moment later while the writes go on. Afterwards every
acknowledged write must be readable at QUORUM, and the restarted node must hold every key it
is a replica of once a read at ALL has repaired it (its own durable writes, hints handed back,
read repair: whichever got there).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import trio

from bhandar_cli.client.openers import open_tcp_client
from bhandar_cli.core.model.errors import ClientError
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.values import encode_json
from bhandar_cli.fleet.cluster_file import ClusterFile

if TYPE_CHECKING:
    from bhandar_cli.client.backends.tcp_backend import TcpBackend
    from bhandar_cli.client.client import Client

VICTIM = "D"  # shares zone z1 with A, so it is a replica of some keys, not all
WRITERS = 8


async def write_stream(
    client: Client[TcpBackend], acked: dict[str, int], failed: list[str], stop: trio.Event
) -> None:
    async def writer(w: int) -> None:
        i = 0
        while not stop.is_set():
            key = f"k{w}-{i}"
            try:
                await client.data.put("crash", key, encode_json(i), "application/json", "none", "QUORUM")
                acked[key] = i
            except ClientError as exc:
                failed.append(f"{key}: {exc.code} {exc}")
            i += 1

    async with trio.open_nursery() as nursery:
        for w in range(WRITERS):
            nursery.start_soon(writer, w)


async def until(condition: Any, timeout: float, what: str) -> None:
    with trio.fail_after(timeout):
        while not condition():
            await trio.sleep(0.02)


def holds(record: Any, value: int) -> bool:
    return isinstance(record, Versioned) and any(
        s.value is not None and json.loads(s.value) == value for s in record.siblings
    )


def test_acknowledged_writes_survive_a_kill_9(fresh_cluster: ClusterFile) -> None:
    async def main() -> tuple[dict[str, int], list[str], dict[str, Any]]:
        acked: dict[str, int] = {}
        failed: list[str] = []
        async with open_tcp_client(fresh_cluster.dir) as client:
            backend = client.backend
            stop = trio.Event()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(write_stream, client, acked, failed, stop)
                await until(lambda: len(acked) >= 300, 20, "300 acknowledged writes")
                assert (await client.admin.kill(VICTIM))["changed"]  # SIGKILL, mid-stream
                killed_at = len(acked)
                await until(lambda: len(acked) >= killed_at + 300, 20, "writes while the node is down")
                assert (await client.admin.revive(VICTIM))["changed"]
                revived_at = len(acked)
                await until(lambda: len(acked) >= revived_at + 200, 20, "writes after the restart")
                stop.set()
            # Every acknowledged write is readable at QUORUM.
            lost = []
            for key, value in sorted(acked.items()):
                outcome = await client.data.get("crash", key, "QUORUM")
                if value not in outcome.values:
                    lost.append((key, value, outcome.values))
            assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {lost[:5]}"
            # The restarted node catches up: after a read at ALL it holds all its keys.
            mine = {k: v for k, v in acked.items() if VICTIM in backend.ring.preference_list(_token(k), 3)}
            with trio.fail_after(30):
                missing = dict(mine)
                while missing:
                    for key in list(missing):
                        own, _ = await backend.node_records(VICTIM, "crash", key)
                        if holds(own, missing[key]):
                            del missing[key]
                        else:
                            await client.data.get("crash", key, "ALL")  # read repair
                    if missing:
                        await trio.sleep(0.1)
            info = await backend.node_info(VICTIM)
            return acked, failed, {"mine": len(mine), "info": info}

    acked, _failed, extra = trio.run(main)
    assert len(acked) >= 800 and 100 < extra["mine"] < len(acked)
    assert extra["info"]["up"] and sorted(extra["info"]["members"]) == fresh_cluster.names


def _token(key: str) -> int:
    from bhandar_cli.core.membership.ring import key_token

    return key_token("crash", key)
