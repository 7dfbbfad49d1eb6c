"""One node process: the core node on trio with its TCP transport, admin RPC and HTTP gateway.

`NodeProcess` owns a node's life in a process: it opens the store in the data directory, listens
on its port (peers and RPC clients), serves the HTTP API and boots the core node with its own
address and its seeds' addresses: the node's gossip membership finds the cluster from there, and
the transport asks it where each peer listens. It stops cleanly on an
RPC `shutdown`, SIGTERM or SIGINT (store synced and closed); SIGKILL is the crash. A clean stop
drains first (`stop`): it tells its peers goodbye (protocol 2: they call it down at once and
hint for it), new client requests are refused as not run (the client asks another replica),
those in flight are answered, then the node exits; its core keeps answering peers
until then, so a request forwarded to it in the meantime is not lost.

With a TLS directory (`tls_dir`: ca.crt, node.crt, node.key) the peer port and the HTTP API run
over TLS with the node's certificate (security/pki.py); without one the node listens in plain TCP,
which it refuses to do anywhere but on a loopback address. Clients are admitted by token always
(security/auth.py: the table the node keeps, from its auth file and from gossip; an empty one admits
no one), unless the operator says `admit_anyone`, which only a node on a loopback address takes.
Everything it writes is its owner's only (umask 077).

The RPC its port serves (client requests and admin operations) is node/rpc_service.py.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import random
import signal
import sys
from pathlib import Path
from typing import Any

import trio

from bhandar_cli.core import NodeBoot, NodeInfo
from bhandar_cli.core.membership import TRUST_ALL, Authorship, GossipAck, GossipSyn, Ring
from bhandar_cli.core.model import LiveConfig, NodeConfig, TokenTable
from bhandar_cli.core.protocol import ClientRequest, Failure, Note, Result
from bhandar_cli.host import NodeHost, Responder
from bhandar_cli.node import admin
from bhandar_cli.node.epoch_clock import EpochClock
from bhandar_cli.node.exposure import node_tls
from bhandar_cli.node.join import JoinDesk
from bhandar_cli.node.net import MIN_COMPATIBLE_VERSION, SEALS_VERSION, TcpTransport, limit_protocol, protocol
from bhandar_cli.node.node_options import NodeOptions
from bhandar_cli.node.note_log import NoteLog
from bhandar_cli.node.reconfigure import tune_store
from bhandar_cli.node.rpc_service import RpcService
from bhandar_cli.node.runtime import FATAL, NodeRunner, call
from bhandar_cli.security import (
    Authenticator,
    Credential,
    JoinTokens,
    NodeTls,
    SignedAuthorship,
    load_auth_file,
    private_dir,
)
from bhandar_cli.store import open_node_store

log = logging.getLogger("bhandar.node")

DRAIN_TIMEOUT = 3.0  # seconds a stopping node waits for its client requests in flight
DRAIN_MIN = 0.3  # seconds a stopping node refuses requests before it exits, even with none in flight
FLUSH_GRACE = 0.05  # seconds for the last answers to be written before the connections close
# Seconds between closing the listener and closing the connections: a client that connected just
# before (its TLS handshake under way) is answered "shutting down", not cut after it sent a request.
CLOSE_GRACE = 0.25
# Seconds a node that has just started may refuse client requests while its links with the peers
# it believes up open both ways (`refusal`); after that it takes them whatever its links.
READY_WAIT = 5.0


class NodeProcess:
    def __init__(self, options: NodeOptions, tls: NodeTls | None) -> None:
        self.options = options
        self.id = options.id
        self.tls = tls
        # A node speaking an older protocol than 4 has no exact dots to send (its peers, as old as
        # it, could not carry them: core/roles/exact_dots.py).
        self.config = NodeConfig(default_n=options.replicas, exact_dots=options.protocol >= 4)
        self.store = open_node_store(options.data_dir, options.fsync, options.data_key)
        self.snapshot_root = Path(options.snapshot_dir or Path(options.data_dir).parent / "snapshots")
        # Who may say what in gossip, checked with the cluster CA (security/signed_authorship.py). A node
        # without TLS is on loopback with peers that may say anything anyway; one run as protocol 4
        # or older does what a build of that version did: it seals and checks nothing (its peers,
        # as old as it, send no seals, and without second-hand states they would never meet).
        self.authority = _authority(tls, options.ca_key) if options.protocol >= SEALS_VERSION else TRUST_ALL
        self._boot_tokens = TokenTable(self.store, self.authority)
        if options.auth_file:
            # Merged into the table the store keeps: a restart with the same file changes nothing,
            # and a token revoked since stays revoked (revocation wins the merge).
            self._boot_tokens.adopt(load_auth_file(Path(options.auth_file)))
        # Tokens are checked whether or not the node was given an auth file: a node that joined
        # a cluster learns its tokens by gossip, and until then admits no one.
        self.auth = None if options.admit_anyone else Authenticator(self.token_table)
        self.rpc = RpcService(self)
        self.join_desk = JoinDesk(
            JoinTokens(options.data_dir),
            Path(options.ca_key).parent if options.ca_key else None,
            lambda: f"{options.host}:{self.port}",
            self._known_ids,
            trio.current_time,  # the EpochClock: Unix seconds, as token expiries are
        )
        self.transport = TcpTransport(
            options.id, self.deliver, self.rpc.serve, options.frame_timeout, self._resolve, self.tls
        )
        self.transport.on_join = self.join_desk.serve
        self.transport.admits_client = lambda hello: self.auth is None or self.auth.knows(hello.get("token"))
        self.transport.client_token = lambda hello: (
            "" if self.auth is None else Credential.of(hello.get("token")).token_id
        )
        # A decommissioned node's certificate stays valid: the membership says it is gone.
        self.transport.gate.decommissioned = self._decommissioned
        ring = Ring.build([options.id], options.vnodes, {options.id: options.zone})
        seed = random.SystemRandom().getrandbits(64)  # a real process: real randomness
        self.notes = NoteLog()  # for a REPL watching this cluster (the `notes` RPC)
        self.host = NodeHost(
            name=options.id,
            zone=options.zone,
            ring=ring,
            store=self.store,
            config=self.config,
            seed=seed,
            send=self._send,
            on_note=self._note,
            fatal=FATAL,
            clock=trio.current_time,  # requests' latency, from their arrival to their answer
        )
        self.runner = NodeRunner(self.host, offload=True)
        self.port: int = options.port
        self.http_port = options.http_port
        self.shutdown = trio.Event()
        self.draining = False  # stopping: new client requests are refused, not run
        self._drained = trio.Event()
        self._started = 0.0  # when `run` began (trio clock)
        self._linked = False  # its links with its peers have been open both ways (`refusal`)
        self._announced = False  # its gossip goes out (`_send`)

    async def run(self, task_status: trio.TaskStatus[tuple[int, int]] = trio.TASK_STATUS_IGNORED) -> None:
        opts = self.options
        self._started = trio.current_time()
        try:
            async with trio.open_nursery() as nursery:
                if opts.http_port >= 0:
                    from bhandar_cli.node.http import serve_http

                    self.http_port = await nursery.start(
                        serve_http, self, opts.host, opts.http_port, self.tls, opts.http_workers
                    )
                self.port = await nursery.start(self.transport.serve, opts.host, opts.port)
                # The cluster file's configuration version: a restarted node comes back with it.
                live = LiveConfig.from_plain(json.loads(opts.config)) if opts.config else None
                if live is not None:
                    tune_store(self.store, live)
                self.host.boot = NodeBoot(
                    status="joining" if opts.bootstrap else "normal",
                    seeds=tuple(f"{host}:{port}" for host, port in opts.seeds),
                    address=f"{opts.host}:{self.port}",
                    http=f"{opts.host}:{self.http_port}" if self.http_port >= 0 else "",
                    zone=opts.zone,
                    live=live,
                    authority=self.authority,
                )
                await nursery.start(self._life)
                nursery.start_soon(self._watch_signals)
                log.info("node %s serving on %s:%d (http %d)", opts.id, opts.host, self.port, self.http_port)
                task_status.started((self.port, self.http_port))
                await self.shutdown.wait()
                nursery.cancel_scope.cancel()
        finally:
            self.store.close()
            log.info("node %s stopped", opts.id)

    async def _life(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The node's one life in this process. If it crashes the process stops (exit status 1), so
        `cluster status` shows the node down and `cluster start` restarts it."""
        await self.runner.run(task_status=task_status)
        if self.host.crash_reason is not None:
            log.error("node %s %s; stopping the process", self.id, self.host.crash_reason)
            self.shutdown.set()

    async def _watch_signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("signal %d: stopping", signum)
                trio.lowlevel.spawn_system_task(self.stop)

    # --- membership --------------------------------------------------------------------------

    def _resolve(self, dst: str) -> str:
        """Where `dst` listens: a seed's "host:port" as given, a node id through membership."""
        return dst if ":" in dst else self.host.address_of(dst)

    def _known_ids(self) -> set[str]:
        """Every id this node's membership has a record of, decommissioned ones included."""
        node = self.host.node
        rows = [] if node is None else node.members(trio.current_time())
        return {self.id, *(str(m["id"]) for m in rows)}

    def _decommissioned(self, member: str) -> bool:
        """Whether `member` left the cluster (decommissioned, or removed by an issuer)."""
        node = self.host.node
        return node is not None and node.status_of(member) == "left"

    def deliver(self, src: str, msg: Any) -> None:
        self.host.deliver(src, msg)

    def _note(self, name: str, note: Note) -> None:
        log.info("%s: %s", name, note.text)
        self.notes.append(note.text, note.data)

    def token_table(self) -> TokenTable:
        """The tokens this node knows: its core node's table (kept by gossip), or before the node
        boots, the one read from the store and the auth file."""
        node = self.host.node
        return node.client_tokens if node is not None else self._boot_tokens

    # --- the coordinator, for the RPC and HTTP faces ---------------------------------------------

    async def stop(self) -> None:
        """Drain, then stop: refuse new client requests, wait (bounded) for those in flight."""
        if self.draining:
            return
        self.draining = True
        log.info("node %s stopping: draining %d client requests in flight", self.id, self.inflight)
        self.rpc.announce_draining()  # connected clients stop sending here at once
        node = self.host.node
        if node is not None and protocol() >= 2:  # a version-1 build has no goodbye
            # Peers call this node down now and hint for it (the transport withholds it from
            # version-1 peers). The core keeps answering peers until the process exits.
            for effect in node.goodbye():
                self.transport.send(self.id, effect.dst, effect.msg)
        with trio.move_on_after(DRAIN_TIMEOUT):
            # At least DRAIN_MIN: a request already on its way is refused (not run), not lost.
            await trio.sleep(DRAIN_MIN)
            if self.inflight:
                await self._drained.wait()
        # A connection cut after its request was sent is an unknown outcome to its client: first
        # no new connections (refused, which a client knows was not run), then the open ones close.
        self.transport.stop_listening()
        await trio.sleep(CLOSE_GRACE + FLUSH_GRACE)  # the last answers leave before they close
        self.shutdown.set()

    def _send(self, src: str, dst: str, msg: Any) -> None:
        """The core's messages to its peers, but for its gossip while it starts: until its own links
        to the peers it believes up are open (READY_WAIT at most), what it gossips is held back and
        only the links are opened. A peer learns that this node is up (its new life) from its
        gossip, and sends it replica writes from then on: had it learned sooner, over another
        peer's gossip, this node's acks would be dropped on links still connecting, and the
        peer's writes would time out (found by tests/e2e/test_upgrade_oneshot.py in a loaded
        suite: 1 put of 759 failed, 'timed out after 1001 ms: 1 of 3 replicas answered', right
        after a restart). Meanwhile the peers keep calling it down and hint for it."""
        if not self._announced and isinstance(msg, GossipSyn | GossipAck):
            waiting = self._unlinked_out()
            if waiting and trio.current_time() - self._started < READY_WAIT:
                for peer in waiting:
                    self.transport.open_link(peer)  # it connects and says hello: nothing more
                return
            self._announced = True
            log.info(
                "node %s gossips (%.2f s after it started)", self.id, trio.current_time() - self._started
            )
        self.transport.send(src, dst, msg)

    def _unlinked_out(self) -> list[str]:
        """The peers this node believes up whose link from this node is not open yet."""
        node = self.host.node
        if node is None:
            return []
        return [
            str(m["id"])
            for m in node.members(trio.current_time())
            if m["id"] != self.id
            and m["status"] != "left"
            and m["up"]
            and not self.transport.connected_to(str(m["id"]))
        ]

    def refusal(self) -> str:
        """Why this node does not take a client request now ('' when it does). A refused request
        was not run, and the client takes it to another node: the node is stopping, or it has
        just started and its links with the peers it believes up are not open both ways yet (its
        replica writes would be dropped, or the peers' acks, on a link still backing off from its
        last life: a write it coordinated would time out, an outcome unknown), for READY_WAIT at
        most."""
        if self.draining:
            return "shutting down: the request was not run"
        if self._linked:
            return ""
        node = self.host.node
        if node is None:
            return "starting: the request was not run"
        now = trio.current_time()
        rows = node.members(now)
        waiting = [
            str(m["id"])
            for m in rows
            if m["id"] != self.id
            and m["status"] != "left"
            and m["up"]
            and not self.transport.linked(str(m["id"]))
        ]
        if waiting and now - self._started < READY_WAIT:
            return f"starting: its links to {', '.join(waiting)} are not open yet; the request was not run"
        self._linked = True
        unlinked = f", without a link each way with {', '.join(waiting)}" if waiting else ""
        took = now - self._started
        log.info("node %s takes client requests (%.2f s after it started%s)", self.id, took, unlinked)
        return ""

    @property
    def inflight(self) -> int:
        """Client requests submitted and not yet answered, whose clients still wait."""
        return self.host.waiting

    def submit(self, request: ClientRequest, respond: Responder) -> int:
        """Hand a client request to this node's coordinator; returns its ticket, for `forget`
        (the executor runs it under that ticket: the `rid` rule of host/executor.py). A refused request
        is answered at once, with nothing to forget."""
        refusal = self.refusal()
        if refusal:
            respond(Failure("unavailable", f"node {self.id}: {refusal}"))
            return 0

        def done(result: Result) -> None:
            respond(result)
            self._check_drained()

        return self.host.submit(request, done)

    def forget(self, ticket: int) -> None:
        """The client stopped waiting for the request of `ticket`: a drain no longer waits for it."""
        self.host.forget(ticket)
        self._check_drained()

    def _check_drained(self) -> None:
        if self.draining and not self.inflight:
            self._drained.set()

    async def call(self, request: ClientRequest, timeout: float = 10.0) -> Result:
        """Submit a client request here and wait for its result (a timeout after `timeout` s)."""
        return await call(self.submit, self.forget, request, timeout, f"node {self.id}")

    def current_metrics(self) -> Any:
        node = self.host.node
        return None if node is None else node.metrics

    def info(self, counts: bool = True) -> NodeInfo:
        ring, now = self.host.ring, trio.current_time()
        tokens = len(ring.tokens_by_node().get(self.id, []))
        info = admin.node_info(self.id, self.options.zone, self.host.node, now, tokens, counts)
        info.update(
            {
                "members": self.members(),
                "pid": os.getpid(),
                "protocol": protocol(),
                "peer_protocols": {p: v for p, (v, _) in sorted(self.transport.peer_protocols.items())},
                "reads_protocols": list(range(MIN_COMPATIBLE_VERSION, protocol() + 1)),
                "by_protocol": self.transport.protocol_counts(),
                "draining": self.draining,
                "serving": not self.refusal(),  # it takes client requests (not stopping, nor starting)
                "host": self.options.host,
                "port": self.port,
                "http_port": self.http_port,
                "partitions": self.transport.model.groups,
                "delays": {k: v * 1000.0 for k, v in self.transport.model.extra_delay.items()},
                "transport": dict(self.transport.stats),
                "peer_rejections": dict(self.transport.gate.rejections),
                "connected": self.transport.connected(),
                "connections": self.transport.admission.view(),
            }
        )
        return info

    def members(self) -> list[str]:
        """The members this node has heard of in this life (itself included): those it can reach.
        Members only remembered from before a restart are left out (their addresses may be old),
        so `cluster up` waits until the nodes have really found each other."""
        node = self.host.node
        if node is None:
            return [self.id]
        rows = node.members(trio.current_time())
        return sorted(m["id"] for m in rows if m["status"] != "left" and m.get("heard", True))


def run_node(options: NodeOptions) -> None:
    """The body of `bhandar node run` (blocks until the node stops)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    tls = node_tls(options)  # before anything is created: a refused node leaves nothing behind
    os.umask(0o077)  # data, WAL, SSTables, manifests: the owner's only
    private_dir(Path(options.data_dir))
    # A flush or compaction thread is pure Python and holds the GIL until asked for it; the event
    # loop asks many times per request. 5 ms (the default) per ask put p99 of gets during a 50 MB
    # compaction at ~105 ms; 1 ms keeps it near the baseline (`bhandar bench compaction`).
    sys.setswitchinterval(0.001)
    # Every message allocates many short-lived objects (frames, dicts, dataclasses, trio's own):
    # collecting the young generation every 700 of them is work for nothing, since refcounting
    # frees nearly all of it and the collector only finds cycles (one A/B under `bench
    # --cluster` showed 5-12% less node CPU per request; on a loaded machine, within the noise).
    gc.set_threshold(50_000, 20, 100)
    limit_protocol(options.protocol)  # before anything reads or writes a frame
    process = NodeProcess(options, tls)
    try:
        trio.run(process.run, clock=EpochClock())
    except OSError:
        if process.host.crash_reason is not None:
            raise crashed(options, process.host) from None  # closing on the same disk failed too
        raise
    except BaseExceptionGroup as group:
        if process.host.crash_reason is not None and group.subgroup(OSError) is not None:
            raise crashed(options, process.host) from None
        # A port already taken surfaces from inside the nurseries; say it plainly.
        found: BaseException | None = group.subgroup(OSError)
        while isinstance(found, BaseExceptionGroup):
            found = found.exceptions[0]
        if isinstance(found, OSError):
            raise found from None
        raise
    if process.host.crash_reason is not None:
        raise crashed(options, process.host)


def crashed(options: NodeOptions, host: NodeHost) -> NodeCrashed:
    """Why the node stopped, and what to do when it was its disk."""
    said = f"node {options.id} {host.crash_reason}"
    if host.disk_trouble is not None:
        said += f"; free space on (or repair) the disk of {options.data_dir}, then start it again"
    return NodeCrashed(said)


class NodeCrashed(Exception):
    """The node's life ended on an internal error or a failed disk (logged with the node's id)."""


def _authority(tls: NodeTls | None, ca_key: str) -> Authorship:
    if tls is None:
        return TRUST_ALL
    key = Path(ca_key).read_bytes() if ca_key else None
    return SignedAuthorship(tls.ca_cert.read_bytes(), tls.cert.read_bytes(), tls.key.read_bytes(), key)
