"""Where every message of a check goes, and the journal of all of them.

Node-to-node messages go through Bhandar's one network model (`host.network`): partitions,
one-way cuts, loss, duplication, a slow node's extra delay and the latency model are decided
there, exactly as in the simulator and the in-process cluster. Messages between a node and a
client or a service are outside the partitioned network (a client always reaches its node, as
in Maelstrom). A service's messages take the same latency; a client's take none, as in Maelstrom
(latency on clients' messages would hide anomalies: a client is as if beside its node), only a
slow node's extra delay. The `duplicate` fault copies messages between nodes
only, as Maelstrom's network never duplicates a client's request; with `duplicate_clients` a
client's request is duplicated too (a retransmission with the same `msg_id`: a node must treat
it as one request). A message to an id that is neither a node, a client nor a service is
answered with error 1 (node-not-found).

A node may pass a client's request on to another node unchanged (`src` still the client, as
Maelstrom's raft.py does): it travels the link between the two nodes, so partitions, loss and
latency apply to it as to any message between them, and whichever node answers the client is
matched by the client by `in_reply_to`.

A message reaches only the life of its destination that was running when it was sent: one sent
to a node that was down, or that dies and restarts before it arrives, is lost with that life, so
a restarted node hears `init` before anything else (a node answering before `init` knows no id).

Every message is journalled (sent, arrived or dropped, who, what type, which ids) up to
`JOURNAL_MAX` messages: the report's Lamport diagram is drawn from it.
"""

from __future__ import annotations

from collections.abc import Callable
from random import Random
from typing import Any

import trio

from bhandar_cli.check.checked_process import CheckedProcess
from bhandar_cli.check.net_stats import NetStats
from bhandar_cli.check.protocol import NODE_NOT_FOUND, Message, encode, error_body, reply_body
from bhandar_cli.host import LatencyModel, Network, NetworkModel
from bhandar_cli.node import TrioTimers

JOURNAL_MAX = 200_000
HARNESS = "c0"  # the harness's own id (init and topology come from it)


class Envelope:
    """One message in flight and in the journal: times in seconds since the run began."""

    __slots__ = ("arrived", "body", "dest", "life", "raw", "sender", "sent", "src")

    def __init__(
        self, sent: float, src: str, dest: str, body: dict[str, Any], raw: bytes, sender: str = ""
    ) -> None:
        self.sent = sent
        self.arrived: float | None = None  # None: dropped, or still in flight
        self.src = src
        self.sender = sender or src  # who wrote it: a node forwarding a client's request, or `src`
        self.life = -1  # the destination node's life when it was sent (-1: down, or not a node)
        self.dest = dest
        self.body = body
        self.raw = raw


class Router:
    def __init__(
        self,
        nodes: dict[str, CheckedProcess],
        rng: Random,
        latency: LatencyModel | None,
        on_client: Callable[[Message], None],
        services: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]],
        start: float,
        duplicate_clients: bool = False,
    ) -> None:
        self.nodes = nodes
        self.duplicate_clients = duplicate_clients
        self.model = NetworkModel(rng, latency)
        self.timers = TrioTimers()
        self.network = Network(self.model, self._schedule, self._arrive)
        self.on_client = on_client
        self.services = services
        self.start = start
        self.journal: list[Envelope] = []
        self.journal_full = False
        self.counts = {"node": 0, "client": 0, "service": 0}
        self.stats = NetStats()  # Maelstrom's net statistics: sends, receives, messages
        self._rng = rng

    async def run(self) -> None:
        await self.timers.run()

    def now(self) -> float:
        return trio.current_time() - self.start

    def restart_clock(self) -> None:
        """Time 0 is now (when the workload begins); what was journalled before moves back."""
        offset = trio.current_time() - self.start
        self.start += offset
        for env in self.journal:
            env.sent -= offset
            if env.arrived is not None:
                env.arrived -= offset

    def _record(self, src: str, dest: str, body: dict[str, Any], raw: bytes, sender: str = "") -> Envelope:
        env = Envelope(self.now(), src, dest, body, raw, sender)
        node = self.nodes.get(dest)
        if node is not None and node.running:
            env.life = node.life
        if len(self.journal) < JOURNAL_MAX:
            self.journal.append(env)
        else:
            self.journal_full = True
        return env

    def _schedule(self, delay: float, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        if delay <= 0:
            fn(*args)
        else:
            self.timers.schedule(delay, fn, args)

    def _arrive(self, dst: str, src: str, env: Envelope) -> bool:
        """Network's deliver: hand the line to the node; False when it is down or not reading."""
        node = self.nodes.get(dst)
        if node is None or env.life != node.life or not node.send(env.raw):
            return False
        env.arrived = self.now()
        self.stats.received(env.sender, dst)
        return True

    # --- from nodes --------------------------------------------------------------------------------

    def from_node(self, msg: Message, sender: str) -> None:
        """A message node `sender` wrote (decoded and checked by the caller): its own, or a
        client's request it passes on to node `msg.dest`."""
        dest = msg.dest
        env = self._record(msg.src, dest, msg.body, msg.raw + b"\n", sender)
        self.stats.sent(sender, dest)
        if dest in self.nodes:
            self.counts["node"] += 1
            self.network.send(sender, dest, env)
        elif dest.startswith("c") and dest[1:].isdigit():
            self.counts["client"] += 1
            self._schedule(self._client_delay(msg.src, dest), self._to_client, (env, msg))
        elif dest in self.services:
            self.counts["service"] += 1
            self._schedule(self.model.delay(msg.src, dest), self._to_service, (env, msg))
        elif msg.msg_id is not None:
            text = f"no node {dest!r}: nodes are {', '.join(self.nodes)}, services {', '.join(self.services)}"
            self.send_to_node(dest, msg.src, reply_body(msg.body, error_body(NODE_NOT_FOUND, text)))

    def _to_client(self, env: Envelope, msg: Message) -> None:
        env.arrived = self.now()
        self.stats.received(msg.src, msg.dest)
        self.on_client(msg)

    def _to_service(self, env: Envelope, msg: Message) -> None:
        env.arrived = self.now()
        self.stats.received(msg.src, msg.dest)
        service = self.services[msg.dest]
        answer = reply_body(msg.body, service(msg.src, msg.body))
        self.send_to_node(msg.dest, msg.src, answer)

    # --- to nodes ----------------------------------------------------------------------------------

    def send_to_node(self, src: str, node: str, body: dict[str, Any], copies: int = 1) -> None:
        """A client's, a service's or the harness's message to a node, after the latency (a
        client's request may be duplicated: `copies`)."""
        raw = encode(src, node, body)
        self.stats.sent(src, node, copies)
        for _ in range(copies):
            env = self._record(src, node, body, raw)
            delay = self.model.delay(src, node) if src in self.services else self._client_delay(src, node)
            self._schedule(delay, self._arrive_direct, (node, env))

    def _client_delay(self, src: str, dest: str) -> float:
        """A client's message (or the harness's): no latency, only a slow node's extra delay."""
        extra = self.model.extra_delay
        return extra.get(src, 0.0) + extra.get(dest, 0.0) if extra else 0.0

    def _arrive_direct(self, node: str, env: Envelope) -> None:
        self._arrive(node, env.src, env)

    def client_copies(self) -> int:
        """How many copies of a client's request the network delivers: the duplicate fault
        strikes them only with `duplicate_clients`."""
        dup = self.model.duplicate
        return 2 if self.duplicate_clients and dup and self._rng.random() < dup else 1
