"""The storage engine's disk layer: the `Disk` interface, the real disk and the simulated disk of
crash tests. (The thread a node runs its fsyncs on is node/sync_worker.py; the data directory's
lock is store/data_dir_lock.py.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.storage.disk.interface import AppendFile, Disk, ReadFile, join, write_file_atomically
    from bhandar_cli.storage.disk.real_disk import RealDisk
    from bhandar_cli.storage.disk.sim_disk import SimDisk, SimulatedCrash

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "AppendFile",
    "Disk",
    "ReadFile",
    "RealDisk",
    "SimDisk",
    "SimulatedCrash",
    "join",
    "write_file_atomically",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "AppendFile": "interface",
            "Disk": "interface",
            "ReadFile": "interface",
            "RealDisk": "real_disk",
            "SimDisk": "sim_disk",
            "SimulatedCrash": "sim_disk",
            "join": "interface",
            "write_file_atomically": "interface",
        },
    )
