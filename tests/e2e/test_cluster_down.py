"""`cluster down` returns only once the node processes have exited, escalating to SIGKILL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import trio

from bhandar_cli.fleet import pids, supervisor
from bhandar_cli.fleet.cluster_file import NodeEntry
from bhandar_cli.fleet.placement import free_ports
from tests.e2e.conftest import NODE_ARGS, kill_all, run_cli


def running(pid: int) -> bool:
    """The kernel's view, independent of `pids.pid_alive`: a zombie has exited (nothing reaps the
    nodes of a `cluster up` that has ended, so they stay zombies until init does)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_no_node_process_is_alive_when_down_returns(tmp_path: Path) -> None:
    directory = tmp_path / "c"
    node_args = [a for arg in NODE_ARGS for a in ("--node-arg", arg)]
    try:
        up = run_cli("cluster", "up", "--nodes", "3", "--dir", str(directory), *node_args, "-o", "json")
        assert up.returncode == 0, up.stderr.decode()
        node_pids = [n["pid"] for n in json.loads(up.stdout)["nodes"]]
        assert all(running(pid) for pid in node_pids)
        down = run_cli("cluster", "down", "--dir", str(directory), "-o", "json")
        assert down.returncode == 0, down.stderr.decode()
        assert json.loads(down.stdout)["ok"] is True
        assert [pid for pid in node_pids if running(pid)] == []
    finally:
        kill_all(directory)


def test_a_node_that_ignores_sigterm_is_killed_before_stop_returns(tmp_path: Path) -> None:
    # A stand-in node: it ignores SIGTERM and answers no shutdown RPC (nothing listens on its
    # port). The comment puts "bhandar_cli" in its command line, as a node's is.
    script = (
        "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); signal.pause()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script + "  # bhandar_cli"], stdout=subprocess.PIPE, start_new_session=True
    )
    pids.CHILDREN[proc.pid] = proc
    try:
        assert proc.stdout is not None and proc.stdout.readline()  # its handler is in place
        port = free_ports(1)[0]
        entry = NodeEntry("A", "z1", "127.0.0.1", port, port, str(tmp_path), str(tmp_path / "log"), proc.pid)
        how = trio.run(lambda: supervisor.stop(entry, timeout=0.2))
        assert how == "killed"
        assert proc.poll() == -9 and not pids.pid_alive(proc.pid)
    finally:
        proc.kill()
        proc.wait()
        pids.CHILDREN.pop(proc.pid, None)
