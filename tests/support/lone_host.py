"""A node host alone on its ring (one node, memory store, default config), whose messages go
nowhere: what tests of how one host runs requests start from."""

from __future__ import annotations

from bhandar_cli.core.membership import Ring
from bhandar_cli.core.model import MemoryStore, NodeConfig
from bhandar_cli.host import NodeHost


def lone_node_host() -> NodeHost:
    return NodeHost(
        name="A",
        zone="z1",
        ring=Ring.build(["A"], 8),
        store=MemoryStore(),
        config=NodeConfig(),
        seed=1,
        send=lambda *_: None,
    )
