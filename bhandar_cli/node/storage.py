"""Opening a node's durable store in its data directory (the LSM engine on the real disk)."""

from __future__ import annotations

from bhandar_cli.core.store import MemoryStore, Store


def open_node_store(data_dir: str, fsync: str = "batch") -> Store:
    """The store of one node. Until the LSM adapter lands this is in memory (not durable)."""
    del data_dir, fsync
    return MemoryStore()
