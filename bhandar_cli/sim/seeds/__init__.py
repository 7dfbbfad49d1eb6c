"""The seed's four teaching simulators, ported exactly from JavaScript."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.sim.seeds.seed_ministore import ministore_json, render_ministore, simulate_ministore
    from bhandar_cli.sim.seeds.seed_quorum import quorum_json, render_quorum, simulate_quorum
    from bhandar_cli.sim.seeds.seed_ring import render_ring, ring_json, simulate_ring
    from bhandar_cli.sim.seeds.seed_versions import render_versions, simulate_versions, versions_json

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "ministore_json",
    "quorum_json",
    "render_ministore",
    "render_quorum",
    "render_ring",
    "render_versions",
    "ring_json",
    "simulate_ministore",
    "simulate_quorum",
    "simulate_ring",
    "simulate_versions",
    "versions_json",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "ministore_json": "seed_ministore",
            "quorum_json": "seed_quorum",
            "render_ministore": "seed_ministore",
            "render_quorum": "seed_quorum",
            "render_ring": "seed_ring",
            "render_versions": "seed_versions",
            "ring_json": "seed_ring",
            "simulate_ministore": "seed_ministore",
            "simulate_quorum": "seed_quorum",
            "simulate_ring": "seed_ring",
            "simulate_versions": "seed_versions",
            "versions_json": "seed_versions",
        },
    )
