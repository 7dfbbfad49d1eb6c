"""How `bhandar bench` shows its report: the table per operation, the baseline's row, the ratio, and
with --hot the hot keys and the load they put on each node; `bench storage`'s stores side by side;
and the progress bar the benches show on a terminal while they run."""

from __future__ import annotations

import sys
from typing import Any


def render(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 120)
    where = f"{report['nodes']} {'processes' if report['target'] == 'processes' else 'in-process nodes'}"
    console.print(
        f"bench: {where}, {report['consistency']}, {report['concurrency']} concurrent clients, "
        f"{report['ops']} ops in {report['seconds']:.2f} s"
    )
    table = Table("op", "ops", "errors", "ops/s", "p50 ms", "p99 ms", "max ms", box=None)
    rows = [*report["per_op"].items(), ("all", report)]
    for name, s in rows:
        table.add_row(
            name,
            str(s.get("count", s.get("ops"))),
            str(s["errors"]),
            f"{s['ops_per_s']:.0f}",
            f"{s['p50_ms']:.2f}",
            f"{s['p99_ms']:.2f}",
            f"{s['max_ms']:.2f}",
        )
    table.add_row(
        "echo",
        "",
        "",
        f"{report['baseline_ops_per_s']:.0f}",
        f"{report['baseline_p50_ms']:.2f}",
        f"{report['baseline_p99_ms']:.2f}",
        "",
    )
    console.print(table)
    console.print(f"ratio to the {report['baseline']}: [bold]{report['ratio']:.2f}[/bold]")
    if report["errors"]:
        console.print(
            f"[yellow]{report['errors']} operations failed; first: {report['first_error']}[/yellow]"
        )
    if report.get("hot_fraction"):
        from bhandar_cli.repl import render_hot

        console.print(f"hot keys ({100 * report['hot_fraction']:g}% of operations read one key):")
        console.print(render_hot(report["hot"]))


def render_storage(r: dict[str, Any], value_size: int) -> None:
    """`bench storage`: each store's rates side by side, the engine's ratio over each other store,
    and with --encrypt the encrypting engine beside the plain one."""
    from rich.console import Console
    from rich.table import Table

    engine, sqlite, level, sealed = r["engine"], r["sqlite"], r.get("leveldb"), r.get("engine_encrypted")
    columns = ["", "engine"]
    if sealed is not None:
        columns += ["engine, encrypted", "encrypted / plain"]
    columns += [f"sqlite3 {r['sqlite_version']}", "engine / sqlite3"]
    if level is not None:
        columns += [f"LevelDB {level['version']}", "engine / LevelDB"]
    table = Table(*columns, box=None)
    rows = [
        ("puts", "puts_per_s", "/s"),
        ("gets (hits)", "get_hits_per_s", "/s"),
        ("gets (misses)", "get_misses_per_s", "/s"),
        ("puts, CPU", "puts_per_cpu_s", "/s"),
        ("gets (hits), CPU", "get_hits_per_cpu_s", "/s"),
        ("peak RSS", "rss_peak_mb", " MiB"),
    ]
    if sealed is not None:
        rows.append(("disk", "disk_bytes", ""))
    for label, key, unit in rows:
        if key == "puts_per_cpu_s" and sealed is None:
            continue  # shown for the encryption cost, which is CPU
        row = [label, _figure(engine, key, unit)]
        if sealed is not None:
            row += [_figure(sealed, key, unit), f"{sealed[key] / engine[key]:.2f}"]
        row += [_figure(sqlite, key, unit), _ratio(engine, sqlite, key)]
        if level is not None:
            row += [_figure(level, key, unit), _ratio(engine, level, key)]
        table.add_row(*row)
    console = Console()
    console.print(f"storage bench: {r['keys']:,} keys of {value_size}-byte values, one fsync per 64 puts")
    console.print(table)
    console.print(
        "[dim]CPU: operations per second of the process's CPU time, steadier on a busy machine; "
        f"peak RSS of each store's own process (the interpreter alone: "
        f"{engine['rss_start_mb']:,.0f} MiB); "
        "sqlite3 with synchronous=NORMAL does not fsync at commit, the engine's batch sync does[/dim]"
    )


def _figure(side: dict[str, Any], key: str, unit: str) -> str:
    if key not in side:
        return "-"
    if key == "disk_bytes":
        return f"{side[key] / (1 << 20):,.1f} MiB"
    return f"{side[key]:,.0f}{unit}"


def _ratio(engine: dict[str, Any], other: dict[str, Any], key: str) -> str:
    return f"{engine[key] / other[key]:.2f}" if other.get(key) else "-"


class ProgressBar:
    """A rich progress bar on a terminal (standard error); nothing when not a terminal."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar: Any = None

    def __enter__(self) -> Any:
        if not sys.stderr.isatty():
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.bar = Progress(
            "bench", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=Console(stderr=True)
        )
        self.bar.start()
        task = self.bar.add_task("ops", total=self.total)
        return lambda n: self.bar.advance(task, n)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
