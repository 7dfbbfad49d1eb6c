"""Background repair: one comparison per interval when idle, back to back when there is work."""

from __future__ import annotations

from bhandar_cli.core.model.config import KeyspaceDef, NodeConfig
from bhandar_cli.core.repair.repair_schedule import RepairSchedule, ReplicatedRange

KS = KeyspaceDef("ks")
RANGES: list[ReplicatedRange] = [(KS, i * 10, i * 10 + 10, ("B", "C")) for i in range(4)]


class Peers:
    def __init__(self) -> None:
        self.up = {"B", "C"}

    def is_up(self, peer: str, now: float) -> bool:
        return peer in self.up


def schedule(peers: Peers) -> RepairSchedule:
    return RepairSchedule(NodeConfig(repair_interval=2.0), peers, lambda: RANGES, first_round=1.0)


def test_idle_rounds_go_one_comparison_per_interval_and_skip_peers_that_are_down() -> None:
    peers = Peers()
    s = schedule(peers)
    assert not s.due(0.5) and s.next_deadline() == 1.0
    assert s.due(1.0) and s.next_deadline() == 3.0
    assert s.next(1.0) == (KS, 0, 10, "B")
    assert not s.ended(differed=False)  # nothing found: wait for the next interval
    assert not s.due(2.0)
    peers.up = {"B"}
    assert s.due(3.0)
    assert s.next(3.0) == (KS, 10, 20, "B")  # (KS, 0, 10, "C") skipped: C is down


def test_a_difference_runs_the_rest_of_the_round_back_to_back() -> None:
    s = schedule(Peers())
    assert s.due(1.0)
    s.next(1.0)
    assert s.ended(differed=True)
    assert s.ended(differed=False)  # still the same round
    rest = [s.next(1.0) for _ in range(7)]
    assert None not in rest and s.next(1.0) is None
    assert s.due(3.0)  # a new round starts calm
    s.next(3.0)
    assert not s.ended(differed=False)
