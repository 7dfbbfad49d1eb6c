"""The strict subset of CBOR that frame bodies may use, enforced on both sides of a connection.

Decoding is strict because a peer may be buggy or hostile. Before cbor2 sees a payload,
`validate_cbor` walks its item headers (RFC 8949 §3), building no objects, and rejects:

- semantic tags other than bignums (2, 3). cbor2 decodes many tags itself (datetime, regex,
  set, shared references that can build cycles, MIME messages...) *without* consulting
  `tag_hook`, so a `tag_hook` alone would not keep them out; we reject them before cbor2 runs;
- indefinite-length items, undefined and other simple values (our encoder never produces them);
- map keys that are not text or byte strings, and duplicate keys. Python's `hash()` of ints and
  floats is not randomised, so a peer could otherwise send a map of colliding keys and make
  decoding quadratic (hash flooding); `str` and `bytes` hashes are salted per process;
- declared lengths larger than the bytes left in the frame, trailing bytes after the item;
- NaN and infinite floats: no message of ours holds one, and a NaN time or a NaN in a value
  would compare false with everything (core/model/limits.py refuses them from clients too);
- nesting deeper than `max_depth` and more than `max_items` data items. cbor2 (6.x) does not
  preallocate from declared lengths (it reads long strings in 64 KiB chunks and grows lists as
  items arrive), so the frame size bounds what it allocates; but a one-byte item such as an empty
  map becomes a ~64-byte Python object, so a 16 MiB frame of them would cost about 1 GiB.
  `max_items` caps that expansion.

`check_encodable` applies the same rules to what a node sends, so a sender fails at once with the
path to the offending value instead of the peer dropping the connection. Both count the frame's
envelope (an array and the version int) as the codec writes it, so their limits agree exactly.
"""

from __future__ import annotations

import math
from typing import Final, NoReturn

# Bignums: cbor2 writes ints outside the 64-bit range as tag 2 / 3 around a byte string.
_ALLOWED_TAGS: Final = frozenset({2, 3})


class ProtocolError(ValueError):
    """The peer sent bytes that are not a valid frame; the connection should be closed.

    Raised here and by the frame decoder; `node.net.codec` exports it with the rest of the codec."""


def check_encodable(body: object, *, max_items: int, max_depth: int) -> None:
    """Raise ValueError (the sender's bug) when `body` breaks a rule or a limit, naming where."""
    # Iterative so a deep body gives our error, not a RecursionError. The envelope array and the
    # version int count as 2 items and 1 level, exactly as the decoder will count them.
    items = 2
    stack: list[tuple[object, int, str]] = [(body, 2, "body")]
    while stack:
        value, depth, path = stack.pop()
        items += 1
        if items > max_items:
            raise ValueError(f"body has more than {max_items} items")
        if depth > max_depth:
            raise ValueError(f"{path} is nested deeper than {max_depth} levels")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{path} is {value}: NaN and infinite floats are not allowed")
        if value is None or isinstance(value, bool | int | float | str | bytes | bytearray):
            continue
        if isinstance(value, list | tuple):
            stack.extend((v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str | bytes):
                    raise ValueError(
                        f"{path} has a key of type {type(k).__name__}; keys must be str or bytes"
                    )
                items += 1  # the key
                stack.append((v, depth + 1, f"{path}[{k!r}]"))
        else:
            raise ValueError(
                f"cannot encode {type(value).__name__} at {path}: "
                "use None, bool, int, float, str, bytes, list or dict"
            )


# The validator: a walk over CBOR item headers (RFC 8949 §3) that builds no objects. Only
# well-formedness and our limits are checked here; UTF-8 validity is left to cbor2. It runs on
# every frame a node receives, where it cost five times cbor2's own decoding: the loop below keeps
# per item to a table lookup for the header and one branch per major type. Compiled (mypyc,
# bhandar_cli/native.py), every local is a C integer or a typed reference: no closure (its
# variables would live in a heap cell), and the tables are bytes, whose items are C integers.

_SIMPLE_OK: Final = frozenset({20, 21, 22})  # false, true, null
# The exponent bits of a half, single and double float: all set means NaN or infinity.
_HALF, _SINGLE, _DOUBLE = 0x7C00, 0x7F80_0000, 0x7FF0_0000_0000_0000
_RESERVED: Final = 0xFF
# Per initial byte, the bytes of argument that follow it: 0 (the argument is in the byte), 1, 2,
# 4 or 8; _RESERVED for additional information 28..31 (reserved, or indefinite length / break).
_ARG_BYTES: Final = bytes(
    0 if ib & 0x1F < 24 else (1 << ((ib & 0x1F) - 24) if ib & 0x1F < 28 else _RESERVED) for ib in range(256)
)


def _fail(start: int, why: str) -> NoReturn:
    raise ProtocolError(f"undecodable CBOR at byte {start}: {why}")


def validate_cbor(data: bytes, *, max_items: int, max_depth: int, batch: bool = False) -> None:
    """Raise `ProtocolError` (the peer's fault) unless `data` is one item of the allowed subset.

    `batch`: the frame holds a batch (protocol 3, node/net/codec.py), whose array around its messages
    counts neither as an item nor as a level, so one message has the same limits in a batch as
    alone."""
    end = len(data)
    pos = 0
    items = -1 if batch else 0
    depth = -1 if batch else 0  # containers open around the current item (len(outer), less a batch's)
    # The innermost open container: the items it still expects (a map counts keys and values
    # apart, so an even count means a key comes next) and, for a map, the keys seen so far. The
    # whole frame is a container of one item; the ones around the innermost wait in `outer`.
    expected = 1
    seen: set[tuple[int, bytes]] | None = None
    outer: list[tuple[int, set[tuple[int, bytes]] | None]] = []
    arg_bytes = _ARG_BYTES
    start = 0
    arg = 0
    while True:
        start = pos
        if pos >= end:
            _fail(start, "truncated item")
        initial: int = data[pos]
        pos += 1
        major = initial >> 5
        size: int = arg_bytes[initial]
        if size == 0:
            arg = initial & 0x1F
        elif size == 1:
            if pos >= end:
                _fail(start, "truncated item header")
            arg = data[pos]
            pos += 1
        elif size != _RESERVED:
            if pos + size > end:
                _fail(start, "truncated item header")
            arg = int.from_bytes(data[pos : pos + size], "big")
            pos += size
        elif initial & 0x1F == 31:
            _fail(start, "unexpected break byte" if major == 7 else "indefinite-length items are not allowed")
        else:
            _fail(start, f"reserved additional information {initial & 0x1F}")
        items += 1
        if items > max_items:
            _fail(start, f"more than {max_items} items")
        # Depth of this item: the envelope is 1, the body 2 (as `check_encodable` counts).
        if depth >= max_depth:
            _fail(start, f"nested deeper than {max_depth} levels")

        if major == 2 or major == 3:
            if arg > end - pos:
                _fail(start, f"string of {arg} bytes but only {end - pos} left in the frame")
            if seen is not None and not expected & 1:  # a map key
                key = (major, data[pos : pos + arg])  # a text and a byte string may be equal
                if key in seen:
                    _fail(start, "duplicate map key")
                seen.add(key)
            pos += arg
        else:
            if seen is not None and not expected & 1:
                _fail(start, "map keys must be text or byte strings")
            if major == 4 or major == 5:
                # Every item takes at least one byte, so a count beyond the bytes left is a lie.
                need = arg * 2 if major == 5 else arg
                if need > end - pos:
                    _fail(start, f"container of {arg} entries but only {end - pos} bytes left in the frame")
                if need:
                    outer.append((expected, seen))
                    depth += 1
                    expected = need
                    seen = set() if major == 5 else None
                    continue
            elif major == 6:
                if arg not in _ALLOWED_TAGS:
                    _fail(start, f"unexpected CBOR tag {arg}")
                # A bignum's content must be a byte string. The tag and its string count as one
                # item (as the encoder counts one int), and the string, read next, completes it.
                if pos >= end or data[pos] >> 5 != 2:
                    _fail(start, f"tag {arg} must wrap a byte string")
                items -= 1
                continue
            elif major == 7:  # floats and simple values
                info = initial & 0x1F
                if info == 25:
                    if arg & _HALF == _HALF:
                        _fail(start, "NaN and infinite floats are not allowed")
                elif info == 26:
                    if arg & _SINGLE == _SINGLE:
                        _fail(start, "NaN and infinite floats are not allowed")
                elif info == 27:
                    if arg & _DOUBLE == _DOUBLE:
                        _fail(start, "NaN and infinite floats are not allowed")
                elif size or arg not in _SIMPLE_OK:
                    _fail(start, f"unexpected simple value (initial byte 0x{initial:02x})")
        # One item finished: close every container it completes.
        expected -= 1
        while not expected and outer:
            expected, seen = outer.pop()
            depth -= 1
            expected -= 1
        if not expected:
            break
    if pos != end:
        _fail(start, f"{end - pos} trailing bytes after the message")
