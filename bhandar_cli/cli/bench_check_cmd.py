"""`bhandar bench check`: the harness of `bhandar check` against a direct pipe between the same
nodes in the same run, and the lin-kv checker on a long history (check/bench.py measures)."""

from __future__ import annotations

import typer

from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail, fail_json
from bhandar_cli.client import EXIT_USAGE, OutputFormat


def bench_check(
    nodes: int = typer.Option(5, "--nodes", help="Nodes in the ring."),
    tokens: int = typer.Option(16, "--tokens", help="Messages in flight for the heavy load."),
    seconds: float = typer.Option(3.0, "--seconds", help="Seconds each of the four runs lasts."),
    ops: int = typer.Option(10_000, "--ops", help="Operations of the lin-kv history the checker decides."),
    clients: int = typer.Option(5, "--clients", help="Clients of that history."),
    seed: int = typer.Option(1, "--seed", help="Draws the synthetic history."),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """What bhandar check adds: nodes passing messages round a ring through the harness, beside
    the same nodes over direct pipes (hops/s, median delay per hop, light and heavy load); and the
    time the lin-kv checker takes to decide a long history."""
    from bhandar_cli.check import HopRunFailed, checker_bench, harness_bench

    if not 2 <= nodes <= 64 or not 1 <= tokens <= 10_000 or not 0.2 <= seconds <= 600:
        fail("--nodes must be 2..64, --tokens 1..10000 and --seconds 0.2..600", EXIT_USAGE)
    if not 10 <= ops <= 1_000_000 or not 1 <= clients <= 100:
        fail("--ops must be 10..1000000 and --clients 1..100", EXIT_USAGE)
    try:
        hops = harness_bench(nodes, tokens, seconds)
    except HopRunFailed as exc:  # the logs it names are gone with the run's temporary directory
        fail_json("bench check", output, f"the hop ring failed, nothing was measured: {exc}", "failed")
    report = {"cmd": "bench check", **hops, "checker": checker_bench(ops, clients, seed)}
    if output is OutputFormat.json:
        emit_json(report)
        return
    print(f"harness vs direct pipe: {nodes} nodes in a ring, {seconds:g} s per run")
    print(f"{'':24}{'hops/s':>12}{'median hop ms':>15}{'p99 hop ms':>12}")
    for load, count in (("light", nodes), ("heavy", tokens)):
        for way in ("harness", "pipe"):
            r = report[f"{way}_{load}"]
            label = f"{way}, {count} in flight"
            print(f"{label:24}{r['hops_per_s']:>12,.0f}{r['median_hop_ms']:>15.3f}{r['p99_hop_ms']:>12.3f}")
        print(f"{'added per hop':24}{'':>12}{report[f'added_ms_per_hop_{load}']:>15.3f}")
    c = report["checker"]
    print(f"lin-kv checker, {ops:,} operations from {clients} clients:")
    for name, what in (
        ("valid", "as generated"),
        ("stale_read", "one read made stale"),
        ("one_key", "all on one key"),
    ):
        r = c[name]
        how = f", explained by {r['explained_by']} operations" if r["explained_by"] else ""
        print(f"  {what:22} {r['verdict']:8} in {r['seconds']:.3f} s ({r['keys']} keys{how})")
