"""`check --checklist`: the same program and workload under each named scenario, one run each
(fresh processes and a log directory of its own), and the table that compares them.

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
from bhandar_cli.check.check_run import CheckOptions, CheckOutcome, run_check


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def run_checklist(
    opts: CheckOptions, progress: Callable[[str], None] = lambda _: None
) -> tuple[list[dict[str, Any]], list[CheckOutcome]]:
    rows: list[dict[str, Any]] = []
    outcomes: list[CheckOutcome] = []
    for name in scenarios(opts.workload):
        progress(f"scenario {name} ...")
        outcome = run_check(
            replace(opts, scenario=name, nemesis=(), log_dir=str(Path(opts.log_dir) / slug(name)))
        )
        rows.append(checklist_row(name, outcome))
        outcomes.append(outcome)
    return rows, outcomes
