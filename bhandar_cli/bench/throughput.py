"""`bhandar bench`: throughput and latency of get/put through client/client.py, and the baseline beside it.

The store is measured through the one client API, on a process cluster (`--cluster DIR`) or on an
in-process cluster started here (`--nodes N`). In the same run an echo server process answers the
same frames at the same concurrency (bench/echo_baselines.py), so the ratio between the two means something
on a noisy machine. Puts go to fresh keys under a prefix drawn for the run (a blind write to a used
key adds a sibling), so every run on a cluster measures the same work; gets read this run's keys.
With `--hot F` a fraction F of all operations read one key of the run instead: the report then
shows the hot keys (`hot`), their replicas and the load they put on each node. The command
(cli/bench_cmd.py) parses and renders; `bench security` drives the same load (`store_load`).
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bhandar_cli.bench.echo_baselines import EchoTls
    from bhandar_cli.client import Backend, Client
    from bhandar_cli.fleet import ClusterFile

KEYSPACE = "bench"
PRELOAD = 100
VALUE = "v" * 100

# What shows a bench's progress: opened with the number of operations to come, it gives the
# function each batch of finished operations is counted with (None: nothing is shown). The
# command line's is a progress bar on a terminal (cli/bench_render.py).
Advance = Callable[[int], None] | None
Progress = Callable[[int], AbstractContextManager[Advance]]


@contextmanager
def no_progress(total: int) -> Iterator[Advance]:
    yield None


async def run_bench(
    cluster: str | None,
    nodes: int | None,
    ops: int,
    concurrency: int,
    level: str,
    weights: tuple[int, int],
    latency: str = "none",
    hot: float = 0.0,
    progress: Progress = no_progress,
) -> dict[str, Any]:
    """`ops` gets and puts (`weights`) at `level` from `concurrency` clients, on the process cluster
    in `cluster` or an in-process one of `nodes` nodes, then the echo baseline; the report."""
    from bhandar_cli.bench.echo_baselines import echo_baseline, memory_echo_baseline
    from bhandar_cli.core.model import parse_value_text
    from bhandar_cli.core.protocol import PutRequest

    parsed = parse_value_text(VALUE)
    value, ctype = parsed.data, parsed.ctype
    echo_tls: EchoTls | None = None
    with progress(2 * ops) as advance:
        if nodes is None:
            from bhandar_cli.client import open_tcp_client

            async with open_tcp_client(cluster, level) as client:
                echo_tls = echo_tls_of(client.backend.cluster)
                target = {
                    "target": "processes",
                    "nodes": len(client.backend.names),
                    "dir": client.backend.cluster.dir,
                }
                store = await store_load(client, ops, concurrency, weights, value, ctype, advance, hot)
        else:
            target = {"target": "in-process", "nodes": nodes, "latency": latency}
            store = await _in_process_load(
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


def echo_tls_of(cluster: ClusterFile) -> EchoTls | None:
    """The echo speaks TLS against a TLS cluster (with its first node's identity), so the ratio
    compares the same transport."""
    from bhandar_cli.bench.echo_baselines import EchoTls
    from bhandar_cli.fleet import client_access, node_tls_dir

    if not cluster.tls:
        return None
    first = cluster.nodes[0]
    return EchoTls(str(node_tls_dir(first)), first.id, client_access(cluster))


async def _in_process_load(
    nodes: int, latency: str, level: str, ops: int, concurrency: int, weights: tuple[int, int], *rest: Any
) -> dict[str, Any]:
    import trio

    from bhandar_cli.client import Client, InProcessBackend
    from bhandar_cli.fleet import InProcessCluster
    from bhandar_cli.host import LatencyModel

    model = LatencyModel(base_ms=0, mean_ms=0, spike_rate=0) if latency == "none" else LatencyModel()
    cluster = InProcessCluster(nodes, min(3, nodes), latency=model)
    async with trio.open_nursery() as nursery:
        await nursery.start(cluster.run)
        client = Client(InProcessBackend(cluster), level)
        result = await store_load(client, ops, concurrency, weights, *rest)
        nursery.cancel_scope.cancel()
    return result


async def store_load(
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

    await client.admin.keyspace_create(KEYSPACE)  # or find it there from an earlier run

    async def preload(worker: int, i: int) -> str:
        await client.data.put(KEYSPACE, written[i], value, ctype, "none")
        return "put"

    await run_load(len(written), concurrency, preload)  # also warms up connections

    async def one(worker: int, i: int) -> str:
        if hot and rng.random() < hot:  # the skew: one key takes this share of every operation
            await tagged("get", client.data.get(KEYSPACE, written[0]))
            return "get"
        if rng.random() * (weights[0] + weights[1]) < weights[0]:
            key, op = rng.choice(written), "get"
            await tagged(op, client.data.get(KEYSPACE, key))
        else:
            key, op = f"{run}-w{worker}-{i}", "put"
            await tagged(op, client.data.put(KEYSPACE, key, value, ctype, "none"))
            written.append(key)
        return op

    result = await run_load(ops, concurrency, one, advance)
    summary = result.summary()
    summary["first_error"] = result.first_error
    summary["hot"] = await client.views.hot(5)  # what the nodes' sketches saw, skewed or not
    return summary


async def tagged(op: str, call: Any) -> Any:
    try:
        return await call
    except Exception as exc:
        exc.op = op  # type: ignore[attr-defined]  # run_load counts the error under this op
        raise
