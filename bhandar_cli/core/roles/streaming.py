"""Range movement: bootstrap of a joining node and decommission of a leaving one.

Join: the new node announces itself `joining` with its tokens. Coordinators then also send writes
for its future ranges to it (pending ranges). After a short delay (so that everyone has heard, and
new writes already reach it), and once it has found a normal member at all (a join from nobody
would make it a cluster of its own: found by `bhandar chaos --seed 999482 --ops 8000`, whose
joiner had only retired seeds), it asks every normal node to stream the records it will
replicate; each source walks its store against the *future* ring and sends them in acknowledged
batches. One that went silent is asked again, one that is down is asked once it is back. When
every source is done the node announces `normal` and starts owning its ranges.

A source that is down is not waited for when its ranges can come from elsewhere. The joiner takes
over some ranges from it (it was a replica, it is none once the join is done: it is *displaced*);
the joiner takes everything every live source holds of its future ranges, so once every other
current replica of each such range has streamed, it holds every write a quorum of the range's
replicas acknowledged that reached one of them, and a key keeps as many replicas holding such a
write as it had: R + W > N still holds for W >= 2. The join then says what it did ("F does not
wait for C (down): the 4 ranges C loses to F stream from their other replicas B, D; ...") and
finishes without the down source (a source back before the join is done is asked after all).
What only the down source held (a write at ONE that reached it alone) is not lost: once it is back
and hears of the join, it holds records of keys it replicates no more, and ownership handoff
(ownership.py) sends them to their replicas, the joiner among them. While another replica of such
a range has not streamed (it is down too, say), the joiner waits and says whom it waits for. (It
waited for every source, as Cassandra's consistent range movement does, before ownership handoff
existed: a displaced replica's records were then lost to every read, found by `bhandar chaos
--seed 128 --ops 3000`; and it waited silently, 120 s with C down, until `add` gave up.)

Decommission: the node announces `leaving`; coordinators send writes for its ranges to the future
replicas too. After the same delay it streams every record it holds (its hinted records as well)
to the replicas the future ring gives each key (leaving.py), waits for every batch to be
acknowledged and for its hint queue to be empty (handoff delivers or redirects hints while the
node is leaving), then announces `left`. Streaming to every future replica, not only the new one,
costs a little more traffic and means no acknowledged write depends on a replica that happened to
miss it. A target that starts leaving (or has left) meanwhile would leave with the records: what
it has not acknowledged is re-planned to the ring as it is now. A decommission never waits
forever: when neither a stream nor the hint queue has moved for `leave_stall` seconds (a target
down all that time, no replica up to take a hint), it stops, the node announces `normal` again,
and the request fails saying what it waited for (as in `bhandar chaos --seed 999482 --ops 8000`
on an older main, where the leaving node streamed to one that had left and waited for it forever).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from bhandar_cli.core.membership import MemberState, key_token
from bhandar_cli.core.model import BadInput, NodeConfig, Refused, merge_records
from bhandar_cli.core.protocol import Effect, Failure, MoveResult, Note, Send, answer
from bhandar_cli.core.repair import fitting
from bhandar_cli.core.roles.leaving import Item, by_replica, held_items, stop_reason
from bhandar_cli.core.roles.role_context import RoleContext

# The `streams` part of a node's `info` (the `view` below): range movements in progress. "from" is
# a keyword, hence the functional form.
InboundStream = TypedDict(
    "InboundStream",
    {
        "from": str,
        "received": int,
        "total": int,
        "done": bool,
        "replaced": bool,
        "instead": list[str],
        "ranges": int,
        "waiting_for": list[str],
    },
)


class OutboundStream(TypedDict):
    to: str
    sent: int
    total: int
    done: bool


class StreamsView(TypedDict):
    movement: str | None  # join | decommission | ..., None when nothing moves
    finished: bool
    stopped: str
    inbound: list[InboundStream]
    outbound: list[OutboundStream]


Displaced = tuple[int, int, tuple[str, ...]]  # an arc (lo, hi] a joiner takes over, its other replicas


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """A joining node asks a source for everything it will replicate."""

    session: int
    joiner: MemberState


@dataclass(frozen=True, slots=True)
class StreamBatch:
    session: int
    seq: int
    items: tuple[Item, ...]
    done: bool
    total: int


@dataclass(frozen=True, slots=True)
class StreamAck:
    session: int
    seq: int


@dataclass
class OutStream:
    """Records this node is sending to one peer."""

    peer: str
    session: int
    items: list[Item]
    sent: int = 0
    in_flight: int = 0  # records of the batch sent last (cut by count and by bytes)
    seq: int = 0
    acked: bool = True
    done: bool = False
    last_ack: float = 0.0


@dataclass
class InStream:
    source: str
    received: int = 0
    total: int = 0
    done: bool = False
    last_heard: float = 0.0
    asked: bool = False  # a StreamRequest went out (the source may have been down until now)
    # The source is down and was not waited for: its displaced ranges (if any) came from their
    # other replicas instead, these.
    replaced: bool = False
    instead: tuple[str, ...] = ()
    ranges: int = 0  # the ranges the joiner takes over from it (counted while it is down)
    waiting_for: tuple[str, ...] = ()  # down, and these other replicas have not streamed yet
    said_down: tuple[str, ...] | None = None  # those of them down when the wait was last noted

    @property
    def streamed(self) -> bool:
        """Whether the source itself sent everything it holds of the joiner's ranges."""
        return self.done and not self.replaced


@dataclass
class Movement:
    """This node's own join or decommission in progress."""

    kind: str  # join or leave
    start_at: float
    rid: int = 0  # the client request to answer when done (decommission)
    origin: str | None = None
    started: bool = False
    inbound: dict[str, InStream] = field(default_factory=dict)
    finished_at: float | None = None
    outbound: set[tuple[str, int]] = field(default_factory=set)  # a leave's own streams
    progress_at: float = 0.0  # a leave's last progress: a batch acknowledged, a hint gone
    hints_left: int = 0
    stopped: str = ""  # why a leave stopped before the node left


class Streaming:
    """This node's own join or decommission, and the streams it sends to and receives from others."""

    def __init__(self, context: RoleContext, config: NodeConfig, now: float) -> None:
        self.node_id = context.node_id
        self.sibling_limit = context.sibling_limit  # a streamed record merged here can take a key past it
        self.config = config
        self.store = context.store
        self.keyspaces = context.keyspaces
        self.hints = context.hints
        self.ring_view = ring_view = context.ring_view
        self.ids = context.ids
        self.movement: Movement | None = None
        self._outgoing: dict[tuple[str, int], OutStream] = {}
        # displaced_arcs, per source, for (current ring, future ring, replication factors)
        self._displaced: tuple[tuple[object, ...], dict[str, list[Displaced]]] = ((), {})
        status = ring_view.status
        if status in ("joining", "leaving"):  # booted (or restarted) in the middle of a movement
            self.movement = Movement("join" if status == "joining" else "leave", now + config.join_delay)

    # --- this node's own movement --------------------------------------------------------------

    def decommission(self, now: float, rid: int, origin: str | None) -> list[Effect]:
        """The `decommission` command: announce `leaving`, then stream every range away and answer
        client `rid` once the node has left."""
        view = self.ring_view
        if not view.gossiping:
            raise BadInput("decommission needs gossip membership (liveness=gossip)")
        if view.status != "normal":
            raise BadInput(f"{self.node_id} is {view.status}; only a normal node can be decommissioned")
        remaining = [m for m in view.peers() if view.status_of(m) == "normal"]
        widest = self.keyspaces.widest()
        if len(remaining) < widest:
            raise Refused(
                f"decommissioning {self.node_id} would leave {len(remaining)} nodes for a keyspace "
                f"with n={widest}"
            )
        view.set_status("leaving")
        self.store.put_meta("status", "leaving")
        self.movement = Movement("leave", now + self.config.join_delay, rid, origin)
        return [Note(f"{self.node_id} is leaving: its ranges will stream to their new replicas")]

    def tick(self, now: float) -> list[Effect]:
        out: list[Effect] = []
        mv = self.movement
        if mv is not None and not mv.started and now >= mv.start_at:
            if mv.kind == "join" and not self._normal_peers():
                # It has found no member of the cluster yet (its seeds are unreachable): a join
                # from nobody would make it a cluster of its own. It waits for one.
                return self._resend_stalled(now)
            mv.started = True
            out.extend(self._begin_join(now) if mv.kind == "join" else self._begin_leave(now))
        if mv is not None and mv.started and mv.finished_at is None:
            out.extend(self._check_join(now, mv) if mv.kind == "join" else self._check_leave(now, mv))
        out.extend(self._resend_stalled(now))
        return out

    def _begin_join(self, now: float) -> list[Effect]:
        assert self.movement is not None
        # Every normal member, up or not: one that is down now is asked when it is back. Skipping
        # it lost what only it held of the ranges this node takes over (it stops being a replica
        # of them, so anti-entropy never looks there again). Found by `bhandar chaos --seed 128
        # --ops 3000`.
        sources = self._normal_peers()
        out: list[Effect] = [Note(f"{self.node_id} bootstraps from {', '.join(sources) or 'nobody'}")]
        for src in sources:
            self.movement.inbound[src] = InStream(src, last_heard=now)
        out.extend(self._ask_sources(now))
        return out

    def _normal_peers(self) -> list[str]:
        view = self.ring_view
        return [p for p in view.peers() if view.status_of(p) == "normal"]

    def _ask_sources(self, now: float) -> list[Effect]:
        """Ask each source that is up and has not answered (or went silent) for its stream."""
        assert self.movement is not None
        view = self.ring_view
        out: list[Effect] = []
        for stream in self.movement.inbound.values():
            if stream.replaced and view.is_up(stream.source, now):
                # Back before the join is done: its own copies are the best source of its ranges,
                # and another down source's ranges may wait for them.
                stream.done = stream.replaced = stream.asked = False
                stream.instead, stream.waiting_for, stream.said_down = (), (), None
            if stream.done:
                continue
            if view.status_of(stream.source) != "normal":
                stream.done = True  # leaving or gone: it streams its data to the future ring itself
                continue
            silent = now - stream.last_heard > self.config.request_timeout * 10
            if (not stream.asked or silent) and view.is_up(stream.source, now):
                stream.asked, stream.last_heard = True, now
                out.append(Send(stream.source, StreamRequest(self.ids.take(), view.mine)))
        return out

    def _replace_down_sources(self, now: float, mv: Movement) -> list[Effect]:
        """A source that is down is done once every other current replica of each range it is
        displaced from has streamed (see the module docstring); until then the joiner says, once
        per change, whom it waits for."""
        view = self.ring_view
        out: list[Effect] = []
        for stream in mv.inbound.values():
            if stream.done or view.is_up(stream.source, now):
                continue
            arcs = self.displaced_arcs(stream.source)
            partners = sorted({p for _, _, others in arcs for p in others})
            waiting = tuple(p for p in partners if p in mv.inbound and not mv.inbound[p].streamed)
            ranges = len({(lo, hi) for lo, hi, _ in arcs})
            me, src = self.node_id, stream.source
            stream.ranges = ranges
            if not waiting:
                stream.done = stream.replaced = True
                stream.instead = tuple(partners)
                if ranges:
                    text = (
                        f"{me} does not wait for {src} (down): the {ranges} ranges {src} loses to {me} "
                        f"stream from their other replicas {', '.join(partners)}; what only {src} holds "
                        "it hands over once it is back"
                    )
                else:
                    text = f"{me} does not wait for {src} (down): {src} loses no range to {me}"
                out.append(Note(text, {"node": me, "source": src, "ranges": ranges, "instead": partners}))
            else:
                down = tuple(p for p in waiting if not view.is_up(p, now))
                stream.waiting_for = waiting
                if stream.said_down != down:  # said once, and again when one it waits for goes down or up
                    stream.said_down = down
                    shown = ", ".join(p + (" (down)" if p in down else "") for p in waiting)
                    text = (
                        f"{me} waits for {src} (down): the {ranges} ranges {src} loses to {me} have "
                        f"other replicas that have not finished streaming them: {shown}"
                    )
                    data = {"node": me, "source": src, "ranges": ranges, "waiting": list(waiting)}
                    out.append(Note(text, data))
        return out

    def displaced_arcs(self, source: str) -> list[Displaced]:
        """The arcs (lo, hi] of which this joining node becomes a replica and `source` stops being
        one, each with the other current replicas, for every replication factor in use (an arc
        appears once per factor that displaces `source` there). Kept while the rings and the
        factors stand: a join with a source down asks at every tick."""
        view = self.ring_view
        current, future = view.ring, view.future_ring()
        factors = tuple(sorted({ks.n for ks in self.keyspaces.all()}))
        if self._displaced[0] != (current, future, factors):
            self._displaced = ((current, future, factors), {})
        known = self._displaced[1]
        if source not in known:
            known[source] = []
            bounds = sorted(set(current.positions) | set(future.positions))
            for i, hi in enumerate(bounds if current.positions and future.positions else []):
                for n in factors:
                    old, new = current.preference_list(hi, n), future.preference_list(hi, n)
                    if source in old and source not in new and self.node_id in new:
                        known[source].append((bounds[i - 1], hi, tuple(r for r in old if r != source)))
        return known[source]

    def _begin_leave(self, now: float) -> list[Effect]:
        items = held_items(self.store, self.keyspaces, self.hints)
        assert self.movement is not None
        self.movement.progress_at, self.movement.hints_left = now, self.hints.pending()
        return self._stream_out(now, by_replica(items, self.ring_view.future_ring()))

    def _stream_out(self, now: float, per_target: dict[str, list[Item]]) -> list[Effect]:
        """Start one stream of this node's leave per target."""
        assert self.movement is not None
        out: list[Effect] = []
        for target, items in sorted(per_target.items()):
            session = self.ids.take()
            stream = OutStream(target, session, items, last_ack=now)
            self._outgoing[(target, session)] = stream
            self.movement.outbound.add((target, session))
            out.extend(self._send_next(now, stream))
        return out

    def _check_join(self, now: float, mv: Movement) -> list[Effect]:
        out = self._ask_sources(now)  # sources back up, and requests or batches lost
        out.extend(self._replace_down_sources(now, mv))
        if out or not all(s.done for s in mv.inbound.values()):
            return out
        mv.finished_at = now
        self.ring_view.set_status("normal")
        keys = sum(s.received for s in mv.inbound.values())
        return [
            Note(f"{self.node_id} joined: {keys} records streamed in", {"node": self.node_id, "keys": keys})
        ]

    def _check_leave(self, now: float, mv: Movement) -> list[Effect]:
        out = self._replan_departed(now, mv)
        mine = [self._outgoing[k] for k in mv.outbound if not self._outgoing[k].done]
        hints = self.hints.pending()
        if hints < mv.hints_left:
            mv.progress_at = now
        mv.hints_left = hints
        # Hints stored here after the streams began would leave with the node: wait until handoff
        # has given each to a replica (it redirects them while this node is leaving). Found by
        # `bhandar chaos --seed 18 --ops 3000 --faults all`.
        if mine or hints:
            if now - mv.progress_at > self.config.leave_stall:
                out.extend(self._stop_leave(now, mv, mine, hints))
            return out
        mv.finished_at = now
        self.ring_view.set_status("left")
        sent = sum(len(self._outgoing[k].items) for k in mv.outbound)
        self.store.put_meta("status", "left")
        out.append(
            Note(f"{self.node_id} left: {sent} records streamed out", {"node": self.node_id, "keys": sent})
        )
        if mv.rid:
            out.append(answer(mv.rid, mv.origin, MoveResult(self.node_id, "leave", sent), durable=True))
        return out

    def _replan_departed(self, now: float, mv: Movement) -> list[Effect]:
        """Send what a target that is leaving (or left) has not acknowledged to the replicas the
        ring gives those records now."""
        view = self.ring_view
        departed = [
            self._outgoing[k]
            for k in sorted(mv.outbound)
            if not self._outgoing[k].done and view.status_of(k[0]) in ("leaving", "left")
        ]
        if not departed:
            return []
        for stream in departed:
            stream.done = True  # abandoned: its target will not keep the records
        unacknowledged = [item for stream in departed for item in stream.items[stream.sent :]]
        per_target = by_replica(unacknowledged, view.future_ring())
        names = ", ".join(s.peer for s in departed)
        mv.progress_at = now
        return [
            Note(f"{self.node_id} re-plans its streams to {names} (leaving the ring) to the current owners"),
            *self._stream_out(now, per_target),
        ]

    def _stop_leave(self, now: float, mv: Movement, stalled: list[OutStream], hints: int) -> list[Effect]:
        """The decommission made no progress for `leave_stall` seconds: stop it, normal again."""
        reason = stop_reason(self.node_id, self.config.leave_stall, stalled, hints)
        for key in mv.outbound:
            self._outgoing[key].done = True
        mv.finished_at, mv.stopped = now, reason
        self.ring_view.set_status("normal")
        self.store.put_meta("status", "normal")
        out: list[Effect] = [Note(reason, {"node": self.node_id, "stopped": True})]
        if mv.rid:
            out.append(answer(mv.rid, mv.origin, Failure("unavailable", reason, coordinator=self.node_id)))
        return out

    # --- sending -------------------------------------------------------------------------------

    def on_request(self, now: float, src: str, msg: StreamRequest) -> list[Effect]:
        self.ring_view.merge(msg.joiner)  # even if gossip has not told us yet
        future = self.ring_view.future_ring()
        items = [
            (ks, key, record)
            for ks in self.keyspaces.all()
            for key, record in self.store.items(ks.name)
            if src in future.preference_list(key_token(ks.name, key), ks.n)
        ]
        stream = OutStream(src, msg.session, items, last_ack=now)
        self._outgoing[(src, msg.session)] = stream
        return self._send_next(now, stream)

    def _send_next(self, now: float, stream: OutStream) -> list[Effect]:
        window = stream.items[stream.sent : stream.sent + self.config.stream_batch]
        # Cut by bytes too: a hundred values at the size limit would make a frame no peer takes
        # (and, resent as it was, a stream that never ends).
        chunk = tuple(window[: fitting([(key, record) for _, key, record in window])])
        stream.in_flight = len(chunk)
        stream.seq += 1
        stream.acked = False
        stream.last_ack = now
        last = stream.sent + len(chunk) >= len(stream.items)
        batch = StreamBatch(stream.session, stream.seq, chunk, last, len(stream.items))
        return [Send(stream.peer, batch)]

    def on_ack(self, now: float, src: str, msg: StreamAck) -> list[Effect]:
        stream = self._outgoing.get((src, msg.session))
        if stream is None or msg.seq != stream.seq or stream.acked:
            return []
        stream.acked = True
        stream.sent = min(len(stream.items), stream.sent + stream.in_flight)
        if self.movement is not None and (src, msg.session) in self.movement.outbound:
            self.movement.progress_at = now
        if stream.sent >= len(stream.items):
            stream.done = True
            return []
        return self._send_next(now, stream)

    def _resend_stalled(self, now: float) -> list[Effect]:
        out: list[Effect] = []
        for stream in self._outgoing.values():
            stalled = not stream.done and not stream.acked
            if (
                stalled
                and now - stream.last_ack > self.config.request_timeout * 2
                and (self.ring_view.is_up(stream.peer, now))
            ):
                stream.seq -= 1  # the same batch again
                out.extend(self._send_next(now, stream))
        return out

    # --- receiving -----------------------------------------------------------------------------

    def on_batch(self, now: float, src: str, msg: StreamBatch) -> list[Effect]:
        for ks, key, record in msg.items:
            self.keyspaces.learn(ks)
            merged = merge_records(ks.policy, self.store.get(ks.name, key), record)
            if merged is not None:
                self.store.put(ks.name, key, merged)
                self.sibling_limit.stored(ks.name, key, merged)
        mv = self.movement
        if mv is not None and mv.kind == "join" and src in mv.inbound:
            stream = mv.inbound[src]
            stream.received += len(msg.items)
            stream.total = msg.total
            stream.last_heard = now
            stream.done = stream.done or msg.done
        return [Send(src, StreamAck(msg.session, msg.seq), durable=True)]

    def view(self) -> StreamsView:
        """Progress of range movements, for status views."""
        mv = self.movement
        inbound: list[InboundStream] = (
            []
            if mv is None
            else [
                {
                    "from": s.source,
                    "received": s.received,
                    "total": s.total,
                    "done": s.done,
                    "replaced": s.replaced,  # down, and not waited for
                    "instead": list(s.instead),  # the replicas its ranges came from instead
                    "ranges": s.ranges,  # the ranges taken over from it (counted once it is down)
                    "waiting_for": list(s.waiting_for),  # down: replicas still to stream them
                }
                for s in mv.inbound.values()
            ]
        )
        outbound: list[OutboundStream] = [
            {"to": s.peer, "sent": s.sent, "total": len(s.items), "done": s.done}
            for s in self._outgoing.values()
        ]
        return {
            "movement": None if mv is None else mv.kind,
            "finished": mv is not None and mv.finished_at is not None,
            "stopped": "" if mv is None else mv.stopped,
            "inbound": inbound,
            "outbound": outbound,
        }
