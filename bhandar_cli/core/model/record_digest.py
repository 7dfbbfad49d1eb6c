"""The canonical encoding of a record, and the digest anti-entropy compares.

Replicas compare records by digest (Merkle leaves, tombstone confirmation), so equal records must
give equal digests on every replica, in every process and on every platform, whatever the disk
and wire forms of the day. This module is the one place that defines what is hashed. It is
written out by hand: it depends on no encoder library or its settings, and on nothing that varies
between processes (no `hash()`, no set order; maps are written in sorted key order).

The digest is BLAKE2b with a 12-byte output (no key, no personalisation) of one CBOR item
(RFC 8949), in this layout:

    versioned record  ["v", [sibling, ...]]           siblings in the record's order (by dot)
    sibling           [actor, counter, context, value, ctype, ts]
    context           {actor: counter, ...}
    counter record    ["c", {actor: [p, n, seq, [[request id, delta], ...]], ...}]
                                                      request ids in the record's order

Encoding rules:

- integers: the shortest head of major type 0 (n >= 0) or 1 (n < 0); beyond 64 bits a bignum,
  tag 2 or 3 around the magnitude's minimal big-endian bytes;
- text (actors, ctype, request ids, "v", "c"): UTF-8 with lone surrogates passed through,
  definite length;
- value: a byte string; a tombstone (no value) is null, 0xf6;
- ts: always an IEEE 754 double, 0xfb and 8 bytes big-endian; -0.0 is written as 0.0 (the two
  compare equal, so equal records must hash equal); NaN and the infinities are written as the
  half-precision f9 7e00, f9 7c00 and f9 fc00;
- maps: keys sorted by code point (`sorted` of `str`), definite length; arrays definite length.

For every record the store builds (a float `ts`), these are exactly the bytes the first disk
format hashed (cbor2's default encoding of `records.to_plain`): digests did not change when the
disk format gained a version, so nodes of both builds agree during a rolling upgrade. A change
here changes every digest and makes anti-entropy between old and new nodes see every key as
different (harmless, but it repairs everything once): change it only on purpose.
"""

from __future__ import annotations

import math
import struct
from hashlib import blake2b

from bhandar_cli.core.model.crdt import PNCounter
from bhandar_cli.core.model.records import Record, Versioned

DIGEST_SIZE = 12

_DOUBLE = struct.Struct(">Bd")
_NAN, _POS_INF, _NEG_INF = b"\xf9\x7e\x00", b"\xf9\x7c\x00", b"\xf9\xfc\x00"
_NULL = b"\xf6"
_UINT, _NINT, _BYTES, _TEXT, _ARRAY, _MAP, _TAG = range(7)


def digest(record: Record) -> bytes:
    """A short hash of the record's content, for Merkle trees: equal records, equal digests."""
    # The record just hashed is often hashed again soon: a write's record by the hash index and
    # then by a check of what was stored, or (in the simulator, where no message is encoded) the
    # coordinator's record by every replica it reaches. Records are immutable, so a few recent
    # ones are remembered by identity; an entry holds its record, so its id cannot be reused
    # while it is remembered, and only small records are kept (a bound on the memory held).
    recent = _RECENT.get(id(record))
    if recent is not None and recent[0] is record:
        return recent[1]
    encoded = canonical_bytes(record)
    hashed = blake2b(encoded, digest_size=DIGEST_SIZE).digest()
    if len(encoded) <= _RECENT_BYTES:
        if len(_RECENT) >= _RECENT_MAX:
            _RECENT.clear()
        _RECENT[id(record)] = (record, hashed)
    return hashed


def canonical_bytes(record: Record) -> bytes:
    """The record in the canonical encoding above (what `digest` hashes)."""
    # Every write hashes the record it stores (the hash index), so this is written for speed: the
    # items are joined from pieces, and the texts a record repeats (actors, content types,
    # request ids) are encoded once and looked up after that (`_text_item`).
    text, integer = _text_item, _int_item
    parts: list[bytes] = []
    add = parts.append
    if isinstance(record, Versioned):
        siblings = record.siblings
        add(_VERSIONED)
        add(_head(_ARRAY, len(siblings)))
        for s in siblings:
            actor, counter = s.dot
            context = s.context
            add(_SIBLING)
            add(text(actor))
            add(integer(counter))
            add(_head(_MAP, len(context)))
            for name, seen in sorted(context.items()):
                add(text(name))
                add(integer(seen))
            value = s.value
            if value is None:
                add(_NULL)
            else:
                add(_head(_BYTES, len(value)))
                add(value)
            add(text(s.ctype))
            add(_double(s.ts))
    elif isinstance(record, PNCounter):
        actors = record.actors
        add(_COUNTER)
        add(_head(_MAP, len(actors)))
        for actor, share in sorted(actors.items()):
            ids = share.ids
            add(text(actor))
            add(_SHARE)
            add(integer(share.p))
            add(integer(share.n))
            add(integer(share.seq))
            add(_head(_ARRAY, len(ids)))
            for request_id, delta in ids:
                add(_PAIR)
                add(text(request_id))
                add(integer(delta))
    else:
        raise TypeError(f"cannot digest a {type(record).__name__}: not a record (a caller bug)")
    return b"".join(parts)


def _head(major: int, n: int) -> bytes:
    """A data item's head: major type and argument, in the shortest form (RFC 8949 §3)."""
    top = major << 5
    if n < 24:
        return _HEADS[top | n]
    if n < 1 << 8:
        return bytes((top | 24, n))
    if n < 1 << 16:
        return bytes((top | 25,)) + n.to_bytes(2, "big")
    if n < 1 << 32:
        return bytes((top | 26,)) + n.to_bytes(4, "big")
    return bytes((top | 27,)) + n.to_bytes(8, "big")


def _int_item(n: int) -> bytes:
    if n.__class__ is not int:
        n = int(n)  # a bool is an int that compares equal to 0 or 1: hash it as that int
    if 0 <= n < 24:
        return _HEADS[n]
    major, magnitude = (_UINT, n) if n >= 0 else (_NINT, -1 - n)
    if magnitude < 1 << 64:
        return _head(major, magnitude)
    raw = magnitude.to_bytes((magnitude.bit_length() + 7) // 8, "big")  # a bignum, tag 2 or 3
    return _head(_TAG, 2 if major == _UINT else 3) + _head(_BYTES, len(raw)) + raw


def _text_item(text: str) -> bytes:
    item = _TEXTS.get(text)
    if item is None:
        raw = text.encode("utf-8", "surrogatepass")
        item = _head(_TEXT, len(raw)) + raw
        if len(raw) <= _TEXT_CACHED_BYTES:
            if len(_TEXTS) >= _TEXTS_MAX:
                _TEXTS.clear()  # a bound on memory: request ids keep coming
            _TEXTS[text] = item
    return item


def _double(x: float) -> bytes:
    x = float(x)
    if x - x == 0.0:  # finite (NaN and the infinities give NaN)
        return _DOUBLE.pack(0xFB, x + 0.0)  # + 0.0 turns -0.0 into 0.0
    if math.isnan(x):
        return _NAN
    return _POS_INF if x > 0 else _NEG_INF


_HEADS = [bytes((b,)) for b in range(256)]  # every one-byte head
_VERSIONED = _head(_ARRAY, 2) + _head(_TEXT, 1) + b"v"
_COUNTER = _head(_ARRAY, 2) + _head(_TEXT, 1) + b"c"
_SIBLING = _head(_ARRAY, 6)
_SHARE = _head(_ARRAY, 4)
_PAIR = _head(_ARRAY, 2)
_TEXTS: dict[str, bytes] = {}  # text -> its encoded item, for the texts records repeat
_TEXTS_MAX = 1 << 16
_TEXT_CACHED_BYTES = 64  # longer texts are encoded every time (actors and request ids are short)
_RECENT: dict[int, tuple[Record, bytes]] = {}  # id(record) -> (record, digest), recent ones
_RECENT_MAX = 256
_RECENT_BYTES = 1 << 16  # records encoded larger than this are not remembered
