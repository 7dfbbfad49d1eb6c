"""Fuzz a node with forged peer messages: whatever `from_wire` accepts from a frame is delivered to
node A of an in-process cluster (on trio's virtual clock) as if from a member or a stranger, then
the cluster runs on for a while. A message the node cannot handle is dropped (the executor counts
it); nothing may crash a node later, in its ticks, and the cluster must still serve at ALL.
"""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from bhandar_cli.core.model.config import NodeConfig
from bhandar_cli.core.protocol.client_messages import GetRequest, GetResult, PutRequest, PutResult
from bhandar_cli.core.wire import from_wire, registry
from bhandar_cli.fleet.in_process_cluster import InProcessCluster
from bhandar_cli.node.net.codec import FrameDecoder, encode_frame

from .conftest import fuzz_settings
from .strategies import bodies, message_of, well_formed_records

# Decommission is an order any member may give (refusing outsiders is TLS's job), so it is left out.
FORGED = sorted(set(registry()) - {"DecommissionRequest"})
NODES = ("A", "B", "C")


def through_the_codec(body: object) -> object | None:
    """What a node's transport would hand on: the decoded frame's message, None if refused."""
    decoder = FrameDecoder()
    decoder.receive_data(encode_frame(body))
    try:
        message: object = from_wire(decoder.next_frame())
    except ValueError:
        return None
    return message


forged = st.tuples(
    st.sampled_from(["B", "C", "Z", "A"]),
    st.sampled_from(FORGED)
    .flatmap(lambda name: message_of(name, bodies | well_formed_records))
    .map(through_the_codec),
)


async def deliver_then_serve(messages: list[tuple[str, object]]) -> None:
    cluster = InProcessCluster(3, 3, 4, seed=1, config=NodeConfig(default_n=3))
    async with trio.open_nursery() as nursery:
        await nursery.start(cluster.run)
        target = cluster.host("A")
        for src, message in messages:
            if message is not None:
                target.deliver(src, message)
            await trio.sleep(0.01)
        await trio.sleep(5.0)  # gossip, failure detection, hints and repair run on what was delivered
        assert all(cluster.host(n).alive for n in NODES), "a forged message crashed a node"
        put = await cluster.request(
            "A", PutRequest(cluster.new_rid(), "kv", "probe", b"1", "", None, "ALL"), 10
        )
        assert isinstance(put, PutResult), put
        got = await cluster.request("B", GetRequest(cluster.new_rid(), "kv", "probe", "ALL"), 10)
        assert isinstance(got, GetResult), got
        nursery.cancel_scope.cancel()


@fuzz_settings(0.1)
@given(messages=st.lists(forged, min_size=1, max_size=10))
def test_forged_peer_messages_never_crash_a_node(messages: list[tuple[str, object]]) -> None:
    trio.run(deliver_then_serve, messages, clock=trio.testing.MockClock(autojump_threshold=0))
