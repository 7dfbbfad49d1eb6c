"""How long after an acknowledged write every read returns it: the staleness curve of a run.

For each read and each write acknowledged before the read began, one sample: how long after the
acknowledgement the read began, and whether it saw the write (or something that replaced it).
Grouped by that delay, the fraction of fresh reads is the t-visibility of Bailis et al.'s PBS
("probabilistically bounded staleness"): the chance that a read t ms after a write sees it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

BUCKETS_MS = (1.0, 5.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 5000.0, math.inf)
MAX_SAMPLES = 2_000_000  # pairs judged at most; reads beyond are sampled evenly

Curve = tuple[tuple[float, float, int], ...]  # (bucket's upper bound in ms, fraction fresh, samples)


def curve(samples: Iterable[tuple[float, bool]]) -> tuple[Curve, float]:
    """The curve from (seconds after the ack, fresh) samples, and the longest delay (ms) at which
    a read still missed a write (0.0: every read was fresh)."""
    fresh = [0] * len(BUCKETS_MS)
    total = [0] * len(BUCKETS_MS)
    worst = 0.0
    for delay, ok in samples:
        ms = delay * 1000.0
        i = next(i for i, top in enumerate(BUCKETS_MS) if ms < top)
        total[i] += 1
        if ok:
            fresh[i] += 1
        elif ms > worst:
            worst = ms
    out = tuple((top, fresh[i] / total[i], total[i]) for i, top in enumerate(BUCKETS_MS) if total[i])
    return out, worst


def render(points: Curve, worst: float) -> str:
    """The curve as text lines: `< 5 ms: 97.0% fresh (1,204 reads)`."""
    if not points:
        return "staleness: no read followed an acknowledged write"
    lines = ["staleness (reads that began this long after a write's acknowledgement, and saw it):"]
    for top, frac, n in points:
        i = BUCKETS_MS.index(top)
        low = BUCKETS_MS[i - 1] if i else 0.0
        span = f"{low:g}-{top:g} ms" if math.isfinite(top) else f">= {low:g} ms"
        lines.append(f"  {span:>14}: {frac * 100:5.1f}% fresh ({n:,} samples)")
    lines.append(
        "  every read saw every write acknowledged before it began"
        if worst == 0.0
        else f"  the latest a read still missed a write: {worst:.1f} ms after its acknowledgement"
    )
    return "\n".join(lines)
