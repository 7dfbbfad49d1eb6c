"""`bhandar chaos --swarm --scheduler`: the seeds on a Dask cluster of worker processes print what a
local `--jobs 2` swarm prints, a failing seed replays locally, and a cluster that cannot be
reached or is lost mid-run is one line and exit 2 (the seeds not run named)."""

from __future__ import annotations

import json
import re
import shlex
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bhandar_cli.sim.chaos import swarm
from bhandar_cli.sim.chaos.chaos_options import ChaosOptions
from bhandar_cli.sim.chaos.swarm import SeedOutcome, run_seed, run_swarm
from bhandar_cli.sim.dask_pool import DaskPool
from tests.sim.chaos.test_swarm import PLANTED, words
from tests.support.chaos_cli import invoke
from tests.support.dask_cluster import LocalDask, dask_cluster

UNUSED = ("--swarm", "6", "--start", "9100000", "--ops", "800")  # seeds no other test runs
REPLAY_13 = (
    "bhandar chaos --seed 13 --ops 1500 --faults clog,loss --consistency QUORUM --bug ack_before_quorum"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalDask]:
    with dask_cluster(tmp_path_factory.mktemp("dask")) as local:
        yield local


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def without_times(text: str) -> list[str]:
    """The lines after the header, each swarm's seconds taken out."""
    return [re.sub(r" in [0-9.]+ s$", " in T s", line) for line in text.splitlines()[1:]]


def test_a_dask_swarm_prints_the_table_of_a_local_swarm(cluster: LocalDask) -> None:
    local = invoke(*UNUSED, "--jobs", "2")
    remote = invoke(*UNUSED, "--scheduler", cluster.address)
    assert remote.exit_code == local.exit_code, remote.stdout + remote.stderr
    where = f"the Dask cluster at {cluster.address} (2 worker threads)"
    assert remote.stdout.splitlines()[0] == f"chaos swarm: 6 seeds, 9100000 to 9100005, on {where}"
    assert local.stdout.splitlines()[0] == "chaos swarm: 6 seeds, 9100000 to 9100005, on 2 workers"
    assert sorted(without_times(remote.stdout)) == sorted(without_times(local.stdout))
    assert (
        without_times(remote.stdout)[-1] == "repeat with: bhandar chaos --swarm 6 --start 9100000 --ops 800"
    )
    assert remote.stderr == local.stderr == ""


def test_a_planted_failing_seed_on_dask_replays_locally(cluster: LocalDask) -> None:
    result = invoke("--swarm", "2", *PLANTED, "--scheduler", cluster.address)
    assert result.exit_code == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("FAILED seed 13: "))
    assert lines[at].startswith("FAILED seed 13: stale_read_strict: strict/")
    assert lines[at + 1] == f"  replay: {REPLAY_13}"
    alone = invoke(*shlex.split(REPLAY_13)[2:])  # here, not on Dask
    assert alone.exit_code == 1
    first = next(line for line in alone.stderr.splitlines() if line.startswith("violation: "))
    violation = lines[at].removeprefix("FAILED seed 13: ").rsplit(" (+", 1)[0]
    assert words(first) == f"violation: {violation}"


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """The swarm's JSON without what differs by executor or by run: timings, jobs, the scheduler."""
    options = {k: v for k, v in obj["options"].items() if k not in ("jobs", "scheduler")}
    seed_13 = [f for f in obj["failed"] if f["seed"] == 13]
    later = ("seconds", "passed", "ok", "stored_twice")  # these count seeds 14 and 15 too
    return {**{k: v for k, v in obj.items() if k not in later}, "options": options, "failed": seed_13}


def test_dask_and_local_json_agree_on_the_planted_seed(cluster: LocalDask) -> None:
    # Whether seeds after 13 fail depends on the store's timing (test_swarm.py): only 13 is compared.
    remote = invoke("--swarm", "3", *PLANTED, "--scheduler", cluster.address, "-o", "json")
    local = invoke("--swarm", "3", *PLANTED, "--jobs", "2", "-o", "json")
    assert remote.exit_code == local.exit_code == 1
    there, here = json.loads(remote.stdout), json.loads(local.stdout)
    assert there["options"]["scheduler"] == cluster.address and here["options"]["scheduler"] is None
    assert there["options"]["jobs"] == 2 and there["lost"] is None and there["finished"] == 3
    assert _comparable(there) == _comparable(here)
    assert _comparable(there)["failed"][0]["violation"].startswith("stale_read_strict: ")


def test_a_seed_past_its_limit_fails_on_dask_and_frees_its_worker(cluster: LocalDask) -> None:
    with DaskPool(cluster.address) as pool:
        slow = run_swarm(ChaosOptions(9000100, 1_000_000), count=2, jobs=2, seed_timeout=1, dask=pool)
        assert [(o.seed, o.violation) for o in slow.outcomes] == [
            (9000100, "did not finish in 1 s"),
            (9000101, "did not finish in 1 s"),
        ]
        # Had the million-operation runs kept the workers, these would wait past their limit.
        quick = run_swarm(ChaosOptions(9000110, 300), count=2, jobs=2, seed_timeout=60, dask=pool)
    assert [(o.seed, o.violation) for o in quick.outcomes] == [(9000110, None), (9000111, None)]


def test_a_seed_stops_its_own_run_at_its_limit() -> None:
    outcome = run_seed(ChaosOptions(9000100, 1_000_000), time_limit=1)
    assert (outcome.seed, outcome.violation, outcome.violations) == (9000100, "did not finish in 1 s", 1)
    assert outcome.command == "bhandar chaos --seed 9000100 --ops 1000000"


def test_a_scheduler_lost_mid_run_names_the_seeds_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = swarm.run_swarm
    with dask_cluster(tmp_path) as doomed:

        def scheduler_dies_after_the_first_seed(
            base: ChaosOptions,
            count: int,
            jobs: int,
            seed_timeout: float,
            on_outcome: Callable[[SeedOutcome], None] | None = None,
            dask: DaskPool | None = None,
        ) -> swarm.SwarmResult:
            def then_kill(outcome: SeedOutcome) -> None:
                if on_outcome is not None:
                    on_outcome(outcome)
                if doomed.scheduler.poll() is None:
                    doomed.kill_scheduler()

            return real(base, count, jobs, seed_timeout, then_kill, dask)

        monkeypatch.setattr(swarm, "run_swarm", scheduler_dies_after_the_first_seed)
        result = invoke("--swarm", "12", "--start", "9000300", "--ops", "600", "--scheduler", doomed.address)
    assert result.exit_code == 2
    [error] = result.stderr.splitlines()
    head = f"bhandar: lost the Dask scheduler at {doomed.address}; seeds not run: "
    assert error.startswith(head), error
    tally = next(line for line in result.stdout.splitlines() if line.startswith("swarm: "))
    done = int(re.match(r"swarm: cut short after ([0-9]+) of 12 seeds", tally)[1])  # type: ignore[index]
    assert 1 <= done < 12
    assert len(seeds_in(error.removeprefix(head))) == 12 - done


def seeds_in(ranges: str) -> list[int]:
    """The seeds of `3-5 9`."""
    seeds: list[int] = []
    for run in ranges.split():
        first, _, last = run.partition("-")
        seeds += range(int(first), int(last or first) + 1)
    return seeds


def test_an_unreachable_scheduler_is_one_line_and_exit_2() -> None:
    address = f"tcp://127.0.0.1:{free_port()}"
    result = invoke("--swarm", "3", "--start", "1", "--scheduler", address)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"bhandar: cannot reach the Dask scheduler at {address}: Connection refused"
    ]


def test_without_dask_the_scheduler_option_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` now fails
    result = invoke("--swarm", "3", "--start", "1", "--scheduler", "tcp://127.0.0.1:8786")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "bhandar: --scheduler needs Dask's distributed package: pip install 'bhandar[dask]'"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--swarm", "3", "--scheduler", "127.0.0.1:8786"], "--scheduler takes the Dask scheduler's address"),
        (
            ["--swarm", "3", "--scheduler", "tcp://127.0.0.1:99999"],
            "as tcp://HOST:PORT, got 'tcp://127.0.0.1:99999'",
        ),
        (["--swarm", "3", "--scheduler", "tcp://a b:1"], "--scheduler takes"),
        (["--scheduler", "tcp://127.0.0.1:8786"], "--scheduler applies only with --swarm"),
        (
            ["--swarm", "3", "--jobs", "2", "--scheduler", "tcp://127.0.0.1:8786"],
            "--jobs and --scheduler cannot be combined",
        ),
        (
            ["--scenario", "ministore", "--scheduler", "tcp://127.0.0.1:8786"],
            "--scheduler does not apply to --scenario ministore",
        ),
    ],
)
def test_bad_scheduler_options_give_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = invoke(*args)
    assert result.exit_code == 2
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr
    assert result.stdout == ""
