"""Colours shared by the views: each node keeps one colour everywhere."""

from __future__ import annotations

NODE_STYLES = ["cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta"]


def node_style(name: str) -> str:
    return NODE_STYLES[(ord(name[0]) - ord("A")) % len(NODE_STYLES)] if name else "white"
