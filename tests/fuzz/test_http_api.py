"""Fuzz the HTTP API (node/http/api.py's ASGI app) with arbitrary methods, paths, query strings, headers
and bodies, called directly as ASGI (what node/http/http1.py hands it) in front of a node of a real
in-process cluster on trio's virtual clock.

Every request gets exactly one response, never a 500 and never an exception out of the app; every
4xx is JSON `{"error": ...}`; a response starts only after the whole body was read, or says
`Connection: close`. Nothing here depends on authentication, so the tests hold whether or
not the app checks a Bearer token first (a 401 is JSON with an "error" as well).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote_from_bytes

import trio
import trio.testing
from hypothesis import example, given
from hypothesis import strategies as st

from bhandar_cli.core.model.config import NodeConfig
from bhandar_cli.core.model.metrics import NodeMetrics
from bhandar_cli.core.node_views import NodeInfo
from bhandar_cli.core.protocol.messages import ClientRequest, Result
from bhandar_cli.core.protocol.value_fields import replaced
from bhandar_cli.fleet.in_process_cluster import InProcessCluster
from bhandar_cli.node import admin
from bhandar_cli.node.http.api import Api
from bhandar_cli.security.auth import Authenticator

from .conftest import fuzz_settings

TIMEOUT = 10.0


class ClusterNode:
    """The `Gateway` the API needs, as a node process gives it, over node A of an in-process cluster."""

    def __init__(self, cluster: InProcessCluster, via: str = "A") -> None:
        self.cluster = cluster
        self.id = via
        self.config = cluster.config
        self.auth: Authenticator | None = None  # every client admitted: the fuzz reaches the routes

    def info(self) -> NodeInfo:
        host = self.cluster.host(self.id)
        return admin.node_info(self.id, self.cluster.zones[self.id], host.node, trio.current_time(), 4)

    def current_metrics(self) -> NodeMetrics | None:
        node = self.cluster.host(self.id).node
        return None if node is None else node.metrics

    async def call(self, request: ClientRequest, timeout: float = TIMEOUT) -> Result:
        return await self.cluster.request(self.id, replaced(request, rid=self.cluster.new_rid()), timeout)


@dataclass(frozen=True)
class HttpRequest:
    method: str
    raw_path: bytes
    query: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: tuple[bytes, ...]  # the chunks, as `http.request` messages


async def asgi(app: Api, request: HttpRequest) -> tuple[int, dict[bytes, bytes], bytes]:
    """One request through the app; its status, headers and body. Fails if the app raises or
    answers other than with one start and one body."""
    path = quote_from_bytes(request.raw_path, safe="/%").replace("%25", "%")  # as a server unquotes it
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": "http",
        "path": path,
        "raw_path": request.raw_path,
        "query_string": request.query,
        "root_path": "",
        "headers": list(request.headers),
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    chunks = list(request.body) or [b""]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if not chunks:
            await trio.sleep_forever()  # a real server: nothing more until the client disconnects
        body = chunks.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(chunks)}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            # An answer before the body is read makes the server close a keep-alive connection the
            # client may already have sent its next request on: read it first, or say close.
            said_close = (b"connection", b"close") in message["headers"]
            assert not any(chunks) or said_close, f"{request}: answered with {b''.join(chunks)!r} unread"
        sent.append(message)

    await app(scope, receive, send)
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"], sent
    return sent[0]["status"], dict(sent[0]["headers"]), sent[1]["body"]


def check_response(request: HttpRequest, status: int, headers: dict[bytes, bytes], body: bytes) -> None:
    assert status != 500, f"{request}: 500 {body!r}"
    assert 200 <= status < 600
    if status >= 400:
        assert headers[b"content-type"] == b"application/json", (request, status)
        error = json.loads(body)["error"]
        assert isinstance(error, str) and error, (request, status, body)
    elif headers[b"content-type"] == b"application/json" and body:
        json.loads(body)
    assert headers[b"content-length"] == str(len(body)).encode()


# --- requests ----------------------------------------------------------------------------------

visible = st.binary(max_size=12).map(lambda b: bytes(c for c in b if 0x21 <= c <= 0x7E))
encoded = st.binary(max_size=12).map(lambda b: quote_from_bytes(b, safe="").encode())
segments = (
    st.sampled_from([b"kv", b"counters", b"nope", b"k", b"%2F", b"%FF", b"%", b"%zz", b"..", b"", b"a" * 300])
    | visible
    | encoded
)
keyspaces = st.sampled_from([b"kv", b"counters", b"fuzz"]) | segments
keys = st.sampled_from([b"k", b"probe", b"a%2Fb", b"caf%C3%A9"]) | segments


def join(*parts: bytes) -> bytes:
    return b"/" + b"/".join(parts)


paths = st.one_of(
    st.builds(lambda ks, key: join(b"v1", b"kv", ks, key), keyspaces, keys),
    st.builds(lambda ks, key: join(b"v1", b"kv", ks, key, b"increment"), keyspaces, keys),
    st.builds(lambda name: join(b"v1", b"keyspaces", name), keyspaces),
    st.sampled_from([b"/v1/status", b"/v1/keyspaces", b"/metrics", b"/", b"//", b"/v1/kv//"]),
    st.lists(segments, max_size=6).map(lambda parts: join(*parts)),
)
query_pairs = st.tuples(
    st.sampled_from([b"consistency", b"context", b"x"]) | visible,
    st.sampled_from([b"ONE", b"QUORUM", b"ALL", b"two", b"none", b"", b"%FF", b"oWFBAQ"]) | visible | encoded,
)
queries = st.lists(query_pairs, max_size=3).map(lambda pairs: b"&".join(k + b"=" + v for k, v in pairs))
methods = st.sampled_from(["GET", "PUT", "POST", "DELETE", "HEAD", "PATCH", "OPTIONS"]) | st.text(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ-", min_size=1, max_size=8
)
headers = st.lists(
    st.tuples(
        st.sampled_from([b"content-length", b"content-type", b"authorization", b"x-y"]),
        st.sampled_from([b"0", b"5", b"-1", b"99999999999999", b"abc", b"Bearer x", b"application/json"])
        | st.binary(max_size=16).map(lambda b: bytes(c for c in b if c >= 0x20 and c != 0x7F)),
    ),
    max_size=3,
).map(tuple)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
json_bodies = st.fixed_dictionaries(
    {},
    optional={
        "value": json_values,
        "context": st.sampled_from(["", "oWFBAQ", "%%", "A" * 5000]) | json_values,
        "delta": st.sampled_from([1, -1, 0, 2**53, 2**64, 1.5, "1", True]) | json_values,
        "request_id": st.sampled_from(["r", "", "x" * 200]) | json_values,
        "policy": st.sampled_from(["siblings", "lww", "counter", "x"]) | json_values,
        "n": st.sampled_from([1, 3, 0, -1, 100, 2**70, True, "3"]),
        "quorum": st.sampled_from(["sloppy", "strict", "x"]) | json_values,
    },
).map(lambda d: json.dumps(d).encode())
raw_bodies = st.sampled_from(
    [
        b"",
        b"{",
        b"[" * 200,
        b'{"value": ' + b"[" * 200,
        b"\xff\xfe",
        b'{"value": NaN}',
        b'{"value": 1e999}',
        b"null",
    ]
) | st.binary(max_size=40)


@st.composite
def chunked(draw: st.DrawFn, body: bytes) -> tuple[bytes, ...]:
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=3)))
    return tuple(body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True))


requests = st.builds(
    HttpRequest,
    methods,
    paths,
    queries,
    headers,
    (json_bodies | raw_bodies).flatmap(chunked),
)


async def serve_all(script: list[HttpRequest]) -> None:
    cluster = InProcessCluster(3, 3, 4, seed=0, config=NodeConfig(default_n=3))
    async with trio.open_nursery() as nursery:
        await nursery.start(cluster.run)
        app = Api(ClusterNode(cluster))
        for request in script:
            check_response(request, *await asgi(app, request))
        # The node still serves a normal write and read.
        ok = HttpRequest("PUT", b"/v1/kv/kv/probe", b"", (), (b'{"value": 1}',))
        assert (await asgi(app, ok))[0] == 204
        got = await asgi(app, HttpRequest("GET", b"/v1/kv/kv/probe", b"", (), ()))
        assert got[0] == 200 and json.loads(got[2])["values"] == [1]
        nursery.cancel_scope.cancel()


@fuzz_settings(0.15)
@given(script=st.lists(requests, min_size=1, max_size=12))
@example(
    script=[HttpRequest("PUT", b"/v1/kv/kv/k", b"", (), (b'{"value": ' + b"[" * 200 + b"]" * 200 + b"}",))]
)
@example(script=[HttpRequest("PUT", b"/v1/kv/kv/%FF", b"", (), (b'{"value"', b": 1}"))])  # refused by path
def test_arbitrary_requests_get_json_errors_never_a_500(script: list[HttpRequest]) -> None:
    trio.run(serve_all, script, clock=trio.testing.MockClock(autojump_threshold=0))
