"""`bhandar bench`: throughput and latency of get/put through client/client.py, and the baseline beside it.

The store is measured through the one client API, on a process cluster (`--cluster DIR`) or on an
in-process cluster started here (`--nodes N`). In the same run an echo server process answers the
same frames at the same concurrency (bench/echo_baselines.py), so the ratio between the two means something
on a noisy machine. Puts go to fresh keys under a prefix drawn for the run (a blind write to a used
key adds a sibling), so every run on a cluster measures the same work; gets read this run's keys.
With `--hot F` a fraction F of all operations read one key of the run instead: the report then
shows the hot keys (`hot`), their replicas and the load they put on each node.
"""

from __future__ import annotations

import random
import secrets
import sys
from typing import TYPE_CHECKING, Any

import typer

from bhandar_cli.cli.output import EXIT_USAGE, OUTPUT_OPTION, OutputFormat, emit_json, fail
from bhandar_cli.core.model.config import LEVELS, one_of

if TYPE_CHECKING:
    from bhandar_cli.bench.echo_baselines import EchoTls
    from bhandar_cli.client.backend import Backend
    from bhandar_cli.client.client import Client
    from bhandar_cli.fleet.cluster_file import ClusterFile

KEYSPACE = "bench"
PRELOAD = 100
VALUE = "v" * 100


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
    from bhandar_cli.core.model.config import parse_level
    from bhandar_cli.core.model.errors import BadInput

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
    from bhandar_cli.cli.cluster_cmd import run_async

    async def body() -> dict[str, Any]:
        return await run_bench(cluster, nodes, ops, concurrency, level, weights, latency, hot)

    report = run_async("bench", output, body)
    if output is OutputFormat.json:
        emit_json(report)
    else:
        from bhandar_cli.cli.bench_render import render

        render(report)


async def run_bench(
    cluster: str | None,
    nodes: int | None,
    ops: int,
    concurrency: int,
    level: str,
    weights: tuple[int, int],
    latency: str = "none",
    hot: float = 0.0,
) -> dict[str, Any]:
    from bhandar_cli.bench.echo_baselines import echo_baseline, memory_echo_baseline
    from bhandar_cli.core.model.values import parse_value_text
    from bhandar_cli.core.protocol.messages import PutRequest

    parsed = parse_value_text(VALUE)
    value, ctype = parsed.data, parsed.ctype
    echo_tls: EchoTls | None = None
    with _progress(2 * ops) as advance:
        if nodes is None:
            from bhandar_cli.client.openers import open_tcp_client

            async with open_tcp_client(cluster, level) as client:
                echo_tls = _echo_tls(client.backend.cluster)
                target = {
                    "target": "processes",
                    "nodes": len(client.backend.names),
                    "dir": client.backend.cluster.dir,
                }
                store = await _store_load(client, ops, concurrency, weights, value, ctype, advance, hot)
        else:
            target = {"target": "in-process", "nodes": nodes, "latency": latency}
            store = await _in_process(
                nodes, latency, level, ops, concurrency, weights, value, ctype, advance, hot
            )
        sample = PutRequest(1, KEYSPACE, "w0-0", value, ctype, None, level)
        if nodes is None:
            baseline = (await echo_baseline(ops, concurrency, sample, advance, echo_tls)).summary()
            tls = ", over TLS as the cluster" if echo_tls is not None else ""
            named = f"bare trio CBOR echo on 127.0.0.1 (same frames, same concurrency{tls})"
        else:  # in-process nodes exchange messages in memory: so does their baseline
            baseline = (await memory_echo_baseline(ops, concurrency, sample, advance)).summary()
            named = "bare in-process echo (one trio task answering over a memory channel, same concurrency)"
    report: dict[str, Any] = {"cmd": "bench", "ok": store["errors"] == 0, **target}
    report.update(consistency=level, concurrency=concurrency, mix={"get": weights[0], "put": weights[1]})
    report.update({k: store[k] for k in ("ops_per_s", "p50_ms", "p99_ms", "max_ms", "errors", "seconds")})
    report.update(ops=store["count"], per_op=store["per_op"], first_error=store.get("first_error", ""))
    report.update(hot_fraction=hot, hot=store["hot"])
    report.update(
        baseline=named,
        baseline_tls=echo_tls is not None,
        baseline_ops_per_s=baseline["ops_per_s"],
        baseline_p50_ms=baseline["p50_ms"],
        baseline_p99_ms=baseline["p99_ms"],
        ratio=round(store["ops_per_s"] / baseline["ops_per_s"], 3) if baseline["ops_per_s"] else 0.0,
    )
    return report


def _echo_tls(cluster: ClusterFile) -> EchoTls | None:
    """The echo speaks TLS against a TLS cluster (with its first node's identity), so the ratio
    compares the same transport."""
    from bhandar_cli.bench.echo_baselines import EchoTls
    from bhandar_cli.fleet.cluster_file import client_access
    from bhandar_cli.fleet.cluster_secrets import node_tls_dir

    if not cluster.tls:
        return None
    first = cluster.nodes[0]
    return EchoTls(str(node_tls_dir(first)), first.id, client_access(cluster))


async def _in_process(
    nodes: int, latency: str, level: str, ops: int, concurrency: int, weights: tuple[int, int], *rest: Any
) -> dict[str, Any]:
    import trio

    from bhandar_cli.client.backends.in_process_backend import InProcessBackend
    from bhandar_cli.client.client import Client
    from bhandar_cli.fleet.in_process_cluster import InProcessCluster
    from bhandar_cli.host.network import LatencyModel

    model = LatencyModel(base_ms=0, mean_ms=0, spike_rate=0) if latency == "none" else LatencyModel()
    cluster = InProcessCluster(nodes, min(3, nodes), latency=model)
    async with trio.open_nursery() as nursery:
        await nursery.start(cluster.run)
        client = Client(InProcessBackend(cluster), level)
        result = await _store_load(client, ops, concurrency, weights, *rest)
        nursery.cancel_scope.cancel()
    return result


async def _store_load(
    client: Client[Backend],
    ops: int,
    concurrency: int,
    weights: tuple[int, int],
    value: bytes,
    ctype: str,
    advance: Any,
    hot: float = 0.0,
) -> dict[str, Any]:
    from bhandar_cli.bench.echo_baselines import run_load

    rng = random.Random(7)
    run = secrets.token_hex(4)  # keys of earlier runs would gain a sibling with every run
    written = [f"{run}-p{i}" for i in range(min(PRELOAD, ops))]

    await client.ops.keyspace_create(KEYSPACE)  # or find it there from an earlier run

    async def preload(worker: int, i: int) -> str:
        await client.data.put(KEYSPACE, written[i], value, ctype, "none")
        return "put"

    await run_load(len(written), concurrency, preload)  # also warms up connections

    async def one(worker: int, i: int) -> str:
        if hot and rng.random() < hot:  # the skew: one key takes this share of every operation
            await _tagged("get", client.data.get(KEYSPACE, written[0]))
            return "get"
        if rng.random() * (weights[0] + weights[1]) < weights[0]:
            key, op = rng.choice(written), "get"
            await _tagged(op, client.data.get(KEYSPACE, key))
        else:
            key, op = f"{run}-w{worker}-{i}", "put"
            await _tagged(op, client.data.put(KEYSPACE, key, value, ctype, "none"))
            written.append(key)
        return op

    result = await run_load(ops, concurrency, one, advance)
    summary = result.summary()
    summary["first_error"] = result.first_error
    summary["hot"] = await client.views.hot(5)  # what the nodes' sketches saw, skewed or not
    return summary


async def _tagged(op: str, call: Any) -> Any:
    try:
        return await call
    except Exception as exc:
        exc.op = op  # type: ignore[attr-defined]  # run_load counts the error under this op
        raise


class _progress:
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

    from bhandar_cli.bench.storage_bench import run_storage_bench

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
    from bhandar_cli.bench.compaction_bench import run_compaction_bench
    from bhandar_cli.cli.cluster_cmd import run_async
    from bhandar_cli.client.openers import open_tcp_client

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
