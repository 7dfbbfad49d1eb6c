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

import hashlib
import math
import struct

from bhandar_cli.core.crdt import PNCounter
from bhandar_cli.core.records import Record, Versioned

DIGEST_SIZE = 12

_DOUBLE = struct.Struct(">Bd")
_NAN, _POS_INF, _NEG_INF = b"\xf9\x7e\x00", b"\xf9\x7c\x00", b"\xf9\xfc\x00"
_NULL = b"\xf6"
_UINT, _NINT, _BYTES, _TEXT, _ARRAY, _MAP, _TAG = range(7)


def digest(record: Record) -> bytes:
    """A short hash of the record's content, for Merkle trees: equal records, equal digests."""
    return hashlib.blake2b(canonical_bytes(record), digest_size=DIGEST_SIZE).digest()


def canonical_bytes(record: Record) -> bytes:
    """The record in the canonical encoding above (what `digest` hashes)."""
    out = bytearray()
    if isinstance(record, Versioned):
        _head(out, _ARRAY, 2)
        _text(out, "v")
        _head(out, _ARRAY, len(record.siblings))
        for s in record.siblings:
            _head(out, _ARRAY, 6)
            _text(out, s.dot[0])
            _int(out, s.dot[1])
            _head(out, _MAP, len(s.context))
            for actor, counter in sorted(s.context.items()):
                _text(out, actor)
                _int(out, counter)
            if s.value is None:
                out += _NULL
            else:
                _bytes(out, s.value)
            _text(out, s.ctype)
            _double(out, s.ts)
    elif isinstance(record, PNCounter):
        _head(out, _ARRAY, 2)
        _text(out, "c")
        _head(out, _MAP, len(record.actors))
        for actor, share in sorted(record.actors.items()):
            _text(out, actor)
            _head(out, _ARRAY, 4)
            _int(out, share.p)
            _int(out, share.n)
            _int(out, share.seq)
            _head(out, _ARRAY, len(share.ids))
            for request_id, delta in share.ids:
                _head(out, _ARRAY, 2)
                _text(out, request_id)
                _int(out, delta)
    else:
        raise TypeError(f"cannot digest a {type(record).__name__}: not a record (a caller bug)")
    return bytes(out)


def _head(out: bytearray, major: int, n: int) -> None:
    """A data item's head: major type and argument, in the shortest form (RFC 8949 §3)."""
    top = major << 5
    if n < 24:
        out.append(top | n)
    elif n < 1 << 8:
        out += bytes((top | 24, n))
    elif n < 1 << 16:
        out.append(top | 25)
        out += n.to_bytes(2, "big")
    elif n < 1 << 32:
        out.append(top | 26)
        out += n.to_bytes(4, "big")
    else:
        out.append(top | 27)
        out += n.to_bytes(8, "big")


def _int(out: bytearray, n: int) -> None:
    n = int(n)  # a bool is an int that compares equal to 0 or 1: hash it as that int
    major, magnitude = (_UINT, n) if n >= 0 else (_NINT, -1 - n)
    if magnitude < 1 << 64:
        _head(out, major, magnitude)
        return
    _head(out, _TAG, 2 if major == _UINT else 3)  # bignum
    _bytes(out, magnitude.to_bytes((magnitude.bit_length() + 7) // 8, "big"))


def _bytes(out: bytearray, raw: bytes) -> None:
    _head(out, _BYTES, len(raw))
    out += raw


def _text(out: bytearray, text: str) -> None:
    raw = text.encode("utf-8", "surrogatepass")
    _head(out, _TEXT, len(raw))
    out += raw


def _double(out: bytearray, x: float) -> None:
    x = float(x)
    if math.isnan(x):
        out += _NAN
    elif math.isinf(x):
        out += _POS_INF if x > 0 else _NEG_INF
    else:
        out += _DOUBLE.pack(0xFB, x + 0.0)  # + 0.0 turns -0.0 into 0.0
