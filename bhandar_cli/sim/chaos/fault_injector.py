"""Fault injection for chaos runs: crashes, restarts, partitions, clogged links, slow nodes, loss.

This module owns *which* faults happen *when*; the mechanics live in the simulated network and
cluster. Faults start at exponentially distributed intervals, each lasts a random while and then
undoes itself, and several may overlap (a partition during a crash during message loss). Overlaps
are tracked per link and per setting, so the end of one fault never cancels another that is still
running. Everything random comes from the injector's own `random.Random`, a child of the run seed.

Kinds:
- `kill`: crash a node for seconds, then restart it. Its memory state is lost; its store is kept,
  except that with storage faults (`--storage lsm`) its disk loses what was not synced yet, and
  half the crashes strike inside one of the node's next disk operations (mid-step, between a
  write and its sync: in a WAL append, an fsync, a flush or a compaction).
- `restart`: crash a node and restart it almost at once (in-flight work and liveness are lost).
- `partition`: split the nodes in two (symmetric), or block a few links one way only; the links
  come back one by one in random order.
- `clog`: hold every message on a few links, then release the links one by one in random order
  (held messages are then delivered, late and reordered).
- `delay`: make a node slow (extra latency on everything it sends and receives).
- `loss`: drop a share of all messages.
- `duplicate`: deliver a share of all messages twice.
- `join`: start a new node (named after the last one: the next letter) that bootstraps into the
  ring; the movement is over when every live node sees it normal.
- `decommission`: ask a live node to leave; once it is `left` and every live node knows, it is shut
  down for good (retired). Never below `min_normal` normal nodes after it leaves.

Range movements are serialised: a `join` or `decommission` drawn while another is in progress is
skipped (operators move one node at a time; the store's pending ranges assume it). The workload
and every other fault keep running during a movement, and a movement may be crashed, partitioned
and restarted like anything else. A movement outlives `stop()`: the heal waits for it to finish.
With storage faults a crash also loses the node's unsynced writes (see `SimCluster.kill`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from random import Random
from typing import Any

from bhandar_cli.core.protocol import DecommissionRequest, Failure, Result
from bhandar_cli.host import next_node_name
from bhandar_cli.sim import SimCluster

NETWORK_KINDS: tuple[str, ...] = ("kill", "restart", "partition", "clog", "delay", "loss", "duplicate")
MEMBERSHIP_KINDS: tuple[str, ...] = ("join", "decommission")
FAULT_KINDS: tuple[str, ...] = NETWORK_KINDS + MEMBERSHIP_KINDS
WATCH_EVERY = 0.25  # simulated seconds between two looks at a range movement in progress
# A decommission request reaches its node within milliseconds; a node still normal this long after
# it was sent never took it (it was down, or a crash lost its `leaving` state before it was synced).
DECOMMISSION_GRACE = 1.0
ARMED_FOR = 0.2  # seconds a crash may wait for a disk operation to interrupt, at most


@dataclass(frozen=True, slots=True)
class FaultParams:
    kinds: tuple[str, ...]
    interval: float  # mean seconds between the starts of two faults
    duration: float  # mean seconds a fault lasts
    max_down: int  # most nodes crashed at once
    max_delay: float  # seconds of extra latency a slow node gets, at most
    max_loss: float  # share of messages dropped (or duplicated), at most
    max_nodes: int = 1000  # nodes in service at most: a join beyond it is skipped
    min_normal: int = 2  # normal nodes at least once a decommission is done (max(N) + 1)


@dataclass(slots=True)
class InjectedMovement:
    """One join or decommission, from the injector's point of view."""

    kind: str  # join | decommission
    node: str
    started: float
    answer: Result | None = None  # what the decommission request got back, if anything yet
    outcome: str = ""  # joined | left | aborted, once over
    finished: float = math.inf


class FaultInjector:
    """Schedules faults on the cluster's event loop until `stop()`, which heals everything."""

    def __init__(self, cluster: SimCluster, params: FaultParams, rng: Random) -> None:
        self.cluster = cluster
        self.params = params
        self.rng = rng
        self.injected: Counter[str] = Counter()
        self.active = True
        self._blocks: Counter[tuple[str, str]] = Counter()
        self._clogs: Counter[tuple[str, str]] = Counter()
        self._delays: dict[str, list[float]] = {}
        self._loss: list[float] = []
        self._dup: list[float] = []
        self._down: set[str] = set()
        self._armed: set[str] = set()  # nodes whose disks will crash inside an operation
        self.zones = sorted(set(cluster.ring.zones.values()))
        self.movement: InjectedMovement | None = None
        self.movements: list[InjectedMovement] = []  # finished ones, in order
        # Each fault as [kind, what, start, end] in simulated seconds, for the run's timeline
        # (`chaos --report`); an end past `stop()` is cut to it. Recording draws no randomness.
        self.spans: list[list[Any]] = []

    @property
    def names(self) -> list[str]:
        """Nodes in service now (joined ones included, retired ones not)."""
        return self.cluster.members

    @property
    def settled(self) -> bool:
        """No range movement in progress."""
        return self.movement is None

    def start(self) -> None:
        if self.params.kinds:
            self._later(self._exp(self.params.interval), self._next_fault)

    def stop(self) -> None:
        """No more faults; heal the network, restore settings and restart every crashed node.
        A range movement in progress goes on (see `settled`)."""
        self.active = False
        now = self.cluster.now
        for span in self.spans:
            if span[0] not in MEMBERSHIP_KINDS:  # a range movement goes on after the stop
                span[3] = min(span[3], now)
        model = self.cluster.model
        self._blocks.clear()
        self._clogs.clear()
        self.cluster.net.heal()
        self._delays.clear()
        model.extra_delay.clear()
        self._loss.clear()
        self._dup.clear()
        model.loss = model.duplicate = 0.0
        for name in sorted(self._armed):  # a crash still waiting for a disk write happens now
            self.cluster.kill(name)
        self._armed.clear()
        for name in self.names:
            self.cluster.revive(name)
        self._down.clear()

    # --- scheduling --------------------------------------------------------------------------

    def _exp(self, mean: float) -> float:
        return -mean * math.log(1.0 - self.rng.random())

    def _later(self, delay: float, fn: Callable[..., None], *args: object) -> None:
        self.cluster.loop.call_later(delay, self._guarded, fn, args)

    def _guarded(self, fn: Callable[..., None], args: tuple[object, ...]) -> None:
        if self.active:
            fn(*args)

    def _next_fault(self) -> None:
        kind = self.rng.choice(self.params.kinds)
        getattr(self, f"_start_{kind}")()
        self._later(self._exp(self.params.interval), self._next_fault)

    # --- the faults --------------------------------------------------------------------------

    def _crash(self, downtime: float, kind: str) -> None:
        alive = [n for n in self.names if n not in self._down]
        if len(self._down) >= self.params.max_down or not alive:
            return
        victim = self.rng.choice(alive)
        self._down.add(victim)
        self.injected[kind] += 1
        # With storage faults, half the crashes strike inside a disk operation of the node's next
        # steps (between a write and its sync); one that has not struck soon is made to happen.
        if self.cluster.arm_crash is not None and self.rng.random() < 0.5:
            self.cluster.crash_during_io(victim)
            self._armed.add(victim)
            self._later(ARMED_FOR, self._strike, victim)
            downtime += ARMED_FOR
        else:
            self.cluster.kill(victim)
        self._span(kind, victim, downtime)
        self._later(downtime, self._revive, victim)

    def _strike(self, name: str) -> None:
        """An armed crash that found no disk write to interrupt: crash the node now."""
        if name in self._armed:
            self._armed.discard(name)
            self.cluster.kill(name)

    def _revive(self, name: str) -> None:
        self._down.discard(name)
        self._armed.discard(name)
        self.cluster.revive(name)

    def _span(self, kind: str, what: str, duration: float) -> None:
        now = self.cluster.now
        self.spans.append([kind, what, now, now + duration])

    def _start_kill(self) -> None:
        self._crash(self._exp(self.params.duration), "kill")

    def _start_restart(self) -> None:
        self._crash(self.rng.random() * 0.05, "restart")

    def _start_partition(self) -> None:
        names = self.names
        rng = self.rng
        if rng.random() < 0.6:
            side = set(rng.sample(names, rng.randint(1, len(names) - 1)))
            links = [(a, b) for a in names for b in names if a != b and (a in side) != (b in side)]
        else:  # one-way: a few links lose one direction only
            pairs = [(a, b) for a in names for b in names if a != b]
            links = rng.sample(pairs, rng.randint(1, max(1, len(pairs) // 3)))
        self.injected["partition"] += 1
        for link in links:
            self._blocks[link] += 1
            self.cluster.model.cut(*link)
        self._span("partition", _links_text(links), self._restore_in_random_order(links, self._unblock))

    def _unblock(self, link: tuple[str, str]) -> None:
        self._blocks[link] -= 1
        if self._blocks[link] <= 0:
            del self._blocks[link]
            self.cluster.model.restore(*link)

    def _start_clog(self) -> None:
        pairs = [(a, b) for a in self.names for b in self.names if a != b]
        links = self.rng.sample(pairs, self.rng.randint(1, max(1, len(pairs) // 4)))
        self.injected["clog"] += 1
        for link in links:
            self._clogs[link] += 1
            self.cluster.model.clog(*link)
        self._span("clog", _links_text(links), self._restore_in_random_order(links, self._unclog))

    def _unclog(self, link: tuple[str, str]) -> None:
        self._clogs[link] -= 1
        if self._clogs[link] <= 0:
            del self._clogs[link]
            self.cluster.net.unclog(*link)

    def _restore_in_random_order(
        self, links: list[tuple[str, str]], restore: Callable[[tuple[str, str]], None]
    ) -> float:
        """Each link comes back at its own random time after the fault's duration; returns the
        last one's delay."""
        duration = self._exp(self.params.duration)
        last = 0.0
        for link in links:
            delay = duration * (0.5 + self.rng.random())
            last = max(last, delay)
            self._later(delay, restore, link)
        return last

    def _start_delay(self) -> None:
        node = self.rng.choice(self.names)
        extra = self.params.max_delay * self.rng.random() ** 2
        self.injected["delay"] += 1
        self._delays.setdefault(node, []).append(extra)
        self._apply_delay(node)
        duration = self._exp(self.params.duration)
        self._span("delay", f"{node} +{extra * 1000:.0f} ms", duration)
        self._later(duration, self._end_delay, node, extra)

    def _end_delay(self, node: str, extra: float) -> None:
        self._delays[node].remove(extra)
        self._apply_delay(node)

    def _apply_delay(self, node: str) -> None:
        delays = self._delays.get(node)
        if delays:
            self.cluster.model.set_delay(node, max(delays))
        else:
            self._delays.pop(node, None)
            self.cluster.model.set_delay(node, 0.0)

    def _start_loss(self) -> None:
        self._rate_fault("loss", self._loss)

    def _start_duplicate(self) -> None:
        self._rate_fault("duplicate", self._dup)

    def _rate_fault(self, kind: str, active: list[float]) -> None:
        rate = self.params.max_loss * (0.2 + 0.8 * self.rng.random())
        self.injected[kind] += 1
        active.append(rate)
        self._apply_rates()
        duration = self._exp(self.params.duration)
        self._span(kind, f"{rate:.0%} of messages", duration)
        self._later(duration, self._end_rate, active, rate)

    def _end_rate(self, active: list[float], rate: float) -> None:
        active.remove(rate)
        self._apply_rates()

    def _apply_rates(self) -> None:
        self.cluster.model.loss = max(self._loss, default=0.0)
        self.cluster.model.duplicate = max(self._dup, default=0.0)

    # --- range movements -----------------------------------------------------------------------

    def _start_join(self) -> None:
        if self.movement is not None or len(self.names) >= self.params.max_nodes:
            return
        name = next_node_name(list(self.cluster.hosts))
        zone = self.rng.choice(self.zones)
        self.injected["join"] += 1
        self.cluster.add_node(name, zone)
        self._begin(InjectedMovement("join", name, self.cluster.now))

    def _start_decommission(self) -> None:
        # With no movement in progress every node in service is normal, so this is the count.
        if self.movement is not None or len(self.names) - 1 < self.params.min_normal:
            return
        alive = [n for n in self.names if self.cluster.is_alive(n)]
        if not alive:
            return
        victim = self.rng.choice(alive)
        self.injected["decommission"] += 1
        movement = InjectedMovement("decommission", victim, self.cluster.now)
        cluster = self.cluster
        cluster.submit(
            victim, DecommissionRequest(cluster.new_rid()), lambda r: setattr(movement, "answer", r)
        )
        self._begin(movement)

    def _begin(self, movement: InjectedMovement) -> None:
        self.movement = movement
        self.spans.append([movement.kind, movement.node, movement.started, math.inf])
        # Not guarded: the watch goes on after `stop()` until the movement is over.
        self.cluster.loop.call_later(WATCH_EVERY, self._watch, movement)

    def _watch(self, movement: InjectedMovement) -> None:
        outcome = self._join_over(movement) if movement.kind == "join" else self._leave_over(movement)
        if not outcome:
            self.cluster.loop.call_later(WATCH_EVERY, self._watch, movement)
            return
        movement.outcome, movement.finished = outcome, self.cluster.now
        for span in self.spans:
            if span[0] == movement.kind and span[1] == movement.node and span[2] == movement.started:
                span[1], span[3] = f"{movement.node} ({outcome})", self.cluster.now
        self.movements.append(movement)
        self.movement = None

    def _live_views(self, node: str) -> list[str]:
        """`node`'s status as each live node in service sees it."""
        cluster = self.cluster
        return [cluster.status_of(node, n) for n in self.names if cluster.is_alive(n)]

    def _join_over(self, movement: InjectedMovement) -> str:
        if not self.cluster.is_alive(movement.node):
            return ""
        return "joined" if all(s == "normal" for s in self._live_views(movement.node)) else ""

    def _leave_over(self, movement: InjectedMovement) -> str:
        cluster, node = self.cluster, movement.node
        if not cluster.is_alive(node):
            return ""
        status = cluster.status_of(node)
        if status == "left" and node not in self._armed:
            others = [cluster.status_of(node, n) for n in self.names if n != node and cluster.is_alive(n)]
            if all(s == "left" for s in others):
                # Like an operator who stops the process once the ring has moved on without it.
                self._down.discard(node)
                cluster.retire(node)
                return "left"
            return ""
        refused = isinstance(movement.answer, Failure)
        if status == "normal" and (refused or cluster.now - movement.started > DECOMMISSION_GRACE):
            return "aborted"
        return ""  # leaving (or answered, and about to be seen left): not over yet


def _links_text(links: list[tuple[str, str]]) -> str:
    shown = " ".join(f"{a}>{b}" for a, b in links[:6])
    return f"{len(links)} links: {shown}" + (" ..." if len(links) > 6 else "")
