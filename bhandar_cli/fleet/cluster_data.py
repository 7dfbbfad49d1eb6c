"""A cluster's data directory, holding one directory per node (DIR/data of a process cluster, an
in-process cluster's --data-dir): which nodes it holds, whether starting N nodes on it would fit,
and setting aside the directory of a node that left the ring."""

from __future__ import annotations

import os

from bhandar_cli.host import node_names

LEFT_SUFFIX = ".left"  # a node that left the ring: its directory renamed, its data kept


def stored_nodes(base: str) -> list[str]:
    """The nodes whose stores an in-process cluster's --data-dir holds (not those that left)."""
    if not os.path.isdir(base):
        return []
    return sorted(
        entry.name
        for entry in os.scandir(base)
        if entry.is_dir() and "." not in entry.name and os.path.exists(os.path.join(entry.path, "MANIFEST"))
    )


def node_set_mismatch(base: str, nodes: int, where: str, grow_hint: str) -> str | None:
    """Why starting `nodes` nodes (A, B, ...) on the data under `base` would be wrong, or None.

    The stored membership would keep nodes not started in the ring (owning ranges, collecting
    hints) with nobody running them, and a node the data does not know would start empty and own
    ranges it never received. `where` names the directory for the message; `grow_hint` says how
    nodes added later are started again."""
    stored, wanted = stored_nodes(base), node_names(nodes)
    if not stored or stored == wanted:
        return None
    said = f"{where} holds the data of {len(stored)} nodes ({', '.join(stored)})"
    missing = [n for n in stored if n not in wanted]
    new = [n for n in wanted if n not in stored]
    if missing:
        said += f"; --nodes {nodes} would leave {', '.join(missing)} in the ring with nobody running them"
    if new:
        said += f"; --nodes {nodes} would start {', '.join(new)} with no data"
    if stored == node_names(len(stored)):
        return said + f": start it with --nodes {len(stored)}, or use another directory"
    return said + f": {grow_hint}, or use another directory"


def retire_node_dir(base: str, node: str) -> None:
    """Set aside the directory of a node that left the ring, so the next start does not count it
    as a member (stored_nodes): NODE.left, NODE.left2, ..."""
    source = os.path.join(base, node)
    if not os.path.isdir(source):
        return
    target, n = source + LEFT_SUFFIX, 1
    while os.path.exists(target):
        n += 1
        target = f"{source}{LEFT_SUFFIX}{n}"
    os.replace(source, target)
