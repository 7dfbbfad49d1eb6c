"""What every test shares: the `patches_compiled` marker, and how many workers `-n auto` starts.

A test so marked replaces a function, method or constant of a module that may run compiled
(bhandar_cli/native.py): compiled code calls its own module's functions directly, so the patch
would not reach it. In a compiled run such a test is left to the pure run, and .ci/run runs it
there (`BHANDAR_PURE=1 pytest -m patches_compiled`): every test runs in one of the two.
"""

from __future__ import annotations

import os
import sys

import pytest

from bhandar_cli import native


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """One worker more than the cores (pyproject.toml's --maxprocesses caps it): a test spends part
    of its time waiting on processes it started and on the disk, and a third worker on 2 cores
    filled that (the whole suite, compiled, `--dist worksteal`: 879 s with 2 workers, 679 s with 3,
    every test passing in both)."""
    # The cores this process may run on (a container's share); macOS has no sched_getaffinity.
    cores = len(os.sched_getaffinity(0)) if sys.platform == "linux" else (os.cpu_count() or 1)
    return cores + 1


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "patches_compiled: replaces code of a compiled module: runs pure only (tests/conftest.py)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if native.MODE != "compiled":
        return
    leave = pytest.mark.skip(reason="patches a compiled module: runs with BHANDAR_PURE=1 (.ci/run does)")
    for item in items:
        if item.get_closest_marker("patches_compiled") is not None:
            item.add_marker(leave)
