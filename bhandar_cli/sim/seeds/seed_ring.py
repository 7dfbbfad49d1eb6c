"""The ring teaching simulation, ported exactly from its JavaScript original:
keys per node with V virtual nodes, and moves.

K random keys are placed on a ring of four nodes A-D with V tokens each; the table shows the
keys each node owns, their spread, and how many keys change owner when a fifth node E joins,
against naive `hash mod N` placement. The ring itself is `core.membership.ring.Ring` (same tokens, same
stable sort, same binary search as the seed), so this module only draws the keys and counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bhandar_cli.core.membership import Ring, moved_keys
from bhandar_cli.core.model import Mulberry32, hash32
from bhandar_cli.sim.seeds.seed_js import js_number_to_string, js_pad_end, js_pad_start, js_round, js_to_fixed

DEFAULT_SEED = 61
DEFAULT_KEYS = 20000
DEFAULT_VNODES: tuple[int, ...] = (1, 10, 100)
NODES: tuple[str, ...] = ("A", "B", "C", "D")
JOINING = "E"


@dataclass(frozen=True)
class RingRow:
    """One table row: the four-node ring with `vnodes` tokens per node."""

    vnodes: int
    counts: dict[str, int]
    stddev: float
    max_over_mean: float
    moved: int
    moved_pct: float


@dataclass(frozen=True)
class RingResult:
    seed: int
    keys: int
    rows: tuple[RingRow, ...]
    naive_moved: int
    naive_moved_pct: float
    nodes: tuple[str, ...] = NODES
    joining: str = JOINING

    @property
    def ideal_moved_pct(self) -> float:
        # A new fifth node should take a fifth of the keys.
        return 100 / (len(self.nodes) + 1)


def simulate_ring(
    seed: int = DEFAULT_SEED, keys: int = DEFAULT_KEYS, vnodes: Sequence[int] = DEFAULT_VNODES
) -> RingResult:
    """Run part 1 with the given PRNG seed, number of keys and list of V."""
    if keys < 1:
        raise ValueError("keys must be at least 1")
    if not vnodes or min(vnodes) < 1:
        raise ValueError("every vnodes count must be at least 1")
    rnd = Mulberry32(seed)
    # `Math.floor(rnd() * 1e9)`: a non-negative float, so int() truncation is the floor.
    tokens = [hash32(f"user:{int(rnd() * 1e9)}") for _ in range(keys)]
    mean = keys / len(NODES)
    rows = []
    for v in vnodes:
        four = Ring.build(NODES, v)
        five = Ring.build((*NODES, JOINING), v)
        counts = dict.fromkeys(NODES, 0)
        for t in tokens:
            counts[four.owner(t)] += 1
        moved = moved_keys(four, five, tokens)
        c = [counts[n] for n in NODES]
        # Summed left to right from 0 as the seed's reduce does (float addition is not associative).
        # V8's `d ** 2` is fdlibm's pow, which returns d * d for an exponent of 2.
        total = 0.0
        for x in c:
            d = x - mean
            total += d * d
        rows.append(
            RingRow(
                vnodes=v,
                counts=counts,
                stddev=math.sqrt(total / len(NODES)),
                max_over_mean=max(c) / mean,
                moved=moved,
                moved_pct=100 * moved / keys,
            )
        )
    naive = sum(1 for h in tokens if h % 4 != h % 5)
    return RingResult(
        seed=seed, keys=keys, rows=tuple(rows), naive_moved=naive, naive_moved_pct=100 * naive / keys
    )


def render_ring(result: RingResult) -> str:
    """The seed's table, byte for byte (every line ends with a newline, as console.log)."""
    header = (
        js_pad_end("V", 6)
        + "".join(js_pad_start(n, 6) for n in result.nodes)
        + js_pad_start("stddev", 12)
        + js_pad_start("max/mean", 10)
        + js_pad_start("moved", 10)
    )
    lines = [header]
    for row in result.rows:
        lines.append(
            js_pad_end(js_number_to_string(row.vnodes), 6)
            + "".join(js_pad_start(js_number_to_string(row.counts[n]), 6) for n in result.nodes)
            + "   "
            + js_pad_start(js_number_to_string(js_round(row.stddev)), 9)
            + "    "
            + js_pad_start(js_to_fixed(row.max_over_mean, 2), 6)
            + "   "
            + js_pad_start(js_to_fixed(row.moved_pct, 1), 6)
            + "%"
        )
    lines.append(
        f"naive hash mod N (4 -> 5 servers) moves {js_to_fixed(result.naive_moved_pct, 1)}% of keys; "
        f"ideal is {js_to_fixed(result.ideal_moved_pct, 1)}%"
    )
    return "\n".join(lines) + "\n"


def ring_json(result: RingResult) -> dict[str, Any]:
    """The same figures as the table, unrounded (the table rounds them for display)."""
    return {
        "cmd": "sim ring",
        "ok": True,
        "seed": result.seed,
        "keys": result.keys,
        "nodes": list(result.nodes),
        "joining": result.joining,
        "rows": [
            {
                "vnodes": row.vnodes,
                "counts": dict(row.counts),
                "stddev": row.stddev,
                "max_over_mean": row.max_over_mean,
                "moved": row.moved,
                "moved_pct": row.moved_pct,
            }
            for row in result.rows
        ],
        "naive_moved": result.naive_moved,
        "naive_moved_pct": result.naive_moved_pct,
        "ideal_moved_pct": result.ideal_moved_pct,
    }
