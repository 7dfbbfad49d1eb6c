"""`bhandar bench cli`: one-shot commands timed as a shell script sees them, beside `python -c pass`.

Each round starts three processes one after the other: `python -c pass` (the interpreter's own
start-up, the floor no command goes below), a `put` of a fresh key and a `get` of it, both in the
modes a script uses (`-o json`, `-o raw`) against a running process cluster. Interleaving them
makes the baseline share the machine's load with what it is compared with; the figure that
matters is how far a command's median lies above the baseline's. Each process's CPU time (user +
system) is reported beside its wall time: on a loaded machine it moves far less. The command
(cli/bench_cli_cmd.py) parses and renders.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

KEYSPACE = "kv"  # there from the start on every cluster
COMMAND_TIMEOUT = 30.0


def run_cli_bench(directory: str, nodes: int, runs: int, lean_path: Iterable[str | Path]) -> dict[str, Any]:
    """`runs` rounds of the baseline, a put and a get against the cluster in `directory`; whether
    the bytecode of `lean_path` (the modules a one-shot command runs) is cached is part of the
    report."""
    bhandar = [sys.executable, "-P", "-m", "bhandar_cli"]  # -P: as the console script, never the cwd
    where = ["--cluster", directory]
    times: dict[str, list[float]] = {"baseline": [], "put": [], "get": []}
    cpu: dict[str, list[float]] = {"baseline": [], "put": [], "get": []}
    errors = 0
    first_error = ""
    stamp = time.strftime("%H%M%S")
    for i in range(runs):
        key = f"bench-cli-{stamp}-{i}"  # fresh keys: a blind put to a used key adds a sibling
        commands = {
            "baseline": [sys.executable, "-c", "pass"],
            "put": [*bhandar, "put", KEYSPACE, key, '"v"', *where, "-o", "json"],
            "get": [*bhandar, "get", KEYSPACE, key, *where, "-o", "raw"],
        }
        for name, argv in commands.items():
            took, cpu_took, error = _time(argv)
            times[name].append(took)
            cpu[name].append(cpu_took)
            if error:
                errors += 1
                first_error = first_error or f"{name}: {error}"
    baseline = _summary(times["baseline"])
    per_op = {op: _summary(times[op]) for op in ("get", "put")}
    over = {op: round(s["median_ms"] - baseline["median_ms"], 1) for op, s in per_op.items()}
    cpu_median = {name: round(1000 * statistics.median(spent), 1) for name, spent in cpu.items()}
    return {
        "cmd": "bench cli",
        "ok": errors == 0,
        "target": "processes",
        "nodes": nodes,
        "dir": directory,
        "runs": runs,
        "per_op": per_op,
        "baseline": "python -c pass",
        "baseline_median_ms": baseline["median_ms"],
        "baseline_p90_ms": baseline["p90_ms"],
        "baseline_min_ms": baseline["min_ms"],
        "over_baseline_ms": over,
        "errors": errors,
        "first_error": first_error,
        "bytecode_cached": bytecode_cached(lean_path),
        # CPU time (user + system) of each process, which a loaded machine inflates far less than
        # wall time: the command's own cost, without the wait for the cluster's answer.
        "cpu_median_ms": {op: cpu_median[op] for op in ("get", "put")},
        "baseline_cpu_median_ms": cpu_median["baseline"],
    }


def bytecode_cached(sources: Iterable[str | Path]) -> bool:
    """Whether these modules (the one-shot path's) have current bytecode in __pycache__. Without
    it (a source tree run with PYTHONDONTWRITEBYTECODE set, say) every command compiles them again,
    which costs more than anything else it does, and the figures measure that."""
    import importlib.util
    import os

    for source in sources:
        try:
            cached = importlib.util.cache_from_source(str(source))
            if os.stat(cached).st_mtime < os.stat(source).st_mtime:
                return False
        except (OSError, ValueError, NotImplementedError):
            return False
    return True


def _time(argv: list[str]) -> tuple[float, float, str]:
    """Seconds from start to exit of one process, the CPU seconds it used, and what went wrong
    ("" if it exited 0)."""
    before = _children_cpu()
    started = time.perf_counter()
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        late = f"no exit within {COMMAND_TIMEOUT:g} s"
        return time.perf_counter() - started, _children_cpu() - before, late
    took = time.perf_counter() - started
    spent = _children_cpu() - before
    if proc.returncode != 0:
        said = proc.stderr.decode(errors="replace").strip().splitlines()
        return took, spent, f"exit {proc.returncode}: {said[-1] if said else '(nothing on stderr)'}"
    return took, spent, ""


def _children_cpu() -> float:
    """User + system CPU seconds of the children this process has waited for."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return {
        "median_ms": round(1000 * statistics.median(ordered), 1),
        "p90_ms": round(1000 * p90, 1),
        "min_ms": round(1000 * ordered[0], 1),
    }
