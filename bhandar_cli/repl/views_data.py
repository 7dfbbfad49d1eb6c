"""Rich views of data replies: get (siblings, counters, dropped LWW writes), put/delete, incr and
keyspaces; and what every view shares (a node's colour, a value, a time). Rendering only."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from bhandar_cli.client import GetOutcome, IncrOutcome, WriteOutcome
from bhandar_cli.core.model import count as counted
from bhandar_cli.core.model import is_exact, relation, show_clock, show_ttl

NODE_STYLES = ["cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta"]


def node_style(name: str) -> str:
    """A node's colour, the same in every view."""
    return NODE_STYLES[(ord(name[0]) - ord("A")) % len(NODE_STYLES)] if name else "white"


def show_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def show_time(ts: float) -> str:
    """A node timestamp as a person reads it: the local time of day for Unix seconds (process
    clusters and the REPL on a real clock), seconds since the start under virtual time."""
    if ts >= 1e9:
        return datetime.fromtimestamp(ts).strftime("%H:%M:%S.%f")[:-3]
    return f"{ts:.3f} s of virtual time"


def with_trace(main: RenderableType, trace: tuple[tuple[float, str], ...]) -> RenderableType:
    if not trace:
        return main
    table = Table("ms", "step", box=box.SIMPLE, title="trace", title_justify="left", show_edge=False)
    for ms, step in trace:
        table.add_row(f"{ms:.3f}", step)
    return Group(main, table)


def render_get(out: GetOutcome) -> RenderableType:
    meta = Text(
        f"  via {out.coordinator}, {counted(out.replies, 'reply', 'replies')} (needed {out.needed})",
        style="dim",
    )
    if out.counter is not None:
        table = Table("replica", "P", "N", box=box.SIMPLE, show_edge=False)
        for actor, (p, n) in out.counter_entries.items():
            table.add_row(actor, str(p), str(n))
        head = Text.assemble((f"{out.key} = {out.counter}", "bold"), meta)
        lines: list[RenderableType] = [head, table]
        if out.duplicates:
            lines.append(
                Text(
                    f"the table sums to {out.counter + out.duplicates}: {out.duplicates} was applied twice "
                    "by a retried request id on two replicas, and the value counts it once",
                    "yellow",
                )
            )
        return with_trace(Group(*lines), out.trace)
    parts: list[RenderableType] = []
    if not out.found:
        expired = sum(s.expired for s in out.siblings)
        tomb = sum(s.tombstone for s in out.siblings) - expired
        said = [f"deleted: {counted(tomb, 'tombstone')}"] if tomb else []
        said += ["expired: its time to live passed"] if expired else []
        note = f" ({'; '.join(said)})" if said else ""
        parts.append(Text.assemble(("(not found)", "yellow"), note, meta))
    else:
        table = Table("#", "value", "dot", "clock", box=box.SIMPLE_HEAD, show_edge=False)
        for i, s in enumerate(out.siblings, 1):
            value = Text("(tombstone)", style="dim") if s.tombstone else Text(show_value(s.value))
            table.add_row(str(i), value, f"{s.dot[0]}:{s.dot[1]}", show_clock(s.clock))
        parts += [table, meta]
        parts.extend(explain_siblings(out))
        parts.extend(explain_fallback_actors(out))
        for lost in out.dropped:
            parts.append(
                Text(
                    f"last-writer-wins dropped {show_value(lost.value)} ({lost.dot[0]}:{lost.dot[1]}, "
                    f"written at {show_time(lost.ts)}): a concurrent write, silently lost",
                    "bold yellow",
                )
            )
    parts += [Text(f"warning: {w}", style="yellow") for w in out.warnings]
    if out.context:
        parts.append(Text.assemble(("context ", "dim"), out.context))
    return with_trace(Group(*parts), out.trace)


def explain_fallback_actors(out: GetOutcome) -> list[RenderableType]:
    """What `A~x` (or `A~r1`, `A~g3`, `A~1`) in a dot or clock means, said once under the table."""
    actors = sorted(
        {a.partition(":")[0] for s in out.siblings for a in (s.dot[0], *s.clock) if "~" in a},
    )
    return [Text(f"{actor}: {actor_story(actor)}", style="dim") for actor in actors]


def actor_story(actor: str) -> str:
    """Why a node wrote under an actor other than its own name: the ways a node takes one."""
    if is_exact(actor):
        node = actor.partition("~")[0]
        again = actor[actor.rfind("~x") + 2 :]
        series = f" (a new series: {node} restarted with one of this key's dots in flight)" if again else ""
        return (
            f"the dots node {node} mints for a key it does not hold: a put it forwarded (one dot, "
            f"whichever replica coordinates it) or a write it took as a fallback; numbered 1, 2, 3 "
            f"for each key{series}. A clock names one beyond its run alone: {actor}:2+5 saw 1, 2 and 5"
        )
    node, _, mark = actor.partition("~")
    if mark.startswith("r"):
        return (
            f"node {node} after a restore from a snapshot, which forgets the dots written since: a new "
            "actor, so it never reuses one"
        )
    if mark.startswith("g"):
        return (
            f"node {node} after it started from older data than its peers had seen of it: a new actor, "
            "so it never reuses a dot of the life it forgot"
        )
    return (
        f"node {node} writing as a fallback (a stand-in for a home replica that was down), under an "
        "actor of its own so it never reuses a dot it forgot (an earlier release; now its exact dots)"
    )


def explain_siblings(out: GetOutcome) -> list[RenderableType]:
    live = [s for s in out.siblings if not s.tombstone]
    lines: list[RenderableType] = []
    if len(live) > 1:
        concurrent = out.concurrent_pairs
        pairs = ", ".join(
            f"{a.dot[0]}:{a.dot[1]} {show_clock(a.clock)} ∥ {b.dot[0]}:{b.dot[1]} {show_clock(b.clock)}"
            for a, b in concurrent
        )
        # A clock can look later than a sibling its write never saw: B:2 {B:2} beside B:1 {B:1},
        # when B:2 was written without a context. Say what was seen, not what the clocks suggest.
        unseen = [
            (later, earlier)
            for a, b in concurrent
            for later, earlier in ((a, b), (b, a))
            if relation(later.clock, earlier.clock) == "descends"
        ]
        why = "neither clock descends from the other"
        if unseen:
            why = "neither write had seen the other: " + "; ".join(
                f"{x.dot[0]}:{x.dot[1]} was written with the context {show_clock(x.context)}, which lacks "
                f"{y.dot[0]}:{y.dot[1]} (its clock counts its own dot, not what it saw)"
                for x, y in unseen
            )
        lines.append(
            Text.assemble(
                (f"{len(live)} siblings: ", "bold yellow"),
                f"concurrent writes ({pairs}); {why}, so the store keeps both rather than guess. Merge "
                "them in your application and write the result back; the next put uses this context "
                "(ctx=auto) and replaces them.",
            )
        )
    if len(live) and len(live) < len(out.siblings):
        lines.append(Text("a concurrent delete is also a sibling (a tombstone)", style="yellow"))
    return lines


def render_write(out: WriteOutcome) -> RenderableType:
    context_words = {
        "auto": "context from your last get",
        "none": "no context (blind write)",
        "given": "given context",
        "read": "context of a read just now",
    }
    head = Text.assemble(
        ("OK ", "bold green"),
        f"{out.cmd} {out.keyspace}/{out.key} via ",
        (out.coordinator, node_style(out.coordinator)),
        f": {counted(out.acks, 'ack')}, needed {out.needed}",
        (f"  ({context_words.get(out.context_used, out.context_used)})", "dim"),
    )
    parts: list[RenderableType] = [head]
    if out.note:
        parts.append(Text(out.note, "cyan"))
    if out.removed is not None:
        parts.append(Text(_removed_line(out), "bold"))
    for hinted in out.hinted:
        fallback, _, home = hinted.partition(" for ")
        parts.append(
            Text(
                f"sloppy quorum: {fallback} stands in for {home} (it keeps a hint until {home} is back)",
                "yellow",
            )
        )
    parts += [Text(f"warning: {w}", style="yellow") for w in out.warnings]
    return with_trace(Group(*parts), out.trace)


def _removed_line(out: WriteOutcome) -> str:
    """What a delete that read first removed: "deleted 2 siblings: "a", "b"."""
    if not out.removed:
        return f"nothing to delete: {out.keyspace}/{out.key} had no value (a tombstone was written)"
    shown = ", ".join(_short(v) for v in out.removed[:5])
    more = f" (and {len(out.removed) - 5} more)" if len(out.removed) > 5 else ""
    noun = "sibling" if len(out.removed) == 1 else "siblings"
    return f"deleted {len(out.removed)} {noun}: {shown}{more}"


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def render_incr(out: IncrOutcome) -> RenderableType:
    line = Text.assemble(
        (f"{out.key} = {out.value}", "bold"),
        (f"  via {out.coordinator}, {counted(out.acks, 'ack')}", "dim"),
    )
    return with_trace(Group(line, Text(out.note, "cyan")) if out.note else line, out.trace)


def render_keyspaces(d: dict[str, Any]) -> RenderableType:
    if "keyspaces" not in d:
        verb = "created" if d["created"] else "exists"
        ttl = f" ttl={show_ttl(d['ttl'])}" if d.get("ttl") else ""
        return Text(f"keyspace {d['name']} {verb}: policy={d['policy']} n={d['n']} quorum={d['quorum']}{ttl}")
    table = Table("keyspace", "policy", "n", "quorum", "ttl", box=box.SIMPLE_HEAD, show_edge=False)
    for k in d["keyspaces"]:
        ttl = show_ttl(k["ttl"]) if k.get("ttl") else "-"
        table.add_row(k["name"], k["policy"], str(k["n"]), k["quorum"], ttl)
    return table
