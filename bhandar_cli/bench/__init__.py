"""Benchmarks, each beside a baseline measured in the same run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.bench.big_values import BigBench
    from bhandar_cli.bench.cli_bench import bytecode_cached, run_cli_bench
    from bhandar_cli.bench.compaction_bench import run_compaction_bench
    from bhandar_cli.bench.etcd_side_by_side import OPS, SIDES, etcd_binary, run_etcd_bench
    from bhandar_cli.bench.loop_baseline import bare_loop_rate
    from bhandar_cli.bench.repair_bench import run_repair_bench
    from bhandar_cli.bench.security_bench import SECURITY_SIDES, run_flood_bench, run_security_bench
    from bhandar_cli.bench.storage_bench import run_storage_bench
    from bhandar_cli.bench.throughput import run_bench

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "OPS",
    "SECURITY_SIDES",
    "SIDES",
    "BigBench",
    "bare_loop_rate",
    "bytecode_cached",
    "etcd_binary",
    "run_bench",
    "run_cli_bench",
    "run_compaction_bench",
    "run_etcd_bench",
    "run_flood_bench",
    "run_repair_bench",
    "run_security_bench",
    "run_storage_bench",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "BigBench": "big_values",
            "OPS": "etcd_side_by_side",
            "SECURITY_SIDES": "security_bench",
            "SIDES": "etcd_side_by_side",
            "bare_loop_rate": "loop_baseline",
            "bytecode_cached": "cli_bench",
            "etcd_binary": "etcd_side_by_side",
            "run_bench": "throughput",
            "run_cli_bench": "cli_bench",
            "run_compaction_bench": "compaction_bench",
            "run_etcd_bench": "etcd_side_by_side",
            "run_flood_bench": "security_bench",
            "run_repair_bench": "repair_bench",
            "run_security_bench": "security_bench",
            "run_storage_bench": "storage_bench",
        },
    )
