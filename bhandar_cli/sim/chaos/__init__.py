"""Chaos runs: a seeded workload under faults against a simulated cluster, then the checker."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.sim.chaos.chaos_options import (
        OPS_MAX,
        SEED_MAX,
        ChaosOptions,
        options_from_flags,
        parse_fraction,
        parse_int,
    )
    from bhandar_cli.sim.chaos.chaos_run import run_chaos
    from bhandar_cli.sim.chaos.ministore_scenario import (
        DEFAULT_REQUESTS,
        DEFAULT_SEED,
        ministore_scenario_json,
        render_ministore_scenario,
        run_ministore_scenario,
    )
    from bhandar_cli.sim.chaos.report import render_summary, render_timing, report_json, reproduce_command
    from bhandar_cli.sim.chaos.report_html import render_html
    from bhandar_cli.sim.chaos.swarm import SeedOutcome, SwarmResult, run_swarm, swarm_command, swarm_json

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "DEFAULT_REQUESTS",
    "DEFAULT_SEED",
    "OPS_MAX",
    "SEED_MAX",
    "ChaosOptions",
    "SeedOutcome",
    "SwarmResult",
    "ministore_scenario_json",
    "options_from_flags",
    "parse_fraction",
    "parse_int",
    "render_html",
    "render_ministore_scenario",
    "render_summary",
    "render_timing",
    "report_json",
    "reproduce_command",
    "run_chaos",
    "run_ministore_scenario",
    "run_swarm",
    "swarm_command",
    "swarm_json",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "ChaosOptions": "chaos_options",
            "DEFAULT_REQUESTS": "ministore_scenario",
            "DEFAULT_SEED": "ministore_scenario",
            "OPS_MAX": "chaos_options",
            "SEED_MAX": "chaos_options",
            "SeedOutcome": "swarm",
            "SwarmResult": "swarm",
            "ministore_scenario_json": "ministore_scenario",
            "options_from_flags": "chaos_options",
            "parse_fraction": "chaos_options",
            "parse_int": "chaos_options",
            "render_html": "report_html",
            "render_ministore_scenario": "ministore_scenario",
            "render_summary": "report",
            "render_timing": "report",
            "report_json": "report",
            "reproduce_command": "report",
            "run_chaos": "chaos_run",
            "run_ministore_scenario": "ministore_scenario",
            "run_swarm": "swarm",
            "swarm_command": "swarm",
            "swarm_json": "swarm",
        },
    )
