"""The driver's surface of a core `Node`, driven by hand: no simulator, no clock, no network.

A `Wire` below carries each node's `Send` effects to the addressed node at once, in order, so a
test sees exactly the effects the nodes return. Nodes use ping liveness: a peer is down once the
node has heard nothing from it for `down_after` seconds, which a test arranges by letting time
pass and then having the node hear from the peers it should see up.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from random import Random

from bhandar_cli.core.membership.gossip import GossipAck
from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.membership.ring import RING_SIZE, Ring, key_token
from bhandar_cli.core.model.config import KeyspaceDef, NodeConfig
from bhandar_cli.core.model.record_digest import digest
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.store import MemoryStore
from bhandar_cli.core.model.versions import Sibling
from bhandar_cli.core.node import Node, NodeBoot
from bhandar_cli.core.protocol.client_messages import Failure, GetRequest, GetResult, PutRequest, PutResult
from bhandar_cli.core.protocol.messages import (
    ClientReply,
    Effect,
    KeyspaceRequest,
    KeyspaceResult,
    Pong,
    ReplicaAck,
    ReplicaWrite,
    Respond,
    Result,
    Send,
)

CONFIG = NodeConfig(liveness="ping", repair_interval=0)
JSON = "application/json"


class Wire:
    """Delivers every Send at once (FIFO) among `nodes`; keeps each node's answers to its clients."""

    def __init__(self, nodes: dict[str, Node], now: float = 0.0) -> None:
        self.nodes = nodes
        self.now = now
        self.cut: set[str] = set()  # nodes whose messages, either way, are lost
        self.answers: dict[str, list[Result]] = {name: [] for name in nodes}
        self.sent: list[tuple[str, Send]] = []

    def run(self, src: str, effects: list[Effect]) -> None:
        queue = deque((src, e) for e in effects)
        while queue:
            origin, effect = queue.popleft()
            if isinstance(effect, Respond):
                self.answers[origin].append(effect.result)
            elif isinstance(effect, Send):
                self.sent.append((origin, effect))
                if origin not in self.cut and effect.dst not in self.cut and effect.dst in self.nodes:
                    out = self.nodes[effect.dst].handle(self.now, origin, effect.msg)
                    queue.extend((effect.dst, e) for e in out)

    def request(self, via: str, req: PutRequest | GetRequest) -> None:
        self.run(via, self.nodes[via].request(self.now, req))

    def tick(self, name: str) -> None:
        self.run(name, self.nodes[name].tick(self.now))


def cluster(names: str = "ABCDE", config: NodeConfig = CONFIG) -> tuple[Wire, Ring]:
    """Nodes on one ring that all know keyspace `ks` (created through the first, as a client would)."""
    ring = Ring.build(list(names), 8)
    nodes = {n: Node(n, ring, MemoryStore(), Random(i), 0.0, config) for i, n in enumerate(names)}
    wire = Wire(nodes)
    first = names[0]
    wire.run(first, nodes[first].request(0.0, KeyspaceRequest(0, KeyspaceDef("ks"))))
    assert wire.answers[first] == [KeyspaceResult(KeyspaceDef("ks"), True)]
    wire.answers[first].clear()
    wire.sent.clear()
    return wire, ring


def key_where(ring: Ring, test: Callable[[tuple[str, ...]], bool], n: int = 3) -> str:
    """A key of keyspace `ks` whose preference list passes `test`."""
    for i in range(10_000):
        key = f"k{i}"
        if test(ring.preference_list(key_token("ks", key), n)):
            return key
    raise AssertionError("no such key")


def put(rid: int, key: str, value: bytes, level: str = "QUORUM") -> PutRequest:
    return PutRequest(rid, "ks", key, value, JSON, None, level)


def test_a_write_is_answered_after_w_acks_and_lands_on_every_replica() -> None:
    wire, ring = cluster()
    key = key_where(ring, lambda prefs: prefs[0] == "A")
    wire.request("A", put(1, key, b"1"))
    [result] = wire.answers["A"]
    assert isinstance(result, PutResult) and result.coordinator == "A" and result.needed == 2
    home = ring.preference_list(key_token("ks", key), 3)
    for name in home:
        own, hinted = wire.nodes[name].records("ks", key)
        assert isinstance(own, Versioned) and [s.value for s in own.siblings] == [b"1"] and hinted is None
    assert wire.nodes["A"].metrics.coordinated == 1
    wire.request("A", GetRequest(2, "ks", key, "ALL"))
    read = wire.answers["A"][1]
    assert isinstance(read, GetResult) and read.replies == 3


def test_a_node_outside_the_preference_list_forwards_once_and_relays_the_answer() -> None:
    wire, ring = cluster()
    key = key_where(ring, lambda prefs: "E" not in prefs)
    coordinator = ring.preference_list(key_token("ks", key), 3)[0]
    wire.request("E", put(77, key, b"1"))
    [(origin, first)] = [(o, e) for o, e in wire.sent if isinstance(e.msg, PutRequest)]
    assert (origin, first.dst) == ("E", coordinator)
    assert isinstance(first.msg, PutRequest) and first.msg.hops == 1 and first.msg.rid != 77
    [result] = wire.answers["E"]  # relayed under the client's own request id
    assert isinstance(result, PutResult) and result.coordinator == coordinator
    assert wire.nodes["E"].metrics.forwarded == 1
    # The forward is done: its deadline passing later answers nobody a second time.
    wire.now = 10.0
    wire.tick("E")
    assert len(wire.answers["E"]) == 1


def test_a_forwarded_request_delivered_twice_is_coordinated_once() -> None:
    wire, ring = cluster()
    key = key_where(ring, lambda prefs: "E" not in prefs)
    coordinator = ring.preference_list(key_token("ks", key), 3)[0]
    forwarded = PutRequest(5, "ks", key, b"1", JSON, None, "QUORUM", hops=1)
    node = wire.nodes[coordinator]
    first = node.handle(0.0, "E", forwarded)
    assert any(isinstance(e, Send) and isinstance(e.msg, ReplicaWrite) for e in first)
    assert node.handle(0.0, "E", forwarded) == []
    assert node.metrics.coordinated == 1


def test_a_forward_that_is_never_answered_and_has_no_fallback_times_out() -> None:
    wire, ring = cluster()
    key = key_where(ring, lambda prefs: "E" not in prefs)
    coordinator = ring.preference_list(key_token("ks", key), 3)[0]
    wire.cut.add(coordinator)
    wire.request("E", put(9, key, b"1", "ALL"))  # ALL cannot be reached without the coordinator
    assert wire.answers["E"] == []
    node = wire.nodes["E"]
    deadline = 2 * CONFIG.request_timeout  # the forwarder waits twice a coordinator's timeout
    assert node.next_deadline() <= deadline
    wire.now = deadline
    wire.tick("E")
    [failure] = wire.answers["E"]
    assert isinstance(failure, Failure) and failure.code == "timeout"
    assert failure.error.startswith(f"forwarded to {coordinator}, which did not answer in time; without it")
    assert node.metrics.forward_fallbacks == 0


def test_a_write_the_replicas_never_acknowledge_times_out_and_is_not_undone() -> None:
    wire, ring = cluster()
    key = key_where(ring, lambda prefs: prefs[0] == "A")
    wire.cut.update(n for n in "BCDE")
    wire.request("A", put(3, key, b"1", "ALL"))
    assert wire.answers["A"] == []
    wire.now = CONFIG.request_timeout
    wire.tick("A")
    [failure] = wire.answers["A"]
    assert isinstance(failure, Failure) and failure.code == "timeout"
    assert (failure.answered, failure.needed) == (1, 3)
    assert "the write is not undone" in failure.error
    assert wire.nodes["A"].records("ks", key)[0] is not None  # its own copy stays


def test_a_late_ack_after_the_timeout_changes_nothing() -> None:
    wire, ring = cluster()
    key = key_where(ring, lambda prefs: prefs[0] == "A")
    wire.cut.update(n for n in "BCDE")
    wire.request("A", put(3, key, b"1", "ALL"))
    write = next(e.msg for _, e in wire.sent if isinstance(e.msg, ReplicaWrite))
    wire.now = CONFIG.request_timeout
    wire.tick("A")
    assert wire.nodes["A"].handle(wire.now, "B", ReplicaAck(write.op)) == []
    assert len(wire.answers["A"]) == 1


def test_a_fallback_holds_a_hint_for_a_down_replica_and_tools_see_it() -> None:
    wire, ring = cluster("ABCD")
    key = key_where(ring, lambda prefs: prefs[0] == "A" and "D" not in prefs)
    down = ring.preference_list(key_token("ks", key), 3)[2]
    wire.now = CONFIG.down_after + 1.0  # every peer silent for too long: A sees them all down...
    for peer in "BCD":
        if peer != down:
            wire.nodes["A"].handle(wire.now, peer, Pong(1))  # ...but these spoke just now
    assert not wire.nodes["A"].is_up(down, wire.now)
    wire.cut.add(down)
    wire.request("A", put(1, key, b"1"))
    [result] = wire.answers["A"]
    assert isinstance(result, PutResult) and result.hinted == (f"D for {down}",)
    fallback = wire.nodes["D"]
    [row] = fallback.hints_summary(wire.now)
    assert (row["holder"], row["target"], row["count"]) == ("D", down, 1)
    own, hinted = fallback.records("ks", key)
    assert own is None and isinstance(hinted, Versioned)
    assert fallback.info(wire.now)["hints"] == 1


def test_views_describe_the_node_without_changing_it() -> None:
    wire, _ = cluster("ABC")
    for i in range(20):
        wire.request("A", put(i + 1, f"k{i}", b"1", "ALL"))
    node = wire.nodes["B"]
    info = node.info(wire.now)
    assert info["keys"] == 20 and info["hints"] == 0
    assert info["peers"] == {"A": True, "C": True}
    assert "status" not in info  # a node without gossip leaves its status to the driver
    assert [k["name"] for k in info["keyspaces"]] == ["kv", "counters", "ks"]
    assert "keys" not in node.info(wire.now, counts=False)
    assert [m["id"] for m in node.members(wire.now)] == ["A", "B", "C"]
    assert (node.status, node.status_of("A"), node.moving) == ("normal", "unknown", False)
    digests = node.digests()
    assert len(digests) == 20
    everything = node.tree_entries("ks", 0, RING_SIZE - 1) + node.tree_entries("ks", RING_SIZE - 1, 0)
    assert sorted((key, d) for _, key, d in everything) == sorted((key, d) for _, key, d in digests)
    own, _ = node.records("ks", "k3")
    assert own is not None and [d for _, key, d in digests if key == "k3"] == [digest(own)]
    assert node.info(wire.now) == info


def test_a_leaving_node_takes_writes_but_no_handoff_and_a_left_one_nothing() -> None:
    ring = Ring.build(["A", "B", "C"], 8)
    record = Versioned((Sibling(("A", 1), {}, b"1", JSON, 0.0),))
    ks = KeyspaceDef("ks")
    for status, write_ok, handoff_ok in (
        ("normal", True, True),
        ("leaving", True, False),
        ("left", False, False),
    ):
        node = Node("C", ring, MemoryStore(), Random(1), 0.0, NodeConfig(), boot=NodeBoot(status=status))
        assert node.status == status
        [ack] = node.handle(0.0, "A", ReplicaWrite(1, ks, "k", record))
        [handoff] = node.handle(0.0, "A", ReplicaWrite(2, ks, "h", record, None, "handoff"))
        assert isinstance(ack, Send) and isinstance(ack.msg, ReplicaAck) and ack.msg.ok is write_ok
        assert isinstance(handoff, Send) and isinstance(handoff.msg, ReplicaAck)
        assert handoff.msg.ok is handoff_ok, status


def test_a_node_that_knows_only_a_seed_address_finds_the_cluster_through_gossip() -> None:
    """Process-mode membership in the core: contact points, addresses, and generations."""
    b_store = MemoryStore()
    a = Node(
        "A",
        Ring.build(["A"], 8),
        MemoryStore(),
        Random(1),
        0.0,
        boot=NodeBoot(seeds=("10.0.0.2:7000",), address="10.0.0.1:7000", http="10.0.0.1:8000"),
    )
    b = Node(
        "B", Ring.build(["B"], 8), b_store, Random(2), 0.0, boot=NodeBoot(seeds=(), address="10.0.0.2:7000")
    )
    [hello] = [e for e in a.tick(0.0) if isinstance(e, Send)]
    assert hello.dst == "10.0.0.2:7000"  # nobody known yet: the seed, by its address
    [reply] = [e for e in b.handle(0.01, "A", hello.msg) if isinstance(e, Send)]
    assert reply.dst == "A" and b.address_of("A") == "10.0.0.1:7000"
    a.handle(0.02, "B", reply.msg)
    assert a.ring.nodes == ("A", "B") == b.ring.nodes
    assert a.address_of("B") == "10.0.0.2:7000" and a.address_of("Z") == ""
    # B restarts and keeps the addresses it learned, so it finds A again without seeds.
    b.tick(0.5)  # housekeeping saves the membership table
    b2 = Node(
        "B", Ring.build(["B"], 8), b_store, Random(3), 1.0, boot=NodeBoot(seeds=(), address="10.0.0.2:7000")
    )
    assert b2.address_of("A") == "10.0.0.1:7000" and b2.ring.nodes == ("A", "B")


def test_a_node_behind_its_peers_generation_starts_above_it_and_remembers() -> None:
    """A node restarted on an older copy of its data would otherwise look like old news forever."""
    store = MemoryStore()
    a = Node("A", Ring.build(["A", "B"], 8), store, Random(1), 0.0)
    b = Node("B", Ring.build(["A", "B"], 8), MemoryStore(), Random(2), 0.0)
    mine = next(m for m in a.members(0.0) if m["id"] == "A")
    assert mine["generation"] == 1
    newer = MemberState("A", "z1", (), "normal", 7, 40)  # what B heard of a later life of A
    b.handle(0.1, "C", GossipAck((newer,)))
    syn = next(e.msg for e in b.tick(0.6) if isinstance(e, Send) and e.dst == "A")
    a.handle(0.7, "B", syn)
    assert next(m for m in a.members(0.7) if m["id"] == "A")["generation"] == 8
    a.tick(1.0)  # housekeeping persists it
    assert store.get_meta("generation") == 8


def test_a_forwarded_answer_for_an_op_that_is_not_a_forward_is_ignored() -> None:
    wire, ring = cluster()
    key = key_where(ring, lambda prefs: prefs[0] == "A")
    wire.cut.update(n for n in "BCDE")
    wire.request("A", put(3, key, b"1", "ALL"))
    write = next(e.msg for _, e in wire.sent if isinstance(e.msg, ReplicaWrite))
    stray = ClientReply(write.op, PutResult("B", 3, 3))  # a reply naming the write's op id
    assert wire.nodes["A"].handle(0.0, "B", stray) == []
    wire.now = CONFIG.request_timeout
    wire.tick("A")  # the write is still there, and times out as it should
    [failure] = wire.answers["A"]
    assert isinstance(failure, Failure) and failure.code == "timeout"


def test_a_joining_node_that_has_found_nobody_yet_answers_unavailable() -> None:
    """Found by `bhandar chaos --seed 8 --ops 1500 --faults all --storage lsm` (seed addresses)."""
    node = Node(
        "G",
        Ring.build(["G"], 8),
        MemoryStore(),
        Random(1),
        0.0,
        boot=NodeBoot(status="joining", seeds=("10.0.0.1:7000",), address="10.0.0.7:7000", tokens=(1, 2, 3)),
    )
    [answer] = node.request(0.0, GetRequest(1, "counters", "k"))
    assert isinstance(answer, Respond) and isinstance(answer.result, Failure)
    assert answer.result.code == "unavailable" and "not found the cluster" in answer.result.error
