"""A write sent via= a node that forwards it says why in its reply (PutResult.forward_reason, filled
by the forwarding node): the client asks nothing more of the cluster to explain it."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from bhandar_cli.client.backends.in_process_backend import InProcessBackend
from bhandar_cli.client.client import Client
from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.node_views import NodeInfo
from bhandar_cli.fleet.in_process_cluster import InProcessCluster


def test_a_forwarded_write_says_why_with_one_request_and_no_info_round_trip() -> None:
    cluster = InProcessCluster(nodes=5)
    backend = InProcessBackend(cluster)
    client = Client(backend, "ONE")
    asked: list[str] = []
    request, node_info = backend.request, backend.node_info

    async def counted_request(via: str, req: Any, timeout: float) -> Any:
        asked.append(f"request {type(req).__name__} to {via}")
        return await request(via, req, timeout)

    async def counted_info(name: str, counts: bool = True) -> NodeInfo:
        asked.append(f"info of {name}")
        return await node_info(name, counts)

    backend.request, backend.node_info = counted_request, counted_info  # type: ignore[method-assign,assignment]
    home = backend.ring.preference_list(key_token("kv", "k"), 3)
    outsider = next(n for n in backend.names if n not in home)
    counter_home = backend.ring.preference_list(key_token("counters", "c"), 3)
    counter_outsider = next(n for n in backend.names if n not in counter_home)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(cluster.run)
            await writes()
            nursery.cancel_scope.cancel()

    async def writes() -> None:
        put = await client.data.put("kv", "k", b"1", "application/json", "none", via=outsider)
        assert put.forwarded_by == outsider
        assert (
            put.note
            == f"{outsider} is not a replica of kv/k ({', '.join(home)}): it forwarded to {put.coordinator}"
        )
        incr = await client.data.incr("counters", "c", 1, "req-1", via=counter_outsider)
        assert incr.forwarded_by == counter_outsider and "is not a replica of counters/c" in incr.note

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert asked == [f"request PutRequest to {outsider}", f"request IncrRequest to {counter_outsider}"]
