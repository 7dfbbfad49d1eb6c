"""The seed's four simulators, ported exactly: one entry point per simulator.

Each simulator lives in its own module (`seed_ring`, `seed_quorum`, `seed_versions`,
`seed_ministore`) with three functions: `simulate_*` computes a plain result from parameters,
`render_*` prints the seed's table byte for byte, and `*_json` gives the same figures as a JSON
object. `seed_js` holds the JavaScript number semantics they share. This module only gathers
them so callers have one import.
"""

from __future__ import annotations

from bhandar_cli.sim.seeds.seed_ministore import (
    MinistoreResult,
    ministore_json,
    render_ministore,
    simulate_ministore,
)
from bhandar_cli.sim.seeds.seed_quorum import QuorumResult, quorum_json, render_quorum, simulate_quorum
from bhandar_cli.sim.seeds.seed_ring import RingResult, render_ring, ring_json, simulate_ring
from bhandar_cli.sim.seeds.seed_versions import (
    VersionsResult,
    render_versions,
    simulate_versions,
    versions_json,
)

__all__ = [
    "MinistoreResult",
    "QuorumResult",
    "RingResult",
    "VersionsResult",
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
