"""The HTTP API of one node (man page: HTTP API; docs/http-api.md): a small ASGI app served by our
HTTP/1.1 server (node/http/http1.py, inline in each connection's task).

It is part of the node: requests go to this node's own coordinator (`NodeProcess.call`), never
through client/client.py. http1.py does all the HTTP; this module only routes, converts JSON to
requests and results to JSON, and maps failures to status codes: bad input 400, too large 413,
not found and unknown keyspace 404, refused (too many siblings) and a keyspace defined otherwise
409, unavailable 503, timeout 504. When the node checks tokens, every route is checked (before its
body is read) against `Authorization: Bearer TOKEN` by security/auth.py under the operation name it
has there: no valid token 401 (with `WWW-Authenticate: Bearer`), no role 403, past the token's rate
429 (with `Retry-After`). `/metrics` is the Prometheus text format from node/http/prometheus.py.
"""

from __future__ import annotations

import json
import logging
import math
import uuid
from dataclasses import asdict
from typing import Any, Protocol

import trio
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from bhandar_cli.core import NodeInfo
from bhandar_cli.core.model import (
    JSON,
    MAX_JSON_DEPTH,
    BadInput,
    BhandarError,
    KeyspaceDef,
    NodeConfig,
    NodeMetrics,
    NotJson,
    PNCounter,
    RateLimited,
    Versioned,
    check_delta,
    check_request_id,
    context_of,
    decode_context,
    decode_url_part,
    decode_value,
    encode_context,
    encode_json,
    parse_json,
    parse_level,
    parse_ttl,
)
from bhandar_cli.core.protocol import (
    ClientRequest,
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    KeyspaceRequest,
    KeyspaceResult,
    PutRequest,
    PutResult,
    Result,
)
from bhandar_cli.core.session import ClientSession, Done, Exchange, Failed, SendRequest, Step
from bhandar_cli.node.http.asgi import ADMIT, Admit, BodyRefused, Limits, RequestBody, serve
from bhandar_cli.node.http.http1 import Receive, Scope, Send
from bhandar_cli.node.http.prometheus import NodeCollector
from bhandar_cli.security import Authenticator, Credential, NodeTls

STATUS = {
    "bad_input": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "rate_limited": 429,
    "not_found": 404,
    "unknown_keyspace": 404,
    "refused": 409,
    "conflict": 409,
    "too_large": 413,
    "internal": 500,
    "unavailable": 503,
    "timeout": 504,
}
TIMEOUT = 10.0
# Connections open at once, and seconds a client may send nothing (a request's body trickled out
# is bounded as a whole by asgi.BODY_TIMEOUT); of them, at most 64 without a valid token yet (the
# oldest goes: a flood of silent ones cannot take the port) and 96 of one token (a keep-alive
# client pool, `bench etcd --clients 256` dealt over three nodes, fits).
LIMITS = Limits(max_connections=256, read_timeout=10, unauthenticated=64, per_token=96)

Response = tuple[int, bytes, str, list[tuple[bytes, bytes]]]  # status, body, content type, headers


class Gateway(Protocol):
    """What the HTTP face needs from its node (NodeProcess)."""

    id: str
    config: NodeConfig
    auth: Authenticator | None  # None: every client is admitted

    def info(self) -> NodeInfo: ...
    def current_metrics(self) -> NodeMetrics | None: ...
    async def call(self, request: ClientRequest, timeout: float = ...) -> Result: ...


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Api:
    def __init__(self, node: Gateway) -> None:
        self.node = node
        # JSON text of a value can be much longer than its bytes (escapes): allow some room, and
        # let the core apply the exact value limit (413 with the numbers).
        self.max_body = 2 * node.config.max_value_bytes + 65536
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(NodeCollector(node))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request_body = RequestBody(scope, receive, self.max_body)
        try:
            status, body, ctype, headers = await self.route(scope, request_body)
        except _Failed as exc:  # a failed request: the failure's own fields (counts, code)
            status, body, ctype, headers = exc.status, _json(exc.body), "application/json", []
        except HttpError as exc:
            status, body, ctype, headers = exc.status, _json({"error": str(exc)}), "application/json", []
        except BhandarError as exc:
            status, ctype, headers = STATUS.get(exc.code, 400), "application/json", _refusal_headers(exc)
            body = _json({"error": str(exc), "code": exc.code})
        headers = [*headers, *await request_body.settle()]
        head = [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode()), *headers]
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": body})

    async def route(self, scope: Scope, request_body: RequestBody) -> Response:
        raw = scope.get("raw_path") or scope["path"].encode()
        # Split the raw path, then unquote each part, so a key may hold an encoded '/' (%2F).
        # Strictly: `%FF` is a 400, never U+FFFD (which made `%FF` and `%FE` the same key).
        parts = [decode_url_part(p, "the path") for p in raw.split(b"?")[0].strip(b"/").split(b"/")]
        method = scope["method"]
        query = _query(scope.get("query_string", b""))
        if parts == ["metrics"] and method == "GET":
            await self.authorize(scope, "metrics")
            return 200, generate_latest(self.registry), CONTENT_TYPE_LATEST, []
        if parts == ["v1", "status"] and method == "GET":
            await self.authorize(scope, "info")
            return 200, _json(self.node.info()), "application/json", []
        if parts == ["v1", "keyspaces"]:
            _allow(method, "GET")
            await self.authorize(scope, "keyspaces")
            return 200, _json({"keyspaces": self.node.info().get("keyspaces", [])}), "application/json", []
        if len(parts) == 3 and parts[:2] == ["v1", "keyspaces"]:
            _allow(method, "PUT")
            await self.authorize(scope, "keyspace_create")
            return await self.create_keyspace(parts[2], await self.body(request_body))
        if len(parts) in (4, 5) and parts[:2] == ["v1", "kv"] and all(parts[2:4]):
            ks, key = parts[2], parts[3]
            level = parse_level(query.get("consistency", "QUORUM"))
            if len(parts) == 5 and parts[4] == "increment":
                _allow(method, "POST")
                await self.authorize(scope, "incr", ks)
                return await self.increment(ks, key, level, await self.body(request_body))
            if len(parts) == 4:
                _allow(method, "GET", "PUT", "DELETE")
                await self.authorize(scope, {"GET": "get", "PUT": "put", "DELETE": "delete"}[method], ks)
                if method == "GET":
                    return await self.get(ks, key, level)
                if method == "PUT":
                    return await self.put(ks, key, level, await self.body(request_body))
                return await self.delete(ks, key, level, query.get("context"))
        raise HttpError(
            404, f"no such endpoint: {method} {scope['path']} (see GET /v1/status, /v1/kv/KS/KEY)"
        )

    async def authorize(self, scope: Scope, op: str, keyspace: str | None = None) -> None:
        """Raise Unauthenticated, Forbidden or RateLimited unless the request's bearer token may do
        `op` (on `keyspace`) now (every request may when the node admits every client). Passed,
        its connection counts as authenticated (asgi.py: shed after those without a token), or
        RateLimited/Unavailable if its token's, or all, authenticated connections are at their most."""
        token = ""
        if self.node.auth is not None:
            token = self.node.auth.check(_bearer(scope), op, keyspace, trio.current_time()).id
        admit: Admit | None = scope.get(ADMIT)
        if admit is not None and not admit.admitted:
            await admit(token)

    async def body(self, request_body: RequestBody) -> dict[str, Any]:
        try:
            raw = await request_body.read()
        except BodyRefused as exc:
            raise HttpError(exc.status, str(exc)) from None
        try:  # the value inside may nest MAX_JSON_DEPTH levels, the body one more
            parsed = parse_json(raw or b"{}", "the request body", MAX_JSON_DEPTH + 1)
        except NotJson as exc:
            raise HttpError(400, f"the body must be a JSON object: {exc}") from None
        if not isinstance(parsed, dict):
            raise HttpError(400, "the body must be a JSON object")
        return parsed

    async def call(self, request: ClientRequest) -> Result:
        result = await self.node.call(request, TIMEOUT)
        if isinstance(result, Failure):
            raise _failed(result)
        return result

    async def run(self, exchange: Exchange) -> Done:
        """Drive a client session's operation (core/session/client_session.py) on this node: the
        gateway is a client of its own node, with the same semantics as every other client."""
        step: Step = exchange.start(None)
        while isinstance(step, SendRequest):
            result = await self.node.call(step.request, TIMEOUT)
            if not isinstance(result, GetResult | PutResult | IncrResult | Failure):
                raise HttpError(500, f"internal error: a data request answered with {type(result).__name__}")
            step = exchange.receive(result, None)
        if isinstance(step, Failed):
            raise _failed(step.failure)
        return step

    async def get(self, ks: str, key: str, level: str) -> Response:
        result = await self.call(GetRequest(0, ks, key, level))
        assert isinstance(result, GetResult)
        headers = [(b"x-bhandar-coordinator", result.coordinator.encode())]
        record = result.record
        if isinstance(record, PNCounter):
            return 200, _json({"values": [record.value], "context": ""}), "application/json", headers
        siblings = record.siblings if isinstance(record, Versioned) else ()
        context = encode_context(context_of(siblings))
        values = [decode_value(s.value, s.ctype) for s in siblings if not s.tombstone]
        if not values:
            body = {"error": f"{ks}/{key} not found", "code": "not_found", "values": [], "context": context}
            return 404, _json(body), "application/json", headers
        body = {"values": values, "context": context}
        if result.warnings:
            body["warnings"] = list(result.warnings)
        return 200, _json(body), "application/json", headers

    async def put(self, ks: str, key: str, level: str, body: dict[str, Any]) -> Response:
        if "value" not in body:
            raise BadInput('the body needs a "value" (any JSON), e.g. {"value": "hello"}')
        context = _context(body.get("context"))
        result = await self.call(PutRequest(0, ks, key, encode_json(body["value"]), JSON, context, level))
        assert isinstance(result, PutResult)
        return 204, b"", "application/json", [(b"x-bhandar-coordinator", result.coordinator.encode())]

    async def delete(self, ks: str, key: str, level: str, context: str | None) -> Response:
        """Without a context, read the key first and delete what the read found (as the CLI and
        REPL do: the client session's delete): a blind tombstone removes nothing already stored.
        `context=none` asks for the blind tombstone anyway, and the reply says so."""
        session = ClientSession(lambda: 0)  # this node numbers the requests it is handed
        chosen = context or None  # "" is no context given: read first
        done = await self.run(session.delete(ks, key, context=chosen, level=level, via=self.node.id))
        headers = [(b"x-bhandar-coordinator", done.result.coordinator.encode())]
        if chosen == "none":
            body = {"blind": True, "warning": done.warnings[0]}
            return 200, _json(body), "application/json", headers
        if done.removed is not None:
            headers.append((b"x-bhandar-deleted", str(len(done.removed)).encode()))
        return 204, b"", "application/json", headers

    async def increment(self, ks: str, key: str, level: str, body: dict[str, Any]) -> Response:
        delta = check_delta(body.get("delta", 1))
        request_id = body.get("request_id") or uuid.uuid4().hex[:16]
        if not isinstance(request_id, str):
            raise BadInput('"request_id" must be a string')
        check_request_id(request_id)
        result = await self.call(IncrRequest(0, ks, key, delta, request_id, level))
        assert isinstance(result, IncrResult)
        return 200, _json({"value": result.value, "request_id": request_id}), "application/json", []

    async def create_keyspace(self, name: str, body: dict[str, Any]) -> Response:
        """201 with the definition when new, 200 when an identical one exists, 409 when it differs."""
        unknown = sorted(set(body) - {"policy", "n", "quorum", "ttl"})
        if unknown:
            raise BadInput(f"unknown field {unknown[0]!r} (a keyspace takes policy, n, quorum and ttl)")
        policy, quorum = body.get("policy", "siblings"), body.get("quorum", "sloppy")
        n = body.get("n", self.node.config.default_n)
        if not isinstance(policy, str) or not isinstance(quorum, str):
            raise BadInput('"policy" and "quorum" must be strings')
        if not isinstance(n, int) or isinstance(n, bool):
            raise BadInput('"n" must be an integer')
        ttl = body.get("ttl", 0)  # seconds, or text as the CLI takes it ("60s", "5m")
        if isinstance(ttl, str):
            ttl = parse_ttl(ttl)
        if not isinstance(ttl, int) or isinstance(ttl, bool):
            raise BadInput('"ttl" must be a number of seconds or a duration such as "60s"')
        result = await self.call(KeyspaceRequest(0, KeyspaceDef(name, policy, n, quorum, ttl)))
        assert isinstance(result, KeyspaceResult)
        out = {**asdict(result.definition), "created": result.created}  # the shape `keyspaces` lists
        return 201 if result.created else 200, _json(out), "application/json", []


class _Failed(HttpError):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status, body["error"])
        self.body = body


def _failed(failure: Failure) -> _Failed:
    """A failed request as the HTTP reply says it: the status its code maps to, and its counts."""
    out: dict[str, Any] = {"error": failure.error, "code": failure.code}
    if failure.needed:
        out.update(answered=failure.answered, needed=failure.needed)
    return _Failed(STATUS.get(failure.code, 500), out)


def _bearer(scope: Scope) -> Credential:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            if scheme.lower() != "bearer":
                return Credential(problem="use the header Authorization: Bearer TOKEN")
            return Credential.of(token.strip())
    return Credential(problem="no token given (send the header Authorization: Bearer TOKEN)")


def _refusal_headers(exc: BhandarError) -> list[tuple[bytes, bytes]]:
    """What a 401 and a 429 must say besides the body: the scheme to use, when to retry."""
    if exc.code == "unauthenticated":
        return [(b"www-authenticate", b'Bearer realm="bhandar"')]
    if isinstance(exc, RateLimited):
        return [(b"retry-after", str(max(1, math.ceil(exc.retry_after))).encode())]
    return []


def _allow(method: str, *allowed: str) -> None:
    if method not in allowed:
        raise HttpError(405, f"{method} is not allowed here (use {', '.join(allowed)})")


def _context(token: Any) -> dict[str, int] | None:
    if token is None or token == "":
        return None  # a blind write
    if not isinstance(token, str):
        raise BadInput('"context" must be the string a GET returned')
    return decode_context(token)


def _query(raw: bytes) -> dict[str, str]:
    """The query string's last value per name, strictly percent-decoded as the path is."""
    out: dict[str, str] = {}
    for pair in raw.split(b"&"):
        if pair:
            name, _, value = pair.partition(b"=")
            what = "the query string"
            out[decode_url_part(name.replace(b"+", b" "), what)] = decode_url_part(
                value.replace(b"+", b" "), what
            )
    return out


def _json(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def serve_http(
    node: Gateway,
    host: str,
    port: int,
    tls: NodeTls | None = None,
    fronts: int = 0,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the API on host:port until cancelled (HTTPS with the node's certificate when it has
    one), in this process or, with `fronts`, through that many front processes
    (node/http/fronts.py); reports the bound port when ready."""
    files = None if tls is None else (str(tls.cert), str(tls.key))
    log = logging.getLogger("bhandar.http")
    api = Api(node)
    if fronts:
        from bhandar_cli.node.http.fronts import serve_fronts

        await serve_fronts(
            api, host, port, fronts, LIMITS, api.max_body, log, node.id, files, task_status=task_status
        )
    else:
        await serve(api, host, port, LIMITS, log, files, task_status=task_status)
