"""Background repair: one peer's ranges per interval when idle, bounded in flight, and the next
peer's at once when a comparison of the round found a difference."""

from __future__ import annotations

from bhandar_cli.core.model.config import KeyspaceDef, NodeConfig
from bhandar_cli.core.repair.repair_schedule import MAX_IN_FLIGHT, RepairSchedule, ReplicatedRange

KS = KeyspaceDef("ks")
RANGES: list[ReplicatedRange] = [(KS, i * 10, i * 10 + 10, ("B", "C")) for i in range(4)]
RANGES.append((KS, 40, 50, ("C", "D")))


class Peers:
    def __init__(self) -> None:
        self.up = {"B", "C", "D"}

    def is_up(self, peer: str, now: float) -> bool:
        return peer in self.up


def schedule(peers: Peers, ranges: list[ReplicatedRange] = RANGES, interval: float = 2.0) -> RepairSchedule:
    return RepairSchedule(NodeConfig(repair_interval=interval), peers, lambda: ranges, first_round=1.0)


def test_each_interval_compares_every_range_shared_with_the_next_peer_and_skips_peers_down() -> None:
    peers = Peers()
    s = schedule(peers)
    assert not s.due(0.5) and s.next_deadline() == 1.0
    assert s.due(1.0) and s.next_deadline() == 3.0
    assert s.start(1.0, 0) == [(KS, i * 10, i * 10 + 10, "B") for i in range(4)]
    assert [s.ended(False, 1.0, n) for n in (3, 2, 1, 0)] == [[], [], [], []]  # equal: wait
    assert not s.due(2.0)
    peers.up = {"B", "D"}
    assert s.due(3.0)
    assert s.start(3.0, 0) == [(KS, 40, 50, "D")]  # C is down: its turn is skipped
    assert s.due(5.0)
    assert s.start(5.0, 0)[0][3] == "B"  # a new round


def test_a_difference_starts_the_next_peers_turn_once_the_current_one_ended() -> None:
    s = schedule(Peers())
    assert s.due(1.0)
    assert len(s.start(1.0, 0)) == 4
    assert s.ended(True, 1.0, 3) == []  # others of B's turn still run
    assert s.ended(False, 1.0, 2) == [] and s.ended(False, 1.0, 1) == []
    c_turn = s.ended(False, 1.0, 0)
    assert [c[3] for c in c_turn] == ["C"] * 5
    assert [c[3] for c in s.ended(False, 1.0, 0)] == ["D"]  # the round goes on at once
    assert s.ended(False, 1.0, 0) == []  # the round is over: the next one waits for its interval
    assert s.due(3.0)
    assert [c[3] for c in s.start(3.0, 0)] == ["B"] * 4
    assert s.ended(False, 3.0, 0) == []  # a new round starts calm


def test_a_turn_keeps_at_most_max_in_flight_comparisons_running() -> None:
    many: list[ReplicatedRange] = [(KS, i, i + 1, ("B",)) for i in range(MAX_IN_FLIGHT + 5)]
    s = schedule(Peers(), many)
    assert s.due(1.0)
    assert len(s.start(1.0, 0)) == MAX_IN_FLIGHT
    assert len(s.ended(False, 1.0, MAX_IN_FLIGHT - 1)) == 1  # one ended: the next starts
    assert len(s.ended(False, 1.0, MAX_IN_FLIGHT - 2)) == 2  # two ended
    assert len(s.ended(False, 1.0, MAX_IN_FLIGHT - 1)) == 1
    assert len(s.ended(False, 1.0, MAX_IN_FLIGHT - 1)) == 1
    assert s.ended(False, 1.0, MAX_IN_FLIGHT - 1) == []  # B's turn is all started


def test_an_interval_of_zero_is_off() -> None:
    s = schedule(Peers(), interval=0.0)
    assert not s.due(100.0) and s.next_deadline() == float("inf")
    assert s.ended(True, 100.0, 0) == []
