"""The interactive REPL's one-line status bar, sized for the terminal (80 columns and less).

What it says about the nodes is the cluster's summary (bhandar_cli/client/cluster_health.py), the same
words `status` and the web page use; then the session's consistency level, the pending hints and
whether tracing is on. What does not fit is shortened, never cut mid-word.
"""

from __future__ import annotations

from bhandar_cli.client import DOWN, PARTITIONED, SUSPECTED, ClusterHealth

Parts = list[tuple[str, str]]  # (kind, text): kind is a state the part names, or ""


def status_parts(health: ClusterHealth, consistency: str, hints: int, trace: bool, width: int) -> Parts:
    """The status bar as (kind, text) parts that fit `width` columns when anything can.

    The summary's own words first; shortened in this order: the down nodes (their first names
    and "+N", then only the count); the partition to its number of groups, the suspected nodes
    to their count; then "trace on" is left out; at last every list becomes a count."""
    down = health.named(DOWN)
    suspected = health.named(SUSPECTED)

    def build(shown_down: int, short: bool, with_trace: bool, counts: bool) -> Parts:
        parts: Parts = []
        for kind, text in health.parts():
            if kind == DOWN:
                if shown_down:
                    rest = len(down) - shown_down
                    text = "down " + ",".join(down[:shown_down]) + (f",+{rest}" if rest else "")
                else:
                    text = f"{len(down)} down"
            elif kind == PARTITIONED:
                text = (
                    f"partition {len(health.groups)} groups"
                    if short
                    else "partition " + "|".join("{" + ",".join(g) + "}" for g in health.groups)
                )
            elif kind == SUSPECTED:
                if short:
                    if any(k == SUSPECTED for k, _ in parts):
                        continue
                    text = f"{len(suspected)} suspected"
            elif kind and counts:
                text = f"{len(health.named(kind))} {kind}"
            parts.append((kind, text))
        parts += [("", consistency), ("", f"hints {hints}")]
        if with_trace:
            parts.append(("", "trace on"))
        return parts

    said = (
        health.parts() + [("", consistency), ("", f"hints {hints}")] + ([("", "trace on")] if trace else [])
    )
    candidates = [said]  # the summary's own words when they fit, as `status` and the page say them
    candidates += [
        build(shown, short, trace, False) for short in (False, True) for shown in range(len(down), -1, -1)
    ]
    candidates += [build(0, True, False, False), build(0, True, False, True)]
    for parts in candidates:
        if sum(len(t) for _, t in parts) + 3 * (len(parts) - 1) <= width:
            return parts
    return candidates[-1]
