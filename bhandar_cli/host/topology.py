"""Names and zones of a cluster's nodes: A, B, ..., Z, then AA, AB, ...; zones round-robin."""

from __future__ import annotations


def node_name(index: int) -> str:
    """The name of the node at `index` (0 -> A, 25 -> Z, 26 -> AA), like spreadsheet columns."""
    name = ""
    index += 1
    while index:
        index, digit = divmod(index - 1, 26)
        name = chr(ord("A") + digit) + name
    return name


def node_names(count: int) -> list[str]:
    return [node_name(i) for i in range(count)]


def next_node_name(taken: set[str] | list[str]) -> str:
    """The first name in order that no node has used yet (so a retired name is never reused)."""
    used = set(taken)
    index = 0
    while node_name(index) in used:
        index += 1
    return node_name(index)


def zone_map(names: list[str], zones: int) -> dict[str, str]:
    """Zones z1, z2, ... assigned round-robin."""
    return {name: f"z{i % max(zones, 1) + 1}" for i, name in enumerate(names)}
