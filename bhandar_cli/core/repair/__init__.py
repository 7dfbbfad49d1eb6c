"""Replicas agreeing again: Merkle trees, the hash index, anti-entropy, reaping, damage."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.core.repair.antientropy import (
        AntiEntropy,
        RepairDone,
        RepairFetch,
        RepairFetchReply,
        RepairProbe,
        RepairProbeReply,
        RepairPush,
    )
    from bhandar_cli.core.repair.damage_repair import DamageRepair
    from bhandar_cli.core.repair.hash_index import HashIndex
    from bhandar_cli.core.repair.indexed_store import IndexedStore
    from bhandar_cli.core.repair.merkle import EMPTY_HASH, HashProbe, MerkleTree, as_hash
    from bhandar_cli.core.repair.merkle_diff import diff, render_lines
    from bhandar_cli.core.repair.reaping import TombstoneReaper
    from bhandar_cli.core.repair.repair_transfer import fitting
    from bhandar_cli.core.repair.unrepaired import Unrepaired

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "EMPTY_HASH",
    "AntiEntropy",
    "DamageRepair",
    "HashIndex",
    "HashProbe",
    "IndexedStore",
    "MerkleTree",
    "RepairDone",
    "RepairFetch",
    "RepairFetchReply",
    "RepairProbe",
    "RepairProbeReply",
    "RepairPush",
    "TombstoneReaper",
    "Unrepaired",
    "as_hash",
    "diff",
    "fitting",
    "render_lines",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "AntiEntropy": "antientropy",
            "DamageRepair": "damage_repair",
            "EMPTY_HASH": "merkle",
            "HashIndex": "hash_index",
            "HashProbe": "merkle",
            "IndexedStore": "indexed_store",
            "MerkleTree": "merkle",
            "RepairDone": "antientropy",
            "RepairFetch": "antientropy",
            "RepairFetchReply": "antientropy",
            "RepairProbe": "antientropy",
            "RepairProbeReply": "antientropy",
            "RepairPush": "antientropy",
            "TombstoneReaper": "reaping",
            "Unrepaired": "unrepaired",
            "as_hash": "merkle",
            "diff": "merkle_diff",
            "fitting": "repair_transfer",
            "render_lines": "merkle_diff",
        },
    )
