"""`bhandar check`: run anyone's nodes (Maelstrom's protocol) under Bhandar's faults and checkers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.check.bench import HopRunFailed, checker_bench, harness_bench
    from bhandar_cli.check.catalog import CONSISTENCY_MODELS, KINDS, WORKLOADS, scenarios
    from bhandar_cli.check.check_report import curve_line, render, render_table, repeat_command, to_json
    from bhandar_cli.check.check_run import CheckOptions, default_timeout, run_check
    from bhandar_cli.check.checklist import run_checklist
    from bhandar_cli.check.html import checklist_page, page
    from bhandar_cli.check.sweep import SweepResult, SweepSeed, run_sweep, sweep_json

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "CONSISTENCY_MODELS",
    "KINDS",
    "WORKLOADS",
    "CheckOptions",
    "HopRunFailed",
    "SweepResult",
    "SweepSeed",
    "checker_bench",
    "checklist_page",
    "curve_line",
    "default_timeout",
    "harness_bench",
    "page",
    "render",
    "render_table",
    "repeat_command",
    "run_check",
    "run_checklist",
    "run_sweep",
    "scenarios",
    "sweep_json",
    "to_json",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "CONSISTENCY_MODELS": "catalog",
            "CheckOptions": "check_run",
            "HopRunFailed": "bench",
            "KINDS": "catalog",
            "SweepResult": "sweep",
            "SweepSeed": "sweep",
            "WORKLOADS": "catalog",
            "checker_bench": "bench",
            "checklist_page": "html",
            "curve_line": "check_report",
            "default_timeout": "check_run",
            "harness_bench": "bench",
            "page": "html",
            "render": "check_report",
            "render_table": "check_report",
            "repeat_command": "check_report",
            "run_check": "check_run",
            "run_checklist": "checklist",
            "run_sweep": "sweep",
            "scenarios": "catalog",
            "sweep_json": "sweep",
            "to_json": "check_report",
        },
    )
