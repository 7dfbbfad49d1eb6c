"""TCP for node processes on trio: length-prefixed CBOR frames (node/net/codec.py) over streams.

This module owns:
- `TcpTransport`, a node's network of peers behind the `send(src, dst, msg)` that the node host
  uses with the in-memory network. One outbound connection per peer, reused, reconnected with
  jittered exponential backoff. Per-peer queues are bounded and a peer that is down or slow costs
  dropped messages, never a blocked node (Dynamo's protocol already survives lost messages). The
  operator's partitions and delays are the one network model (host/network.py) applied here as a
  filter, on both the sending and receiving side; the latency is the real network's.
- The listener. Every connection opens with a hello frame: `{"hello": "peer", "id": X}` starts a
  one-way stream of messages from node X; `{"hello": "client"}` starts request/response RPC,
  served by the node (`on_client`); `{"hello": "join"}` is a new machine asking for a certificate
with a join token (`on_join`, node/join.py). A hello is written in the oldest protocol version and
names the newest one its writer reads (`"protocol"`): this node writes to each peer in the newest
version both read (`codec.negotiate`), holds what it sends a peer until it has heard the peer's
hello (up to `HELLO_WAIT`; then the oldest), and counts the messages it sends and receives per
version (`by_protocol`, in `info`).
Garbage, an oversized length prefix or a frame left half-sent
  for `frame_timeout` seconds closes the connection; the node goes on serving the others. Before
  a connection is admitted (a peer's certificate, a client's token) admission.py's limits hold.
With the node's TLS files (`tls`), both run over TLS: the listener asks for a certificate of the
cluster CA (clients show none, peers must; the checks on who speaks as whom are security/peer_gate.py's),
and a link to a peer shows this node's certificate and checks the peer's against its node id.
Frames (reading and batched writing) are in frames.py; the RPC client in rpc.py.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from functools import partial
from random import Random
from typing import Any

import trio

from bhandar_cli.core import from_wire, readable_at, to_wire_at
from bhandar_cli.core.model import BhandarError
from bhandar_cli.host import NetworkModel
from bhandar_cli.node.net import codec
from bhandar_cli.node.net.admission import JOIN_TIMEOUT, Admission, Ticket
from bhandar_cli.node.net.cbor_validation import ProtocolError
from bhandar_cli.node.net.codec import encode_frame, negotiate
from bhandar_cli.node.net.frames import (
    BACKOFF_MAX,
    BACKOFF_MIN,
    BATCH_BYTES,
    BATCH_FRAMES,
    CONNECT_TIMEOUT,
    FRAME_TIMEOUT,
    HELLO_TIMEOUT,
    PEER_QUEUE,
    SMALL_FRAME,
    STREAM_ERRORS,
    FrameConn,
    checked_body,
    let_others_queue,
    send_messages,
)
from bhandar_cli.node.net.hello import check_hello
from bhandar_cli.node.net.tls_connect import HandshakeError, client_ctx, handshake, open_stream, server_ctx
from bhandar_cli.node.net.tls_stream import TlsStream, Truncated
from bhandar_cli.node.net.wire_versions import MIN_COMPATIBLE_VERSION
from bhandar_cli.security import NodeTls, PeerGate, PeerRefused, peer_node_id

log = logging.getLogger("bhandar.transport")

DEFERRED = 0  # a queued message's version until the peer's is known (versions start at 1)
# How long a link waits for the peer's hello before writing to it in the oldest version: the
# peer's link to us opens when it hears ours (a connection and a TLS handshake on a LAN).
HELLO_WAIT = 2.0


class TcpTransport:
    """A node's links to its peers, and its listener."""

    def __init__(
        self,
        me: str,
        on_message: Callable[[str, Any], None],
        on_client: Callable[[FrameConn, dict[str, Any], Callable[[], None]], Awaitable[None]],
        frame_timeout: float = FRAME_TIMEOUT,
        resolve: Callable[[str], str] = lambda dst: dst,
        tls: NodeTls | None = None,
    ) -> None:
        self.me = me
        self.tls = tls
        self.gate = PeerGate(me, tls is not None)
        # Where a destination listens ("host:port"; "" if unknown): the node's membership knows,
        # and a seed is named by its address before anyone knows its id.
        self.resolve = resolve
        self.on_message = on_message
        self.on_client = on_client
        # Set by a node that admits new machines (node/join.py); None: join hellos are refused.
        self.on_join: Callable[[FrameConn], Awaitable[None]] | None = None
        self.admission = Admission()
        # Whether a client's hello shows a token the node knows (the node process sets it).
        self.admits_client: Callable[[dict[str, Any]], bool] = lambda hello: True
        # The token id a client's hello shows, by which its connections are counted ("": no
        # token checks, no per-token cap; the node process sets it).
        self.client_token: Callable[[dict[str, Any]], str] = lambda hello: ""
        self.frame_timeout = frame_timeout
        # Partitions and extra delays set by the operator; no loss or latency of its own.
        self.model = NetworkModel(Random(), latency=None)
        # "writes" counts send_all calls to peers: sent / writes is how many messages share one;
        # "frames" counts the frames written to peers: sent / frames, how many share a frame;
        # "truncated", inbound TLS streams cut without close_notify (tls_stream.py).
        self.stats = dict.fromkeys(("sent", "received", "dropped", "connects", "connect_failures"), 0)
        self.stats.update(rejected=0, writes=0, frames=0, truncated=0)
        self._links: dict[str, _PeerLink] = {}
        self._nursery: trio.Nursery | None = None
        self._listening = trio.CancelScope()  # the listener's: `stop_listening` closes it
        self._last_msg: Any = None
        self._last_bodies: dict[int, bytes] = {}
        self.protocol = codec.protocol()
        # The newest version each peer's last hello said it reads, and when it came (trio clock).
        self.peer_protocols: dict[str, tuple[int, float]] = {}
        # (direction, protocol version, message) -> count; a write is named by its kind
        # (ReplicaWrite:write, :handoff for a hint, :repair), so the mix a cluster runs is visible.
        self.by_protocol: Counter[tuple[str, int, str]] = Counter()
        self._inbound: Counter[str] = Counter()  # open peer connections from each peer
        self._hellos: dict[str, trio.Event] = {}  # set at the peer's next hello (`heard`)

    def version_for(self, peer: str) -> int:
        """The protocol version to write to `peer`: the newest both read, as far as we know."""
        heard = self.peer_protocols.get(peer)
        return MIN_COMPATIBLE_VERSION if heard is None else min(self.protocol, heard[0])

    def protocol_counts(self) -> dict[str, dict[str, dict[str, int]]]:
        """by_protocol as {"sent"|"received"|"withheld": {"v1": {message: count}}}; withheld: not
        sent, the peer's version does not know the message's type."""
        out: dict[str, dict[str, dict[str, int]]] = {"sent": {}, "received": {}, "withheld": {}}
        for (direction, version, name), count in sorted(self.by_protocol.items()):
            out[direction].setdefault(f"v{version}", {})[name] = count
        return out

    # --- the node's side -----------------------------------------------------------------------

    def send(self, src: str, dst: str, msg: Any) -> None:
        """Queue `msg` for `dst`; never blocks. Dropped if `dst` is partitioned away or backed up."""
        address = self.resolve(dst)
        if not address or self._nursery is None:
            self.stats["dropped"] += 1
            return
        delays = self.model.route(src, dst, msg)
        if not delays:  # partitioned away
            self.stats["dropped"] += 1
            return
        link = self._links.get(dst)
        if link is None:
            link = self._links[dst] = _PeerLink(self, dst, address)
            self._nursery.start_soon(link.run)
        elif link.address != address:  # the peer restarted elsewhere: drop the old connection
            link.address = address
            link.reconnect()
        extra = delays[0]
        due = trio.current_time() + extra if extra else 0.0
        if dst not in self.peer_protocols and ":" not in dst:
            # Not heard yet (just started, or the peer's link closed): written once its hello says
            # what it reads. Written now in the oldest version, a message would lose the fields
            # of later ones, and some change what it means: a forwarded put without its dot is
            # applied under a second dot, two siblings of one write (found by `bhandar soak
            # --seconds 24 --seed 3` after a join: a false sibling). A seed, named by its address,
            # is written to in the oldest version: its id, and so its hello, is not known yet.
            if link.offer(due, DEFERRED, msg):
                self.stats["sent"] += 1
            else:
                self.stats["dropped"] += 1
            return
        version = self.version_for(dst)
        body = self._body(msg, version, dst)
        if body is None:
            return
        if link.offer(due, version, body):
            self.stats["sent"] += 1
            self.by_protocol["sent", version, _label(msg)] += 1
        else:
            self.stats["dropped"] += 1

    def _body(self, msg: Any, version: int, dst: str) -> bytes | None:
        """`msg` as a reader of `version` reads it; None when it is withheld (the version does not
        know its type) or cannot be encoded (a bug, logged)."""
        # A coordinator sends one message to several replicas, as one object or as equal ones
        # (a write builds one per target): encode it once. Frozen messages compare field by field,
        # and a different type (most consecutive messages) fails the test at once.
        last = self._last_msg
        if msg is not last and (type(msg) is not type(last) or msg != last):
            self._last_bodies = {}
            self._last_msg = msg
        if not readable_at(msg, version):  # a message type the peer's version does not know
            self.by_protocol["withheld", version, _label(msg)] += 1
            return None
        body = self._last_bodies.get(version)
        if body is None:
            try:
                body = self._last_bodies[version] = checked_body(to_wire_at(msg, version))
            except ValueError:
                self.stats["dropped"] += 1
                self._last_msg = None
                log.exception("cannot encode %s for %s (a bug); dropped", type(msg).__name__, dst)
                return None
        return body

    async def heard(self, peer: str, limit: float) -> bool:
        """Wait up to `limit` seconds for `peer`'s hello (its version); whether it came."""
        if peer not in self.peer_protocols:
            event = self._hellos.setdefault(peer, trio.Event())
            with trio.move_on_after(limit):
                await event.wait()
        return peer in self.peer_protocols

    def connected(self) -> list[str]:
        return sorted(p for p, link in self._links.items() if link.connected)

    def connected_to(self, peer: str) -> bool:
        """Whether this node's link to `peer` is open (what it sends gets there)."""
        link = self._links.get(peer)
        return link is not None and link.connected

    def open_link(self, dst: str) -> None:
        """Start this node's link to `dst` without a message: it connects and says hello (a peer
        that hears the hello stops backing off its own link to this node)."""
        address = self.resolve(dst)
        if not address or self._nursery is None or dst in self._links:
            return
        link = self._links[dst] = _PeerLink(self, dst, address)
        self._nursery.start_soon(link.run)

    def linked(self, peer: str) -> bool:
        """Whether a link with `peer` is open each way: this node's to it (what it sends gets
        there) and the peer's to this node (its answers come back)."""
        link = self._links.get(peer)
        return link is not None and link.connected and self._inbound[peer] > 0

    # --- listening ---------------------------------------------------------------------------

    async def serve(
        self, host: str, port: int, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen on host:port; reports the bound port when ready; runs until cancelled. The
        connections are served in this nursery, not the listener's: they outlive `stop_listening`."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            serve = partial(trio.serve_tcp, self._handle, port, host=host, handler_nursery=nursery)
            listeners = await nursery.start(self._listen, serve)
            task_status.started(listeners[0].socket.getsockname()[1])

    async def _listen(
        self,
        serve: Callable[..., Awaitable[None]],
        task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        with self._listening:
            await serve(task_status=task_status)

    def stop_listening(self) -> None:
        """Close the listener, and keep serving the connections already open: from here a client
        that connects is refused (not run: it asks another node), and one that connected a moment
        before gets its hello and requests answered."""
        self._listening.cancel()

    async def _handle(self, tcp: trio.SocketStream) -> None:
        conn = FrameConn(tcp, self.frame_timeout)
        with self.admission.enter(conn) as ticket:  # the limits before authentication (admission.py)
            if ticket is not None:
                await self._serve_connection(tcp, conn, ticket)
        await trio.aclose_forcefully(tcp)  # one past the cap (any other is closed already)

    async def _serve_connection(self, tcp: trio.SocketStream, conn: FrameConn, ticket: Ticket) -> None:
        stream: trio.abc.Stream = tcp
        try:
            certified: str | None = None
            if self.tls is not None:
                await trio.lowlevel.wait_readable(tcp.socket)  # TLS state (KiBs) once it speaks
                stream = TlsStream(tcp, server_ctx(self.tls), server_side=True)
                conn = FrameConn(stream, self.frame_timeout)
                self.admission.limit(ticket, conn.decoder)
                try:
                    await handshake(stream, HELLO_TIMEOUT)
                except (HandshakeError, trio.TooSlowError) as exc:
                    why = str(exc) or "no handshake in time"
                    raise self.gate.refuse("handshake", f"TLS handshake failed: {why}", conn.peer) from None
                certified = peer_node_id(stream)
            hello = await conn.receive()  # under the ticket's deadline
            if hello is None:
                return
            fields = check_hello(hello)  # each field's type and bounds, before anything uses it
            kind, peer = fields["hello"], fields.get("id")
            if kind == "peer" and isinstance(peer, str):
                self.gate.admit_hello(peer, certified, conn.peer)
                self.admission.admit(ticket)
                theirs = fields.get("protocol", MIN_COMPATIBLE_VERSION)  # absent: a version-1 build
                # A malformed or too old version closes the link.
                self.peer_protocols[peer] = (negotiate(codec.PROTOCOL_VERSION, theirs), trio.current_time())
                waiting = self._hellos.pop(peer, None)
                if waiting is not None:
                    waiting.set()
                link = self._links.get(peer)
                if link is None:
                    # Our link to it says our hello: the peer then writes to us in our version
                    # without waiting for it (`heard`).
                    self.open_link(peer)
                elif not link.connected:
                    # It is back (restarted): stop backing off, or our messages to it would be
                    # dropped for up to BACKOFF_MAX while it already counts as up.
                    link.reconnect()
                self._inbound[peer] += 1
                try:
                    await self._peer_loop(conn, peer)
                finally:
                    self._inbound[peer] -= 1
            elif kind == "client":
                # Admitted (and counted against its token) once it shows a token the node knows:
                # at its hello, or at a call that passes (node/rpc_service.py), when the node
                # learnt the token by gossip since. Over a cap it stays unadmitted: its calls
                # are answered with the reason.
                admit = partial(self.admission.admit_client, ticket, self.client_token(fields))
                if self.admits_client(fields):
                    with contextlib.suppress(BhandarError):
                        admit()
                await self.on_client(conn, fields, admit)
            elif kind == "join" and self.on_join is not None:
                self.admission.extend(ticket, JOIN_TIMEOUT)
                await self.on_join(conn)  # a new machine redeeming a join token (node/join.py)
            else:
                raise ProtocolError("this node admits no new machines: a join hello is refused here")
        except PeerRefused:
            self.stats["rejected"] += 1  # the gate logged it, naming both sides
        except (ProtocolError, trio.TooSlowError) as exc:
            self.stats["rejected"] += 1
            self.gate.rejections["protocol"] += 1
            why = str(exc) or "too slow"
            self.admission.refusals.refused(
                conn.peer, "protocol", f"closed the connection from {conn.peer}: {why}"
            )
        except Truncated as exc:  # cut on the path, or the peer died: what followed is lost
            self.stats["truncated"] += 1
            self.admission.refusals.refused(conn.peer, "truncated", f"connection from {conn.peer}: {exc}")
        except STREAM_ERRORS:
            pass  # the other side went away; nothing to tell
        except Exception:
            # A bug in serving one connection must not take the node (this handler's nursery) down.
            log.exception("internal error serving %s; connection closed", conn.peer)
        finally:
            await trio.aclose_forcefully(stream)

    async def _peer_loop(self, conn: FrameConn, src: str) -> None:
        while (body := await conn.receive()) is not None:
            try:
                msg = from_wire(body)
            except Exception as exc:  # from_wire's checks and the dataclasses' own validation
                raise ProtocolError(f"peer {src} sent a message this node cannot read: {exc}") from exc
            self.gate.admit_message(src, msg, conn.peer)
            self.stats["received"] += 1
            self.by_protocol["received", conn.decoder.peer_version or 0, _label(msg)] += 1
            if not self.model.admits(src, self.me):
                self.stats["dropped"] += 1
                continue
            delay = self.model.extra_delay.get(src, 0.0)
            if delay and not self.resolve(src):
                # Only for senders we cannot send to (they applied no delay of theirs); a known
                # peer's sending side already added both ends' delays.
                await trio.sleep(delay)
            self.on_message(src, msg)


class _PeerLink:
    """The outbound connection to one peer, and the bounded queue of messages for it."""

    def __init__(self, transport: TcpTransport, peer: str, address: str) -> None:
        self.transport = transport
        self.peer = peer
        self.address = address  # "host:port"
        self.connected = False
        # (due, version, body), or (due, DEFERRED, the message) until the peer's version is known
        self._send, self._recv = trio.open_memory_channel[tuple[float, int, Any]](PEER_QUEUE)
        self._scope: trio.CancelScope | None = None
        self._backoff = BACKOFF_MIN

    def offer(self, due: float, version: int, body: Any) -> bool:
        try:
            self._send.send_nowait((due, version, body))
        except trio.WouldBlock:
            return False
        return True

    def reconnect(self) -> None:
        """Drop the connection, or the attempt or back-off in progress, and start again now (the
        peer's address changed)."""
        self._backoff = BACKOFF_MIN
        if self._scope is not None:
            self._scope.cancel()

    async def run(self) -> None:
        stats = self.transport.stats
        self._backoff = BACKOFF_MIN
        while True:
            host, _, port = self.address.rpartition(":")
            with trio.CancelScope() as self._scope:
                try:
                    stream = await self._connect(host, int(port))
                except (OSError, trio.TooSlowError, ValueError, HandshakeError) as exc:
                    # ValueError: a malformed address
                    if isinstance(exc, HandshakeError):
                        log.warning("link to %s at %s: TLS check failed: %s", self.peer, self.address, exc)
                    stats["connect_failures"] += 1
                    # While the peer is unreachable its messages are dropped, not saved for later:
                    # a burst of stale pings and writes on reconnect would only mislead it.
                    await self._drop_for(self._backoff * random.uniform(0.5, 1.5))
                    self._backoff = min(self._backoff * 2, BACKOFF_MAX)
                    continue
            if self._scope.cancelled_caught:
                continue
            stats["connects"] += 1
            self._backoff = BACKOFF_MIN
            try:
                with trio.CancelScope() as self._scope:
                    self.connected = True
                    hello = {"hello": "peer", "id": self.transport.me, "protocol": self.transport.protocol}
                    await stream.send_all(encode_frame(hello, version=MIN_COMPATIBLE_VERSION))
                    await self._pump(stream)
            except (*STREAM_ERRORS, trio.TooSlowError):
                pass
            finally:
                self.connected = False
                # The peer may have restarted as another version: unless its own link to us (the
                # one whose hello we remember) is still open, write the oldest again until it says
                # hello anew. A restarted peer's new link may already have said it: keep that.
                transport = self.transport
                if not transport._inbound[self.peer]:
                    transport.peer_protocols.pop(self.peer, None)
                self._scope = None
                await trio.aclose_forcefully(stream)

    async def _connect(self, host: str, port: int) -> trio.abc.Stream:
        """Open the link; over TLS, show this node's certificate and check the peer's: by node id,
        or for a seed known only by its address, by chain (its id is then read from it)."""
        files = self.transport.tls
        if files is None:
            return await open_stream(host, port, CONNECT_TIMEOUT)
        by_name = ":" not in self.peer
        ctx = client_ctx(files.ca_cert, files, by_name)
        stream = await open_stream(host, port, CONNECT_TIMEOUT, ctx, self.peer if by_name else None)
        if not by_name:
            log.debug("seed %s is node %s", self.address, peer_node_id(stream))
        return stream

    async def _drop_for(self, seconds: float) -> None:
        with trio.move_on_after(seconds):
            while True:
                await self._recv.receive()
                self.transport.stats["dropped"] += 1

    async def _pump(self, stream: trio.abc.Stream) -> None:
        transport, recv = self.transport, self._recv
        waited = False  # for the peer's hello, on this connection
        while True:
            item = await recv.receive()
            if item[1] == DEFERRED and not waited:
                # Its hello comes on its own link to us, which ours prompts it to open.
                waited = True
                if not await transport.heard(self.peer, HELLO_WAIT):
                    log.info(
                        "%s did not say hello within %g s: writing to it in protocol %d",
                        self.peer,
                        HELLO_WAIT,
                        MIN_COMPATIBLE_VERSION,
                    )
            first = self._encoded(item)
            await let_others_queue()
            batch = [first] if first is not None else []
            size = len(first[2]) if first is not None else 0
            while len(batch) < BATCH_FRAMES and size < BATCH_BYTES:
                try:
                    more = self._encoded(recv.receive_nowait())
                except trio.WouldBlock:
                    break
                if more is not None:
                    batch.append(more)
                    size += len(more[2])
            if not batch:
                continue
            if size > SMALL_FRAME and not any(due for due, _, _ in batch):  # small ones first (frames.py)
                batch.sort(key=lambda item: len(item[2]) > SMALL_FRAME)
            # The messages that leave together go in one frame (one from protocol 3 on: framed).
            bodies: list[tuple[int, bytes]] = []
            for due, version, body in batch:
                if due and due > trio.current_time():
                    if bodies:
                        await send_messages(stream, bodies, transport.stats)
                        bodies = []
                    await trio.sleep_until(due)
                if not transport.model.admits(transport.me, self.peer):  # partitioned meanwhile
                    transport.stats["dropped"] += 1
                    continue
                bodies.append((version, body))
            if bodies:
                await send_messages(stream, bodies, transport.stats)

    def _encoded(self, item: tuple[float, int, Any]) -> tuple[float, int, bytes] | None:
        """A queued message as it is written: a deferred one encoded now, in the version heard
        from the peer (or the oldest); None when it is withheld."""
        due, version, body = item
        if version != DEFERRED:
            return item
        transport = self.transport
        version = transport.version_for(self.peer)
        encoded = transport._body(body, version, self.peer)
        if encoded is None:
            return None
        transport.by_protocol["sent", version, _label(body)] += 1
        return due, version, encoded


def _label(msg: Any) -> str:
    name = type(msg).__name__
    kind = getattr(msg, "kind", None)
    return f"{name}:{kind}" if isinstance(kind, str) else name
