"""Fuzz a real node process: hundreds of random and mutated frames on its port, as a peer or as a
client, over plain TCP (an insecure cluster) and inside TLS (a secure one). Then the node must
still be running, answer a normal client, and its log must show no internal error (a bug its
connection handler caught) and no crash.

Frames that would legitimately stop or reconfigure the node are left out: the `shutdown`,
`partition`, `delay` and `snapshot` operations and decommission requests. Any outsider can send
those to an insecure cluster; refusing them is the job of TLS and tokens, not of the decoder.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import example, given
from hypothesis import strategies as st

from bhandar_cli.core.wire import registry
from bhandar_cli.fleet import pids, supervisor
from bhandar_cli.fleet.cluster_file import ClusterFile
from bhandar_cli.node.net.codec import encode_frame
from tests.e2e.conftest import NODE_ARGS, kill_all, raw_connection, rpc

from .conftest import fuzz_settings
from .strategies import message_of, mutated, small_bodies

SAFE_OPS = ["info", "records", "hints", "metrics", "digest", "members", "tree", "flush", "heal", "compact"]
# What stops or reconfigures the node (see the module docstring).
OPERATOR_OPS = frozenset({"shutdown", "partition", "delay", "snapshot"})
PEER_MESSAGES = sorted(set(registry()) - {"DecommissionRequest"})
CLOSE_WITHIN = 10.0  # the node closes a connection at our end of stream at once; this only bounds a hang


@pytest.fixture(scope="module", params=[False, True], ids=["insecure", "tls"])
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterFile]:
    """A one-node cluster of the module's own (the fuzz may leave odd keyspaces and records):
    insecure, where every frame reaches the decoder, and secure, where a client's frames do inside
    TLS and a peer hello without a node certificate meets the peer gate."""
    directory = tmp_path_factory.mktemp("fuzz") / "cluster"
    tls: bool = request.param
    try:
        yield trio.run(lambda: supervisor.up(directory, 1, 1, 0, 8, 1, NODE_ARGS, 30.0, tls=tls))
    finally:
        kill_all(directory)


HELLOS = [
    encode_frame({"hello": "peer", "id": "Z"}),
    encode_frame({"hello": "peer", "id": "A"}),
    encode_frame({"hello": "client"}),
    encode_frame({"hello": "client", "token": "x"}),
]
# Mostly a real hello, so the frames after it reach the node's message handling.
hellos = st.sampled_from([*HELLOS, b""]).flatmap(
    lambda hello: st.just(hello) if hello else small_bodies.map(encode_frame)
)
peer_frames = (
    st.sampled_from(PEER_MESSAGES).flatmap(lambda name: message_of(name, small_bodies)).map(encode_frame)
)
rpc_frames = st.builds(
    lambda op, call_id, args: encode_frame({"op": op, "id": call_id, **args}),
    st.sampled_from(SAFE_OPS) | st.text(max_size=8).filter(lambda op: op not in OPERATOR_OPS),
    st.integers(0, 2**64) | small_bodies,
    st.dictionaries(
        st.sampled_from(["keyspace", "key", "lo", "hi", "counts", "msg", "x"]), small_bodies, max_size=4
    ),
)
request_frames = st.builds(
    lambda call_id, msg: encode_frame({"op": "request", "id": call_id, "msg": msg}),
    st.integers(0, 100),
    st.sampled_from(["PutRequest", "GetRequest", "IncrRequest", "KeyspaceRequest", "RepairRequest"]).flatmap(
        lambda name: message_of(name, small_bodies)
    ),
)


@st.composite
def connections(draw: st.DrawFn) -> bytes:
    """One connection's bytes: a hello, then frames, some mutated, or bytes of no protocol at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(min_size=1, max_size=200))
    frames = [draw(hellos)]
    frames += draw(
        st.lists(peer_frames | rpc_frames | request_frames | small_bodies.map(encode_frame), max_size=8)
    )
    stream = b"".join(frames)
    return draw(mutated(stream)) if draw(st.integers(0, 2)) == 0 else stream


# Connections the fuzz made to each cluster: the check after it must not pass on an unfuzzed node.
EXCHANGES: dict[str, int] = {}


def exchange(cluster: ClusterFile, data: bytes) -> None:
    """Send `data`, end our side, and read until the node closes the connection."""
    EXCHANGES[cluster.dir] = EXCHANGES.get(cluster.dir, 0) + 1
    with raw_connection(cluster, "A") as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)  # (on a TLS socket: a TCP half-close, no close_notify)
        except (BrokenPipeError, ConnectionResetError):
            return  # the node already closed it: fine
        sock.settimeout(CLOSE_WITHIN)
        deadline = time.monotonic() + CLOSE_WITHIN
        try:
            while time.monotonic() < deadline:
                if sock.recv(65536) == b"":
                    return
        except ConnectionResetError:
            return
        raise AssertionError(f"the node kept the connection open after our end of stream: {data!r}")


@fuzz_settings(0.5)
@given(data=connections())
@example(data=encode_frame({"hello": "client"}) + encode_frame({"op": "tree", "id": 1, "lo": 2**70, "hi": 0}))
def fuzz_frames(node: ClusterFile, data: bytes) -> None:
    exchange(node, data)


def test_random_frames_never_take_the_node_down_and_it_still_serves(node: ClusterFile) -> None:
    """The fuzz and the check after it, in one test: as two, pytest-xdist could run the check on
    another worker than the fuzz (its node then saw none, and the check failed)."""
    fuzz_frames(node)  # hypothesis draws `data`
    assert EXCHANGES.get(node.dir, 0) >= 20, "this node saw no fuzz"
    entry = node.node("A")
    assert pids.pid_alive(entry.pid)
    assert rpc(node, "A", "info")["up"]
    put = {
        "$t": "PutRequest",
        "rid": 1,
        "keyspace": "kv",
        "key": "after-fuzz",
        "value": b"1",
        "ctype": "",
        "context": None,
    }
    assert rpc(node, "A", "request", msg=put)["$t"] == "PutResult"
    got = rpc(node, "A", "request", msg={"$t": "GetRequest", "rid": 2, "keyspace": "kv", "key": "after-fuzz"})
    assert got["$t"] == "GetResult"
    log = Path(entry.log).read_text(encoding="utf-8", errors="replace")
    # A bug in serving a connection, or the node crashing. (A forged message its handler chokes on
    # is dropped and logged, by design: that is not a crash.)
    assert "internal error" not in log and "stopping the process" not in log, log[-3000:]
