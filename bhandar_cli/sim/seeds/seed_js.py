"""JavaScript number semantics the seed simulators depend on, reproduced exactly in Python.

The seed's tables are printed by node; to reproduce them byte for byte we need JavaScript's
`toFixed`, `Math.round`, `String(number)`, `padStart`/`padEnd`, the default `Array.prototype.sort`
order of strings, `JSON.stringify` of string arrays, and V8's `Math.log`. Each differs from the
obvious Python spelling in some corner:

- `x.toFixed(d)` rounds the *exact binary value* half away from zero; `f"{x:.{d}f}"` rounds half to
  even (so `0.125.toFixed(2)` is "0.13" but Python says "0.12").
- `Math.round` rounds half toward +Infinity (`Math.round(-2.5)` is -2); Python's `round` is
  banker's rounding.
- `String(1e21)` is "1e+21" and `String(1e-7)` is "1e-7"; Python's repr switches notation at
  different exponents and writes "1e-07".
- V8's `Math.log` is fdlibm's `__ieee754_log` (error < 1 ulp), not the C library's: glibc's
  correctly rounded `log` disagrees with it in the last bit for several percent of inputs, and
  the quorum simulator sorts and prints those latencies.
"""

from __future__ import annotations

import json
import math
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any

# Enough digits for toFixed's whole domain: |x| < 1e21 with up to 100 fraction digits.
_DECIMAL = Context(prec=200)


def js_to_fixed(x: float, digits: int) -> str:
    """`Number.prototype.toFixed(digits)` (ECMA-262 §21.1.3.3)."""
    if not 0 <= digits <= 100:
        raise ValueError("toFixed() digits argument must be between 0 and 100")
    if math.isnan(x):
        return "NaN"
    sign = ""
    # The spec tests `x < 0`, so -0 prints without a sign but -0.001 prints as "-0.00".
    if x < 0:
        sign, x = "-", -x
    if x >= 1e21:
        return sign + js_number_to_string(x)
    # Decimal(x) is the exact binary value; ROUND_HALF_UP on a positive value is "pick the larger
    # n when two are equally near", which is what the spec says.
    exact = Decimal(x) if x else Decimal(0)  # Decimal keeps the sign of -0.0; toFixed does not
    quantum = Decimal(1).scaleb(-digits)
    return sign + format(exact.quantize(quantum, rounding=ROUND_HALF_UP, context=_DECIMAL), "f")


def js_round(x: float) -> float:
    """`Math.round`: the nearest integer, ties toward +Infinity, compared on the exact value.

    Returns an int for finite input (JavaScript's -0 results print as "0" anyway).
    """
    if not math.isfinite(x):
        return x
    floor = math.floor(x)
    # Exact comparison of the fraction with 1/2 (x - floor(x) in floats is exact too, but the
    # integer form needs no argument): x = p/q, so x - floor >= 1/2  <=>  2(p - floor*q) >= q.
    p, q = x.as_integer_ratio()
    return floor + 1 if 2 * (p - floor * q) >= q else floor


def js_number_to_string(x: float | int) -> str:
    """`String(number)` (Number::toString, ECMA-262 §6.1.6.1.20) for radix 10."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        x = float(x) if abs(x) >= 2**53 else x
        if isinstance(x, int):
            return str(x)
    if math.isnan(x):
        return "NaN"
    if x == 0:
        return "0"
    if x < 0:
        return "-" + js_number_to_string(-x)
    if math.isinf(x):
        return "Infinity"
    # Python's repr gives the same shortest round-trip digits as JavaScript (both pick the
    # candidate nearest the exact value); only the layout differs, so take the digits and the
    # exponent from repr and lay them out by the spec's rules.
    mantissa, _, exp_text = repr(x).partition("e")
    whole, _, frac = mantissa.partition(".")
    frac = "" if frac == "0" else frac
    digits = (whole + frac).lstrip("0")
    # n: the position of the decimal point relative to the first significant digit.
    n = len(whole.lstrip("0")) if whole.strip("0") else -(len(frac) - len(frac.lstrip("0")))
    n += int(exp_text or 0)
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    e = n - 1
    exp = ("+" if e >= 0 else "-") + str(abs(e))
    if k == 1:
        return digits + "e" + exp
    return digits[0] + "." + digits[1:] + "e" + exp


def _utf16_len(s: str) -> int:
    # JavaScript string lengths count UTF-16 code units, not code points.
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def js_pad_start(s: str, width: int, fill: str = " ") -> str:
    """`String.prototype.padStart` with a one-unit fill (the only kind the seed uses)."""
    return fill * max(0, width - _utf16_len(s)) + s


def js_pad_end(s: str, width: int, fill: str = " ") -> str:
    """`String.prototype.padEnd` with a one-unit fill."""
    return s + fill * max(0, width - _utf16_len(s))


def js_string_sort_key(s: str) -> bytes:
    """Key for `Array.prototype.sort()` without a comparator: UTF-16 code-unit order.

    Python compares code points, which differs for astral characters versus U+E000..U+FFFF;
    big-endian UTF-16 bytes compare exactly like code units.
    """
    return s.encode("utf-16-be", "surrogatepass")


def js_json_stringify(value: Any) -> str:
    """`JSON.stringify` for the plain values the seed prints (strings, numbers, arrays of them).

    Python's json with these settings escapes the same characters as JavaScript (quote,
    backslash, control characters) and leaves non-ASCII text alone.
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# fdlibm e_log.c constants, as in V8's src/base/ieee754.cc.
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_LG1 = 6.666666666666735130e-01
_LG2 = 3.999999999940941908e-01
_LG3 = 2.857142874366239149e-01
_LG4 = 2.222219843214978396e-01
_LG5 = 1.818357216161805012e-01
_LG6 = 1.531383769920937332e-01
_LG7 = 1.479819860511658591e-01


def js_math_log(x: float) -> float:
    """V8's `Math.log`: fdlibm's `__ieee754_log`, operation for operation.

    fdlibm reads the high word of the double; here `math.frexp` supplies the same fields exactly
    (x = m * 2**e with 0.5 <= m < 1), including for subnormals, so no bit casting is needed.
    """
    if math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    if math.isinf(x):
        return x
    m, e = math.frexp(x)
    k = e - 1
    # The top 20 bits of the 52-bit fraction: fdlibm's `hx & 0x000fffff`.
    hx = int((m * 2.0 - 1.0) * 1048576.0)
    i = (hx + 0x95F64) & 0x100000
    # fdlibm sets the exponent so that the mantissa lies in [sqrt(2)/2, sqrt(2)): 2m or m.
    xn = m if i else m * 2.0
    k += i >> 20
    f = xn - 1.0
    if (0x000FFFFF & (2 + hx)) < 3:  # -2**-20 <= f < 2**-20
        if f == 0.0:
            if k == 0:
                return 0.0
            dk = float(k)
            return dk * _LN2_HI + dk * _LN2_LO
        r = f * f * (0.5 - 0.33333333333333333 * f)
        if k == 0:
            return f - r
        dk = float(k)
        return dk * _LN2_HI - ((r - dk * _LN2_LO) - f)
    s = f / (2.0 + f)
    dk = float(k)
    z = s * s
    i = hx - 0x6147A
    w = z * z
    j = 0x6B851 - hx
    t1 = w * (_LG2 + w * (_LG4 + w * _LG6))
    t2 = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
    i |= j
    r = t2 + t1
    if i > 0:
        hfsq = 0.5 * f * f
        if k == 0:
            return f - (hfsq - s * (hfsq + r))
        return dk * _LN2_HI - ((hfsq - (s * (hfsq + r) + dk * _LN2_LO)) - f)
    if k == 0:
        return f - s * (f - r)
    return dk * _LN2_HI - ((s * (f - r) - dk * _LN2_LO) - f)
