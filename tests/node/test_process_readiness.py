"""A node process that has just started takes no client request until its links with the peers it
believes up are open both ways (node/process.py `refusal`): a request is refused as not run, which
the client takes to another node, and `info` says the node is not serving. Found by the one-shot
puts of tests/e2e/test_upgrade_oneshot.py: a node restarted by a rolling upgrade coordinated a put
the moment it listened, its replicas' acks were dropped on their links still backing off from its
last life, and the put timed out (an outcome unknown, never sent again). READY_WAIT bounds the wait.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from bhandar_cli.core.membership.gossip import GossipSyn
from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.protocol.client_messages import PutRequest
from bhandar_cli.core.wire import to_wire
from bhandar_cli.fleet.placement import free_ports
from bhandar_cli.node import process as node_process
from bhandar_cli.node.net.blocking_rpc import RpcError
from bhandar_cli.node.net.rpc import open_rpc
from bhandar_cli.node.node_options import NodeOptions
from bhandar_cli.node.process import NodeProcess


def test_a_node_refuses_requests_unrun_until_its_links_are_open_then_after_ready_wait_takes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (nowhere,) = free_ports(1)  # nobody listens there: the link with B never opens
    options = NodeOptions(id="A", data_dir=str(tmp_path / "A"), http_port=-1, fsync="none", admit_anyone=True)

    async def main() -> None:
        process = NodeProcess(options, None)
        async with trio.open_nursery() as nursery:
            port, _ = await nursery.start(process.run)
            node = process.host.node
            assert node is not None
            # A hears that B is up (a heartbeat by gossip), at an address where nothing listens.
            b = MemberState("B", "z1", (7,), "normal", 1, 1, f"127.0.0.1:{nowhere}")
            process.deliver("B", GossipSyn((b,)))
            with trio.fail_after(5):
                while not any(m["id"] == "B" and m["up"] for m in node.members(trio.current_time())):
                    await trio.sleep(0.01)

            put = PutRequest(1, "kv", "k", b"1", "application/json", None)
            async with open_rpc("127.0.0.1", port, "A") as rpc:
                with pytest.raises(RpcError) as refused:
                    await rpc.call("request", 5.0, msg=to_wire(put))
            assert refused.value.kind == "draining", refused.value  # not run: ask another node
            assert "starting: its links to B are not open yet" in str(refused.value)
            assert process.refusal() == "starting: its links to B are not open yet; the request was not run"
            assert process.info(counts=False)["serving"] is False

            monkeypatch.setattr(node_process, "READY_WAIT", 0.0)  # its bound has passed
            assert process.refusal() == ""
            assert process.info(counts=False)["serving"] is True
            process.shutdown.set()

    trio.run(main)


def test_a_starting_node_holds_its_gossip_until_its_links_to_its_peers_are_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its peers learn of its new life from its gossip and send it replica writes from then on:
    before its own links to them are open its acks would be dropped (a loaded suite: a put timed
    out right after a restart, 1 of 3 replicas answered). So it only opens the links meanwhile."""
    (nowhere,) = free_ports(1)
    options = NodeOptions(id="A", data_dir=str(tmp_path / "A"), http_port=-1, fsync="none", admit_anyone=True)

    async def main() -> None:
        process = NodeProcess(options, None)
        sent: list[tuple[str, str]] = []
        real_send = process.transport.send

        def recording(src: str, dst: str, msg: object) -> None:
            sent.append((dst, type(msg).__name__))
            real_send(src, dst, msg)

        monkeypatch.setattr(process.transport, "send", recording)
        held: list[str] = []  # each gossip held back opens (or keeps opening) the link instead
        real_open = process.transport.open_link

        def opening(dst: str) -> None:
            held.append(dst)
            real_open(dst)

        monkeypatch.setattr(process.transport, "open_link", opening)
        async with trio.open_nursery() as nursery:
            await nursery.start(process.run)
            node = process.host.node
            assert node is not None
            b = MemberState("B", "z1", (7,), "normal", 1, 1, f"127.0.0.1:{nowhere}")
            process.deliver("B", GossipSyn((b,)))  # B is up: A answers, and gossips to it
            with trio.fail_after(5):
                while not any(m["id"] == "B" and m["up"] for m in node.members(trio.current_time())):
                    await trio.sleep(0.01)
            with trio.fail_after(5):
                while held.count("B") < 3:  # three messages of gossip held
                    await trio.sleep(0.01)
            assert not [m for dst, m in sent if m.startswith("Gossip")], sent
            assert not process.transport.connected_to("B")  # the link is tried: nothing listens

            monkeypatch.setattr(node_process, "READY_WAIT", 0.0)  # its bound has passed
            with trio.fail_after(5):
                while not [m for dst, m in sent if dst == "B" and m.startswith("Gossip")]:
                    await trio.sleep(0.05)
            process.shutdown.set()

    trio.run(main)
