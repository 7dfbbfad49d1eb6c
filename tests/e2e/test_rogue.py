"""A rogue client on a node's port is disconnected; the node keeps serving everyone else."""

from __future__ import annotations

import socket
import ssl
import struct
import time

import pytest

from bhandar_cli.fleet.cluster_file import ClusterFile
from bhandar_cli.node.net.codec import encode_frame
from tests.e2e.conftest import raw_connection, rpc


def closed_by_node(sock: socket.socket, within: float) -> bool:
    """True if the node closes the connection (EOF or reset) within `within` seconds."""
    sock.settimeout(within)
    deadline = time.monotonic() + within
    try:
        while time.monotonic() < deadline:
            if sock.recv(4096) == b"":
                return True
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):  # SSLError: closed without TLS goodbye
        return True
    except TimeoutError:
        return False
    return False


def still_serves(cluster: ClusterFile, node: str) -> None:
    info = rpc(cluster, node, "info")
    assert info["id"] == node and info["up"]


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 3, id="garbage"),
        pytest.param(struct.pack(">I", 0xFFFFFFF0) + b"\x00" * 16, id="huge-length-prefix"),
        pytest.param(encode_frame({"hello": "client"}) + b"\x00\x00\x00\x09\x82\x01", id="half-frame"),
        pytest.param(encode_frame({"hello": "client"}) + encode_frame([1, 2]), id="rpc-not-a-map"),
        pytest.param(
            encode_frame({"hello": "peer", "id": "Z"}) + encode_frame({"$t": "Nope"}), id="bad-message"
        ),
        pytest.param(encode_frame({"hello": "peer", "id": "Z"}) + b"\x00\x00\x00\x02\xff\xff", id="bad-cbor"),
    ],
)
def test_rogue_bytes_get_the_connection_closed(shared_cluster: ClusterFile, payload: bytes) -> None:
    with raw_connection(shared_cluster, "A") as sock:
        sock.sendall(payload)
        # The half frame waits out the node's frame timeout (1 s in these tests); the rest is at once.
        assert closed_by_node(sock, within=4.0), "the node kept a rogue connection open"
    still_serves(shared_cluster, "A")


def test_silent_connection_without_hello_is_closed(shared_cluster: ClusterFile) -> None:
    with raw_connection(shared_cluster, "B") as sock:
        sock.sendall(b"\x00\x00")  # two bytes of a length prefix, then nothing
        assert closed_by_node(sock, within=4.0)
    still_serves(shared_cluster, "B")


def test_a_malformed_request_is_refused_without_hurting_the_node(shared_cluster: ClusterFile) -> None:
    bad = {"$t": "GetRequest", "rid": 1, "keyspace": 5, "key": ["x"], "consistency": "QUORUM"}
    # "malformed": compiled (bhandar_cli/native.py), the message refuses its field as it is built.
    with pytest.raises(Exception, match=r"wrong type|malformed GetRequest"):
        rpc(shared_cluster, "C", "request", msg=bad)
    with pytest.raises(Exception, match="unknown operation"):
        rpc(shared_cluster, "C", "format_disk")
    still_serves(shared_cluster, "C")
    # The node still answers real requests afterwards.
    reply = rpc(
        shared_cluster, "C", "request", msg={"$t": "GetRequest", "rid": 2, "keyspace": "kv", "key": "k"}
    )
    assert reply["$t"] == "GetResult"
