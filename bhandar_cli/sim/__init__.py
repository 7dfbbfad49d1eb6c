"""Deterministic simulation: the seed's simulators, a seeded event loop and the chaos checker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.sim.dask_pool import DaskPool, DaskUnavailable, parse_scheduler, seed_ranges
    from bhandar_cli.sim.history import (
        FAULT_COLOURS,
        STYLE,
        WRITES,
        CheckResult,
        History,
        Operation,
        Violation,
    )
    from bhandar_cli.sim.scale import render_scale, run_scale
    from bhandar_cli.sim.sim_cluster import SimCluster

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "FAULT_COLOURS",
    "STYLE",
    "WRITES",
    "CheckResult",
    "DaskPool",
    "DaskUnavailable",
    "History",
    "Operation",
    "SimCluster",
    "Violation",
    "parse_scheduler",
    "render_scale",
    "run_scale",
    "seed_ranges",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "CheckResult": "history",
            "DaskPool": "dask_pool",
            "DaskUnavailable": "dask_pool",
            "FAULT_COLOURS": "history",
            "History": "history",
            "Operation": "history",
            "STYLE": "history",
            "SimCluster": "sim_cluster",
            "Violation": "history",
            "WRITES": "history",
            "parse_scheduler": "dask_pool",
            "render_scale": "scale",
            "run_scale": "scale",
            "seed_ranges": "dask_pool",
        },
    )
