"""The seed's hash (32-bit FNV-1a plus a final mix) and PRNG (mulberry32), exact to the bit.

JavaScript does this arithmetic on 32-bit integers (`Math.imul`, `>>>`, `| 0`); Python's ints are
unbounded, so every step is masked back to 32 bits. The seed simulators compare outputs digit for
digit, so nothing here may be "improved".
"""

from __future__ import annotations

MASK32 = 0xFFFFFFFF
FNV_OFFSET = 0x811C9DC5
FNV_PRIME = 0x01000193


def imul(a: int, b: int) -> int:
    """`Math.imul` as an unsigned 32-bit result (the sign is irrelevant once masked)."""
    return (a * b) & MASK32


def _mix(h: int) -> int:
    h = imul(h ^ (h >> 16), 0x85EBCA6B)
    h = imul(h ^ (h >> 13), 0xC2B2AE35)
    return (h ^ (h >> 16)) & MASK32


def _utf16_units(s: str) -> list[int]:
    data = s.encode("utf-16-le", "surrogatepass")
    return [data[i] | (data[i + 1] << 8) for i in range(0, len(data), 2)]


def hash32(s: str) -> int:
    """The seed's `hash(s)`: FNV-1a over UTF-16 code units (`charCodeAt`), then the mix."""
    h = FNV_OFFSET
    if s.isascii():
        for ch in s.encode("ascii"):
            h = ((h ^ ch) * FNV_PRIME) & MASK32
    else:
        for unit in _utf16_units(s):
            h = ((h ^ unit) * FNV_PRIME) & MASK32
    return _mix(h)


def hash32_codepoints(s: str) -> int:
    """The part-4 variant: `for (const ch of s) ... ch.charCodeAt(0)`.

    Iterating a JS string by `for...of` walks code points, and `charCodeAt(0)` of an astral code
    point is its high surrogate, so astral characters contribute one unit instead of two.
    """
    h = FNV_OFFSET
    for ch in s:
        unit = _utf16_units(ch)[0]
        h = ((h ^ unit) * FNV_PRIME) & MASK32
    return _mix(h)


class Mulberry32:
    """The seed's `mulberry32(a)`: call the instance for the next float in [0, 1)."""

    __slots__ = ("state",)

    def __init__(self, seed: int) -> None:
        self.state = seed & MASK32

    def __call__(self) -> float:
        self.state = (self.state + 0x6D2B79F5) & MASK32
        a = self.state
        t = imul(a ^ (a >> 15), 1 | a)
        t = ((t + imul(t ^ (t >> 7), 61 | t)) & MASK32) ^ t
        return ((t ^ (t >> 14)) & MASK32) / 4294967296
