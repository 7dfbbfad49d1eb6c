"""`bhandar bench` and its `storage` and `compaction` commands: their options and their output; the
benches are bench/'s (throughput.py, storage_bench.py, compaction_bench.py). The load options
`bench` and `bench security` share are declared here once."""

from __future__ import annotations

from typing import Any

import typer

from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail
from bhandar_cli.client import EXIT_USAGE, OutputFormat
from bhandar_cli.core.model import LEVELS, one_of


def parse_mix(text: str) -> tuple[int, int]:
    """'get:put' (1:1), 'get', 'put' or a ratio such as '3:1' -> (get weight, put weight)."""
    named = {"get:put": (1, 1), "get": (1, 0), "put": (0, 1)}
    if text in named:
        return named[text]
    parts = text.split(":")
    if len(parts) != 2 or not all(p.isdigit() for p in parts) or not any(int(p) for p in parts):
        fail(f"--mix takes GET:PUT weights such as 1:1 or 9:1 (or get, put), got {text!r}", EXIT_USAGE)
    return int(parts[0]), int(parts[1])


# The load both `bench` and `bench security` drive: declared and checked once.
CONCURRENCY_OPTION = typer.Option(16, "--concurrency", help="Concurrent clients.")
CONSISTENCY_OPTION = typer.Option("QUORUM", "--consistency", "-c", help=f"{one_of(LEVELS)}.")
MIX_OPTION = typer.Option("get:put", "--mix", metavar="GET:PUT", help="Weights of gets and puts, e.g. 9:1.")


def load_shape(concurrency: int, consistency: str, mix: str) -> tuple[str, tuple[int, int]]:
    """(level, (get weight, put weight)) of the load options; a bad one is a usage error."""
    from bhandar_cli.core.model import BadInput, parse_level

    if not 1 <= concurrency <= 1024:
        fail(f"--concurrency must be 1..1024 (got {concurrency})", EXIT_USAGE)
    try:
        level = parse_level(consistency)
    except BadInput as exc:
        fail(str(exc), EXIT_USAGE)
    return level, parse_mix(mix)


bench_app = typer.Typer(
    help="Measure the store (ops/s, p50/p99) beside a baseline measured in the same run.",
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@bench_app.callback()
def bench(
    ctx: typer.Context,
    cluster: str | None = typer.Option(
        None, "--cluster", metavar="DIR", help="Bench a running process cluster."
    ),
    nodes: int | None = typer.Option(None, "--nodes", help="Bench an in-process cluster of N nodes instead."),
    ops: int = typer.Option(10_000, "--ops", help="Operations to run."),
    concurrency: int = CONCURRENCY_OPTION,
    consistency: str = CONSISTENCY_OPTION,
    mix: str = MIX_OPTION,
    latency: str = typer.Option("none", "--latency", help="In-process network latency: none or seed."),
    hot: float = typer.Option(
        0.0, "--hot", metavar="FRACTION", help="Skew: this fraction of operations read one hot key."
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Measure ops/s and p50/p99/max per operation, with a bare CBOR echo baseline and the ratio.

    `bhandar bench storage` measures one node's storage engine against sqlite3 instead.
    """
    if ctx.invoked_subcommand is not None:
        return
    if cluster is not None and nodes is not None:
        fail("give --cluster DIR or --nodes N, not both", EXIT_USAGE)
    if not 1 <= ops <= 10_000_000:
        fail(f"--ops must be 1..10000000 (got {ops})", EXIT_USAGE)
    if nodes is not None and not 1 <= nodes <= 26:
        fail(f"--nodes must be between 1 and 26 (got {nodes})", EXIT_USAGE)
    if latency not in ("none", "seed"):
        fail(f"--latency must be none or seed (got {latency!r})", EXIT_USAGE)
    if not 0.0 <= hot <= 1.0:
        fail(f"--hot takes a fraction of the operations, 0 to 1 (got {hot})", EXIT_USAGE)
    level, weights = load_shape(concurrency, consistency, mix)
    from bhandar_cli.bench import run_bench
    from bhandar_cli.cli.bench_render import ProgressBar
    from bhandar_cli.cli.cluster_cmd import run_async

    async def body() -> dict[str, Any]:
        return await run_bench(cluster, nodes, ops, concurrency, level, weights, latency, hot, ProgressBar)

    report = run_async("bench", output, body)
    if output is OutputFormat.json:
        emit_json(report)
    else:
        from bhandar_cli.cli.bench_render import render

        render(report)


@bench_app.command("storage")
def storage(
    keys: int = typer.Option(
        100_000, "--keys", "--ops", help="Keys put, then as many gets of present and of absent keys."
    ),
    value_size: int = typer.Option(100, "--value-size", help="Bytes per value."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random keys and values."),
    directory: str | None = typer.Option(
        None, "--dir", metavar="DIR", help="An empty directory to work in (default: a temporary one)."
    ),
    encrypt: bool = typer.Option(
        False, "--encrypt", help="Also run the engine encrypting at rest (AES-GCM), beside the plain one."
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """One node's LSM engine (batch fsync, group commit every 64 puts) vs sqlite3 (WAL,
    synchronous=NORMAL, one transaction per 64 puts) on the same work, side by side, and LevelDB
    too when plyvel is installed; each store in a process of its own, whose peak RSS is shown.
    With --encrypt, the engine encrypting its WAL and SSTables too, and its cost over the plain one."""
    import tempfile

    from bhandar_cli.bench import run_storage_bench

    if not 1 <= keys <= 10_000_000 or not 0 <= value_size <= 1 << 20:
        fail("--keys must be 1..10000000 and --value-size 0..1048576", EXIT_USAGE)
    with tempfile.TemporaryDirectory(prefix="bhandar-bench-") as tmp:
        try:
            r = run_storage_bench(directory or tmp, keys, value_size, seed, encrypt=encrypt)
        except ValueError as exc:
            fail(str(exc), EXIT_USAGE)
    if output is OutputFormat.json:
        emit_json({"cmd": "bench storage", "ok": True, **r})
        return
    from bhandar_cli.cli.bench_render import render_storage

    render_storage(r, value_size)


@bench_app.command("compaction")
def compaction(
    cluster: str | None = typer.Option(None, "--cluster", metavar="DIR", help="The running process cluster."),
    node: str = typer.Option("A", "--node", help="The node that compacts."),
    mb: int = typer.Option(50, "--mb", help="Fill until the node holds this many MB on disk."),
    concurrency: int = typer.Option(8, "--concurrency", help="Concurrent clients reading."),
    seconds: float = typer.Option(5.0, "--seconds", help="Length of the baseline phase."),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """QUORUM gets (p50/p99) and peers' view of NODE, first as a baseline, then while NODE runs a
    forced full compaction of at least MB megabytes; fills the store first if needed."""
    from bhandar_cli.bench import run_compaction_bench
    from bhandar_cli.cli.cluster_cmd import run_async
    from bhandar_cli.client import open_tcp_client

    if not 1 <= mb <= 100_000 or not 1 <= concurrency <= 1024 or not 0.5 <= seconds <= 3600:
        fail("--mb must be 1..100000, --concurrency 1..1024 and --seconds 0.5..3600", EXIT_USAGE)

    async def body() -> dict[str, Any]:
        async with open_tcp_client(cluster) as client:
            return await run_compaction_bench(client, client.data.node(node), mb, concurrency, seconds)

    report = run_async("bench compaction", output, body)
    if output is OutputFormat.json:
        emit_json(report)
        return
    b, d = report["baseline"], report["during"]
    print(
        f"bench compaction: node {report['target']}, {report['disk_mb']} MB in {report['sstables']} "
        f"SSTables, full compaction {report['compaction_s']} s {report['compaction_error']}".rstrip()
    )
    for label, p in (("baseline", b), ("during compaction", d)):
        print(
            f"  {label:18} {p['gets']:6} QUORUM gets  p50 {p['p50_ms']} ms  p99 {p['p99_ms']} ms  "
            f"max {p['max_ms']} ms  errors {p['errors']}"
        )
    print(
        f"  peers saw {report['target']} down in {d['marked_down']} of {d['samples']} samples "
        f"during the compaction (baseline: {b['marked_down']} of {b['samples']})"
    )
