"""What Bhandar's node serves as a Maelstrom node: workload requests as client requests, and
results as Maelstrom answers (pure translation; node/maelstrom.py is the environment).

- dynamo-kv, on the `kv` keyspace (siblings): `get` {key} -> `get_ok` {values, context} (every
  live sibling, and the opaque context of the node's `get`); `put` {key, value, context} ->
  `put_ok` (no context, or null: a blind write).
- g-counter and pn-counter, on key `counter` of the `counters` keyspace: `add` {delta} ->
  `add_ok`, with the request id `src:msg_id`, so a retransmitted add counts once; `read` (no
  key) -> `read_ok` {value}.
- lin-kv, on the `lin` keyspace (last writer wins, created at `init`): `read` {key} ->
  `read_ok` {value} or error 20; `write` {key, value} -> `write_ok`. `cas` is answered with
  error 10 (not supported): a sloppy-quorum store has no compare-and-set it could honour.

Keys that are not strings are stored under their JSON text. Failures map to Maelstrom's codes
by what they promise: refused before anything was stored (unavailable, bad input) is definite,
a timeout or an internal error is indefinite.
"""

from __future__ import annotations

import json
from typing import Any

from bhandar_cli.core.model import (
    JSON,
    BadInput,
    KeyspaceDef,
    PNCounter,
    Versioned,
    context_of,
    decode_context,
    decode_value,
    encode_context,
    encode_json,
)
from bhandar_cli.core.protocol import (
    ClientRequest,
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    KeyspaceRequest,
    PutRequest,
    Result,
)

KV, COUNTERS, COUNTER_KEY = "kv", "counters", "counter"
LIN = "lin"

# Maelstrom's codes (its protocol's error table).
TIMEOUT, NOT_SUPPORTED, UNAVAILABLE, MALFORMED, CRASH, KEY_MISSING = 0, 10, 11, 12, 13, 20
CODES = {
    "unavailable": UNAVAILABLE,
    "refused": UNAVAILABLE,
    "rate_limited": UNAVAILABLE,
    "bad_input": MALFORMED,
    "too_large": MALFORMED,
    "unknown_keyspace": MALFORMED,
    "conflict": MALFORMED,
    "timeout": TIMEOUT,
}


class NotServed(Exception):
    """A request this node answers at once with an error: (code, text)."""

    def __init__(self, code: int, text: str) -> None:
        super().__init__(text)
        self.code = code


def key_of(body: dict[str, Any]) -> str:
    key = body.get("key")
    if key is None:
        raise NotServed(MALFORMED, 'the request needs a "key"')
    return key if isinstance(key, str) else json.dumps(key, sort_keys=True)


def schema_request(rid: int, n: int) -> KeyspaceRequest:
    """The lin-kv keyspace, created by every node at `init` (the same definition everywhere)."""
    return KeyspaceRequest(rid, KeyspaceDef(LIN, "lww", n))


def request_of(rid: int, src: str, body: dict[str, Any], level: str) -> ClientRequest:
    """The client request a workload message asks for; NotServed when there is none."""
    kind = body.get("type")
    try:
        if kind == "get":
            return GetRequest(rid, KV, key_of(body), level)
        if kind == "put":
            if "value" not in body:
                raise NotServed(MALFORMED, 'put needs a "value"')
            context = body.get("context")
            if context is not None and not isinstance(context, str):
                raise NotServed(MALFORMED, "the context must be the string a get returned, or null")
            ctx = decode_context(context) if context else None
            return PutRequest(rid, KV, key_of(body), encode_json(body["value"]), JSON, ctx, level)
        if kind == "add" and "delta" in body:
            delta = body["delta"]
            if type(delta) is not int:
                raise NotServed(MALFORMED, "delta must be an integer")
            return IncrRequest(rid, COUNTERS, COUNTER_KEY, delta, f"{src}:{body.get('msg_id')}", level)
        if kind == "read":
            if "key" not in body:
                return GetRequest(rid, COUNTERS, COUNTER_KEY, level)
            return GetRequest(rid, LIN, key_of(body), level)
        if kind == "write":
            if "value" not in body:
                raise NotServed(MALFORMED, 'write needs a "value"')
            return PutRequest(rid, LIN, key_of(body), encode_json(body["value"]), JSON, None, level)
    except BadInput as exc:
        raise NotServed(MALFORMED, str(exc)) from None
    if kind == "cas":
        raise NotServed(NOT_SUPPORTED, "cas is not supported: a sloppy-quorum store has no compare-and-set")
    raise NotServed(
        NOT_SUPPORTED, f"this node serves dynamo-kv, g-counter, pn-counter and lin-kv, not {kind!r}"
    )


def answer_of(request: ClientRequest, body: dict[str, Any], result: Result) -> dict[str, Any]:
    """The Maelstrom answer body (without `in_reply_to`) to a request's result."""
    if isinstance(result, Failure):
        code = CODES.get(result.code, CRASH)
        return {"type": "error", "code": code, "text": result.error}
    kind = body.get("type")
    if isinstance(request, GetRequest) and isinstance(result, GetResult):
        record = result.record
        if isinstance(record, PNCounter) or request.keyspace == COUNTERS:
            return {"type": "read_ok", "value": record.value if isinstance(record, PNCounter) else 0}
        siblings = record.siblings if isinstance(record, Versioned) else ()
        values = [decode_value(s.value, s.ctype) for s in siblings if not s.tombstone]
        if kind == "get":
            return {
                "type": "get_ok",
                "values": values,
                "context": encode_context(context_of(siblings)) or None,
            }
        if not values:
            return {"type": "error", "code": KEY_MISSING, "text": "key does not exist"}
        return {"type": "read_ok", "value": values[-1]}
    return {"type": f"{kind}_ok"}
