"""Rich views of the session's own commands: help, trace, consistency, output, sleep, wait, web, quit.
Rendering only."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text


def render_help(data: dict[str, Any]) -> RenderableType:
    if "commands" in data:
        table = Table("command", "what it does", box=box.SIMPLE, show_edge=False)
        for c in data["commands"]:
            table.add_row(Text(c["usage"], "bold"), c["summary"])
        return Group(table, Text("help CMD shows examples", style="dim"))
    parts: list[RenderableType] = [Text(data["usage"], "bold"), Text(data["summary"])]
    if data.get("help"):
        parts.append(Text(data["help"], "dim"))
    if data.get("aliases"):
        parts.append(Text(f"also: {', '.join(data['aliases'])}", "dim"))
    parts += [Text(f"  {ex}", "cyan") for ex in data["examples"]]
    return Group(*parts)


def render_trace(data: dict[str, Any]) -> RenderableType:
    return Text(f"tracing {'on' if data['trace'] else 'off'}")


def render_consistency(data: dict[str, Any]) -> RenderableType:
    return Text(f"consistency {data['level']}")


def render_output(data: dict[str, Any]) -> RenderableType:
    return Text(f"output {data['output']}")


def render_sleep(data: dict[str, Any]) -> RenderableType:
    return Text(f"slept {data['seconds']:g}s")


def render_wait(data: dict[str, Any]) -> RenderableType:
    return Text(f"converged after {data['waited_s']:g}s")


def render_quit(data: dict[str, Any]) -> RenderableType:
    return Text("bye")


def render_web(data: dict[str, Any]) -> RenderableType:
    lines = [Text(f"web view {'already ' if data.get('already') else ''}at {data['url']}", "green")]
    if not data["trace"]:
        lines.append(Text("trace is off: `trace on` lets the page draw each request's messages", "dim"))
    return Group(*lines)
