"""Rich view of the `hot` command: the keys clients ask for most, their replicas, and the load
they put on each node. Rendering only."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from bhandar_cli.repl.views_data import node_style


def _shares(shares: dict[str, float]) -> Text:
    text = Text()
    for i, (node, share) in enumerate(sorted(shares.items())):
        if i:
            text.append(" ")
        text.append(node, style=node_style(node))
        text.append(f" {100 * share:.0f}%")
    return text


def render_hot(data: dict[str, Any]) -> RenderableType:
    head = Text(f"{data['total_rate']:g} client requests/s in all (rates decay over ~{data['window_s']:g} s)")
    if not data["keys"]:
        return Group(head, Text("no requests yet", style="dim"))
    table = Table("keyspace", "key", "req/s", "share", "replicas", "entered at", box=box.SIMPLE_HEAD)
    for entry in data["keys"]:
        replicas = Text(" ").join(Text(r, style=node_style(r)) for r in entry["replicas"])
        table.add_row(
            entry["keyspace"],
            entry["key"],
            f"{entry['rate']:g}",
            f"{100 * entry['share']:.1f}%",
            replicas,
            _shares(entry["nodes"]),
        )
    load = Text("replica load of these keys: ").append_text(_shares(data["replica_load"]))
    return Group(head, table, load)
