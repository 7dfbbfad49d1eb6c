"""The quorum teaching simulation, ported exactly from its JavaScript original:
quorum put then get on N = 3 replicas.

Each round writes version v with W acknowledgements and then reads with R replies; replica 1
(the second) is down for rounds 3000-5999 whatever the number of rounds (so with fewer than 3000
rounds nothing is ever down). A write that finds fewer than W live replicas, or a read that finds
fewer than R, counts as failed at the 100 ms timeout. The table shows success ratios, p99
latencies and stale reads for (R, W) = (1, 1), (2, 2), (1, 3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bhandar_cli.core.model import Mulberry32
from bhandar_cli.sim.seeds.seed_js import js_math_log, js_number_to_string, js_to_fixed

DEFAULT_SEED = 2026
DEFAULT_ROUNDS = 10000
N = 3
TIMEOUT_MS = 100
DOWN_REPLICA = 1
DOWN_FROM = 3000  # first round the replica is down
DOWN_UNTIL = 6000  # first round it is back
QUORUMS: tuple[tuple[int, int], ...] = ((1, 1), (2, 2), (1, 3))


@dataclass(frozen=True)
class QuorumRun:
    """The figures of one (R, W) line."""

    r: int
    w: int
    put_ok: int
    get_ok: int
    put_ok_pct: float
    get_ok_pct: float
    put_p99_ms: float
    get_p99_ms: float
    stale_reads: int


@dataclass(frozen=True)
class QuorumResult:
    seed: int
    rounds: int
    runs: tuple[QuorumRun, ...]


def _latencies(seed: int, rounds: int) -> list[float]:
    """Every `lat()` value of one run, in call order: six per round (three puts, three gets).

    The seed reseeds its PRNG for every (R, W) and draws the same number of values whatever R and
    W are ("same latencies for every (R, W)"), so one stream serves all three runs.
    """
    rnd = Mulberry32(seed)
    log = js_math_log
    out = []
    for _ in range(6 * rounds):
        # `1 + -Math.log(1 - rnd()) + (rnd() < 0.03 ? 40 + 40 * rnd() : 0)`, evaluated left to
        # right: the exponential part draws first, then the 3% slow-path test, then its size.
        t = 1 + -log(1 - rnd())
        out.append(t + (40 + 40 * rnd() if rnd() < 0.03 else 0))
    return out


def _p99(values: Sequence[float]) -> float:
    s = sorted(values)
    return s[math.ceil(0.99 * len(s)) - 1]


def _run(r_need: int, w_need: int, rounds: int, lat: Sequence[float]) -> QuorumRun:
    has = [0] * N  # version held by each replica
    acked = put_ok = get_ok = stale = 0
    put_lat: list[float] = []
    get_lat: list[float] = []
    pos = 0
    for v in range(1, rounds + 1):
        up = [True] * N
        up[DOWN_REPLICA] = not (DOWN_FROM <= v < DOWN_UNTIL)
        # Stable sort by latency, as the seed's comparator sort; latencies of down replicas are
        # drawn too, then dropped, so the PRNG stream stays aligned.
        w = sorted(((i, lat[pos + i]) for i in range(N) if up[i]), key=lambda x: x[1])
        r = sorted(((i, lat[pos + N + i]) for i in range(N) if up[i]), key=lambda x: x[1])
        pos += 2 * N
        if len(w) >= w_need:  # success after the W-th fastest ack
            t_w = w[w_need - 1][1]
            acked = v
            put_ok += 1
            put_lat.append(t_w)
            for i, t in w:
                if t <= t_w:
                    has[i] = v  # the slower replicas apply it later
        else:
            put_lat.append(TIMEOUT_MS)
        if len(r) >= r_need:
            get_ok += 1
            get_lat.append(r[r_need - 1][1])
            if max(has[i] for i, _ in r[:r_need]) < acked:
                stale += 1
        else:
            get_lat.append(TIMEOUT_MS)
        for i, _ in w:
            has[i] = v  # in-flight writes land before the next round
    return QuorumRun(
        r=r_need,
        w=w_need,
        put_ok=put_ok,
        get_ok=get_ok,
        put_ok_pct=100 * put_ok / rounds,
        get_ok_pct=100 * get_ok / rounds,
        put_p99_ms=_p99(put_lat),
        get_p99_ms=_p99(get_lat),
        stale_reads=stale,
    )


def simulate_quorum(seed: int = DEFAULT_SEED, rounds: int = DEFAULT_ROUNDS) -> QuorumResult:
    """Run part 2 with the given PRNG seed and number of rounds."""
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    lat = _latencies(seed, rounds)
    return QuorumResult(seed=seed, rounds=rounds, runs=tuple(_run(r, w, rounds, lat) for r, w in QUORUMS))


def render_quorum(result: QuorumResult) -> str:
    """The seed's three lines, byte for byte."""
    s = js_number_to_string
    return "".join(
        f"(R,W)=({s(run.r)},{s(run.w)})  put ok {js_to_fixed(run.put_ok_pct, 1)}%"
        f"  get ok {js_to_fixed(run.get_ok_pct, 1)}%"
        f"  put p99 {js_to_fixed(run.put_p99_ms, 1)} ms  get p99 {js_to_fixed(run.get_p99_ms, 1)} ms"
        f"  stale reads {s(run.stale_reads)}\n"
        for run in result.runs
    )


def quorum_json(result: QuorumResult) -> dict[str, Any]:
    """The same figures as the table, unrounded."""
    return {
        "cmd": "sim quorum",
        "ok": True,
        "seed": result.seed,
        "rounds": result.rounds,
        "n": N,
        "timeout_ms": TIMEOUT_MS,
        "down": {"replica": DOWN_REPLICA, "from_round": DOWN_FROM, "until_round": DOWN_UNTIL},
        "runs": [
            {
                "r": run.r,
                "w": run.w,
                "put_ok": run.put_ok,
                "put_ok_pct": run.put_ok_pct,
                "get_ok": run.get_ok,
                "get_ok_pct": run.get_ok_pct,
                "put_p99_ms": run.put_p99_ms,
                "get_p99_ms": run.get_p99_ms,
                "stale_reads": run.stale_reads,
            }
            for run in result.runs
        ],
    }
