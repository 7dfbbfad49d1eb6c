"""`kill B; kill B` over node processes says "killed B", then "B was already down" (issue 41, item
10: the second said "killed B" too, 1 try in 7). The REPL on a process cluster is not the nodes'
parent: right after SIGKILL the process is still exiting, and an exiting process counts as
running, so kill now returns only once the process has exited. Real processes: a 3-node cluster,
`bhandar repl --connect` as a subprocess."""

from __future__ import annotations

import json

from bhandar_cli.fleet import pids
from bhandar_cli.fleet.cluster_file import ClusterFile, load
from tests.e2e.conftest import run_cli

ROUNDS = 4


def test_kill_twice_says_the_second_time_that_the_node_is_already_down(small_cluster: ClusterFile) -> None:
    said = []
    for _ in range(ROUNDS):
        pid = load(small_cluster.dir).node("B").pid
        ran = run_cli(
            "repl",
            "--connect",
            small_cluster.dir,
            "-o",
            "json",
            "-e",
            "kill B; kill B; revive B",
            timeout=120,
        )
        assert ran.returncode == 0, ran.stderr
        replies = [json.loads(line) for line in ran.stdout.decode().splitlines()]
        said.append([(r["cmd"], r["changed"]) for r in replies])
        assert not pids.pid_alive(pid)  # the process that was killed is gone; revive started another
    assert said == [[("kill", True), ("kill", False), ("revive", True)]] * ROUNDS
