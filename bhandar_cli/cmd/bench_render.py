"""How `bhandar bench` shows its report: the table per operation, the baseline's row, the ratio, and
with --hot the hot keys and the load they put on each node."""

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
        from bhandar_cli.repl.views_hot import render_hot

        console.print(f"hot keys ({100 * report['hot_fraction']:g}% of operations read one key):")
        console.print(render_hot(report["hot"]))
