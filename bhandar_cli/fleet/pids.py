"""Whether node processes run: a pid check that sees through zombies and reused pids, the
processes this process started, and the cluster file of a cluster that runs.

Kept apart from the supervisor (which starts and stops nodes under trio) so that a one-shot
command can ask "is node B up?" without importing trio.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from bhandar_cli.fleet import cluster_file
from bhandar_cli.fleet.cluster_file import ClusterFile, ClusterFileError

if TYPE_CHECKING:
    import subprocess  # what starts the children is the supervisor; a one-shot command never does

PF_KTHREAD = 0x00200000  # /proc/PID/stat flags: a kernel thread (whose command line is empty too)

CHILDREN: dict[int, subprocess.Popen[bytes]] = {}
"""Processes this process started, so that `pid_alive` reaps them: a killed child stays a zombie
(and looks alive to `kill(pid, 0)`) until its parent waits for it."""


def pid_alive(pid: int) -> bool:
    """Is `pid` a running node process of ours (not gone, not a zombie, not a reused pid)?

    A process that is exiting, its memory already released (so its command line reads empty)
    but not yet a zombie, still counts as running: it may hold its ports and files a moment
    longer, and `cluster down` promises they are free when it returns."""
    if pid <= 0:
        return False
    child = CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return _signal_zero(pid)  # no /proc here: trust kill(pid, 0)
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X") or int(fields[6]) & PF_KTHREAD:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    # An empty command line is a process on its way out.
    return not cmdline or b"bhandar_cli" in cmdline  # else the pid was reused by another program


def _signal_zero(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or someone else's process has that pid
        return False
    return True


def load_running(directory: str | Path) -> ClusterFile:
    """The cluster file of `directory`, if at least one of its nodes runs (else ClusterFileError)."""
    cluster = cluster_file.load(directory)
    if not any(pid_alive(n.pid) for n in cluster.nodes):
        raise ClusterFileError(
            f"stale cluster file {cluster_file.path_of(directory)}: none of its nodes is running "
            f"(start them with `bhandar cluster up --dir {directory}`)"
        )
    return cluster
