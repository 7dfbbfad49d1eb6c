"""One node on trio: a core `Node` fed from an inbox channel, its timers, and its effects.

The node's task drains whatever is queued in its inbox (up to a batch), hands it to the core, and
syncs the store once before sending anything durable: many writes, one sync (group commit).
`kill` cancels the task without any clean-up (the in-memory state is gone, the store stays);
`start` again is a restart with the same store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from random import Random
from typing import Any

import trio

from bhandar_cli.core.config import NodeConfig
from bhandar_cli.core.messages import ClientRequest, Failure, Note, Respond, Result, Send
from bhandar_cli.core.node import Node
from bhandar_cli.core.ring import Ring
from bhandar_cli.core.store import Store

log = logging.getLogger("bhandar.node")

INBOX_SIZE = 10_000
BATCH = 256

SendFn = Callable[[str, str, Any], None]  # (src, dst, message)
Responder = Callable[[Result], None]


class NodeRuntime:
    def __init__(
        self,
        name: str,
        zone: str,
        ring: Ring,
        store: Store,
        config: NodeConfig,
        seed: int,
        send: SendFn,
        on_note: Callable[[str, Note], None] | None = None,
    ) -> None:
        self.name = name
        self.zone = zone
        self.ring = ring
        self.store = store
        self.config = config
        self.send = send
        self.on_note = on_note
        self._rng = Random(seed)
        self.node: Node | None = None
        self.generation = 0
        self._scope: trio.CancelScope | None = None
        self._inbox_send, self._inbox_recv = trio.open_memory_channel[tuple[str | None, Any]](INBOX_SIZE)
        self._responders: dict[int, Responder] = {}
        self.errors = 0  # messages dropped because handling them raised
        self.boot: dict[str, Any] = {}  # extra Node arguments (a joining node's status, tokens, seeds)
        # Off in-process: a virtual clock would jump while a thread runs, and fsyncs are short.
        self.sync_in_thread = False

    @property
    def alive(self) -> bool:
        return self.node is not None

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Boot the node and serve until killed (cancelled)."""
        self.generation += 1
        self._inbox_send, self._inbox_recv = trio.open_memory_channel[tuple[str | None, Any]](INBOX_SIZE)
        node = Node(
            self.name,
            self.ring,
            self.store,
            Random(self._rng.getrandbits(64)),
            trio.current_time(),
            self.config,
            **self.boot,
        )
        self.store.sync()  # the new generation must survive the next crash
        self.node = node
        with trio.CancelScope() as scope:
            self._scope = scope
            task_status.started()
            await self._serve(node)

    async def _serve(self, node: Node) -> None:
        recv = self._inbox_recv
        while True:
            batch: list[tuple[str | None, Any]] = []
            with trio.move_on_at(node.next_deadline()):
                batch.append(await recv.receive())
                while len(batch) < BATCH:
                    try:
                        batch.append(recv.receive_nowait())
                    except trio.WouldBlock:
                        break
            now = trio.current_time()
            effects: list[Any] = []
            for src, msg in batch:
                try:
                    if src is None:
                        effects.extend(node.request(now, msg))
                    else:
                        effects.extend(node.handle(now, src, msg))
                except Exception as exc:  # a malformed message, or our bug: never let it kill the node
                    self._internal_error(src, msg, exc)
            if now >= node.next_deadline():
                effects.extend(node.tick(now))
            if not effects:
                continue
            durable = [e for e in effects if getattr(e, "durable", False)]
            if not durable:
                self._dispatch(effects)
                continue
            # Group commit: one sync makes every write of this batch durable, then the acks go.
            # In a node process the fsync runs in a worker thread so the node's other tasks (its
            # transport, its HTTP gateway) keep going; answers that need no sync go out first.
            self._dispatch([e for e in effects if not getattr(e, "durable", False)])
            if self.sync_in_thread:
                await trio.to_thread.run_sync(self.store.sync)
            else:
                self.store.sync()
            self._dispatch(durable)

    def _internal_error(self, src: str | None, msg: Any, exc: Exception) -> None:
        self.errors += 1
        what = f"{type(msg).__name__} from {src or 'a client'}"
        log.error("%s dropped %s: %s: %s", self.name, what, type(exc).__name__, exc, exc_info=exc)
        if self.on_note is not None:
            self.on_note(
                self.name, Note(f"{self.name} dropped {what} it could not handle ({type(exc).__name__})")
            )
        if src is None and hasattr(msg, "rid"):
            responder = self._responders.pop(msg.rid, None)
            if responder is not None:
                responder(Failure("internal", f"node {self.name} could not handle the request: {exc}"))

    def _dispatch(self, effects: list[Any]) -> None:
        for effect in effects:
            if isinstance(effect, Send):
                self.send(self.name, effect.dst, effect.msg)
            elif isinstance(effect, Respond):
                responder = self._responders.pop(effect.rid, None)
                if responder is not None:
                    responder(effect.result)
            elif isinstance(effect, Note) and self.on_note is not None:
                self.on_note(self.name, effect)

    def kill(self) -> None:
        """Crash: no clean shutdown; requests in flight here are lost."""
        if self._scope is not None:
            self._scope.cancel()
        self._scope = None
        self.node = None
        self._inbox_send.close()
        responders, self._responders = self._responders, {}
        for responder in responders.values():
            responder(Failure("unavailable", f"node {self.name} crashed before answering"))

    def deliver(self, src: str, msg: Any) -> bool:
        """A message from the network; False if this node is down or overloaded (dropped)."""
        if self.node is None:
            return False
        try:
            self._inbox_send.send_nowait((src, msg))
        except (trio.WouldBlock, trio.ClosedResourceError):
            return False
        return True

    def submit(self, request: ClientRequest, responder: Responder) -> None:
        """A client request; `responder` is called exactly once with the result."""
        if self.node is None:
            responder(Failure("unavailable", f"node {self.name} is down; revive it or use another node"))
            return
        self._responders[request.rid] = responder
        try:
            self._inbox_send.send_nowait((None, request))
        except (trio.WouldBlock, trio.ClosedResourceError):
            self._responders.pop(request.rid, None)
            responder(Failure("unavailable", f"node {self.name} is overloaded (inbox full)"))

    def forget(self, rid: int) -> None:
        self._responders.pop(rid, None)
