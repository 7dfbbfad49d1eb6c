"""Every limit on what a client may send, declared once, with the checks that enforce it.

The faces (CLI, REPL, HTTP) call these checks early so a person gets the message before anything
is sent; the core calls them again, because raw frames reach it without passing through a face.
Each failure is a `BadInput` (`TooLarge` for sizes): the caller's fault, exit 2 in the CLI, HTTP
400 (413 for sizes), one line in the REPL. Nothing here recurses, so no input can make a check
raise a RecursionError.

The integer range is the one every client represents exactly: JSON numbers are IEEE doubles in
JavaScript and most JSON libraries, exact only up to 2^53-1. Counter deltas, counter values and
the counters inside a causal context all stay within ±(2^53-1) (well inside signed 64-bit).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from bhandar_cli.core.model.errors import BadInput, TooLarge
from bhandar_cli.core.model.versions import compact, is_exact

MAX_KEY_BYTES = 1024  # UTF-8 bytes of a key
MAX_VALUE_BYTES = 1 << 20  # bytes of a stored value
MAX_JSON_DEPTH = 64  # nesting of arrays and objects in a JSON value
MAX_INTEGER = 2**53 - 1  # |counter delta|, |counter value| and every counter of a context
# A key's context holds an entry per actor that ever wrote it (no entry is ever pruned: see
# core/model/versions.py), so these leave room for every node of a large cluster twice over.
MAX_CONTEXT_CHARS = 8192  # characters of a context string
MAX_CONTEXT_ACTORS = 256  # entries of a context (an actor's counter, or one exact dot)
MAX_REQUEST_ID_CHARS = 128  # an increment's request id
SNAPSHOT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
ACTOR = re.compile(r"^[A-Za-z0-9_.~-]{1,64}$")  # a node id, or a node's later actor (A~3, A~r1)

# One pass over a JSON text finds its nesting depth: strings are skipped whole (a bracket inside
# a string does not nest), brackets are counted. Unrolled string pattern: no backtracking.
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


class NotJson(Exception):
    """The text is not JSON at all (as opposed to JSON the store refuses, a `BadInput`)."""


def check_snapshot_name(name: object) -> str:
    """A snapshot's name, which becomes a directory name (ROOT/NAME) on the client and on every
    node: a plain name only, never a path (a `/`, `..`, a leading dot); BadInput otherwise."""
    if not isinstance(name, str) or not SNAPSHOT_NAME.fullmatch(name) or ".." in name:
        raise BadInput(
            f"bad snapshot name {name!r}: use 1-64 letters, digits, '_', '-' or '.', with no '..' "
            "and not starting with '.'"
        )
    return name


def check_key(key: str, max_bytes: int = MAX_KEY_BYTES) -> None:
    """A key is 1 to `max_bytes` bytes of valid UTF-8 (no lone surrogates)."""
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise BadInput("the key is not valid UTF-8 (it holds a lone surrogate)") from None
    if not 0 < size <= max_bytes:
        raise BadInput(f"key must be 1 to {max_bytes} bytes (got {size})")


def check_value_size(value: bytes, max_bytes: int = MAX_VALUE_BYTES) -> None:
    if len(value) > max_bytes:
        raise TooLarge(f"value of {len(value)} bytes is over the limit of {max_bytes}")


def check_delta(delta: object) -> int:
    """A counter delta: an integer (not a bool) with |delta| <= 2^53-1."""
    if not isinstance(delta, int) or isinstance(delta, bool):
        raise BadInput(f"the delta must be an integer (got {type(delta).__name__})")
    if abs(delta) > MAX_INTEGER:
        raise BadInput(f"the delta {delta} is outside ±{MAX_INTEGER} (2^53-1, the exact JSON integers)")
    return delta


def check_request_id(request_id: str) -> None:
    if not 0 < len(request_id) <= MAX_REQUEST_ID_CHARS:
        raise BadInput(
            f"the request id must be 1 to {MAX_REQUEST_ID_CHARS} characters (got {len(request_id)})"
        )


def check_counter_total(key: str, before: int, after: int) -> None:
    """Refuse an increment that would take a counter's value outside ±(2^53-1), unless it moves
    the value back towards zero.

    Judged on the coordinator's merged view: increments through other coordinators at the same
    moment can together still carry the merged value past it, which a get then shows exactly (as
    an integer of any size); JavaScript clients would round it.
    """
    if abs(after) > MAX_INTEGER and abs(after) > abs(before):
        raise BadInput(
            f"counter {key} would reach {after}, outside ±{MAX_INTEGER} "
            "(2^53-1, the integers every JSON client represents exactly)"
        )


def check_context(context: Mapping[Any, Any]) -> dict[str, int]:
    """A decoded causal context: at most 256 entries, each a node's actor name with a counter in
    1..2^53-1, or one exact dot (`A~x:7`, whose counter is 7). Returned compacted (versions.py),
    as `join` leaves a context. The core checks a context from a raw frame with this too."""
    if len(context) > MAX_CONTEXT_ACTORS:
        raise BadInput(
            f"context of {len(context)} entries is over the limit of {MAX_CONTEXT_ACTORS} "
            "(use the context a get returned)"
        )
    out: dict[str, int] = {}
    for entry, counter in context.items():
        if not isinstance(entry, str):
            raise BadInput("malformed context (bad node name inside)")
        actor, _, alone = entry.partition(":")
        if not ACTOR.match(actor) or (alone and not (is_exact(actor) and alone == str(counter))):
            raise BadInput("malformed context (bad node name inside)")
        if not isinstance(counter, int) or isinstance(counter, bool) or not 0 < counter <= MAX_INTEGER:
            raise BadInput(f"malformed context (counter of {actor} outside 1..{MAX_INTEGER})")
        out[entry] = counter
    return compact(out)


def check_exact_dot(dot: Any) -> None:
    """The exact dot a forwarding node minted for a put (core/roles/exact_dots.py), as a raw frame
    may carry it."""
    if (
        not isinstance(dot, tuple)
        or len(dot) != 2
        or not isinstance(dot[0], str)
        or not ACTOR.match(dot[0])
        or not is_exact(dot[0])
        or not isinstance(dot[1], int)
        or isinstance(dot[1], bool)
        or not 0 < dot[1] <= MAX_INTEGER
    ):
        raise BadInput(f"malformed exact dot {dot!r}")


def json_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of a JSON text, counted only up to `limit + 1` (enough to refuse it)."""
    depth = deepest = 0
    for match in _JSON_TOKENS.finditer(text):
        char = text[match.start()]
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
        elif char in "]}":
            depth -= 1
    return deepest


def check_json_depth(text: str, what: str = "the value", limit: int = MAX_JSON_DEPTH) -> None:
    if text.count("[") + text.count("{") <= limit:
        return  # too few brackets to nest deeper (the common case, at C speed)
    if json_depth(text, limit) > limit:
        raise BadInput(f"{what} is nested deeper than {limit} levels of arrays and objects")


def parse_json(text: str | bytes, what: str = "the value", max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON: raises `NotJson` when `text` is not JSON, `BadInput` when it is JSON-like but
    refused (nested deeper than `max_depth`, NaN, Infinity, or a number too large for a double)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotJson(f"not UTF-8: {exc}") from None
    check_json_depth(text, what, max_depth)
    refused: list[str] = []

    def constant(name: str) -> None:
        refused.append(name)

    def number(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            refused.append(literal)
        return value

    try:
        value = json.loads(text, parse_constant=constant, parse_float=number)
    except ValueError as exc:  # JSONDecodeError, and ints past Python's digit limit
        raise NotJson(str(exc)) from None
    if refused:
        raise BadInput(
            f"{what} holds {refused[0]}: NaN, Infinity and numbers beyond a double's range are "
            "not JSON numbers and are refused (quote it to store a string)"
        )
    return value


def check_json_value(data: bytes) -> None:
    """What the core requires of a value stored as JSON: readable back without harm (not too
    deep, no NaN or Infinity). Bytes that are not JSON at all are kept and shown as base64."""
    try:
        parse_json(data)
    except NotJson:
        return


def decode_url_part(raw: bytes, what: str = "the URL") -> str:
    """Strict percent-decoding: the bytes must be UTF-8, so `%FF` is an error, never U+FFFD
    (which would make `%FF` and `%FE` the same key)."""
    out = bytearray()
    i, n = 0, len(raw)
    while i < n:
        byte = raw[i]
        if byte == 0x25:  # '%'
            pair = raw[i + 1 : i + 3]
            if len(pair) < 2 or not all(c in b"0123456789abcdefABCDEF" for c in pair):
                raise BadInput(f"bad percent escape in {what}: {raw[i : i + 3].decode('latin-1')!r}")
            out.append(int(pair, 16))
            i += 3
        else:
            out.append(byte)
            i += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{what} is not valid UTF-8 once percent-decoded") from None
