"""The ministore teaching simulation, ported exactly from its JavaScript original:
strict vs sloppy quorum vs hinted handoff.

Five nodes A-E on a ring with 8 tokens each, N = 3, W = 2, R = 2. Node D is down for operations
2000-5999 and E for 4000-5999 (fixed windows, whatever the number of operations). Each operation
reads or writes a random key; "strict" uses only the key's home replicas, "sloppy" the first
three live nodes on the walk, and "sloppy + hints" also leaves a hint for each down home replica,
delivered DETECT operations after the node comes back (when gossip would notice). The table shows
availability, stale reads and hints for each mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bhandar_cli.core.membership import Ring
from bhandar_cli.core.model import Mulberry32, hash32_codepoints
from bhandar_cli.sim.seeds.seed_js import js_number_to_string, js_pad_end, js_to_fixed

DEFAULT_SEED = 54
DEFAULT_OPS = 8000
DEFAULT_KEYS = 300
DEFAULT_DETECT = 300
NODES: tuple[str, ...] = ("A", "B", "C", "D", "E")
VNODES = 8
N, W, R = 3, 2, 2
# node -> [first op down, first op back up)
DOWN: dict[str, tuple[int, int]] = {"D": (2000, 6000), "E": (4000, 6000)}
MODES: tuple[str, ...] = ("strict", "sloppy, no handoff", "sloppy + hints")


@dataclass(frozen=True)
class ModeRun:
    """The figures of one mode's line."""

    mode: str
    ok: int
    tries: int
    availability_pct: float
    stale_reads: int
    hints_stored: int
    hints_delivered: int


@dataclass(frozen=True)
class MinistoreResult:
    seed: int
    ops: int
    keys: int
    detect: int
    runs: tuple[ModeRun, ...]


@dataclass
class _Hint:
    to: str | None  # None where the seed's index runs past the down home replicas (undefined)
    k: int
    v: int
    done: bool = False


def _up(node: str, t: int) -> bool:
    window = DOWN.get(node)
    return not (window is not None and window[0] <= t < window[1])


def _ring() -> Ring:
    # Part 4's hash walks code points (`for (const ch of s)`), unlike part 1's charCodeAt loop;
    # identical for these ASCII names, but the port keeps the seed's variant.
    return Ring({n: [hash32_codepoints(f"{n}:{v}") for v in range(VNODES)] for n in NODES})


def _run(
    mode: str, seed: int, ops: int, keys: int, detect: int, ring: Ring, walks: dict[int, tuple[str, ...]]
) -> ModeRun:
    rnd = Mulberry32(seed)
    has: dict[str, dict[int, int]] = {n: {} for n in NODES}
    acked: dict[int, int] = {}
    hints: list[_Hint] = []
    ok = tries = stale = delivered = 0
    hinted = mode == "sloppy + hints"
    for t in range(ops):
        if hinted:
            for n, (_, back) in DOWN.items():
                if t == back + detect:  # gossip says n is back
                    for h in hints:
                        if h.to == n and not h.done:
                            has[n][h.k] = max(has[n].get(h.k, 0), h.v)
                            h.done = True
                            delivered += 1
        k = int(rnd() * keys)
        is_put = rnd() < 0.5
        w = walks.get(k)
        if w is None:
            # Distinct nodes clockwise from the key: the seed's walk is the ring's walk.
            w = walks[k] = ring.walk(hash32_codepoints(f"k{k}"))
        home = w[:N]
        live = [n for n in (home if mode == "strict" else w) if _up(n, t)]
        chosen = live if mode == "strict" else live[:N]
        # Fastest replies first: one draw per replica, stable sort on the draw.
        draws = [(rnd(), n) for n in chosen]
        pick = [n for _, n in sorted(draws, key=lambda x: x[0])]
        tries += 1
        if is_put:
            for n in chosen:
                has[n][k] = t + 1  # partial writes stay even if the put fails
            if hinted:
                down_home = [x for x in home if not _up(x, t)]
                stand_ins = [n for n in chosen if n not in home]
                for i, _ in enumerate(stand_ins):
                    hints.append(_Hint(down_home[i] if i < len(down_home) else None, k, t + 1))
            if len(chosen) >= W:
                ok += 1
                acked[k] = t + 1
        elif len(chosen) >= R:
            ok += 1
            if max(has[n].get(k, 0) for n in pick[:R]) < acked.get(k, 0):
                stale += 1
    return ModeRun(
        mode=mode,
        ok=ok,
        tries=tries,
        availability_pct=100 * ok / tries,
        stale_reads=stale,
        hints_stored=len(hints),
        hints_delivered=delivered,
    )


def simulate_ministore(
    seed: int = DEFAULT_SEED, ops: int = DEFAULT_OPS, keys: int = DEFAULT_KEYS, detect: int = DEFAULT_DETECT
) -> MinistoreResult:
    """Run part 4 with the given PRNG seed, operations, key count and detection delay."""
    if ops < 1 or keys < 1 or detect < 0:
        raise ValueError("ops and keys must be at least 1 and detect at least 0")
    ring = _ring()
    walks: dict[int, tuple[str, ...]] = {}  # the ring is the same in every mode, so are the walks
    runs = tuple(_run(m, seed, ops, keys, detect, ring, walks) for m in MODES)
    return MinistoreResult(seed=seed, ops=ops, keys=keys, detect=detect, runs=runs)


def render_ministore(result: MinistoreResult) -> str:
    """The seed's three lines, byte for byte."""
    s = js_number_to_string
    return "".join(
        js_pad_end(run.mode, 19)
        + f"availability {js_to_fixed(run.availability_pct, 2)}%  stale reads {s(run.stale_reads)}"
        + f"  hints stored {s(run.hints_stored)}  delivered {s(run.hints_delivered)}\n"
        for run in result.runs
    )


def ministore_json(result: MinistoreResult) -> dict[str, Any]:
    """The same figures as the table, unrounded."""
    return {
        "cmd": "sim ministore",
        "ok": True,
        "seed": result.seed,
        "ops": result.ops,
        "keys": result.keys,
        "detect": result.detect,
        "nodes": list(NODES),
        "vnodes": VNODES,
        "n": N,
        "w": W,
        "r": R,
        "down": {n: {"from_op": a, "until_op": b} for n, (a, b) in DOWN.items()},
        "modes": [
            {
                "mode": run.mode,
                "ok": run.ok,
                "tries": run.tries,
                "availability_pct": run.availability_pct,
                "stale_reads": run.stale_reads,
                "hints_stored": run.hints_stored,
                "hints_delivered": run.hints_delivered,
            }
            for run in result.runs
        ],
    }
