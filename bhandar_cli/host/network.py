"""The one network model: which messages get through, and when.

Partitions (groups that cannot talk), one-way cuts, per-node extra delay, loss, duplication and
clogged links (messages held until the link is restored) are decided here, once, for every way
Bhandar runs: the simulator schedules deliveries on its event loop, the in-process cluster of the
REPL on trio's clock, and a node process applies the same model as a filter on its TCP transport
(there the latency is the real network's, so the model adds none of its own).

`NetworkModel` decides; `Network` carries messages through a scheduler the environment supplies
(`schedule(delay, callback, args)`), checking the model again on arrival: a partition that starts
while a message is in flight drops it, as a cable pulled mid-flight loses the packet.

Latency follows the seed text's model: 1 ms + Exp(1) ms, and 3% of messages 40-80 ms later.
`bhandar check` also offers Maelstrom's other shapes around a mean (`distribution`): constant,
or uniform from 0 to twice the mean. Reordering comes from independent per-message latencies.
All randomness comes from the `random.Random` handed in. Where the senders are tasks that a
scheduler runs in an order of its own choosing (trio shuffles runnable tasks on purpose, so the
in-process cluster's nodes send in a different order from run to run), `per_sender` gives each
sender its own stream seeded from it: a node's draws then depend on its own sends only, and a
seeded run on trio's virtual clock repeats exactly. The simulator steps its nodes in a fixed order
and draws from the one stream.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from random import Random
from typing import Any, Literal

Link = tuple[str, str]  # (source node, destination node)
Deliver = Callable[[str, str, Any], bool]  # (dst, src, message) -> accepted by a live node
Schedule = Callable[[float, Callable[..., None], tuple[Any, ...]], None]  # (delay s, fn, args)
Distribution = Literal["constant", "uniform", "exponential"]
DISTRIBUTIONS: tuple[Distribution, ...] = ("constant", "uniform", "exponential")


@dataclass(frozen=True)
class LatencyModel:
    base_ms: float = 1.0
    mean_ms: float = 1.0  # exponential part
    spike_rate: float = 0.03
    spike_min_ms: float = 40.0
    spike_max_ms: float = 80.0
    distribution: Distribution = "exponential"  # of the part around `mean_ms`

    def sample(self, rng: Random) -> float:
        """One message's latency in seconds."""
        if self.distribution == "constant":
            ms = self.base_ms + self.mean_ms
        elif self.distribution == "uniform":
            ms = self.base_ms + 2.0 * self.mean_ms * rng.random()
        else:
            ms = self.base_ms - self.mean_ms * math.log(1.0 - rng.random())
        if rng.random() < self.spike_rate:
            ms += self.spike_min_ms + (self.spike_max_ms - self.spike_min_ms) * rng.random()
        return ms / 1000.0


def partition_groups(groups: Iterable[Iterable[str]], nodes: Iterable[str]) -> list[list[str]]:
    """The groups as given, plus one more of every node not listed (if any)."""
    listed = [list(g) for g in groups]
    seen = {n for g in listed for n in g}
    rest = [n for n in nodes if n not in seen]
    return [*listed, rest] if rest else listed


class NetworkModel:
    """Faults between nodes, and the latency of a message (None: the real network supplies it)."""

    def __init__(
        self, rng: Random, latency: LatencyModel | None = LatencyModel(), per_sender: bool = False
    ) -> None:
        self.rng = rng
        self._stream_seed = rng.getrandbits(64) if per_sender else None
        self._streams: dict[str, Random] = {}  # sender -> its stream (with `per_sender`)
        self.latency = latency
        self.loss = 0.0
        self.duplicate = 0.0
        self.blocked: set[Link] = set()
        self.groups: list[list[str]] = []  # the partition as a person declared it ([] if none)
        self.clogged: set[Link] = set()
        self.extra_delay: dict[str, float] = {}  # node -> seconds added to its messages both ways
        self.held: dict[Link, list[Any]] = {}
        self.sent = 0
        self.dropped = 0

    # --- deciding ----------------------------------------------------------------------------

    def _rng(self, src: str) -> Random:
        """The stream that decides the fate of `src`'s messages."""
        if self._stream_seed is None:
            return self.rng
        stream = self._streams.get(src)
        if stream is None:  # a string seed is hashed with SHA-512: the same in every process
            stream = self._streams[src] = Random(f"{self._stream_seed}:{src}")
        return stream

    def route(self, src: str, dst: str, msg: Any) -> tuple[float, ...]:
        """The delays (seconds) after which copies of `msg` arrive: () when it is lost or held."""
        self.sent += 1
        link = (src, dst)
        if link in self.blocked or (self.loss and self._rng(src).random() < self.loss):
            self.dropped += 1
            return ()
        if link in self.clogged:
            self.held.setdefault(link, []).append(msg)
            return ()
        first = self.delay(src, dst)
        if self.duplicate and self._rng(src).random() < self.duplicate:
            return (first, self.delay(src, dst))
        return (first,)

    def delay(self, src: str, dst: str) -> float:
        extra = self.extra_delay
        added = extra.get(src, 0.0) + extra.get(dst, 0.0) if extra else 0.0
        return added if self.latency is None else self.latency.sample(self._rng(src)) + added

    def admits(self, src: str, dst: str) -> bool:
        """Is the link open now (checked again when a message arrives)?"""
        return (src, dst) not in self.blocked

    # --- faults ------------------------------------------------------------------------------

    def partition(self, groups: Iterable[Iterable[str]], nodes: Iterable[str]) -> list[list[str]]:
        """Nodes in different groups cannot talk; nodes not listed form one more group. Replaces any
        earlier partition or cut. Returns the groups."""
        everyone = list(nodes)
        listed = partition_groups(groups, everyone)
        group_of = {n: i for i, g in enumerate(listed) for n in g}
        self.blocked = {(a, b) for a in group_of for b in group_of if group_of[a] != group_of[b]}
        self.groups = listed
        return listed

    def cut(self, src: str, dst: str) -> None:
        """A one-way cut: `src` cannot reach `dst` (the other way still works)."""
        self.blocked.add((src, dst))
        self.groups = []

    def restore(self, src: str, dst: str) -> None:
        self.blocked.discard((src, dst))

    def clog(self, src: str, dst: str) -> None:
        self.clogged.add((src, dst))

    def unclog(self, src: str, dst: str) -> list[Any]:
        """Open a clogged link; returns the messages it held, in order, to be sent now."""
        self.clogged.discard((src, dst))
        return self.held.pop((src, dst), [])

    def set_delay(self, node: str, seconds: float) -> None:
        if seconds > 0:
            self.extra_delay[node] = seconds
        else:
            self.extra_delay.pop(node, None)

    def heal(self) -> list[tuple[str, str, Any]]:
        """Lift partitions, cuts and clogs; returns the held messages (src, dst, msg) to send now."""
        self.blocked.clear()
        self.groups = []
        return [(s, d, m) for (s, d) in sorted(self.clogged) for m in self.unclog(s, d)]


class Network:
    """Messages between nodes through a `NetworkModel`, on the environment's scheduler."""

    def __init__(self, model: NetworkModel, schedule: Schedule, deliver: Deliver) -> None:
        self.model = model
        self.schedule = schedule
        self.deliver = deliver

    def send(self, src: str, dst: str, msg: Any) -> None:
        for delay in self.model.route(src, dst, msg):
            self.schedule(delay, self._arrive, (src, dst, msg))

    def _arrive(self, src: str, dst: str, msg: Any) -> None:
        if not self.model.admits(src, dst) or not self.deliver(dst, src, msg):
            self.model.dropped += 1

    def release(self, held: Iterable[tuple[str, str, Any]]) -> None:
        """Send messages a clogged link held (after `heal` or `unclog`)."""
        for src, dst, msg in held:
            self.schedule(self.model.delay(src, dst), self._arrive, (src, dst, msg))

    def unclog(self, src: str, dst: str) -> None:
        self.release((src, dst, m) for m in self.model.unclog(src, dst))

    def heal(self) -> None:
        self.release(self.model.heal())
