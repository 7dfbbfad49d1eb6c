"""One request-id rule on both backends (host/executor.py): a client's `rid` is its own number, and
the node runs the request under a ticket of its own. Two clients that both chose the same rid, each
reading its own key at the same time, each get their own value: through the in-process cluster
(which once passed the client's rid through, so the second read took the first one's answer and
the first timed out) and through a node process's RPC port (which renumbered requests itself).

A node process also forgets a request whose client gave up (node/process.py `call`, the HTTP
gateway's path): it no longer counts it in flight, so a drain does not wait for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from bhandar_cli.client.backends.in_process_backend import InProcessBackend
from bhandar_cli.core.membership.gossip import GossipSyn
from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import JSON
from bhandar_cli.core.protocol.client_messages import Failure, GetRequest, GetResult, PutRequest, PutResult
from bhandar_cli.core.protocol.messages import ClientRequest, Result
from bhandar_cli.core.wire import from_wire, to_wire
from bhandar_cli.fleet.in_process_cluster import InProcessCluster
from bhandar_cli.fleet.placement import free_ports
from bhandar_cli.node import process as node_process
from bhandar_cli.node.net.rpc import open_rpc
from bhandar_cli.node.node_options import NodeOptions
from bhandar_cli.node.process import NodeProcess

Ask = Callable[[int, ClientRequest], Awaitable[Result]]  # (client, request) -> its result
SAME_RID = 1


def value(result: Result) -> bytes | None:
    assert isinstance(result, GetResult) and isinstance(result.record, Versioned), result
    [sibling] = result.record.siblings
    return sibling.value


async def two_clients_read_under_one_rid(ask: Ask) -> dict[str, bytes | None]:
    """Each client writes its key, then both read theirs at once, under the same rid."""
    for client, key in enumerate(("k1", "k2")):
        written = await ask(client, PutRequest(SAME_RID, "kv", key, f'"{key}"'.encode(), JSON, None, "ONE"))
        assert isinstance(written, PutResult), written
    read: dict[str, bytes | None] = {}

    async def read_own(client: int, key: str) -> None:
        read[key] = value(await ask(client, GetRequest(SAME_RID, "kv", key, "ONE")))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_own, 0, "k1")
        nursery.start_soon(read_own, 1, "k2")
    return read


def test_the_in_process_backend_answers_each_client_whatever_rid_it_chose() -> None:
    async def main() -> dict[str, bytes | None]:
        cluster = InProcessCluster(nodes=1)
        backend = InProcessBackend(cluster)
        async with trio.open_nursery() as nursery:
            await nursery.start(cluster.run)
            read = await two_clients_read_under_one_rid(lambda _client, req: backend.request("A", req, 2.0))
            nursery.cancel_scope.cancel()
        return read

    read = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert read == {"k1": b'"k1"', "k2": b'"k2"'}


def lone_node(tmp_path: Path) -> NodeProcess:
    options = NodeOptions(id="A", data_dir=str(tmp_path / "A"), http_port=-1, fsync="none", admit_anyone=True)
    return NodeProcess(options, None)


def test_a_node_process_answers_each_client_whatever_rid_it_chose(tmp_path: Path) -> None:
    async def main() -> dict[str, bytes | None]:
        process = lone_node(tmp_path)
        async with trio.open_nursery() as nursery:
            port, _ = await nursery.start(process.run)
            async with open_rpc("127.0.0.1", port, "A") as first, open_rpc("127.0.0.1", port, "A") as second:
                clients = (first, second)  # two connections: two clients, each counting from 1

                async def ask(client: int, request: ClientRequest) -> Result:
                    result: Result = from_wire(
                        await clients[client].call("request", 5.0, msg=to_wire(request))
                    )
                    return result

                read = await two_clients_read_under_one_rid(ask)
            process.shutdown.set()
        return read

    assert trio.run(main) == {"k1": b'"k1"', "k2": b'"k2"'}


def test_a_node_process_forgets_a_request_whose_client_gave_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (nowhere,) = free_ports(1)  # B is believed up but listens nowhere: a write waits for its ack

    async def main() -> tuple[Result, int]:
        process = lone_node(tmp_path)
        async with trio.open_nursery() as nursery:
            await nursery.start(process.run)
            node = process.host.node
            assert node is not None
            b = MemberState("B", "z1", (7,), "normal", 1, 1, f"127.0.0.1:{nowhere}")
            process.deliver("B", GossipSyn((b,)))
            with trio.fail_after(5):
                while not any(m["id"] == "B" and m["up"] for m in node.members(trio.current_time())):
                    await trio.sleep(0.01)
            monkeypatch.setattr(node_process, "READY_WAIT", 0.0)  # takes requests, link to B or not
            put = PutRequest(0, "kv", "k", b'"v"', JSON, None, "QUORUM")  # A and B must ack
            result = await process.call(put, timeout=0.2)  # the node's own timeout is 1 s
            in_flight = process.inflight
            process.shutdown.set()
        return result, in_flight

    result, in_flight = trio.run(main)
    assert isinstance(result, Failure) and result.code == "timeout", result
    assert in_flight == 0  # the node answers (a timeout) only after 1 s: to nobody
    assert result.error == "no answer from node A within 0.2 s"
