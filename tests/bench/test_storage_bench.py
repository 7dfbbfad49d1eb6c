"""The storage benchmark runs end to end (tiny and untimed here: rates are for `bhandar bench`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bhandar_cli.bench.storage_bench import run_engine_jobs_bench, run_storage_bench
from bhandar_cli.bench.storage_contenders import EngineWorkload


def test_bench_returns_both_sides_their_peak_rss_and_ratios(tmp_path: Path) -> None:
    r: Any = run_storage_bench(
        str(tmp_path / "b"), keys=300, value_size=20, seed=1, durable_baseline=True, leveldb=False
    )
    assert r["keys"] == 300 and "leveldb" not in r
    for side in ("engine", "sqlite", "sqlite_full"):
        for rate in ("puts", "get_hits", "get_misses"):
            assert r[side][f"{rate}_per_s"] > 0 and r[side][f"{rate}_per_cpu_s"] > 0
        # Each side's own process: the interpreter, then the store on top.
        assert 0 < r[side]["rss_start_mb"] <= r[side]["rss_peak_mb"]
    assert r["put_ratio"] == pytest.approx(r["engine"]["puts_per_s"] / r["sqlite"]["puts_per_s"])
    assert r["get_ratio"] == pytest.approx(r["engine"]["get_hits_per_s"] / r["sqlite"]["get_hits_per_s"])
    assert r["engine"]["fsyncs"] >= 300 // 64


def test_workload_keys_are_distinct_hits_present_and_misses_absent() -> None:
    work = EngineWorkload(5000, 10, seed=3)
    put = [k for chunk in work.puts() for k, _ in chunk]
    assert len(put) == len(set(put)) == 5000 and all(len(k) == 21 for k in put)
    hits = [k for chunk in work.hits() for k in chunk]
    assert len(hits) == 5000 and set(hits) <= set(put) and len(set(hits)) > 2500  # spread, not one key
    misses = [k for chunk in work.misses() for k in chunk]
    assert len(set(misses)) == 5000 and not set(misses) & set(put)
    assert [k for chunk in EngineWorkload(5000, 10, seed=3).puts() for k, _ in chunk] == put  # seeded
    assert [k for chunk in EngineWorkload(5000, 10, seed=4).puts() for k, _ in chunk] != put


def test_bench_storage_command_prints_json_with_rss(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bhandar_cli", "bench", "storage", "--keys", "2000", "-o", "json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    assert r["cmd"] == "bench storage" and r["ok"] and r["keys"] == 2000
    for side in ("engine", "sqlite", *(["leveldb"] if "leveldb" in r else [])):
        assert r[side]["rss_peak_mb"] >= r[side]["rss_start_mb"] > 0
        assert r[side]["get_hits_per_s"] > 0
    assert r["get_ratio"] > 0 and r["engine"]["block_cache_misses"] >= 0


def test_bench_storage_encrypt_runs_the_encrypting_engine_beside_the_plain_one(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "bhandar_cli", "bench", "storage", "--keys", "1500", "--encrypt"]
    done = subprocess.run([*cmd, "-o", "json"], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    sealed, plain = r["engine_encrypted"], r["engine"]
    assert sealed["get_hits_per_s"] > 0 and sealed["sstables"] >= 0
    assert r["encrypted_puts_ratio"] == pytest.approx(sealed["puts_per_s"] / plain["puts_per_s"])
    assert r["encrypted_disk_ratio"] >= 1.0  # every sealed unit carries its nonce and tag
    wide = {**os.environ, "COLUMNS": "200"}
    table = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, env=wide)
    assert table.returncode == 0, table.stderr
    assert "engine, encrypted" in table.stdout and "encrypted / plain" in table.stdout


def test_bench_refuses_a_used_directory(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("mine")
    with pytest.raises(ValueError, match="not empty"):
        run_storage_bench(str(tmp_path), keys=10)


def test_compaction_bench_times_both_halves_of_every_job(tmp_path: Path) -> None:
    from bhandar_cli.storage.compaction import TierPolicy
    from bhandar_cli.storage.engine_options import EngineOptions

    opts = EngineOptions(memtable_bytes=16 << 10, tiers=TierPolicy(min_tables=3))
    r: Any = run_engine_jobs_bench(str(tmp_path / "c"), total_bytes=300 << 10, value_size=50, options=opts)
    assert r["data_bytes"] >= 300 << 10 and r["tables_before"] >= 1
    assert r["flush_run"]["count"] == r["flush_finish"]["count"] > 5
    full = r["full_compaction"]
    assert full["installed"] and full["tables_after"] == 1
    assert full["run_ms"] > 0 and full["finish_ms"] > 0
