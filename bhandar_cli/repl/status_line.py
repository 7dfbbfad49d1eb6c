"""What the interactive REPL shows between commands: notices of what the cluster noticed on its
own (failure detection, joins) and the one-line status bar, both sized for an 80-column terminal.

Notices are about changes a person should hear of once. Every node reports what it sees at its own
moment: after `partition A | B C` about twenty "X sees Y down" observations trickle in over a few
seconds. `Notices` keeps, per node, the set of nodes that currently see it down, and announces a
node only when that set becomes non-empty ("B is down") or empty again ("B is up again"); who else
came to see the same thing later is what the status bar and `status` show.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

Observation = tuple[str, dict[str, Any], str]  # (text, data, observing node), as the backend drains


@dataclass
class Notices:
    """Folds observations into one line per change of the cluster's view of a node."""

    seen_down_by: dict[str, set[str]] = field(default_factory=dict)

    def fold(self, observations: Iterable[Observation], alive: Sequence[str]) -> list[str]:
        """The notice lines for these observations (plain text, at most one per kind of change)."""
        down: dict[str, list[str]] = {}
        up: list[str] = []
        other: list[str] = []
        for text, data, observer in observations:
            if "peer" not in data:
                if text not in other:
                    other.append(text)
                continue
            peer = data["peer"]
            observers = self.seen_down_by.setdefault(peer, set())
            was_down = bool(observers)
            if data["up"]:
                observers.discard(observer)
            else:
                observers.add(observer)
            if not was_down and observers:
                down.setdefault(peer, []).append(observer)
            elif peer in down and not data["up"]:
                down[peer].append(observer)
            elif was_down and not observers:
                up.append(peer)
        # A node that is not running sees nothing any more: its old suspicions are forgotten
        # without a notice (the node it suspected did not come back; the observer went away).
        for observers in self.seen_down_by.values():
            observers.intersection_update(alive)
        lines = list(other)
        if down:
            lines.append(
                "down: "
                + ", ".join(
                    f"{peer} (seen by {', '.join(sorted(set(by)))})" for peer, by in sorted(down.items())
                )
            )
        up = [peer for peer in up if peer not in down]
        if up:
            lines.append("up again: " + ", ".join(sorted(set(up))))
        return lines


def status_parts(state: dict[str, Any], width: int) -> list[tuple[str, str]]:
    """The status bar as (style, text) parts that fit `width` columns when anything can.

    Style is "" or "down". What does not fit is shortened in this order: the list of down nodes
    (its first names and "+N", then only the count); the partition to its number of groups, with
    the down nodes' names again as far as they fit; then "trace on" is left out."""
    nodes = state.get("nodes", 0)
    down: list[str] = list(state.get("down", []))
    groups: list[list[str]] = list(state.get("partitions") or [])

    def build(shown_down: int, full_partition: bool, trace: bool) -> list[tuple[str, str]]:
        parts: list[tuple[str, str]] = [("", f"{nodes - len(down)}/{nodes} up")]
        if down:
            if shown_down:
                rest = len(down) - shown_down
                parts.append(("down", "down " + ",".join(down[:shown_down]) + (f",+{rest}" if rest else "")))
            else:
                parts.append(("down", f"{len(down)} down"))
        if groups:
            text = (
                "|".join("{" + ",".join(g) + "}" for g in groups)
                if full_partition
                else f"{len(groups)} groups"
            )
            parts.append(("", f"partition {text}"))
        parts += [("", str(state.get("consistency", ""))), ("", f"hints {state.get('hints', 0)}")]
        if trace:
            parts.append(("", "trace on"))
        return parts

    trace = bool(state.get("trace"))
    candidates = [build(shown, full, trace) for full in (True, False) for shown in range(len(down), -1, -1)]
    candidates.append(build(0, False, False))
    for parts in candidates:
        if sum(len(t) for _, t in parts) + 3 * (len(parts) - 1) <= width:
            return parts
    return candidates[-1]
