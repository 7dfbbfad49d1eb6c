"""`bhandar bench check`: what the harness adds, measured against a direct pipe in the same run,
and how fast the lin-kv checker decides a long history.

The harness: N hop nodes (check/hop_node.py) pass tokens round a ring. Through the harness,
every hop is a line read from one node's standard output, decoded, checked, routed through the
network model, journalled and written to the next node's standard input. In the baseline the
same nodes run with each one's standard output piped straight into the next one's input. Each
node stamps the messages it sends and keeps the delay of every hop it receives, so both runs
are measured the same way, by the nodes: hops per second (from the first hop received to the
last, all nodes together), and the median delay of a hop, under a light load (one token per
node) and under a heavy one (`tokens` in flight). Added per hop = harness minus pipe.

The checker: a synthetic history of the lin-kv workload (its operations and keys, a register
per key applying them in a random order consistent with real time, `clients` clients, 5% of
operations timing out with their effect applied or not), decided once as it is (valid), once
with one read made stale (invalid, with its explanation), and once with every operation on one
key.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from random import Random
from typing import Any

import trio

from bhandar_cli.check.cluster import NodeCluster, SetupError
from bhandar_cli.check.maelstrom_history import MaelstromHistory
from bhandar_cli.check.router import Router
from bhandar_cli.check.workloads.lin_kv import LinKv

HOP_NODE = [sys.executable, "-m", "bhandar_cli.check.hop_node"]


class HopRunFailed(RuntimeError):
    """A hop node did not start, broke the protocol or wrote no report: that run measured nothing."""


def _hops(reports: list[dict[str, Any]]) -> dict[str, float]:
    hops = sum(r["hops"] for r in reports)
    firsts = [r["first_ns"] for r in reports if r["hops"]]
    lasts = [r["last_ns"] for r in reports if r["hops"]]
    span = (max(lasts) - min(firsts)) / 1e9 if firsts else 0.0
    delays = [d for r in reports for d in r["delays_us"]]
    return {
        "hops": hops,
        "hops_per_s": round(hops / span, 1) if span > 0 else 0.0,
        "median_hop_ms": round(statistics.median(delays) / 1000.0, 3) if delays else 0.0,
        "p99_hop_ms": round(sorted(delays)[int(len(delays) * 0.99)] / 1000.0, 3) if delays else 0.0,
    }


def _last_json(path: Path) -> dict[str, Any]:
    for line in reversed(path.read_text(encoding="utf-8", errors="replace").splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    raise HopRunFailed(f"hop node {path.stem} wrote no report{_said(path)}")


def _said(log: Path) -> str:
    """The last line a node wrote on standard error (its log goes with the run's directory)."""
    lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines() if log.exists() else []
    return f" (it said: {lines[-1][:200]})" if lines else " (its standard error is empty)"


def through_harness(nodes: int, tokens: int, seconds: float, workdir: Path) -> dict[str, float]:
    names = [f"n{i}" for i in range(1, nodes + 1)]

    def refuse(exc: Exception) -> None:
        raise HopRunFailed(f"a hop node broke the protocol: {exc}")

    async def run() -> None:
        cluster = NodeCluster(names, HOP_NODE, workdir, dict(os.environ), 10**9, refuse)
        router = Router(cluster.procs, Random(0), None, lambda m: None, {}, trio.current_time())
        cluster.attach(router)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(router.run)
            try:
                await cluster.start(nursery, names, 30.0)
                for k in range(tokens):
                    body = {"type": "hop", "token": k, "sent": time.monotonic_ns()}
                    router.send_to_node("c1", names[k % nodes], body)
                await trio.sleep(seconds)
            finally:
                await cluster.stop()
                nursery.cancel_scope.cancel()

    try:
        trio.run(run)
    except* (SetupError, HopRunFailed) as group:
        raise HopRunFailed("; ".join(str(e) for e in group.exceptions)) from None
    return _hops([_last_json(workdir / f"{name}.log") for name in names])


def through_pipes(nodes: int, tokens: int, seconds: float, workdir: Path) -> dict[str, float]:
    names = [f"n{i}" for i in range(1, nodes + 1)]
    pipes = [os.pipe() for _ in names]  # pipes[i] feeds node i's standard input
    procs = []
    logs = [workdir / f"pipe-{name}.log" for name in names]
    try:
        for i, name in enumerate(names):
            ready_read, ready_write = os.pipe()
            env = {**os.environ, "HOP_ID": name, "HOP_IDS": ",".join(names), "HOP_READY_FD": str(ready_write)}
            with logs[i].open("wb") as err:
                procs.append(
                    subprocess.Popen(
                        HOP_NODE,
                        stdin=pipes[i][0],
                        stdout=pipes[(i + 1) % nodes][1],
                        stderr=err,
                        env=env,
                        pass_fds=(ready_write,),
                    )
                )
            os.close(ready_write)
            with os.fdopen(ready_read, "rb") as ready:
                if ready.read(1) != b"r":  # end of file: the node died before it was ready
                    raise HopRunFailed(f"hop node {name} did not start{_said(logs[i])}")
        for read_end, _ in pipes:
            os.close(read_end)
        for k in range(tokens):
            line = {
                "src": "c1",
                "dest": names[k % nodes],
                "body": {"type": "hop", "token": k, "sent": time.monotonic_ns()},
            }
            os.write(pipes[k % nodes][1], json.dumps(line).encode() + b"\n")
        time.sleep(seconds)  # the measurement itself: the tokens circulate meanwhile
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for _, write_end in pipes:
            os.close(write_end)
    return _hops([_last_json(log) for log in logs])


def harness_bench(nodes: int, tokens: int, seconds: float) -> dict[str, Any]:
    """Both runs, light and heavy, side by side; the added delay per hop."""
    out: dict[str, Any] = {"nodes": nodes, "tokens": tokens, "seconds": seconds}
    with tempfile.TemporaryDirectory(prefix="bhandar-bench-check-") as tmp:
        for load, count in (("light", nodes), ("heavy", tokens)):
            for way, measure in (("harness", through_harness), ("pipe", through_pipes)):
                work = Path(tmp) / f"{way}-{load}"
                work.mkdir()
                out[f"{way}_{load}"] = measure(nodes, count, seconds, work)
    for load in ("light", "heavy"):
        added = out[f"harness_{load}"]["median_hop_ms"] - out[f"pipe_{load}"]["median_hop_ms"]
        out[f"added_ms_per_hop_{load}"] = round(added, 3)
    return out


# --- the checker -----------------------------------------------------------------------------------


def register_history(ops: int, clients: int, seed: int, one_key: bool = False) -> MaelstromHistory:
    """A linearizable lin-kv history: the workload's operations, applied to one register per key
    at a random point inside each operation's interval; 5% time out (applied or not)."""
    rng = Random(seed)
    workload = LinKv(Random(seed), [f"n{i}" for i in range(1, clients + 1)])
    history = MaelstromHistory()
    free = [0.0] * clients
    planned = []
    for _ in range(ops):
        c = rng.randrange(clients)
        f, value = workload.next_op(rng, c + 1)
        if one_key:
            value = {**value, "key": 0}
        call = free[c] + rng.uniform(0, 0.002)
        point = call + rng.uniform(0, 0.004)
        ret = point + rng.uniform(0, 0.004)
        free[c] = ret
        op = history.invoke(call, f"c{c + 1}", "n1", f, value)
        planned.append((point, ret, op))
    state: dict[Any, Any] = {}
    for _, ret, op in sorted(planned, key=lambda p: p[0]):
        key, timeout = op.value["key"], rng.random() < 0.05
        if op.f == "read":
            if key in state:
                op.answer(ret, state[key])
            else:
                op.failed(ret, 20, "")
        elif op.f == "write":
            if not timeout or rng.random() < 0.5:
                state[key] = op.value["value"]
            op.answer(ret, None)
        elif state.get(key, object()) == op.value["from"] and (not timeout or rng.random() < 0.5):
            state[key] = op.value["to"]
            op.answer(ret, None)
        else:
            op.failed(ret, 22 if key in state else 20, "")
        if timeout and op.f != "read":
            op.type, op.completed, op.result, op.code = "info", float("inf"), None, None
        workload.completed(op)
    return history


def spoil_a_read(history: MaelstromHistory) -> None:
    """Make one late read stale: it returns the value of a write that another write, complete
    before the read began, had replaced."""
    reads = [op for op in history.ops if op.f == "read" and op.ok]
    for target in reads[int(len(reads) * 0.9) :]:
        key = target.value["key"]
        writes = [op for op in history.ops if op.f == "write" and op.ok and op.value["key"] == key]
        before = [w for w in writes if w.completed < target.invoked]
        if len(before) >= 2 and before[-2].completed < before[-1].invoked:
            target.result = before[-2].value["value"]
            return


def checker_bench(ops: int, clients: int, seed: int) -> dict[str, Any]:
    out: dict[str, Any] = {"ops": ops, "clients": clients}
    for name, one_key, spoil in (
        ("valid", False, False),
        ("stale_read", False, True),
        ("one_key", True, False),
    ):
        history = register_history(ops, clients, seed, one_key)
        if spoil:
            spoil_a_read(history)
        checker = LinKv(Random(seed), ["n1"])
        started = time.perf_counter()
        verdict = checker.check(history)
        out[name] = {
            "seconds": round(time.perf_counter() - started, 3),
            "verdict": verdict.status,
            "keys": verdict.stats.get("keys"),
            "explained_by": len(verdict.problems[0].ops) if verdict.problems else 0,
        }
    return out
