"""Rich views of REPL replies: one renderer per kind of answer. Rendering only, no store logic."""

from __future__ import annotations

import json
import math
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from bhandar_cli.core.versions import show_clock
from bhandar_cli.outcomes import ClientError, GetOutcome, IncrOutcome, WriteOutcome
from bhandar_cli.repl import views_ops
from bhandar_cli.repl.palette import node_style
from bhandar_cli.repl.session import Reply


def show_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def render(reply: Reply) -> RenderableType:
    data = reply.data
    if isinstance(data, ClientError):
        return render_error(data)
    if isinstance(data, GetOutcome):
        return render_get(data)
    if isinstance(data, WriteOutcome):
        return render_write(data)
    if isinstance(data, IncrOutcome):
        return _with_trace(
            Text.assemble(
                (f"{data.key} = {data.value}", "bold"), (f"  via {data.coordinator}, {data.acks} acks", "dim")
            ),
            data.trace,
        )
    renderer = RENDERERS.get(reply.cmd)
    return renderer(data) if renderer else Text(f"ok: {reply.cmd}", style="green")


def render_error(err: ClientError) -> RenderableType:
    return Text.assemble(("error", "bold red"), f" ({err.code}): ", str(err))


def _with_trace(main: RenderableType, trace: tuple[tuple[float, str], ...]) -> RenderableType:
    if not trace:
        return main
    table = Table("ms", "step", box=box.SIMPLE, title="trace", title_justify="left", show_edge=False)
    for ms, step in trace:
        table.add_row(f"{ms:.3f}", step)
    return Group(main, table)


def render_get(out: GetOutcome) -> RenderableType:
    meta = Text(f"  via {out.coordinator}, {out.replies} replies (needed {out.needed})", style="dim")
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
        return _with_trace(Group(*lines), out.trace)
    parts: list[RenderableType] = []
    if not out.found:
        tomb = sum(s.tombstone for s in out.siblings)
        note = f" (deleted: {tomb} tombstone(s))" if tomb else ""
        parts.append(Text.assemble(("(not found)", "yellow"), note, meta))
    else:
        table = Table("#", "value", "dot", "clock", box=box.SIMPLE_HEAD, show_edge=False)
        for i, s in enumerate(out.siblings, 1):
            value = Text("(tombstone)", style="dim") if s.tombstone else Text(show_value(s.value))
            table.add_row(str(i), value, f"{s.dot[0]}:{s.dot[1]}", show_clock(s.clock))
        parts += [table, meta]
        parts.extend(explain_siblings(out))
        for lost in out.dropped:
            parts.append(
                Text(
                    f"last-writer-wins dropped {show_value(lost.value)} ({lost.dot[0]}:{lost.dot[1]}, "
                    f"written at {lost.ts:.3f}): a concurrent write, silently lost",
                    "bold yellow",
                )
            )
    if out.context:
        parts.append(Text.assemble(("context ", "dim"), out.context))
    return _with_trace(Group(*parts), out.trace)


def explain_siblings(out: GetOutcome) -> list[RenderableType]:
    live = [s for s in out.siblings if not s.tombstone]
    lines: list[RenderableType] = []
    if len(live) > 1:
        pairs = ", ".join(
            f"{a.dot[0]}:{a.dot[1]} {show_clock(a.clock)} ∥ {b.dot[0]}:{b.dot[1]} {show_clock(b.clock)}"
            for a, b in out.concurrent_pairs
        )
        lines.append(
            Text.assemble(
                (f"{len(live)} siblings: ", "bold yellow"),
                f"concurrent writes ({pairs}); neither clock descends from the other, so the store keeps "
                "both rather than guess. Merge them in your application and write the result back; "
                "the next put uses this context (ctx=auto) and replaces them.",
            )
        )
    if len(live) and len(live) < len(out.siblings):
        lines.append(Text("a concurrent delete is also a sibling (a tombstone)", style="yellow"))
    return lines


def render_write(out: WriteOutcome) -> RenderableType:
    ctx = {"auto": "context from your last get", "none": "no context (blind write)", "given": "given context"}
    head = Text.assemble(
        ("OK ", "bold green"),
        f"{out.cmd} {out.keyspace}/{out.key} via ",
        (out.coordinator, node_style(out.coordinator)),
        f": {out.acks} ack(s), needed {out.needed}",
        (f"  ({ctx.get(out.context_used, out.context_used)})", "dim"),
    )
    parts: list[RenderableType] = [head]
    for hinted in out.hinted:
        fallback, _, home = hinted.partition(" for ")
        parts.append(
            Text(
                f"sloppy quorum: {fallback} stands in for {home} (it keeps a hint until {home} is back)",
                "yellow",
            )
        )
    parts += [Text(f"warning: {w}", style="yellow") for w in out.warnings]
    return _with_trace(Group(*parts), out.trace)


def render_status(data: dict[str, Any]) -> RenderableType:
    table = Table("", "node", "zone", "tokens", "owns", "keys", "hints", "sees down", box=box.SIMPLE_HEAD)
    left = [n["id"] for n in data["nodes"] if n.get("status") == "left"]
    moving: list[str] = []
    for n in data["nodes"]:
        if n.get("status") == "left":
            continue
        streams = n.get("streams") or {}
        for s in streams.get("inbound", []) if n.get("status") == "joining" else []:
            moving.append(f"{n['id']} <- {s['from']}: {s['received']}/{s['total'] or '?'} records")
        for s in streams.get("outbound", []) if n.get("status") == "leaving" else []:
            moving.append(f"{n['id']} -> {s['to']}: {s['sent']}/{s['total']} records")
        code = Text(n["code"], style="green" if n["code"] == "UN" else "yellow" if n["up"] else "bold red")
        table.add_row(
            code,
            Text(n["id"], style=node_style(n["id"])),
            n["zone"],
            str(n["tokens"]),
            f"{100 * n['owns']:.1f}%",
            str(n.get("keys", "")) if n["up"] else "-",
            str(n.get("hints", "")) if n["up"] else "-",
            ", ".join(n.get("sees_down", [])) if n["up"] else "-",
        )
    parts: list[RenderableType] = [table]
    parts += [Text(f"streaming {line}", "yellow") for line in moving]
    if left:
        parts.append(Text(f"left the ring: {', '.join(left)}", "dim"))
    if data.get("partitions"):
        groups = " | ".join("{" + ", ".join(g) + "}" for g in data["partitions"])
        parts.append(Text(f"partitioned: {groups}", style="yellow"))
    return Group(*parts)


def render_ring(data: dict[str, Any]) -> RenderableType:
    own = Table("node", "owns", "", box=box.SIMPLE_HEAD, show_edge=False)
    for node, share in sorted(data["ownership"].items()):
        own.add_row(
            Text(node, style=node_style(node)),
            f"{100 * share:.1f}%",
            Text("█" * round(40 * share), node_style(node)),
        )
    ranges = Table("from (exclusive)", "to", "owner", "share", box=box.SIMPLE_HEAD, show_edge=False)
    for r in data["ranges"]:
        ranges.add_row(
            str(r["range"][0]),
            str(r["range"][1]),
            Text(r["owner"], node_style(r["owner"])),
            f"{100 * r['share']:.2f}%",
        )
    return Group(draw_ring(data["ranges"]), own, ranges)


def draw_ring(ranges: list[dict[str, Any]], radius: int = 9) -> Text:
    """The ring as a circle of owner letters, clockwise from the top (token 0)."""
    width, height = 4 * radius + 5, 2 * radius + 3
    grid: list[list[tuple[str, str]]] = [[(" ", "")] * width for _ in range(height)]
    his = [r["range"][1] for r in ranges]
    steps = 8 * radius
    for i in range(steps):
        token = int(i / steps * 2**32)
        owner = next(
            (r["owner"] for r, hi in zip(ranges, his, strict=True) if token <= hi), ranges[0]["owner"]
        )
        angle = 2 * math.pi * i / steps
        x = round(width / 2 + 2 * radius * math.sin(angle))
        y = round(height / 2 - radius * math.cos(angle))
        grid[min(y, height - 1)][min(x, width - 1)] = (owner, node_style(owner))
    text = Text()
    for row in grid:
        for ch, style in row:
            text.append(ch, style=style)
        text.append("\n")
    return text


def render_prefs(data: dict[str, Any]) -> RenderableType:
    table = Table("role", "node", "zone", "", box=box.SIMPLE_HEAD, show_edge=False)
    for i, node in enumerate(data["replicas"] + data["fallbacks"]):
        role = f"replica {i + 1}" if node in data["replicas"] else "fallback"
        state = Text("up", "green") if data["up"].get(node) else Text("down", "bold red")
        table.add_row(role, Text(node, node_style(node)), data["zones"][node], state)
    head = Text(
        f"{data['keyspace']}/{data['key']}: token {data['token']}, "
        f"first token clockwise owned by {data['owner']}"
    )
    if not data["fallbacks"]:
        return Group(head, table, Text("no fallbacks: every node is a replica of this key", style="dim"))
    note = Text("a write whose replica is down goes to the first healthy fallback, with a hint", style="dim")
    return Group(head, table, note)


def render_clock(data: dict[str, Any]) -> RenderableType:
    table = Table("node", "holds as", "dot", "clock", "value", box=box.SIMPLE_HEAD, show_edge=False)
    for node, versions in data["replicas"].items():
        label = Text(node, node_style(node))
        holder = data["holders"].get(node, "replica")
        if node in data.get("down", ()):
            table.add_row(label, Text("down", "bold red"), "", "", "")
        elif not versions:
            table.add_row(label, holder, "", "", Text("(nothing)", "dim"))
        for v in versions or []:
            if "counter" in v:
                parts = ", ".join(f"{a} P{e['p']} N{e['n']}" for a, e in v["entries"].items())
                table.add_row(label, holder, "", "", f"counter {v['counter']} ({parts})")
                continue
            value = Text("(tombstone)", "dim") if v["tombstone"] else Text(show_value(v["value"]))
            table.add_row(label, holder, f"{v['dot'][0]}:{v['dot'][1]}", show_clock(v["clock"]), value)
    words = {
        "equal": "=",
        "descends": "descends from",
        "precedes": "is older than",
        "concurrent": "∥ concurrent with",
    }
    rel = [Text(f"{r['a']} {words[r['relation']]} {r['b']}") for r in data["relations"]]
    return Group(table, *rel)


def render_hints(data: dict[str, Any]) -> RenderableType:
    if not data["queues"]:
        return Text("no hints pending", style="dim")
    table = Table("holder", "for", "count", "oldest", box=box.SIMPLE_HEAD, show_edge=False)
    for q in data["queues"]:
        table.add_row(
            Text(q["holder"], node_style(q["holder"])),
            Text(q["target"], node_style(q["target"])),
            str(q["count"]),
            f"{q['oldest_s']:.1f}s",
        )
    return table


def render_metrics(data: dict[str, Any]) -> RenderableType:
    table = Table(
        "op", "level", "count", "success", "p50 ms", "p99 ms", "max ms", box=box.SIMPLE_HEAD, show_edge=False
    )
    for op, levels in data["ops"].items():
        for level, s in levels.items():
            table.add_row(
                op,
                level,
                str(s["count"]),
                f"{100 * s['success']:.1f}%",
                f"{s['p50_ms']:.2f}",
                f"{s['p99_ms']:.2f}",
                f"{s['max_ms']:.2f}",
            )
    h = data["hints"]
    summary = Text(
        f"stale reads {data['stale_reads']}  read repairs {data['read_repairs']}  "
        f"hints pending {h['pending']} "
        f"(oldest {h['oldest_s']:.1f}s, stored {h['stored']}, delivered {h['delivered']})"
    )
    parts: list[RenderableType] = [table, summary]
    ae = data.get("anti_entropy")
    if ae:
        parts.append(
            Text(
                f"anti-entropy sessions {ae['sessions']}  keys repaired {ae['keys_repaired']}  "
                f"tombstones reaped {ae['tombstones_reaped']}  "
                f"oldest range repair {_repair_age(ae.get('repair_age', {}))}"
            )
        )
    if data.get("storage"):
        disk = Table(
            "node", "disk", "sstables", "backlog", "wal", "memtable", box=box.SIMPLE_HEAD, show_edge=False
        )
        for node, s in data["storage"].items():
            disk.add_row(
                Text(node, node_style(node)),
                _bytes(s["disk_bytes"]),
                str(s["sstables"]),
                str(s["compaction_backlog"]),
                _bytes(s["wal_bytes"]),
                _bytes(s["memtable_bytes"]),
            )
        parts.append(disk)
    return Group(*parts)


def _repair_age(per_node: dict[str, Any]) -> str:
    never = sum(r["never"] for r in per_node.values())
    ages = [r["oldest_s"] for r in per_node.values() if r["oldest_s"] is not None]
    oldest = f"{max(ages):.1f}s ago" if ages else "none yet"
    return oldest + (f" ({never} ranges never repaired)" if never else "")


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def render_help(data: dict[str, Any]) -> RenderableType:
    if "commands" in data:
        table = Table("command", "what it does", box=box.SIMPLE, show_edge=False)
        for c in data["commands"]:
            table.add_row(Text(c["usage"], "bold"), c["summary"])
        return Group(table, Text("help CMD shows examples", style="dim"))
    parts: list[RenderableType] = [Text(data["usage"], "bold"), Text(data["summary"])]
    parts += [Text(f"  {ex}", "cyan") for ex in data["examples"]]
    return Group(*parts)


def _line(fmt: str) -> Any:
    return lambda d: Text(fmt.format(**d))


RENDERERS: dict[str, Any] = {
    "status": render_status,
    "ring": render_ring,
    "prefs": render_prefs,
    "clock": render_clock,
    "hints": render_hints,
    "metrics": render_metrics,
    "help": render_help,
    "partition": lambda d: Text(
        "partitioned: " + " | ".join("{" + ", ".join(g) + "}" for g in d["groups"]), "yellow"
    ),
    "heal": lambda d: Text("healed: every node can reach every other", "green"),
    "kill": lambda d: Text(f"killed {d['node']}" if d["changed"] else f"{d['node']} was already down", "red"),
    "revive": lambda d: Text(
        f"revived {d['node']}" if d["changed"] else f"{d['node']} was already up", "green"
    ),
    "delay": lambda d: Text(
        f"{d['node']}: +{d['ms']:g} ms on every message" if d["ms"] else f"{d['node']}: no delay"
    ),
    "sleep": _line("slept {seconds:g}s"),
    "wait": _line("converged after {waited_s:g}s"),
    "trace": lambda d: Text(f"tracing {'on' if d['trace'] else 'off'}"),
    "consistency": _line("consistency {level}"),
    "output": _line("output {output}"),
    "quit": lambda d: Text("bye"),
    "keyspace": lambda d: render_keyspaces(d),
    **views_ops.RENDERERS,
}


def render_keyspaces(d: dict[str, Any]) -> RenderableType:
    if "keyspaces" not in d:
        verb = "created" if d["created"] else "exists"
        return Text(f"keyspace {d['name']} {verb}: policy={d['policy']} n={d['n']} quorum={d['quorum']}")
    table = Table("keyspace", "policy", "n", "quorum", box=box.SIMPLE_HEAD, show_edge=False)
    for k in d["keyspaces"]:
        table.add_row(k["name"], k["policy"], str(k["n"]), k["quorum"])
    return table


def print_reply(console: Console, reply: Reply, output: str) -> None:
    if output == "json":
        console.file.write(json.dumps(reply.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n")
        console.file.flush()
    else:
        console.print(render(reply))
        console.file.flush()
