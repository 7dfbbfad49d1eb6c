"""The soak's pieces that need no cluster: how an operation's outcome is classed, the live line,
percentiles, and that the fault schedule always gets its join and decommission in (on a fake
client under trio's MockClock: no processes, no wall clock)."""

from __future__ import annotations

from random import Random
from types import SimpleNamespace
from typing import Any, cast

import trio
import trio.testing

from bhandar_cli.cli.soak_cmd import live_line
from bhandar_cli.sim.history import History
from bhandar_cli.soak.faults import FaultLog, FaultSchedule, FaultTimes
from bhandar_cli.soak.load import LoadStats, outcome_of
from bhandar_cli.soak.run import SoakProgress, percentile


def test_outcomes_are_acknowledged_failed_or_unknown() -> None:
    history = History()
    stats = LoadStats()
    cases = [("ok", ""), ("fail", "unavailable"), ("fail", "timeout"), ("timeout", "client_timeout")]
    for outcome, code in cases:
        op = history.invoke(0.0, 0, "put", "soak", "k", "QUORUM", b"1")
        op.outcome, op.code, op.completed = outcome, code, 0.25
        stats.record(op)
    assert [outcome_of(op) for op in history.ops] == ["acknowledged", "failed", "unknown", "unknown"]
    assert stats.outcomes == {"put": {"acknowledged": 1, "failed": 1, "unknown": 2}}
    assert stats.latencies_ms == [250.0] and stats.total == 4 and stats.acknowledged == 1


def test_percentiles_and_the_live_line() -> None:
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 0.5), percentile(values, 0.99), percentile([], 0.99)) == (51.0, 100.0, 0.0)
    progress = SoakProgress(started=100.0, phase="load")
    op = History().invoke(100.0, 0, "get", "soak", "k", "ONE")
    op.outcome, op.completed = "ok", 100.1
    progress.stats.record(op)
    progress.faults.note("kill", "killed C (SIGKILL)")
    line = live_line(progress, 110.0)
    assert "10 s" in line and "1 ops (0/s)" in line and "available 100.0%" in line
    assert "faults 1" in line and "last: killed C (SIGKILL)" in line


class FakeOperator:
    """Stands in for client/client.py's Client (its backend, and its cluster admin: itself): records
    the faults, each taking a second of (mock) time."""

    def __init__(self) -> None:
        self.admin = self
        self.backend = SimpleNamespace(
            names=["A", "B", "C", "D", "E"], cluster=SimpleNamespace(replicas=3), is_alive=lambda n: True
        )
        self.backend.cluster.dir = "/nowhere"
        self.done: list[str] = []

    async def _act(self, what: str) -> None:
        await trio.sleep(1.0)
        self.done.append(what)

    async def kill(self, name: str) -> Any:
        await self._act("kill")

    async def revive(self, name: str) -> Any:
        await self._act("revive")

    async def partition(self, groups: list[list[str]]) -> Any:
        assert sorted(n for g in groups for n in g) == self.backend.names and all(groups)
        await self._act("partition")

    async def heal(self) -> Any:
        await self._act("heal")

    async def add(self, name: str) -> Any:
        await trio.sleep(8.0)  # longer than a short soak's remaining time
        self.backend.names.append(name)
        self.done.append("add")

    async def decommission(self, name: str) -> Any:
        assert name != "F"  # never the node that joined
        await self._act("decommission")


def test_a_short_schedule_still_joins_and_decommissions(monkeypatch: Any) -> None:
    monkeypatch.setattr("bhandar_cli.soak.faults.next_free_name", lambda cluster: "F")
    operator, log = FakeOperator(), FaultLog()

    async def main() -> float:
        start = trio.current_time()
        await FaultSchedule(cast(Any, operator), Random(5), log, FaultTimes(mean_gap=1.0)).run(6.0)
        return trio.current_time() - start

    took = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert operator.done.count("add") == 1 and operator.done.count("decommission") == 1, operator.done
    assert operator.done.index("add") < operator.done.index("decommission")
    assert log.counts["join"] == 1 and log.counts["decommission"] == 1 and len(log.movements) == 2
    assert took > 6.0  # the movements ran past the end rather than being dropped
