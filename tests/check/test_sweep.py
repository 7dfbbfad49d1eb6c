"""`bhandar check --sweep N --start S`: one line per seed (its verdict, the command that repeats it),
the tally and the exit code, here (`--jobs`) and on a Dask cluster of worker processes
(`--scheduler`), which print the same lines; each seed in a log directory of its own."""

from __future__ import annotations

import json
import re
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from bhandar_cli.cli.check_cmd import check
from tests.check.support import py
from tests.support.dask_cluster import LocalDask, dask_cluster

QUICK = ["--recovery", "0.3s", "--timeout", "0.5s", "--rate", "40"]
ECHO = ["--bin", " ".join(py("echo.py")), "-w", "echo", *QUICK, "--time-limit", "0.6s"]
# Every put of this node becomes a sibling: a run is invalid once two clients put one key, which
# seeds 1 to 3 of these options draw early (test_cli.py runs seed 2 alone).
IGNORES = [
    "--bin",
    " ".join(py("dynamo_kv.py", MODE="ignore")),
    "-w",
    "dynamo-kv",
    *QUICK,
    "--time-limit",
    "1.5s",
]
SEED_LINE = re.compile(r"seed ([0-9]+): (valid|invalid|unknown|error)(?: \((.*)\))?; repeat with: (.*)")


def invoke(*args: str) -> Result:
    app = typer.Typer(add_completion=False)

    @app.callback()
    def root() -> None:
        """Test harness."""

    app.command("check")(check)
    return CliRunner().invoke(app, ["check", *args])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalDask]:
    with dask_cluster(tmp_path_factory.mktemp("dask")) as local:
        yield local


def seed_lines(stdout: str) -> dict[int, tuple[str, str]]:
    """seed -> (verdict, repeat command), from the sweep's lines."""
    found = {}
    for line in stdout.splitlines():
        if (m := SEED_LINE.fullmatch(line)) is not None:
            found[int(m[1])] = (m[2], m[4])
    return found


def test_a_sweep_runs_each_seed_in_its_own_directory_and_says_each_verdict(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    result = invoke(*ECHO, "--log-dir", str(logs), "--sweep", "3", "--start", "40", "--jobs", "2")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"check sweep: 3 seeds, 40 to 42, on 2 at a time here; logs in {logs}/seed-N"
    seeds = seed_lines(result.stdout)
    assert sorted(seeds) == [40, 41, 42] and {v for v, _ in seeds.values()} == {"valid"}
    for seed, (_, command) in seeds.items():
        assert command.startswith("bhandar check --bin ") and f" --seed {seed} " in f"{command} "
        assert (logs / f"seed-{seed}" / "history.jsonl").stat().st_size > 0
    assert re.fullmatch(r"sweep: 3 seeds: 3 valid, 0 invalid, 0 unknown, 0 error in [0-9.]+ s", lines[-1])
    assert len(lines) == 5


def test_invalid_seeds_exit_1_and_their_repeat_command_fails_alone(tmp_path: Path) -> None:
    result = invoke(*IGNORES, "--log-dir", str(tmp_path / "logs"), "--sweep", "2", "--start", "1")
    assert result.exit_code == 1, result.output
    seeds = seed_lines(result.stdout)
    assert sorted(seeds) == [1, 2] and {v for v, _ in seeds.values()} == {"invalid"}
    assert result.stdout.splitlines()[-1] == "not valid: 1 2"
    alone = invoke(*shlex.split(seeds[2][1])[2:], "--log-dir", str(tmp_path / "alone"))
    assert alone.exit_code == 1 and "INVALID: " in alone.stdout and ", seed 2" in alone.stdout


def test_a_seed_that_cannot_be_judged_makes_the_sweep_exit_2(tmp_path: Path) -> None:
    no_init = ["--bin", " ".join(py("no_init.py")), "-w", "echo", *QUICK, "--init-timeout", "0.5s"]
    no_init += ["--time-limit", "0.6s"]
    result = invoke(*no_init, "--log-dir", str(tmp_path), "--sweep", "2", "--start", "1", "-o", "json")
    assert result.exit_code == 2, result.output
    obj = json.loads(result.stdout)
    assert [(s["seed"], s["status"], s["exit"]) for s in obj["seeds"]] == [(1, "error", 2), (2, "error", 2)]
    assert all("setup error: " in s["summary"] for s in obj["seeds"])
    assert (obj["ok"], obj["exit"], obj["valid"], obj["finished"]) == (False, 2, 0, 2)
    assert obj["sweep"] == {"start": 1, "count": 2, "jobs": 2, "scheduler": None}


def test_a_dask_sweep_says_what_a_local_sweep_says(cluster: LocalDask, tmp_path: Path) -> None:
    for program, start, verdict, code in ((ECHO, 20, "valid", 0), (IGNORES, 1, "invalid", 1)):
        args = (*program, "--sweep", "3", "--start", str(start))
        local = invoke(*args, "--log-dir", str(tmp_path / "here"), "--jobs", "2")
        remote = invoke(*args, "--log-dir", str(tmp_path / "dask"), "--scheduler", cluster.address)
        assert local.exit_code == remote.exit_code == code, remote.output
        where = f"the Dask cluster at {cluster.address} (2 worker threads)"
        span = f"{start} to {start + 2}"
        assert remote.stdout.splitlines()[0].startswith(f"check sweep: 3 seeds, {span}, on {where}; ")
        assert seed_lines(remote.stdout) == seed_lines(local.stdout)
        assert {v for v, _ in seed_lines(remote.stdout).values()} == {verdict}
        # The Dask workers ran in their own directory, but wrote where this process would.
        dirs = [f"seed-{s}" for s in range(start, start + 3)]
        assert sorted(p.name for p in (tmp_path / "dask").iterdir() if p.name in dirs) == dirs


def test_a_dask_sweep_in_json_names_its_scheduler(cluster: LocalDask, tmp_path: Path) -> None:
    args = (*IGNORES, "--log-dir", str(tmp_path), "--sweep", "2", "--start", "2", "-o", "json")
    result = invoke(*args, "--scheduler", cluster.address)
    assert result.exit_code == 1, result.output
    obj = json.loads(result.stdout)
    assert obj["sweep"] == {"start": 2, "count": 2, "jobs": 2, "scheduler": cluster.address}
    assert [(s["seed"], s["status"]) for s in obj["seeds"]] == [(2, "invalid"), (3, "invalid")]
    assert obj["lost"] is None and obj["exit"] == 1 and obj["ok"] is False


def _as_from_a_terminal() -> None:
    """SIGINT handled by default, as in a shell's foreground command (test_swarm.py says why)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_stops_every_run_and_prints_the_tally_so_far(tmp_path: Path) -> None:
    args = [*ECHO, "--log-dir", str(tmp_path), "--sweep", "6", "--start", "1", "--jobs", "2"]
    command = [sys.executable, "-m", "bhandar_cli", "check", *args]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_as_from_a_terminal
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            for line in proc.stdout:  # once a seed is done, the next two are under way
                if line.startswith("seed "):
                    break
            proc.send_signal(signal.SIGINT)
            rest = proc.stdout.read()
            errors = proc.stderr.read()
            code = proc.wait(timeout=60)
        finally:
            proc.kill()
    assert code == 130, errors
    assert "sweep: interrupted after " in rest and " of 6 seeds: " in rest
    assert "Traceback" not in errors


def test_an_unreachable_scheduler_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    result = invoke(*ECHO, "--log-dir", str(tmp_path), "--sweep", "2", "--scheduler", address)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"bhandar: cannot reach the Dask scheduler at {address}: Connection refused"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sweep", "0"], "--sweep must be an integer from 1 to 100000, got '0'"),
        (["--sweep", "many"], "--sweep must be an integer"),
        (["--sweep", "3", "--start", "-2"], "--start must be an integer"),
        (["--sweep", "3", "--jobs", "0"], "--jobs must be an integer from 1 to 256, got '0'"),
        (["--sweep", "3", "--seed", "4"], "--seed and --sweep cannot be combined"),
        (["--sweep", "3", "--checklist"], "--checklist and --sweep cannot be combined"),
        (["--sweep", "3", "--report", "r.html"], "--report applies to one run (not --sweep)"),
        (["--sweep", "3", "--jobs", "2", "--scheduler", "tcp://127.0.0.1:8786"], "cannot be combined"),
        (["--sweep", "3", "--scheduler", "localhost"], "--scheduler takes the Dask scheduler's address"),
        (["--start", "4"], "--start applies only with --sweep"),
        (["--jobs", "2"], "--jobs applies only with --sweep or --checklist"),
        (["--scheduler", "tcp://127.0.0.1:8786"], "--scheduler applies only with --sweep"),
    ],
)
def test_bad_sweep_options_give_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = invoke(*ECHO, *args)
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr, result.stderr
    assert result.stdout == ""
