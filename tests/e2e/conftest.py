"""Process clusters on 127.0.0.1 for the tests, and the `bhandar` command line as a subprocess.

Clusters are secure, as `cluster up` makes them by default: every process test runs over TLS.

Every process a test starts is stopped by a finalizer, also when the test fails: each node leads
its own process group and the group is SIGKILLed. Waits poll a condition under a deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
import trio

from bhandar_cli.fleet import cluster_file, pids, supervisor
from bhandar_cli.fleet.cluster_file import ClusterFile, client_access
from bhandar_cli.node.net.rpc import rpc_once
from bhandar_cli.security.join_tokens import JOIN_TOKEN_ENV

REPO = Path(__file__).resolve().parents[2]
# Short frame timeout so the rogue-client test does not wait 5 s for a half frame.
NODE_ARGS = ("--frame-timeout", "1", "--fsync", "batch")


# The keyspaces the tests write to (besides kv and counters), created as a user would first.
TEST_KEYSPACES = ("web", "cli", "crash")


def start_cluster(directory: Path, nodes: int = 5, protocol: int | None = None) -> ClusterFile:
    from bhandar_cli.client.openers import open_tcp_client

    async def up() -> ClusterFile:
        cluster = await supervisor.up(directory, nodes, 3, 0, 8, 3, NODE_ARGS, 30.0, protocol=protocol)
        async with open_tcp_client(directory) as client:
            for name in TEST_KEYSPACES:
                await client.admin.keyspace_create(name)  # returns once every node knows it
        return cluster

    return trio.run(up)


def kill_all(directory: Path) -> None:
    """SIGKILL every node process group the cluster file names (and reap our children)."""
    try:
        cluster = cluster_file.load(directory)
    except cluster_file.ClusterFileError:
        return
    for entry in cluster.nodes:
        if pids.pid_alive(entry.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(entry.pid, signal.SIGKILL)
    for pid, child in list(pids.CHILDREN.items()):
        if child.poll() is None and pid in {n.pid for n in cluster.nodes}:
            child.wait(timeout=10)


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterFile]:
    """A 5-node cluster for tests that do not break it (data may accumulate)."""
    directory = tmp_path_factory.mktemp("shared") / "cluster"
    try:
        yield start_cluster(directory)
    finally:
        kill_all(directory)


@pytest.fixture
def fresh_cluster(tmp_path: Path) -> Iterator[ClusterFile]:
    """A 5-node cluster of the test's own, for tests that kill, restart or partition nodes."""
    directory = tmp_path / "cluster"
    try:
        yield start_cluster(directory)
    finally:
        kill_all(directory)


@pytest.fixture
def small_cluster(tmp_path: Path) -> Iterator[ClusterFile]:
    """A 3-node cluster of the test's own (an import target, a configuration to roll out)."""
    directory = tmp_path / "small"
    try:
        yield start_cluster(directory, nodes=3)
    finally:
        kill_all(directory)


@pytest.fixture
def fresh_cluster_v1(tmp_path: Path) -> Iterator[ClusterFile]:
    """As `fresh_cluster`, with every node speaking wire protocol 1 (`node run --protocol 1`)."""
    directory = tmp_path / "cluster"
    try:
        yield start_cluster(directory, protocol=1)
    finally:
        kill_all(directory)


def run_cli(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    """`bhandar ARGS` as a subprocess (the installed package, never the current directory); a
    command that starts a cluster of its own (bench repair, bench big) needs a longer timeout."""
    full_env = {k: v for k, v in os.environ.items() if k != "BHANDAR_CLUSTER"}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-P", "-m", "bhandar_cli", *args],
        input=stdin,
        capture_output=True,
        cwd=REPO,
        env=full_env,
        timeout=timeout,
    )


@pytest.fixture
def bhandar() -> Callable[..., subprocess.CompletedProcess[bytes]]:
    return run_cli


def rpc(cluster: ClusterFile, node: str, op: str, **args: Any) -> Any:
    entry = cluster.node(node)
    reach = client_access(cluster)
    return trio.run(lambda: rpc_once(entry.host, entry.port, op, 3.0, node, reach, **args))


def tls_verify(cluster: ClusterFile) -> ssl.SSLContext | bool:
    """What an HTTP client checks a node's certificate with (the cluster CA), or True if plain."""
    ca = client_access(cluster).ca_cert
    return ssl.create_default_context(cafile=str(ca)) if ca else True


def http_base(cluster: ClusterFile, node: str) -> str:
    """The node's HTTP API: https with a secure cluster (its certificate names its address)."""
    entry = cluster.node(node)
    scheme = "https" if cluster.tls else "http"
    return f"{scheme}://{entry.host}:{entry.http_port}"


def raw_connection(cluster: ClusterFile, node: str, timeout: float = 5.0) -> socket.socket:
    """A socket to the node's port for hand-made frames, inside TLS with a secure cluster."""
    entry = cluster.node(node)
    sock = socket.create_connection((entry.host, entry.port), timeout=timeout)
    ca = client_access(cluster).ca_cert
    if ca is None:
        return sock
    return ssl.create_default_context(cafile=str(ca)).wrap_socket(sock, server_hostname=entry.id)


def http_client(cluster: ClusterFile, node: str | None = None, token: str | None = None) -> httpx.Client:
    """An HTTP client of the cluster: its CA, `token` (default: the admin token), and the base URL
    of `node` when one is given."""
    return httpx.Client(
        base_url=http_base(cluster, node) if node else "",
        headers=bearer(cluster, token),
        verify=tls_verify(cluster),
        timeout=15,
    )


def bearer(cluster: ClusterFile, token: str | None = None) -> dict[str, str]:
    """The HTTP header that shows `token` (default: the cluster's admin token)."""
    return {"Authorization": f"Bearer {token or cluster.token}"}


def wait_for(condition: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Poll `condition` until it holds; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


# A cluster spread over loopback addresses, and nodes joining it from another one (docs/joining.md).
SPREAD_HOSTS = "127.0.0.2-5"
JOINER_HOST = "127.0.0.6"


@pytest.fixture
def spread_cluster(tmp_path: Path) -> Iterator[ClusterFile]:
    directory = tmp_path / "cluster"
    try:
        up = run_cli(
            *("cluster", "up", "--nodes", "4", "--zones", "2", "--hosts", SPREAD_HOSTS),
            *("--dir", str(directory)),
            *("--node-arg=--frame-timeout", "--node-arg=1"),
        )
        assert up.returncode == 0, up.stderr.decode()
        yield cluster_file.load(directory)
    finally:
        kill_all(directory)


class Joiner:
    """`bhandar node run --join` processes of one test; every one is killed at the end."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        node_id: str,
        token: str,
        join: str,
        host: str,
        port: int = 0,
        http_port: int = -1,
        how: Literal["env", "file", "stdin"] = "env",
    ) -> subprocess.Popen[bytes]:
        """`node run --join` with `token` passed as an operator would: in $BHANDAR_JOIN_TOKEN, in a
        0600 file (--token-file PATH) or on standard input (--token-file -)."""
        log = open(self.root / f"{node_id}.log", "ab")  # noqa: SIM115 (the child writes to it)
        argv = [
            *(sys.executable, "-P", "-m", "bhandar_cli", "node", "run", "--join", join),
            *("--id", node_id, "--host", host, "--port", str(port), "--http-port", str(http_port)),
            *("--data-dir", str(self.root / node_id), "--frame-timeout", "1"),
        ]
        env = {k: v for k, v in os.environ.items() if k != JOIN_TOKEN_ENV}
        if how == "env":
            env[JOIN_TOKEN_ENV] = token
        elif how == "file":
            token_file = self.root / f"{node_id}.token"
            token_file.touch(mode=0o600)
            token_file.write_text(token + "\n")
            argv += ["--token-file", str(token_file)]
        else:
            argv += ["--token-file", "-"]
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE if how == "stdin" else subprocess.DEVNULL,
            cwd=REPO,
            env=env,
            start_new_session=True,
        )
        if proc.stdin is not None:
            proc.stdin.write(token.encode() + b"\n")
            proc.stdin.close()
        log.close()
        self.procs.append(proc)
        return proc

    def finish(self, proc: subprocess.Popen[bytes], node_id: str) -> tuple[int, str]:
        """Wait (bounded) for a node that should refuse to start; its exit status and output."""
        code = proc.wait(timeout=60)
        return code, (self.root / f"{node_id}.log").read_text(errors="replace")

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.fixture
def joiners(tmp_path: Path) -> Iterator[Joiner]:
    joiner = Joiner(tmp_path)
    try:
        yield joiner
    finally:
        joiner.stop_all()
