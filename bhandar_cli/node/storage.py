"""Opening a node's durable store in its data directory: the LSM engine on the real disk."""

from __future__ import annotations

from bhandar_cli.node.disk import RealDisk
from bhandar_cli.storage.engine import EngineOptions
from bhandar_cli.storage.record_store import RecordStore


def open_node_store(data_dir: str, fsync: str = "batch") -> RecordStore:
    """The store of one node in `data_dir` (created if missing); recovery runs on open."""
    disk = RealDisk()
    disk.makedirs(data_dir)
    return RecordStore(disk, data_dir, EngineOptions(fsync=fsync))
