"""The storage benchmark runs end to end (tiny and untimed here: rates are for `bhandar bench`)."""

from __future__ import annotations

import pytest

from bhandar_cli.node.storage_bench import run_storage_bench


def test_bench_returns_both_sides_and_ratios(tmp_path) -> None:
    r = run_storage_bench(str(tmp_path / "b"), ops=300, value_size=20, seed=1, durable_baseline=True)
    for side in ("engine", "sqlite", "sqlite_full"):
        assert {"puts_per_s", "get_hits_per_s", "get_misses_per_s"} <= set(r[side])
        assert all(r[side][k] > 0 for k in ("puts_per_s", "get_hits_per_s", "get_misses_per_s"))
    assert r["put_ratio"] == pytest.approx(r["engine"]["puts_per_s"] / r["sqlite"]["puts_per_s"])
    assert r["get_ratio"] == pytest.approx(r["engine"]["get_hits_per_s"] / r["sqlite"]["get_hits_per_s"])
    assert r["engine"]["fsyncs"] >= 300 // 64


def test_bench_refuses_a_used_directory(tmp_path) -> None:
    (tmp_path / "x").write_text("mine")
    with pytest.raises(ValueError, match="not empty"):
        run_storage_bench(str(tmp_path), ops=10)
