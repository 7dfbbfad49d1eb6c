"""Why the live nodes' membership views disagree about a member, said from the facts.

`members` lists the members the live nodes' gossip views disagree about, with each other or with
the facts: a member whose process does not run that a view still calls up, a live one that a view
calls down. The cause is not always that gossip has not spread yet: the member may have stopped and
some detectors not yet reached their threshold, a partition may cut nodes off from it, or a node
may not have heard of its restart. Each reason is read from what the client knows for a fact (which
processes run, the partition the operator made) and from each node's own view row: its verdict,
the member's generation as it knows it, how long it has heard nothing of the member (`silent_s`)
and after how much silence its detector calls it down (`down_after_s`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

Row = Mapping[str, Any]  # one member as one node's `members` view shows it


def disagreeing(views: Mapping[str, Mapping[str, Row]], stopped: Collection[str] = ()) -> list[str]:
    """Members the views (live node -> member -> row) disagree about: with each other, or with the
    facts (a member whose process does not run, `stopped`, that a view calls up; a live member
    that a view calls down). Members that left the ring are no one's concern."""
    seen: dict[str, set[bool]] = {}
    for viewer, view in views.items():
        for member, row in view.items():
            if member != viewer and row.get("status") != "left":
                seen.setdefault(member, set()).add(bool(row.get("up")))
    return sorted(
        m
        for m, verdicts in seen.items()
        if len(verdicts) > 1 or (m in stopped and True in verdicts) or (m in views and False in verdicts)
    )


def why_views_differ(
    member: str,
    views: Mapping[str, Mapping[str, Row]],
    running: bool,
    groups: Sequence[Sequence[str]] = (),
) -> str:
    """One sentence on why the views (viewer -> member -> row) disagree about `member`, whose
    process runs or not (`running`), under the partition `groups` ([] for none)."""
    rows = {viewer: view[member] for viewer, view in views.items() if member in view and viewer != member}
    up = sorted(v for v, row in rows.items() if row.get("up"))
    down = sorted(v for v, row in rows.items() if not row.get("up"))
    if not running:
        return f"its process does not run; {_names(up)} {_have(up)} not noticed yet ({_waits(up, rows)})"
    group_of = {name: i for i, group in enumerate(groups) for name in group}
    across = [v for v in down if v in group_of and group_of.get(v) != group_of.get(member)]
    own = views.get(member, {}).get(member, {}).get("generation")
    behind = [
        v for v in down if v not in across and own is not None and (rows[v].get("generation") or 0) < own
    ]
    silent = [v for v in down if v not in across and v not in behind]
    parts = []
    if across:
        parts.append(f"the partition cuts {_names(across)} off from it")
    if behind:
        parts.append(f"it restarted (generation {own}) and gossip has not told {_names(behind)} yet")
    if silent:
        parts.append(
            f"it runs, but its heartbeats have not reached {_names(silent)} in time "
            f"({_waits(silent, rows)}): a partition just healed, or it or its links are slow"
        )
    return "; ".join(parts) or "the views changed while they were read"


def _waits(viewers: Sequence[str], rows: Mapping[str, Row]) -> str:
    """Each viewer's silence from the member against the silence its detector allows."""
    said = []
    for viewer in viewers:
        row = rows[viewer]
        silent, after = row.get("silent_s"), row.get("down_after_s")
        if silent is None or after is None:  # a node of an older version: its phi only
            said.append(f"{viewer}: phi {float(row.get('phi') or 0.0):.2f}")
        else:
            said.append(f"{viewer}: silent {float(silent):.1f} s of the {float(after):.1f} s it allows")
    return "; ".join(said)


def _names(nodes: Sequence[str]) -> str:
    return ", ".join(nodes)


def _have(nodes: Sequence[str]) -> str:
    return "has" if len(nodes) == 1 else "have"
