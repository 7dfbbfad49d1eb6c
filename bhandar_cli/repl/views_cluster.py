"""Rich views of what the cluster looks like: status, ring, preference lists, per-replica clocks,
hint queues and metrics. Rendering only."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Column, Table
from rich.text import Text

from bhandar_cli.client import DOWN, LEFT, PARTITIONED, SUSPECTED, UP
from bhandar_cli.core.model import count as counted
from bhandar_cli.core.model import show_clock
from bhandar_cli.repl.views_data import node_style, show_value

UNBOUNDED = 10_000  # columns: wide enough to measure a table at its natural width
_SPLIT_WIDE = ContextVar("split_wide_tables", default=True)


@contextmanager
def one_table_each() -> Iterator[None]:
    """Within it, a table too wide for its width stays one table (cells cut) rather than two one
    above the other: for the web page's log, whose box is shorter than it is wide, where two
    tables would push the newest reply out of sight."""
    token = _SPLIT_WIDE.set(False)
    try:
        yield
    finally:
        _SPLIT_WIDE.reset(token)


STATE_STYLES = {DOWN: "bold red", SUSPECTED: "yellow", PARTITIONED: "yellow", LEFT: "dim", UP: "green"}


def state_text(state: str) -> Text:
    """A node's state word (cluster_health's vocabulary), coloured; the word says it all alone."""
    return Text(state, style=STATE_STYLES.get(state, "cyan"))


class WholeHeadings:
    """A table of many columns that keeps its headings whole: all the columns in one table when it
    fits the width it is given, else its columns in two tables one above the other (each led by
    `key`), so a 50-column terminal reads `sees down`, not `s…`."""

    def __init__(self, headings: list[str], rows: list[list[RenderableType]], key: int, split: int) -> None:
        self.headings, self.rows, self.key, self.split = headings, rows, key, split

    def _table(self, columns: list[int], narrow: bool = False, whole: bool = True) -> Table:
        # A heading never wraps or shrinks (`whole`): a narrow column wraps its cells instead.
        # Narrow tables pad on the right only, two spaces between columns rather than three.
        headings = (
            Column(self.headings[i], min_width=len(self.headings[i]) if whole else None) for i in columns
        )
        padding = (0, 1, 0, 0) if narrow else (0, 1)
        table = Table(*headings, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=padding)
        for row in self.rows:
            table.add_row(*(row[i] for i in columns))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        whole = self._table(list(range(len(self.headings))))
        natural = Measurement.get(console, options.update_width(UNBOUNDED), whole).maximum  # unclamped
        if natural <= options.max_width:
            yield whole
            return
        if not _SPLIT_WIDE.get():  # one table, as short as it can be: its cells and headings cut
            yield self._table(list(range(len(self.headings))), whole=False)
            return
        first = list(range(self.split))
        yield self._table(first, narrow=True)
        rest = [self.key, *(i for i in range(self.split, len(self.headings)) if i != self.key)]
        yield self._table(rest, narrow=True)


def render_status(data: dict[str, Any]) -> RenderableType:
    headings = ["state", "node", "zone", "tokens", "owns", "keys", "hints", "sees down"]
    headings.append("config")  # the configuration version each node runs: a rollout's progress
    wire = any(n.get("protocol") for n in data["nodes"])  # node processes speak a wire protocol
    if wire:
        headings.append("protocol")
    rows: list[list[RenderableType]] = []
    moving: list[str] = []
    for n in data["nodes"]:
        if n.get("status") == "left":
            continue
        streams = n.get("streams") or {}
        for s in streams.get("inbound", []) if n.get("status") == "joining" else []:
            moving.append(f"{n['id']} <- {s['from']}: {s['received']}/{s['total'] or '?'} records")
        for s in streams.get("outbound", []) if n.get("status") == "leaving" else []:
            moving.append(f"{n['id']} -> {s['to']}: {s['sent']}/{s['total']} records")
        rows.append(
            [
                state_text(n["state"]),
                Text(n["id"], style=node_style(n["id"])),
                n["zone"],
                str(n["tokens"]),
                f"{100 * n['owns']:.1f}%",
                str(n.get("keys", "")) if n["up"] else "-",
                str(n.get("hints", "")) if n["up"] else "-",
                ", ".join(n.get("sees_down", [])) if n["up"] else "-",
                f"v{n['config']}" if n.get("config") is not None else "-",
                *([str(n.get("protocol") or "-")] if wire else []),
            ]
        )
    # Too narrow for one table: where the ring is shared (state .. owns), then what each node holds.
    table = WholeHeadings(headings, rows, key=1, split=5)
    parts: list[RenderableType] = [table]
    parts += [Text(f"{n['id']} {n['crashed']}", "bold red") for n in data["nodes"] if n.get("crashed")]
    parts += [Text(f"{n['id']} {c}", "yellow") for n in data["nodes"] for c in n.get("conditions", [])]
    parts += [Text(f"streaming {line}", "yellow") for line in moving]
    for n in data["nodes"]:
        over = n.get("siblings_over_limit") or {}
        if over.get("count"):
            keys = ", ".join(f"{k['keyspace']}/{k['key']} ({k['siblings']})" for k in over["keys"])
            unlisted = over["count"] - len(over["keys"])
            more = f" and {unlisted} more" if unlisted > 0 else ""
            parts.append(
                Text(
                    f"{n['id']}: {counted(over['count'], 'key')} over the sibling limit of {over['limit']} "
                    f"(merges keep every sibling): {keys}{more}",
                    "yellow",
                )
            )
    parts += [Text(f"the nodes disagree: {line}", "yellow") for line in data["summary"].get("disagree", [])]
    parts.append(Text(data["summary"]["line"]))
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
        # Around the middle cell ((n - 1) / 2), so the circle is symmetric: around n / 2 its bottom
        # point rounded one row below the rest (a stray letter under the ring).
        x = round((width - 1) / 2 + 2 * radius * math.sin(angle))
        y = round((height - 1) / 2 - radius * math.cos(angle))
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
    relations = data["relations"]
    if len(relations) > 1 and all(r["relation"] == "equal" for r in relations):
        nodes = sorted({n for r in relations for n in (r["a"], r["b"])})
        hints = [n for n in nodes if data["holders"].get(n) == "hint"]
        down = list(data.get("down", ()))
        if not hints and not down:
            return Group(table, Text(f"{' = '.join(nodes)}: every replica holds the same versions"))
        # A hint is not a replica, and a replica that is down was not asked: say what was compared.
        notes = [f"{', '.join(hints)} as a hint"] if hints else []
        notes += [f"{', '.join(down)} down, not asked"] if down else []
        return Group(table, Text(f"{' = '.join(nodes)}: the same versions ({'; '.join(notes)})"))
    rel = [Text(f"{r['a']} {words[r['relation']]} {r['b']}") for r in relations]
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
    """The parts the reply holds (`metrics show=PART` keeps one)."""
    parts: list[RenderableType] = []
    if "ops" in data:
        columns = ("op", "level", "count", "success", "p50 ms", "p99 ms", "max ms")
        table = Table(*columns, box=box.SIMPLE_HEAD, show_edge=False)
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
        parts.append(table)
    if "hints" in data:
        h = data["hints"]
        parts.append(
            Text(
                f"stale reads {data['stale_reads']}  read repairs {data['read_repairs']}  "
                f"hints pending {h['pending']} "
                f"(oldest {h['oldest_s']:.1f}s, stored {h['stored']}, delivered {h['delivered']})"
            )
        )
    ae = data.get("anti_entropy")
    if ae:
        parts.append(
            Text(
                f"anti-entropy sessions {ae['sessions']}  keys repaired {ae['keys_repaired']}  "
                f"tombstones reaped {ae['tombstones_reaped']}  "
                f"oldest range repair {_repair_age(ae.get('repair_age', {}), ae.get('ranges'))}"
            )
        )
    if data.get("storage"):
        disk = Table(
            "node",
            "disk",
            "sstables",
            "backlog",
            "wal",
            "memtable",
            "wal archive",
            box=box.SIMPLE_HEAD,
            show_edge=False,
        )
        for node, s in data["storage"].items():
            disk.add_row(
                Text(node, node_style(node)),
                _bytes(s["disk_bytes"]),
                str(s["sstables"]),
                str(s["compaction_backlog"]),
                _bytes(s["wal_bytes"]),
                _bytes(s["memtable_bytes"]),
                f"{_bytes(s.get('archived_wal_bytes', 0))} for {s.get('archives', 0)}",
            )
        parts.append(disk)
    return Group(*parts)


def _repair_age(per_node: dict[str, Any], ranges: int | None) -> str:
    """The oldest repair, and how many range replicas (a node's copy of a keyspace's token range:
    each range counts once per replica) were never compared, out of how many."""
    never = sum(r["never"] for r in per_node.values())
    copies = sum(r["ranges"] for r in per_node.values())
    ages = [r["oldest_s"] for r in per_node.values() if r["oldest_s"] is not None]
    oldest = f"{max(ages):.1f}s ago" if ages else "none yet"
    if not never:
        return oldest
    of = f" ({ranges} keyspace ranges, each on its replicas)" if ranges else ""
    return f"{oldest}; {never} of {copies} range replicas never compared{of}"


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)
