"""`bhandar bench cli`: one-shot commands timed as a shell script sees them, beside `python -c pass`.

Each round starts three processes one after the other: `python -c pass` (the interpreter's own
start-up, the floor no command goes below), a `put` of a fresh key and a `get` of it, both in the
modes a script uses (`-o json`, `-o raw`) against a running process cluster. Interleaving them
makes the baseline share the machine's load with what it is compared with; the figure that
matters is how far a command's median lies above the baseline's. Each process's CPU time (user +
system) is reported beside its wall time: on a loaded machine it moves far less.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from typing import Any

import typer

from bhandar_cli.cli.output import EXIT_USAGE, OUTPUT_OPTION, OutputFormat, emit_json, fail, fail_json

KEYSPACE = "kv"  # there from the start on every cluster
COMMAND_TIMEOUT = 30.0


def bench_cli(
    cluster: str | None = typer.Option(
        None, "--cluster", metavar="DIR", help="The running process cluster (./.bhandar, $BHANDAR_CLUSTER)."
    ),
    runs: int = typer.Option(20, "--runs", help="Invocations of each command."),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Time one-shot get and put (median, p90) beside `python -c pass` measured in the same run."""
    from bhandar_cli.fleet.cluster_file import ClusterFileError, resolve_dir
    from bhandar_cli.fleet.pids import load_running

    if not 1 <= runs <= 10_000:
        fail(f"--runs must be 1..10000 (got {runs})", EXIT_USAGE)
    try:
        running = load_running(resolve_dir(cluster))
    except ClusterFileError as exc:
        fail_json("bench cli", output, str(exc), "no_cluster")
    report = run_cli_bench(running.dir, len(running.nodes), runs)
    if output is OutputFormat.json:
        emit_json(report)
    else:
        render(report)


def run_cli_bench(directory: str, nodes: int, runs: int) -> dict[str, Any]:
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
        "bytecode_cached": bytecode_cached(),
        # CPU time (user + system) of each process, which a loaded machine inflates far less than
        # wall time: the command's own cost, without the wait for the cluster's answer.
        "cpu_median_ms": {op: cpu_median[op] for op in ("get", "put")},
        "baseline_cpu_median_ms": cpu_median["baseline"],
    }


def bytecode_cached() -> bool:
    """Whether the one-shot path's modules have current bytecode in __pycache__. Without it (a
    source tree run with PYTHONDONTWRITEBYTECODE set, say) every command compiles them again,
    which costs more than anything else it does, and the figures measure that."""
    import importlib.util
    import os

    import bhandar_cli.cli.launch
    import bhandar_cli.cli.oneshot

    for module in (bhandar_cli.cli.launch, bhandar_cli.cli.oneshot):
        source = module.__file__ or ""
        try:
            cached = importlib.util.cache_from_source(source)
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


def render(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 120)
    console.print(
        f"bench cli: {report['runs']} runs of each command, interleaved, on {report['nodes']} processes"
    )
    table = Table("command", "median ms", "p90 ms", "min ms", "over baseline ms", "CPU median ms", box=None)
    base = [str(report[f"baseline_{k}_ms"]) for k in ("median", "p90", "min")]
    table.add_row("python -c pass", *base, "", str(report["baseline_cpu_median_ms"]))
    for op, s in report["per_op"].items():
        shown = "put -o json" if op == "put" else "get -o raw"
        over = str(report["over_baseline_ms"][op])
        cpu = str(report["cpu_median_ms"][op])
        table.add_row(shown, str(s["median_ms"]), str(s["p90_ms"]), str(s["min_ms"]), over, cpu)
    console.print(table)
    if not report["bytecode_cached"]:
        import os

        import bhandar_cli

        package = os.path.dirname(bhandar_cli.__file__ or "bhandar_cli")
        console.print(
            "note: bhandar's bytecode is not cached (PYTHONDONTWRITEBYTECODE?), so every command "
            f"compiled its modules again; `python -m compileall -q {package}` caches it"
        )
    if report["errors"]:
        console.print(f"[red]{report['errors']} failed[/red]: {report['first_error']}")
