"""The core's record store on the LSM engine: the records' encoding on disk, and opening a
node's data directory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.store.data_dir import (
        LOCATION,
        DataDirInUse,
        RestoreSummary,
        open_node_store,
        restore_node_dir,
        restore_summary,
        snapshot_home,
        snapshot_path,
        verify_snapshot,
    )
    from bhandar_cli.store.record_store import RecordStore

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "LOCATION",
    "DataDirInUse",
    "RecordStore",
    "RestoreSummary",
    "open_node_store",
    "restore_node_dir",
    "restore_summary",
    "snapshot_home",
    "snapshot_path",
    "verify_snapshot",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "DataDirInUse": "data_dir",
            "LOCATION": "data_dir",
            "RecordStore": "record_store",
            "RestoreSummary": "data_dir",
            "open_node_store": "data_dir",
            "restore_node_dir": "data_dir",
            "restore_summary": "data_dir",
            "snapshot_home": "data_dir",
            "snapshot_path": "data_dir",
            "verify_snapshot": "data_dir",
        },
    )
