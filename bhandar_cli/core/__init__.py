"""The sans-I/O core: plain synchronous logic, handed `now` and a `random.Random`.

By concept, each sub-package importing only those before it: model/ (records, versions, values,
configuration, errors, the store interface), protocol/ (messages and effects), membership/ (the
ring, gossip, failure detection), repair/ (Merkle trees, anti-entropy), roles/ (what a node does).
node.py wires the roles into one node and is the only surface a driver uses; node_views.py and
wire.py read across all of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.core.node import Node, NodeBoot
    from bhandar_cli.core.node_views import HintQueueRow, NodeInfo, oldest_hint_age
    from bhandar_cli.core.wire import from_wire, readable_at, to_wire, to_wire_at

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "HintQueueRow",
    "Node",
    "NodeBoot",
    "NodeInfo",
    "from_wire",
    "oldest_hint_age",
    "readable_at",
    "to_wire",
    "to_wire_at",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "HintQueueRow": "node_views",
            "Node": "node",
            "NodeBoot": "node",
            "NodeInfo": "node_views",
            "from_wire": "wire",
            "oldest_hint_age": "node_views",
            "readable_at": "wire",
            "to_wire": "wire",
            "to_wire_at": "wire",
        },
    )
