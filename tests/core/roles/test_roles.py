"""Roles of a node built alone from their collaborators: the ring view, membership across restarts,
hinted handoff and tombstone reaping (keyspaces: tests/core/model/test_keyspaces.py)."""

from __future__ import annotations

from random import Random

import pytest

from bhandar_cli.core.membership.liveness import PingLiveness
from bhandar_cli.core.membership.node_membership import MembershipSaver, boot_gossip
from bhandar_cli.core.membership.ring import Ring, key_token
from bhandar_cli.core.membership.ringview import RingView
from bhandar_cli.core.model.config import KeyspaceDef, NodeConfig
from bhandar_cli.core.model.keyspaces import Keyspaces
from bhandar_cli.core.model.metrics import NodeMetrics
from bhandar_cli.core.model.record_digest import digest
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.sibling_limit import SiblingLimit
from bhandar_cli.core.model.store import MemoryStore
from bhandar_cli.core.model.versions import Sibling
from bhandar_cli.core.protocol.messages import ReplicaAck, ReplicaWrite, Send
from bhandar_cli.core.protocol.pending import PendingHandoff
from bhandar_cli.core.protocol.pending_table import IdSource, PendingTable
from bhandar_cli.core.repair.reaping import TombstoneReaper
from bhandar_cli.core.roles.handoff import HintedHandoff
from bhandar_cli.core.roles.hints import HintQueue
from bhandar_cli.core.roles.role_context import RoleContext

JSON = "application/json"
# Peers stay up for `down_after` (1.5 s) after the last word from them; hint rounds every 0.1 s.
CONFIG = NodeConfig(liveness="ping", hint_batch=2, hint_delivery_interval=0.1)


def value(v: bytes | None, ts: float = 0.0, actor: str = "A") -> Versioned:
    return Versioned((Sibling((actor, 1), {}, v, JSON, ts),))


# --- ring view and membership -------------------------------------------------------------------


def test_without_gossip_the_ring_is_the_drivers_and_everyone_is_normal() -> None:
    ring = Ring.build(["A", "B", "C"], 4)
    view = RingView("A", PingLiveness("A", ring.nodes, 0.0), None, ring)
    assert view.ring is ring and view.peers() == ["B", "C"]
    assert (view.status, view.status_of("B"), view.moving(), view.pending_ring()) == (
        "normal",
        "unknown",
        False,
        None,
    )
    with pytest.raises(RuntimeError, match="range movement needs it"):
        view.future_ring()


def boot(store: MemoryStore, ring: Ring, status: str = "normal", node: str = "C") -> RingView:
    keyspaces = Keyspaces(store, 3)
    gossip = boot_gossip(
        node, ring, store, NodeConfig(), Random(1), 0.0,
        status=status, seeds=None, zone=None, tokens=None, address="", http="",
        schema=keyspaces.all, on_schema=keyspaces.learn_all,
    )  # fmt: skip
    return RingView(node, gossip, gossip, ring)


def test_a_joining_node_is_in_the_future_ring_only_until_it_is_normal() -> None:
    ring = Ring.build(["A", "B", "C"], 4)
    view = boot(MemoryStore(), ring, status="joining")
    assert view.status == "joining" and view.moving()
    assert "C" not in view.ring.nodes and "C" in view.future_ring().nodes
    pending = view.pending_ring()
    assert pending is not None and "C" in pending.nodes
    view.set_status("normal")
    assert "C" in view.ring.nodes and not view.moving() and view.pending_ring() is None


def test_a_restart_remembers_the_saved_members_and_status_with_a_newer_generation() -> None:
    store = MemoryStore()
    ring = Ring.build(["A", "B", "C"], 4)
    view = boot(store, ring)
    assert view.gossip is not None
    saver = MembershipSaver(store, view.gossip, lambda actor: None)
    view.set_status("leaving")
    saver.save()
    first = view.mine.generation
    # Restarted with a boot ring that knows only itself: the saved table brings the others back.
    again = boot(store, Ring.build(["C"], 4))
    assert again.status == "leaving" and again.peers() == ["A", "B"]
    assert again.mine.generation == first + 1


def test_the_membership_table_is_written_only_when_ownership_changed() -> None:
    store = MemoryStore()
    view = boot(store, Ring.build(["A", "B", "C"], 4))
    assert view.gossip is not None
    saver = MembershipSaver(store, view.gossip, lambda actor: None)
    saver.save()
    store.put_meta("members", "sentinel")
    view.gossip.tick(1.0)  # a heartbeat is not an ownership change
    saver.save()
    assert store.get_meta("members") == "sentinel"
    view.set_status("leaving")
    saver.save()
    assert sorted(m[0] for m in store.get_meta("members")) == ["A", "B", "C"]


# --- hinted handoff -----------------------------------------------------------------------------


def handoff_parts(now: float = 0.0) -> tuple[HintedHandoff, HintQueue, MemoryStore, NodeMetrics]:
    ring = Ring.build(["A", "B", "C", "D"], 4)
    store = MemoryStore()
    keyspaces = Keyspaces(store, 3)
    hints = HintQueue(store, keyspaces.policy, max_age=CONFIG.hint_max_age)
    view = RingView("D", PingLiveness("D", ring.nodes, now), None, ring)
    metrics = NodeMetrics()
    limit = SiblingLimit(CONFIG.sibling_max, metrics)
    ids = IdSource(1)
    context = RoleContext(
        node_id="D",
        store=store,
        keyspaces=keyspaces,
        ring_view=view,
        ids=ids,
        pending=PendingTable(ids),
        metrics=metrics,
        hints=hints,
        sibling_limit=limit,
    )
    handoff = HintedHandoff(context, CONFIG, now)
    return handoff, hints, store, metrics


def acknowledge(handoff: HintedHandoff, now: float, sent: list[Send], ok: bool = True) -> list[Send]:
    """Answer every handoff in `sent`; the handoffs those answers send next."""
    out: list[Send] = []
    for effect in sent:
        msg = effect.msg
        assert isinstance(msg, ReplicaWrite)
        op = handoff.pending.get(msg.op)
        assert isinstance(op, PendingHandoff)
        ack = ReplicaAck(msg.op) if ok else ReplicaAck(msg.op, False, "leaving")
        out.extend(e for e in handoff.on_ack(now, msg.op, ack, op) if isinstance(e, Send))
    return out


def test_hints_go_home_in_bounded_batches_one_batch_in_flight_per_target() -> None:
    handoff, hints, _, metrics = handoff_parts()
    for i in range(3):
        assert hints.add(0.0, "C", "ks", f"k{i}", value(b"1"))
    sent = [e for e in handoff.tick(0.0) if isinstance(e, Send)]
    assert [(e.dst, e.msg.key, e.msg.kind) for e in sent] == [("C", "k0", "handoff"), ("C", "k1", "handoff")]
    assert handoff.next_deadline() == CONFIG.hint_delivery_interval
    assert handoff.tick(0.2) == []  # that batch is still in flight: nothing more for C
    first_half = acknowledge(handoff, 0.3, sent[:1])
    assert first_half == [] and hints.pending("C") == 2  # the batch is not settled yet
    [last] = acknowledge(handoff, 0.3, sent[1:])  # settled whole: the next batch goes at once
    assert last.msg.key == "k2" and metrics.hints_delivered == 2
    assert handoff.tick(0.4) == []  # in flight
    assert acknowledge(handoff, 0.5, [last]) == [] and hints.pending() == 0


def test_n_hints_go_home_in_n_over_batch_round_trips_without_waiting_for_a_round() -> None:
    handoff, hints, _, metrics = handoff_parts()
    for i in range(9):
        hints.add(0.0, "C", "ks", f"k{i}", value(b"1"))
    sent = [e for e in handoff.tick(0.0) if isinstance(e, Send)]
    round_trips = 0
    while sent:  # every answer arrives at once: no tick, no time passes
        round_trips += 1
        assert len(sent) <= CONFIG.hint_batch
        sent = acknowledge(handoff, 0.01, sent)
    assert round_trips == 5 and hints.pending() == 0 and metrics.hints_delivered == 9


def test_a_refused_batch_waits_for_the_next_round() -> None:
    handoff, hints, _, metrics = handoff_parts()
    for i in range(4):
        hints.add(0.0, "C", "ks", f"k{i}", value(b"1"))
    sent = [e for e in handoff.tick(0.0) if isinstance(e, Send)]
    assert acknowledge(handoff, 0.01, sent[:1], ok=False) == []
    assert acknowledge(handoff, 0.01, sent[1:]) == []  # settled, but not whole: no hurry
    assert hints.pending("C") == 3 and metrics.hints_delivered == 1
    again = [e.msg.key for e in handoff.tick(CONFIG.hint_delivery_interval) if isinstance(e, Send)]
    assert again == ["k0", "k2"]


def test_a_refused_or_unanswered_handoff_keeps_the_hint_for_the_next_round() -> None:
    handoff, hints, _, metrics = handoff_parts()
    hints.add(0.0, "C", "ks", "a", value(b"1"))
    hints.add(0.0, "C", "ks", "b", value(b"1"))
    first, _ = (e.msg for e in handoff.tick(0.0) if isinstance(e, Send))
    op = handoff.pending.get(first.op)
    assert isinstance(op, PendingHandoff)
    handoff.on_ack(0.0, first.op, ReplicaAck(first.op, False, "leaving"), op)
    assert handoff.tick(0.5) == []  # the other one is still in flight
    for _, expired in handoff.pending.expired(CONFIG.request_timeout):
        assert isinstance(expired, PendingHandoff)
        handoff.expire(expired)
    assert hints.pending("C") == 2 and metrics.hints_delivered == 0
    again = [e.msg.key for e in handoff.tick(CONFIG.request_timeout) if isinstance(e, Send)]
    assert again == ["a", "b"]


def test_an_expired_hint_for_a_down_target_goes_to_another_home_replica() -> None:
    handoff, hints, _, metrics = handoff_parts()
    ring = handoff.ring_view.ring
    key = next(
        k for k in (f"k{i}" for i in range(1000)) if "D" not in ring.preference_list(key_token("ks", k), 3)
    )
    home = ring.preference_list(key_token("ks", key), 3)
    target = home[0]
    hints.add(0.0, target, "ks", key, value(b"1"))
    later = CONFIG.hint_max_age + 10.0
    for other in home[1:]:  # the other home replicas spoke lately; the target stays silent: down
        handoff.ring_view.liveness.heard_from(other, later)
    sent = [e for e in handoff.tick(later) if isinstance(e, Send)]
    assert [(e.dst, e.msg.key) for e in sent] == [(home[1], key)]
    assert metrics.hints_expired == 1


# --- tombstone reaping --------------------------------------------------------------------------


def test_a_tombstone_is_reaped_only_after_the_grace_and_once_every_other_replica_holds_it() -> None:
    ring = Ring.build(["A", "B", "C"], 4)
    store = MemoryStore()
    config = NodeConfig(liveness="ping", tombstone_grace=10.0)
    metrics = NodeMetrics()
    view = RingView("A", PingLiveness("A", ring.nodes, 0.0), None, ring)
    reaper = TombstoneReaper("A", config, store, view, metrics)
    ks = KeyspaceDef("ks")
    key = "gone"
    hi = ring.ranges()[0].hi
    tomb = value(None, ts=1.0)
    store.put("ks", key, tomb)
    held = {key: digest(tomb)}
    reaper.confirm(20.0, ks, hi, "B", held)
    assert store.get("ks", key) == tomb  # C has not confirmed yet
    reaper.confirm(5.0, ks, hi, "C", held)
    assert store.get("ks", key) == tomb  # both confirmed, but within the grace period
    reaper.confirm(20.0, ks, hi, "B", held)
    assert store.get("ks", key) is None and metrics.tombstones_reaped == 1
    assert reaper.already_reaped("ks", key, tomb)
    assert not reaper.already_reaped("ks", key, value(None, ts=2.0))  # a newer delete
    assert not reaper.already_reaped("ks", key, value(b"back", ts=0.5))  # not a tombstone


def test_a_tombstone_that_changed_since_the_session_began_starts_over() -> None:
    ring = Ring.build(["A", "B", "C"], 4)
    store = MemoryStore()
    config = NodeConfig(liveness="ping", tombstone_grace=0.0)
    view = RingView("A", PingLiveness("A", ring.nodes, 0.0), None, ring)
    reaper = TombstoneReaper("A", config, store, view, NodeMetrics())
    ks, hi = KeyspaceDef("ks"), ring.ranges()[0].hi
    old = value(None, ts=1.0)
    store.put("ks", "k", old)
    reaper.confirm(5.0, ks, hi, "B", {"k": digest(old)})
    newer = value(None, ts=2.0, actor="B")
    store.put("ks", "k", newer)
    reaper.confirm(5.0, ks, hi, "C", {"k": digest(old)})  # C confirmed the old one: not enough
    assert store.get("ks", "k") == newer
