"""`check --checklist`: the same program and workload under each named scenario, one run each
(fresh processes and a log directory of its own; `--jobs` of them at a time), and the table that
compares them.

Each workload has its own scenarios, in its own words (check/catalog.py `scenarios`), drawn
from the plans of check/nemesis.py: no fault; one node down; two nodes down; a minority
partition; a slow node (dynamo-kv: a slow replica); a node killed during a partition (dynamo-kv:
a hint holder killed, a fallback that may hold writes for nodes cut off dies before the partition
heals); restarts (every node killed and restarted in turn). Each row gives the operations, how
they ended, lost acknowledged writes and stale reads (for workloads that count them), the p99
latency and the verdict.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bhandar_cli.check.catalog import scenarios
from bhandar_cli.check.check_report import checklist_row
from bhandar_cli.check.check_run import CheckOptions, CheckOutcome, run_checks


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def run_checklist(
    opts: CheckOptions, jobs: int = 1, progress: Callable[[str], None] = lambda _: None
) -> tuple[list[dict[str, Any]], list[CheckOutcome]]:
    """Every scenario of the workload, `jobs` at a time: the rows and outcomes in the catalog's
    order. Scenarios run side by side share this machine's cores, so a latency-bound scenario
    (a slow node) reads slower when run with others than alone: `jobs` 1 (the default) measures
    each alone."""
    runs = [
        replace(opts, scenario=name, nemesis=(), log_dir=str(Path(opts.log_dir) / slug(name)))
        for name in scenarios(opts.workload)
    ]
    outcomes = run_checks(runs, jobs, lambda run: progress(f"scenario {run.scenario} ..."))
    rows = [checklist_row(run.scenario, outcome) for run, outcome in zip(runs, outcomes, strict=True)]
    return rows, outcomes
