"""The convergence check compares the replicas of every range by the root hash each holds."""

from __future__ import annotations

from random import Random

from bhandar_cli.core.membership.ring import Ring, key_token
from bhandar_cli.core.model.config import NodeConfig
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.store import MemoryStore
from bhandar_cli.core.model.versions import Sibling
from bhandar_cli.core.node import Node
from bhandar_cli.core.node_views import HintQueueRow
from bhandar_cli.node.admin import convergence_problems, convergence_ranges

NAMES = ("A", "B", "C", "D")
RECORD = Versioned((Sibling(("A", 1), {}, b"1", "", 1.0),))


def cluster() -> tuple[Ring, dict[str, MemoryStore], dict[str, Node]]:
    ring = Ring.build(list(NAMES), 4)
    stores = {n: MemoryStore() for n in NAMES}
    nodes = {n: Node(n, ring, stores[n], Random(1), 0.0, NodeConfig(liveness="ping")) for n in NAMES}
    return ring, stores, nodes


Hints = dict[str, list[HintQueueRow]]


def problems(ring: Ring, nodes: dict[str, Node], hints: Hints | None = None) -> list[str]:
    hashes = {n: node.range_hashes(convergence_ranges(ring)) for n, node in nodes.items()}
    return convergence_problems(ring, hints or {n: [] for n in nodes}, hashes, {}, 3)


def test_replicas_that_hold_the_same_records_agree_and_a_missing_one_is_named() -> None:
    ring, stores, nodes = cluster()
    assert problems(ring, nodes) == []
    key = "k1"
    replicas = ring.preference_list(key_token("kv", key), 3)
    for name in replicas:
        stores[name].put("kv", key, RECORD)
    nodes = {n: Node(n, ring, stores[n], Random(1), 0.0, NodeConfig(liveness="ping")) for n in NAMES}
    assert problems(ring, nodes) == []
    # One replica misses the key: that range, and only that range, differs.
    stores[replicas[-1]].remove("kv", key)
    nodes = {n: Node(n, ring, stores[n], Random(1), 0.0, NodeConfig(liveness="ping")) for n in NAMES}
    rng = next(r for r in ring.ranges() if r.contains(key_token("kv", key)))
    assert f"replicas of kv range ({rng.lo}, {rng.hi}] differ" in "\n".join(problems(ring, nodes))
    # Down nodes (absent from the views) are not compared.
    alive = {n: node for n, node in nodes.items() if n != replicas[-1]}
    assert not any(f"({rng.lo}, {rng.hi}]" in p for p in problems(ring, alive))


def test_a_hint_held_for_a_live_node_is_a_problem() -> None:
    ring, _, nodes = cluster()
    hints: Hints = {n: [] for n in NAMES}
    hints["A"] = [{"holder": "A", "target": "B", "count": 2, "oldest_s": 1.0}]
    assert problems(ring, nodes, hints) == ["A holds 2 hints for B"]
