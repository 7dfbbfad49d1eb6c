"""A joining node's streams (its `info`'s "streams" view, core/roles/streaming.py) in words: the
progress lines `add` reports while the node bootstraps, and what a join that did not finish in
time is waiting for, naming each source it waits for and why (down, or still streaming).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any


def join_progress(node: str, streams: Mapping[str, Any]) -> list[str]:
    """What the join of `node` has reached, one line per fact; a caller reports each line once."""
    inbound = list(streams.get("inbound") or [])
    if not inbound:
        return []
    lines = [f"bootstraps from {', '.join(s['from'] for s in inbound)}"]
    for s in inbound:
        if s.get("replaced"):
            lines.append(f"does not wait for {s['from']} (down): {_instead(node, s)}")
        elif s.get("waiting_for") and not s.get("done"):
            lines.append(
                f"waits for {s['from']} (down) until the {_ranges(s)} it loses to {node} have come "
                f"from their other replicas ({', '.join(s['waiting_for'])} not done yet)"
            )
    return lines


def waiting_for(node: str, streams: Mapping[str, Any], down: Collection[str] = ()) -> str:
    """Why the join of `node` has not finished, in a clause: whom it waits for (`down`: the nodes
    the caller knows are down)."""
    inbound = list(streams.get("inbound") or [])
    if streams.get("movement") != "join" or not inbound:
        return f"{node} has not reached a member of the cluster to stream from yet"
    if streams.get("finished"):
        return f"{node} has finished streaming, but not every node has heard it is normal yet"
    pending = []
    for s in inbound:
        if s.get("done"):
            continue
        if s.get("waiting_for"):
            others = ", ".join(p + (" (down)" if p in down else "") for p in s["waiting_for"])
            pending.append(
                f"{s['from']} (down: the {_ranges(s)} it loses to {node} wait for their other "
                f"replicas {others} to stream them)"
            )
        elif s["from"] in down:
            pending.append(f"{s['from']} (down, and {node} has not noticed yet)")
        elif s.get("total"):
            pending.append(f"{s['from']} ({s['received']} of {s['total']} records so far)")
        else:
            pending.append(f"{s['from']} (nothing received yet)")
    return f"{node} waits for {', '.join(pending)}"


def replaced_sources(streams: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The sources that were down and not waited for: the ranges each lost to the joiner, and the
    other replicas those came from instead."""
    return [
        {"node": s["from"], "ranges": s.get("ranges", 0), "from": list(s.get("instead") or [])}
        for s in streams.get("inbound") or []
        if s.get("replaced")
    ]


def replaced_text(source: Mapping[str, Any]) -> str:
    """One of `replaced_sources` in words."""
    node = source["node"]
    if not source["ranges"]:
        return f"{node} was down: it lost no range to the new node"
    return (
        f"{node} was down: the {_ranges(source)} it lost came from their other replicas "
        f"{', '.join(source['from'])}; what only {node} holds it hands over once it is back"
    )


def _instead(node: str, stream: Mapping[str, Any]) -> str:
    if not stream.get("ranges"):
        return f"it loses no range to {node}"
    return (
        f"the {_ranges(stream)} it loses to {node} come from their other replicas "
        f"{', '.join(stream['instead'])}"
    )


def _ranges(stream: Mapping[str, Any]) -> str:
    count = int(stream.get("ranges", 0))
    return f"{count} range" + ("" if count == 1 else "s")
