"""The clients of a check (c1, c2, ...): each sends one request at a time to its node, waits for
the answer or its timeout, records the operation, pauses, and goes on until the time limit.

Client i talks to node n((i-1) mod N), as in Maelstrom. Together the clients aim at `rate`
operations per second: each pauses a random 0 to 2M/rate seconds between operations (M clients),
from its own random stream drawn from the seed. An answer is matched to its request by
`in_reply_to`; a late one (after its timeout) or one nobody asked for is counted and dropped. An
answer of the wrong type, an error without an integer code, or an `*_ok` without the fields its
type promises is the node breaking the protocol: `on_protocol_error` ends the run.
"""

from __future__ import annotations

from collections.abc import Callable
from random import Random
from typing import Any

import trio

from bhandar_cli.check.history import History, Op
from bhandar_cli.check.protocol import Message, ProtocolError
from bhandar_cli.check.router import Router
from bhandar_cli.check.workload import BadAnswer, Workload

FINAL_TRIES = 3


class Clients:
    def __init__(
        self,
        router: Router,
        workload: Workload,
        history: History,
        timeout: float,
        on_protocol_error: Callable[[ProtocolError], None],
    ) -> None:
        self.router = router
        self.workload = workload
        self.history = history
        self.timeout = timeout
        self.on_protocol_error = on_protocol_error
        self.late = 0  # answers after their request timed out, or to nothing asked
        self._pending: dict[tuple[str, int], tuple[trio.Event, list[Message]]] = {}
        self._next_id = 0

    # --- requests and answers ------------------------------------------------------------------------

    async def call(
        self, client: str, node: str, body: dict[str, Any], copies: int = 1, op: Op | None = None
    ) -> Message | None:
        """Send `body` from `client` to `node` and wait for the answer (None: none in time)."""
        self._next_id += 1
        msg_id = self._next_id
        if op is not None:
            op.msg_id = msg_id
        body = {**body, "msg_id": msg_id}
        done, box = trio.Event(), list[Message]()
        self._pending[(client, msg_id)] = (done, box)
        self.router.send_to_node(client, node, body, copies)
        try:
            with trio.move_on_after(self.timeout):
                await done.wait()
        finally:
            self._pending.pop((client, msg_id), None)
        return box[0] if box else None

    def on_answer(self, msg: Message) -> None:
        """A message a node sent to a client (the router's `on_client`)."""
        waiting = (
            self._pending.pop((msg.dest, msg.in_reply_to or -1), None)
            if msg.in_reply_to is not None
            else None
        )
        if waiting is None:
            self.late += 1
            return
        done, box = waiting
        box.append(msg)
        done.set()

    def complete(self, op: Op, answer: Message | None) -> None:
        """Record the outcome of `op` from its answer (None: it timed out)."""
        now = self.router.now()
        if answer is None:
            op.gave_up(now, f"no answer within {self.timeout:g} s")
        elif answer.type == "error":
            code = answer.body.get("code")
            if type(code) is not int:
                self._bad(answer, op, 'an error without an integer "code"')
                return
            op.failed(now, code, str(answer.body.get("text", ""))[:200])
        elif answer.type != f"{op.f}_ok":
            self._bad(answer, op, f"{answer.type!r} (expected {op.f}_ok or error)")
            return
        else:
            try:
                op.answer(now, self.workload.parse(op.f, answer.body))
            except BadAnswer as exc:
                self._bad(answer, op, str(exc))
                return
        self.workload.completed(op)

    def _bad(self, answer: Message, op: Op, what: str) -> None:
        op.gave_up(self.router.now(), "malformed answer")
        text = answer.raw.decode("utf-8", "replace")[:200]
        self.on_protocol_error(
            ProtocolError(f"{answer.src} answered {op.client}'s {op.f} (#{op.index}) with {what}: {text!r}")
        )

    # --- the workload --------------------------------------------------------------------------------

    async def run(self, client: int, node: str, rng: Random, until: float, pause: float) -> None:
        """Client `client`'s operations until `until` (seconds since the workload began)."""
        name = f"c{client}"
        workload, history, router = self.workload, self.history, self.router
        while router.now() < until:
            f, value = workload.next_op(rng, client)
            op = history.invoke(router.now(), name, node, f, value)
            answer = await self.call(name, node, workload.request(f, value), router.client_copies(), op)
            self.complete(op, answer)
            await trio.sleep(rng.uniform(0, 2 * pause))

    async def finals(self, clients: int) -> None:
        """The workload's final operations, all at once, each tried until answered (at most
        FINAL_TRIES times)."""
        async with trio.open_nursery() as nursery:
            for i, (node, f, value) in enumerate(self.workload.finals()):
                nursery.start_soon(self._final, f"c{i % clients + 1}", node, f, value)

    async def _final(self, client: str, node: str, f: str, value: Any) -> None:
        for _ in range(FINAL_TRIES):
            op = self.history.invoke(self.router.now(), client, node, f, value, final=True)
            self.complete(op, await self.call(client, node, self.workload.request(f, value), 1, op))
            if op.ok:
                return
            if op.type == "info":
                continue  # timed out: the timeout was the pause
            await trio.sleep(self.timeout / 4)
