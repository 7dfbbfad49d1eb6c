"""`bhandar bench etcd`: Bhandar beside etcd on this machine, under the same HTTP load.

When an `etcd` binary is installed (Debian: etcd-server), this starts a 3-member etcd cluster on
loopback and a 3-node Bhandar process cluster as `cluster up` makes it (TLS, tokens, encryption at
rest), both in a temporary directory, and drives each with the same load from a process of its own
(bench/http_load.py: keep-alive clients dealt round the three servers, 100-byte values; puts to fresh
keys, then gets over 100 keys written first). Rounds alternate which store goes first, so a noisy
machine weighs on both alike. The report gives each side's median over the rounds of ops/s, p99
and the servers' CPU per operation, and Bhandar's ratio to etcd. Every process started here is
stopped before it returns.

etcd runs with its defaults but for what keeps it on loopback and in the temporary directory:
names, data directories, client and peer URLs on 127.0.0.1 ports of its own, a new cluster token,
logs at error level. Its client API is the JSON gateway (`/v3/kv/put`, `/v3/kv/range`) over plain
HTTP: etcd's default. Its gets are linearizable (its default), Bhandar's at QUORUM (its default).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

SIDES = ("etcd", "bhandar")
OPS = ("put", "get")
MEMBERS = 3
GET_KEYS = 100
VALUE = "v" * 100
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


def etcd_binary() -> str | None:
    return shutil.which("etcd") or next((p for p in ("/usr/bin/etcd",) if os.access(p, os.X_OK)), None)


# --- etcd ------------------------------------------------------------------------------------


def start_etcd(binary: str, workdir: Path) -> tuple[list[subprocess.Popen[bytes]], list[tuple[str, int]]]:
    """A 3-member etcd on 127.0.0.1, waited for until every member reports healthy."""
    from bhandar_cli.fleet import free_ports

    ports = free_ports(2 * MEMBERS)
    clients, peers = ports[:MEMBERS], ports[MEMBERS:]
    names = [f"etcd{i}" for i in range(MEMBERS)]
    initial = ",".join(f"{n}=http://127.0.0.1:{p}" for n, p in zip(names, peers, strict=True))
    # etcd reads any ETCD_* variable as a flag (Debian's /etc/default/etcd sets some): none here.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name, client, peer in zip(names, clients, peers, strict=True):
            log = open(workdir / f"{name}.log", "wb")  # noqa: SIM115 (the process holds it)
            procs.append(
                subprocess.Popen(
                    [
                        binary,
                        f"--name={name}",
                        f"--data-dir={workdir / name}",
                        f"--listen-client-urls=http://127.0.0.1:{client}",
                        f"--advertise-client-urls=http://127.0.0.1:{client}",
                        f"--listen-peer-urls=http://127.0.0.1:{peer}",
                        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                        f"--initial-cluster={initial}",
                        "--initial-cluster-state=new",
                        f"--initial-cluster-token=bhandar-bench-{os.getpid()}",
                        "--logger=zap",
                        "--log-level=error",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    cwd=workdir,
                )
            )
            log.close()
        deadline = time.monotonic() + START_TIMEOUT
        for proc, client in zip(procs, clients, strict=True):
            while not _healthy(client):
                if proc.poll() is not None:
                    raise RuntimeError(f"etcd exited at start (code {proc.returncode}): {_tail(workdir)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"etcd did not report healthy within {START_TIMEOUT:g} s: {_tail(workdir)}"
                    )
                time.sleep(0.1)
    except BaseException:
        stop_etcd(procs)
        raise
    return procs, [("127.0.0.1", p) for p in clients]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1.0) as answer:
            return bool(json.loads(answer.read()).get("health") == "true")
    except (OSError, ValueError):
        return False


def _tail(workdir: Path) -> str:
    lines = [line for log in sorted(workdir.glob("etcd*.log")) for line in log.read_text().splitlines()]
    return " | ".join(lines[-3:]) or "no log"


def stop_etcd(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- the run -----------------------------------------------------------------------------------


def load(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the load process (bench/http_load.py) once; its JSON report."""
    done = subprocess.run(
        [sys.executable, "-m", "bhandar_cli.bench.http_load"],
        input=json.dumps(spec).encode(),
        capture_output=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the load process failed: {done.stderr.decode(errors='replace')[-400:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


async def run_etcd_bench(
    workdir: Path, binary: str, ops: int, rounds: int, clients: int, http_workers: int = 0
) -> dict[str, Any]:
    """The side-by-side run; `http_workers`: each node's HTTP front processes (`node run
    --http-workers`), whose CPU counts as the node's."""
    import secrets

    from bhandar_cli.fleet import down, up

    etcd_procs: list[subprocess.Popen[bytes]] = []
    cluster = None
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {side: {op: [] for op in OPS} for side in SIDES}
    try:
        (workdir / "etcd").mkdir()
        etcd_procs, etcd_servers = start_etcd(binary, workdir / "etcd")
        fronts = ("--http-workers", str(http_workers)) if http_workers else ()
        cluster = await up(workdir / "bhandar", 3, 3, 0, 8, 3, fronts, tls=True)
        bases: dict[str, dict[str, Any]] = {
            "etcd": {"api": "etcd", "servers": etcd_servers, "pids": [p.pid for p in etcd_procs]},
            "bhandar": {
                "api": "bhandar",
                "servers": [(n.host, n.http_port) for n in cluster.nodes],
                "pids": [n.pid for n in cluster.nodes],
                "token": cluster.token,
                "ca": str(Path(cluster.dir) / "tls" / "ca.crt"),
            },
        }
        common = {"clients": clients, "value": VALUE, "keys": [f"get:{i}" for i in range(GET_KEYS)]}
        _create_keyspace(cluster)
        for side in SIDES:  # the keys the gets read
            load({**bases[side], **common, "op": "put", "ops": GET_KEYS, "prefix": ""})
        for r in range(rounds):
            for side in SIDES if r % 2 == 0 else SIDES[::-1]:
                for op in OPS:
                    prefix = f"put:{secrets.token_hex(4)}:" if op == "put" else ""
                    runs[side][op].append(
                        load({**bases[side], **common, "op": op, "ops": ops, "prefix": prefix})
                    )
    finally:
        stop_etcd(etcd_procs)
        if cluster is not None:
            await down(cluster)
    return report(runs, ops, rounds, clients, etcd_version(binary)) | {"http_workers": http_workers}


def _create_keyspace(cluster: Any) -> None:
    import ssl

    node = cluster.nodes[0]
    ctx = ssl.create_default_context(cafile=str(Path(cluster.dir) / "tls" / "ca.crt"))
    request = urllib.request.Request(
        f"https://{node.host}:{node.http_port}/v1/keyspaces/bench",
        data=b"{}",
        method="PUT",
        headers={"Authorization": f"Bearer {cluster.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10.0, context=ctx) as answer:
        answer.read()


def etcd_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return out.splitlines()[0].removeprefix("etcd Version: ").strip() if out else "?"


def report(
    runs: dict[str, dict[str, list[dict[str, Any]]]], ops: int, rounds: int, clients: int, version: str
) -> dict[str, Any]:
    from bhandar_cli import native

    sides: dict[str, Any] = {}
    for side in SIDES:
        sides[side] = {}
        for op in OPS:
            done = runs[side][op]
            sides[side][op] = {
                key: statistics.median(d[key] for d in done)
                for key in ("ops_per_s", "p99_ms", "cpu_us_per_op", "own_cpu_us_per_op")
            } | {
                "rounds_ops_per_s": [d["ops_per_s"] for d in done],
                "errors": sum(d["errors"] for d in done),
                "first_error": next((d["first_error"] for d in done if d["first_error"]), ""),
            }
    ratios = {
        op: {
            "ops": _ratio(sides["bhandar"][op]["ops_per_s"], sides["etcd"][op]["ops_per_s"]),
            "p99": _ratio(sides["bhandar"][op]["p99_ms"], sides["etcd"][op]["p99_ms"]),
            "cpu_per_op": _ratio(sides["bhandar"][op]["cpu_us_per_op"], sides["etcd"][op]["cpu_us_per_op"]),
        }
        for op in OPS
    }
    errors = sum(sides[side][op]["errors"] for side in SIDES for op in OPS)
    return {
        "cmd": "bench etcd",
        "ok": errors == 0,
        "etcd_version": version,
        "hot_path": native.describe(),
        "ops_per_round": ops,
        "rounds": rounds,
        "clients": clients,
        "value_bytes": len(VALUE),
        "errors": errors,
        **sides,
        "ratio": ratios,
    }


def _ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else 0.0
