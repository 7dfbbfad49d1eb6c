"""The storage benchmark runs end to end (tiny and untimed here: rates are for `bhandar bench`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bhandar_cli.node.storage_bench import run_compaction_bench, run_storage_bench


def test_bench_returns_both_sides_and_ratios(tmp_path: Path) -> None:
    r: Any = run_storage_bench(str(tmp_path / "b"), ops=300, value_size=20, seed=1, durable_baseline=True)
    for side in ("engine", "sqlite", "sqlite_full"):
        assert {"puts_per_s", "get_hits_per_s", "get_misses_per_s"} <= set(r[side])
        assert all(r[side][k] > 0 for k in ("puts_per_s", "get_hits_per_s", "get_misses_per_s"))
    assert r["put_ratio"] == pytest.approx(r["engine"]["puts_per_s"] / r["sqlite"]["puts_per_s"])
    assert r["get_ratio"] == pytest.approx(r["engine"]["get_hits_per_s"] / r["sqlite"]["get_hits_per_s"])
    assert r["engine"]["fsyncs"] >= 300 // 64


def test_bench_refuses_a_used_directory(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("mine")
    with pytest.raises(ValueError, match="not empty"):
        run_storage_bench(str(tmp_path), ops=10)


def test_compaction_bench_times_both_halves_of_every_job(tmp_path: Path) -> None:
    from bhandar_cli.storage.compaction import TierPolicy
    from bhandar_cli.storage.engine import EngineOptions

    opts = EngineOptions(memtable_bytes=16 << 10, tiers=TierPolicy(min_tables=3))
    r: Any = run_compaction_bench(str(tmp_path / "c"), total_bytes=300 << 10, value_size=50, options=opts)
    assert r["data_bytes"] >= 300 << 10 and r["tables_before"] >= 1
    assert r["flush_run"]["count"] == r["flush_finish"]["count"] > 5
    full = r["full_compaction"]
    assert full["installed"] and full["tables_after"] == 1
    assert full["run_ms"] > 0 and full["finish_ms"] > 0
