"""How the checker's findings name a write's dot and a value (one wording in every violation)."""

from __future__ import annotations

from bhandar_cli.core.model.versions import Dot


def dot_text(dot: Dot) -> str:
    return f"{dot[0]}:{dot[1]}"


def show_value(value: bytes | None) -> str:
    """A value as the workload wrote it (its values are text), or `tombstone`."""
    return "tombstone" if value is None else value.decode("utf-8", "replace")
