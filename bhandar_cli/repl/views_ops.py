"""Rich views of cluster operations: faults (partition, heal, kill, revive, delay), membership
(members, add, decommission, remove), anti-entropy (repair, merkle) and storage (flush, compact, snapshot,
restore, upgrade). Rendering only."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from bhandar_cli.core.model import count as counted
from bhandar_cli.repl.views_data import node_style


def render_partition(data: dict[str, Any]) -> RenderableType:
    return Text("partitioned: " + " | ".join("{" + ", ".join(g) + "}" for g in data["groups"]), "yellow")


def render_heal(data: dict[str, Any]) -> RenderableType:
    return Text("healed: every node can reach every other", "green")


def render_kill(data: dict[str, Any]) -> RenderableType:
    node = data["node"]
    return Text(f"killed {node}" if data["changed"] else f"{node} was already down", "red")


def render_revive(data: dict[str, Any]) -> RenderableType:
    node = data["node"]
    return Text(f"revived {node}" if data["changed"] else f"{node} was already up", "green")


def render_delay(data: dict[str, Any]) -> RenderableType:
    node = data["node"]
    return Text(f"{node}: +{data['ms']:g} ms on every message" if data["ms"] else f"{node}: no delay")


def render_members(data: dict[str, Any]) -> RenderableType:
    table = Table(
        "node", "zone", "status", "up", "phi", "heartbeat", "generation", "tokens", box=box.SIMPLE_HEAD
    )
    wire = any("protocol" in m for m in data["members"])  # node processes: wire protocol, round trip
    if wire:
        table.add_column("protocol")
        table.add_column("rtt ms")
    for m in data["members"]:
        extra = []
        if wire:
            rtt = m.get("rtt_ms")
            extra = [str(m.get("protocol") or "?"), "-" if rtt is None else f"{rtt:.1f}"]
        up = Text("up", "green") if m.get("up") else Text("down", "bold red")
        table.add_row(
            Text(m["id"], node_style(m["id"])),
            m.get("zone", ""),
            m.get("status", ""),
            up,
            f"{m.get('phi', 0.0):.2f}",
            str(m.get("heartbeat", "")),
            str(m.get("generation", "")),
            str(m.get("tokens", "")),
            *extra,
        )
    parts: list[RenderableType] = [
        Text(f"membership as {data['from']} sees it (gossip + phi accrual)"),
        table,
    ]
    if data.get("disagree"):
        why = data.get("why") or {}
        parts.append(Text("the nodes' views differ from each other or from the facts about:", "yellow"))
        for member in data["disagree"]:
            reason = why.get(member)
            parts.append(Text(f"  {member}" + (f": {reason}" if reason else ""), "yellow"))
    return Group(*parts)


def add_counts(data: dict[str, Any]) -> str:
    """What a join brought, for the REPL's `add` and `cluster add` alike: the keys the new node
    holds, and the records streamed to it (each key's copy from each of its replicas, so more)."""
    streamed = f"{counted(data['keys_streamed'], 'record')} streamed from their replicas"
    held = data.get("keys_held")
    return streamed if held is None else f"holds {counted(held, 'key')}, from {streamed}"


def render_add(data: dict[str, Any]) -> RenderableType:
    text = Text.assemble(
        ("joined ", "green"),
        (data["node"], node_style(data["node"])),
        f" in zone {data['zone']}: {add_counts(data)} in {data['seconds']:.2f} s",
    )
    for line in sources_down_lines(data):
        text.append("\n" + line, style="yellow")
    return text


def sources_down_lines(data: dict[str, Any]) -> list[str]:
    """What an `add` did about sources that were down (client/procedures/joining.py), one line each."""
    from bhandar_cli.client import replaced_text

    return [replaced_text(s) for s in data.get("sources_down", [])]


def render_decommission(data: dict[str, Any]) -> RenderableType:
    return Text.assemble(
        ("decommissioned ", "yellow"),
        (data["node"], node_style(data["node"])),
        f": streamed {data['keys_streamed']} records to their new replicas in {data['seconds']:.2f} s",
    )


def render_remove(data: dict[str, Any]) -> RenderableType:
    known = "every live node knows" if data["everyone_knows"] else "gossip is still spreading it"
    return Text.assemble(
        ("removed ", "yellow"),
        (data["node"], node_style(data["node"])),
        f" for good (sealed by {data['by']}; {known}); its ranges' other replicas fill the new ones",
    )


def render_repair(data: dict[str, Any]) -> RenderableType:
    table = Table("node", "compared", "differing", "keys exchanged", "problems", box=box.SIMPLE_HEAD)
    for row in data["nodes"]:
        table.add_row(
            Text(row["node"], node_style(row["node"])),
            str(row["compared"]),
            str(row["differing"]),
            str(row["keys"]),
            Text("; ".join(row["failed"]), "yellow"),
        )
    return Group(
        table, Text(f"{data['keys']} keys exchanged in {data['seconds']:.2f} s (Merkle trees per range)")
    )


def render_merkle(data: dict[str, Any]) -> RenderableType:
    ranges = data["ranges"]
    head = Text(
        f"{data['a']} vs {data['b']}: {len(ranges)} shared ranges, {data['differing']} differ",
        "yellow" if data["differing"] else "green",
    )
    parts: list[RenderableType] = [head]
    for r in ranges:
        if r["equal"]:
            continue
        parts.append(
            Text(f"{r['keyspace']} ({r['range'][0]}, {r['range'][1]}]: keys {', '.join(r['keys'])}", "bold")
        )
        for line in r["tree"]:
            parts.append(Text("  " + line, "red" if "≠" in line else "dim"))
    if not data["differing"]:
        parts.append(Text("every shared range has the same root hash: nothing to exchange", "dim"))
    return Group(*parts)


def nodes_timed(verb: str, data: dict[str, Any]) -> RenderableType:
    """What a node operation did, node by node: "flushed: A 1.2 ms, B 0.9 ms"."""
    rows = [f"{n['node']} {n['ms']:.1f} ms" for n in data["nodes"]]
    return Text(f"{verb}: " + ", ".join(rows))


def render_snapshot(data: dict[str, Any]) -> RenderableType:
    how = f"copied to {data['to']} with checksums" if data.get("to") else "hard-linked"
    return Text(
        f"snapshot {data['name']}: {data['files']} files {how} in {data['ms']:.1f} ms; "
        "the WALs written from now on are kept with it (restore NAME until=TIME)"
    )


def render_restore(data: dict[str, Any]) -> RenderableType:
    point = f"up to {data['until']}" if data.get("until") else "to the snapshot itself"
    lines = [
        Text(
            f"restored {data['name']} {point} on {', '.join(data['nodes'])}: "
            f"RTO {data['rto_ms'] / 1000:.2f} s "
            f"(quiesce {data['quiesce_ms'] / 1000:.2f} s, restore {data['ms'] / 1000:.2f} s, "
            f"repair of {data['repaired_keys']} keys {data['repair_seconds']:.2f} s)"
        ),
        Text(
            f"{data['verified_files']} files verified; writes replayed: {data['replayed']}; "
            f"acknowledged later and discarded: {data['discarded']}; RPO {data['rpo_s']:.3f} s"
        ),
    ]
    if not data["quiesced"]:
        lines.append(Text(f"did not settle before the restore: {'; '.join(data['unsettled'])}", "yellow"))
    lines += [Text(f"warning: {w}", "yellow") for w in data.get("warnings", [])]
    if data["discarded"]:
        since = data["until"] if data.get("until") else "the snapshot"
        lines.append(Text(f"the {data['discarded']} writes made after {since} are gone", "yellow"))
    return Group(*lines)


def render_upgrade(data: dict[str, Any]) -> RenderableType:
    rows = []
    for r in data["nodes"]:
        text = f"{r['node']} {r['seconds']:.1f}s"
        if r.get("skipped"):
            text = f"{r['node']} already at protocol {r['protocol']}"
        elif "protocol" in r and r.get("from") != r["protocol"]:
            text += f" (protocol {r['from']} -> {r['protocol']})"
        if not r["settled"]:
            text += " (not settled)"
        rows.append(text)
    what = "rolling restart" if data.get("to") is None else f"rolling upgrade to protocol {data['to']}"
    return Text(f"{what}, one node at a time: {', '.join(rows)}; {data['seconds']:.1f} s in all")


def render_config(data: dict[str, Any]) -> RenderableType:
    if data["cmd"] == "config set":
        steps = ", ".join(
            f"{r['node']} {r['seconds']:.1f}s (p99 {r['after']['p99_ms']} ms)" for r in data["nodes"]
        )
        return Text(
            f"config version {data['version']}: {data['key']}={data['value']} on every node, one at a "
            f"time: {steps}; {data['seconds']:.1f} s in all"
        )
    versions = ", ".join(
        f"{r['node']} v{r['version']}" if r["up"] else f"{r['node']} down" for r in data["nodes"]
    )
    values = ", ".join(f"{k}={v}" + (" (set)" if k in data["set"] else "") for k, v in data["values"].items())
    agreed = "every node agrees" if data["agreed"] else "nodes differ"
    return Text(f"config version {data['version']} ({agreed}: {versions})\n{values}")


def progress_line(event: dict[str, Any]) -> str:
    """One line of a running upgrade or config rollout: node, phase, seconds since its step began."""
    extra = "".join(f" {k}={v}" for k, v in event.items() if k not in ("node", "phase", "elapsed", "what"))
    what = event.get("what", "upgrade")
    return f"{what}: {event['node']} {event['phase']} ({event['elapsed']:.1f} s){extra}"


KEPT_PHASES = frozenset({"rollback", "not settled"})  # on a terminal too, these stay on their own line


@contextmanager
def node_progress(stream: TextIO) -> Iterator[Callable[[dict[str, Any]], None]]:
    """A progress callback for a one-shot command's rolling operation. On a terminal each node's
    phases overwrite one line, so five nodes leave five lines (and a rollback its own), not fifty;
    anywhere else every phase is a line of its own, for a log to keep."""
    if not stream.isatty():
        yield lambda event: print(progress_line(event), file=stream, flush=True)
        return
    shown: list[tuple[Any, Any]] = []  # the node whose line is open, if one is

    def show(event: dict[str, Any]) -> None:
        node = (event.get("what"), event["node"])
        if shown and shown[-1] != node:
            stream.write("\n")
        stream.write("\r\x1b[2K" + progress_line(event))
        shown[:] = [node]
        if event["phase"] in KEPT_PHASES:
            stream.write("\n")
            shown.clear()
        stream.flush()

    try:
        yield show
    finally:
        if shown:
            stream.write("\n")
            stream.flush()
