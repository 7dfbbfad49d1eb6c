"""Maelstrom's node protocol: one JSON message per line, its validation, and its error codes.

A message is `{"src", "dest", "body"}`; a body has a `type` and, for RPCs, an integer `msg_id`
and/or `in_reply_to`. Node ids are n0..n(N-1) and clients c1..cM, as in Maelstrom (the harness's
own `init` comes from c0), and the services keep their names (`lin-kv`, `seq-kv`, `lww-kv`,
`lin-tso`). Every line a node writes is decoded here, strictly: a node that writes anything else
on standard output (a stray print, a truncated line, another node's or a service's name as `src`)
broke the protocol, and the error says which node, which line and why. A client's id as `src` is
allowed: a node passing a client's request on to another node unchanged (Maelstrom allows any
`src` its network knows; Bhandar keeps one node from speaking as another node or a service,
which would hide which node did what).

The error codes are Maelstrom's, with their meaning for a checker: a *definite* error promises
the operation did not and never will happen; an *indefinite* one (0 timeout, 13 crash, and every
code not in the table) promises nothing.
"""

from __future__ import annotations

import json
from collections.abc import Container
from dataclasses import dataclass
from typing import Any

MAX_LINE = 1 << 20  # bytes in one message line; a longer one is a protocol error
SHOWN = 120  # characters of a bad line quoted in an error

# code -> (name, definite)
ERRORS: dict[int, tuple[str, bool]] = {
    0: ("timeout", False),
    1: ("node-not-found", True),
    10: ("not-supported", True),
    11: ("temporarily-unavailable", True),
    12: ("malformed-request", True),
    13: ("crash", False),
    14: ("abort", True),
    20: ("key-does-not-exist", True),
    21: ("key-already-exists", True),
    22: ("precondition-failed", True),
    30: ("txn-conflict", True),
}
TIMEOUT = 0
NODE_NOT_FOUND = 1
NOT_SUPPORTED = 10
UNAVAILABLE = 11
MALFORMED = 12
CRASH = 13
KEY_MISSING = 20
PRECONDITION_FAILED = 22


def definite(code: int) -> bool:
    """Did an error with this code promise the operation never happens?"""
    known = ERRORS.get(code)
    return known is not None and known[1]


def error_name(code: int) -> str:
    known = ERRORS.get(code)
    return known[0] if known is not None else f"error {code}"


class MaelstromProtocolError(Exception):
    """A node broke the protocol: the message says which node and how."""


@dataclass(frozen=True, slots=True)
class Message:
    """One message as a node wrote it (`raw`, its line) and as decoded."""

    src: str
    dest: str
    body: dict[str, Any]
    raw: bytes

    @property
    def type(self) -> str:
        return str(self.body["type"])

    @property
    def msg_id(self) -> int | None:
        return self.body.get("msg_id")

    @property
    def in_reply_to(self) -> int | None:
        return self.body.get("in_reply_to")


def quoted(line: bytes) -> str:
    text = line.decode("utf-8", "replace")
    return repr(text if len(text) <= SHOWN else text[:SHOWN] + "...")


def decode(line: bytes, sender: str, clients: Container[str] = ()) -> Message:
    """The message `sender` wrote on one line (without its newline); MaelstromProtocolError if it is not
    one, naming the sender and quoting the line. Its `src` is `sender`, or one of `clients` (a
    client's request passed on: the caller checks that it goes to a node)."""
    if len(line) > MAX_LINE:
        raise MaelstromProtocolError(
            f"{sender} wrote a line of {len(line)} bytes (at most {MAX_LINE} are allowed)"
        )
    try:
        msg = json.loads(line)
    except ValueError as exc:
        raise MaelstromProtocolError(
            f"{sender} wrote a line that is not JSON ({exc}): {quoted(line)}"
        ) from None
    if type(msg) is not dict:
        raise MaelstromProtocolError(f"{sender} wrote JSON that is not a message object: {quoted(line)}")
    src, dest, body = msg.get("src"), msg.get("dest"), msg.get("body")
    if type(src) is not str or type(dest) is not str or type(body) is not dict:
        raise MaelstromProtocolError(
            f'{sender} wrote a message without string "src" and "dest" and an object "body": {quoted(line)}'
        )
    if src != sender and src not in clients:
        raise MaelstromProtocolError(
            f"{sender} wrote a message claiming to come from {src!r}: a node writes as itself, or "
            f"passes a client's request on to another node unchanged (src a client), never as another "
            f"node or a service: {quoted(line)}"
        )
    kind = body.get("type")
    if type(kind) is not str or not kind:
        raise MaelstromProtocolError(f'{sender} wrote a body without a string "type": {quoted(line)}')
    for field in ("msg_id", "in_reply_to"):
        value = body.get(field)
        if value is not None and type(value) is not int:
            raise MaelstromProtocolError(
                f'{sender} wrote a body whose "{field}" is not an integer: {quoted(line)}'
            )
    return Message(src, dest, body, line)


def encode(src: str, dest: str, body: dict[str, Any]) -> bytes:
    """One message as a line (with its newline)."""
    return json.dumps({"src": src, "dest": dest, "body": body}, separators=(",", ":")).encode() + b"\n"


def reply_body(request: dict[str, Any], body: dict[str, Any], msg_id: int | None = None) -> dict[str, Any]:
    """`body` as the answer to `request`."""
    out = dict(body)
    if "msg_id" in request:
        out["in_reply_to"] = request["msg_id"]
    if msg_id is not None:
        out["msg_id"] = msg_id
    return out


def error_body(code: int, text: str) -> dict[str, Any]:
    return {"type": "error", "code": code, "text": text}
