"""JavaScript number semantics (`bhandar_cli/sim/seeds/seed_js.py`) against what node 20 prints.

Every expected value below was printed by node v20, e.g.
`node -e 'console.log([0.125, 1.005].map(x => x.toFixed(2)))'`; the obvious Python spelling is
noted where it gives a different answer, so these tests fail if the helpers fall back to it.
"""

from __future__ import annotations

import math

import pytest

from bhandar_cli.core.model.hashing import Mulberry32
from bhandar_cli.sim.seeds.seed_js import (
    js_json_stringify,
    js_math_log,
    js_number_to_string,
    js_pad_end,
    js_pad_start,
    js_round,
    js_string_sort_key,
    js_to_fixed,
)

TO_FIXED = [
    (0.125, 2, "0.13"),  # exact tie in binary: JS rounds up, Python's format gives "0.12"
    (1.005, 2, "1.00"),  # 1.005 is 1.00499999999999989... in binary
    (2.5, 0, "3"),  # Python's format gives "2"
    (-2.5, 0, "-3"),  # half away from zero, on the magnitude
    (-1.5, 0, "-2"),
    (0.5, 0, "1"),  # Python's format gives "0"
    (1.45, 1, "1.4"),
    (8.345, 2, "8.35"),
    (-0.0, 2, "0.00"),  # the spec tests x < 0, so -0 has no sign
    (-1e-10, 2, "-0.00"),
    (1e21, 2, "1e+21"),  # from 1e21 up, toFixed is String(x)
    (123.456, 10, "123.4560000000"),
    (0.000001, 7, "0.0000010"),
    (32.455, 1, "32.5"),
    (1.255, 2, "1.25"),
    (0.05, 1, "0.1"),
    (0.15, 1, "0.1"),
    (0.25, 1, "0.3"),  # Python's format gives "0.2"
    (0.35, 1, "0.3"),
    (99.995, 2, "100.00"),
    (5e-324, 3, "0.000"),
    (1.7976931348623157e308, 1, "1.7976931348623157e+308"),
    (999999999999999900000.0, 1, "999999999999999868928.0"),
]


@pytest.mark.parametrize(("x", "digits", "expected"), TO_FIXED)
def test_to_fixed_matches_node(x: float, digits: int, expected: str) -> None:
    assert js_to_fixed(x, digits) == expected


def test_to_fixed_special_values() -> None:
    assert js_to_fixed(math.nan, 2) == "NaN"
    assert js_to_fixed(math.inf, 1) == "Infinity"
    assert js_to_fixed(-math.inf, 1) == "-Infinity"
    with pytest.raises(ValueError):
        js_to_fixed(1.0, 101)


ROUND = [
    (2.5, 3),  # Python's round gives 2
    (-2.5, -2),  # ties toward +Infinity, not away from zero
    (0.49999999999999994, 0),  # floor(x + 0.5) would give 1
    (-0.5, 0),
    (1.5, 2),
    (-1.5, -1),
    (0.5, 1),  # Python's round gives 0
    (-0.49999999999999994, 0),
    (4503599627370495.5, 4503599627370496),
    (-4503599627370495.5, -4503599627370495),
    (2.4999999999999996, 2),
    (-2.5000000000000004, -3),
    (4361.01966287702, 4361),
]


@pytest.mark.parametrize(("x", "expected"), ROUND)
def test_round_matches_node(x: float, expected: int) -> None:
    assert js_round(x) == expected


NUMBER_TO_STRING = [
    (1e21, "1e+21"),  # Python: "1e+21" too, but 1e16 differs (below)
    (1e16, "10000000000000000"),  # Python repr: "1e+16"
    (1e-7, "1e-7"),  # Python repr: "1e-07"
    (123456789012345680000.0, "123456789012345680000"),
    (0.000001, "0.000001"),  # Python repr: "1e-06"
    (1.5e-10, "1.5e-10"),
    (100, "100"),
    (100.0, "100"),  # Python repr: "100.0"
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (5e-324, "5e-324"),
    (-0.0, "0"),
    (0.1 + 0.2, "0.30000000000000004"),
    (2.0**53, "9007199254740992"),
    (1e20, "100000000000000000000"),
    (1.2345e-5, "0.000012345"),
    (-42.5, "-42.5"),
    (123e-20, "1.23e-18"),
    (1e300 * 10, "1e+301"),
    (math.inf, "Infinity"),
    (math.nan, "NaN"),
]


@pytest.mark.parametrize(("x", "expected"), NUMBER_TO_STRING)
def test_number_to_string_matches_node(x: float, expected: str) -> None:
    assert js_number_to_string(x) == expected


def test_pad_counts_utf16_units() -> None:
    assert js_pad_start("A", 6) == "     A"
    assert js_pad_end("V", 6) == "V     "
    assert js_pad_start("toolong", 3) == "toolong"
    # "😀".length is 2 in JavaScript, so one space fills to 3.
    assert js_pad_start("😀", 3) == " 😀"


def test_default_sort_is_utf16_order() -> None:
    # JavaScript sorts by UTF-16 code units: the astral "😀" (surrogate 0xD83D) sorts before
    # U+FF21; Python's code-point order puts it after.
    words = ["Ａ", "😀", "b", "B"]
    assert sorted(words, key=js_string_sort_key) == ["B", "b", "😀", "Ａ"]
    assert sorted(words) != sorted(words, key=js_string_sort_key)


def test_json_stringify_like_javascript() -> None:
    assert js_json_stringify(["rice", "oil"]) == '["rice","oil"]'
    assert js_json_stringify(["ভাত", 'a"b\n']) == '["ভাত","a\\"b\\n"]'


# node: [1.4022207876058157, ...].map(Math.log); the last column is what glibc's log (Python's
# math.log) returns, one ulp away, which is why the quorum simulator cannot use math.log.
LOG = [
    (1.4022207876058157, 0.3380572566742912, 0.33805725667429115),
    (1.5854032604941586, 0.4608387979939006, 0.46083879799390054),
    (0.6186015818823309, -0.48029386153700626, -0.4802938615370062),
    (1.4458895746938862, 0.3687247547720497, 0.36872475477204975),
    (0.8473004097231633, -0.16569997221456007, -0.16569997221456004),
    (0.5825630554201726, -0.5403178497524868, -0.5403178497524869),
    (0.7799910061652215, -0.2484728899223853, -0.24847288992238528),
    (0.8233376226073575, -0.1943889283972302, -0.19438892839723018),
]


@pytest.mark.parametrize(("x", "v8", "glibc"), LOG)
def test_math_log_is_v8s_fdlibm_log(x: float, v8: float, glibc: float) -> None:
    assert js_math_log(x) == v8
    assert math.log(x) == glibc != v8


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (0.7310585786300049, -0.3132616875182228),
        (1.0000001, 9.999999505838704e-8),  # |f| < 2**-20 branch
        (1e-310, -713.8013788281542),  # subnormal input
        (3.5, 1.252762968495368),
        (0.5, -0.6931471805599453),
        (1.0, 0.0),
        (2.0, 0.6931471805599453),
        (1e300, 690.7755278982137),
    ],
)
def test_math_log_branches(x: float, expected: float) -> None:
    assert js_math_log(x) == expected


def test_math_log_special_values() -> None:
    assert js_math_log(0.0) == -math.inf
    assert math.isnan(js_math_log(-1.0))
    assert js_math_log(math.inf) == math.inf


def test_math_log_first_latencies_of_part2() -> None:
    # node: rnd = mulberry32(2026); [1, 2, 3, 4, 5, 6].map(() => -Math.log(1 - rnd()))
    rnd = Mulberry32(2026)
    assert [-js_math_log(1 - rnd()) for _ in range(6)] == [
        0.6077178364429088,
        0.36888655449762253,
        1.0822197315334383,
        0.9635794717919861,
        0.16520500646341219,
        0.25082737426745005,
    ]
