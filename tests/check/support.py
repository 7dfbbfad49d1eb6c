"""Shared helpers of the check tests: the fixture nodes, short runs, and whether a pid lives."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bhandar_cli.check.check_run import CheckOptions

NODES = Path(__file__).parent / "nodes"
ALL_FAULTS = ("partition", "kill", "pause", "slow", "loss", "duplicate")


def py(node: str, **env: str) -> tuple[str, ...]:
    """The argv of a Python fixture node, with environment variables (MODE=...) before it."""
    pre = ("env", *(f"{k}={v}" for k, v in env.items())) if env else ()
    return (*pre, sys.executable, str(NODES / node))


def short(argv: tuple[str, ...], workload: str, where: Path, **changes: Any) -> CheckOptions:
    """A check short enough for the test suite (about a second and a half of real time)."""
    values: dict[str, Any] = {
        "node_count": 3,
        "concurrency": 3,
        "rate": 60.0,
        "time_limit": 1.0,
        "seed": 1,
        "interval": 0.3,
        "op_timeout": 0.5,
        "recovery": 0.3,
        "init_timeout": 5.0,
    }
    values.update(changes)
    return CheckOptions(argv=argv, workload=workload, log_dir=str(where), **values)


def alive(pid: int) -> bool:
    """Is `pid` a running process (a zombie nobody reaped yet is not)?"""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return False
    return state != "Z"
