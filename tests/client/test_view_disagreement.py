"""`members` says why the nodes' views differ, from the facts: not "gossip has not spread yet"
when a process stopped, a partition cuts nodes off, or a detector is slow to notice."""

from __future__ import annotations

from typing import Any

from bhandar_cli.client.view_disagreement import disagreeing, why_views_differ


def row(
    up: bool, generation: int = 1, silent: float | None = 0.2, after: float | None = 1.6
) -> dict[str, Any]:
    return {"up": up, "generation": generation, "phi": 0.5, "silent_s": silent, "down_after_s": after}


def views(verdicts: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Each live node's view, itself included (up, with its own generation)."""
    return {viewer: {viewer: row(True), **others} for viewer, others in verdicts.items()}


def test_a_stopped_node_that_every_live_node_still_calls_up_is_listed_with_their_silences() -> None:
    seen = views(
        {
            "A": {"B": row(True, silent=3.1, after=1.7)},
            "C": {"B": row(True, silent=3.0, after=95.3)},
        }
    )
    assert disagreeing(seen, stopped=["B"]) == ["B"]
    why = why_views_differ("B", seen, running=False)
    assert why == (
        "its process does not run; A, C have not noticed yet "
        "(A: silent 3.1 s of the 1.7 s it allows; C: silent 3.0 s of the 95.3 s it allows)"
    )
    assert disagreeing(seen, stopped=[]) == []  # all agree, and B runs: nothing to say


def test_a_partition_is_named_as_the_cause() -> None:
    seen = views({"A": {"C": row(False)}, "B": {"C": row(True)}, "C": {}})
    groups = [["A"], ["B", "C"]]
    assert disagreeing(seen) == ["C"]
    assert why_views_differ("C", seen, running=True, groups=groups) == "the partition cuts A off from it"


def test_a_restart_not_yet_gossiped_is_named_as_the_cause() -> None:
    seen = views({"A": {"B": row(False, generation=1)}, "B": {}})
    seen["B"]["B"] = row(True, generation=2)
    assert disagreeing(seen) == ["B"]  # every other live node calls a running node down
    assert why_views_differ("B", seen, running=True) == (
        "it restarted (generation 2) and gossip has not told A yet"
    )


def test_late_heartbeats_of_a_running_node_are_said_with_the_numbers() -> None:
    seen = views({"A": {"B": row(False, silent=2.5, after=1.6)}, "B": {}, "C": {"B": row(True)}})
    assert why_views_differ("B", seen, running=True) == (
        "it runs, but its heartbeats have not reached A in time (A: silent 2.5 s of the 1.6 s it "
        "allows): a partition just healed, or it or its links are slow"
    )


def test_a_node_of_an_older_version_shows_its_phi() -> None:
    seen = views({"A": {"B": row(True, silent=None, after=None)}})
    assert (
        why_views_differ("B", seen, running=False)
        == "its process does not run; A has not noticed yet (A: phi 0.50)"
    )


def test_a_member_that_left_is_no_disagreement() -> None:
    seen = views({"A": {"D": {**row(False), "status": "left"}}, "B": {"D": {**row(True), "status": "left"}}})
    assert disagreeing(seen, stopped=["D"]) == []
