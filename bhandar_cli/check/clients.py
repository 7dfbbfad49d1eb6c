"""The clients of a check (c1, c2, ...): each sends one request at a time to its node, waits for
the answer or its timeout, records the operation, pauses, and goes on until the time limit.

Client i talks to node n((i-1) mod N), as in Maelstrom. Together the clients aim at `rate`
operations per second: each pauses a random 0 to 2M/rate seconds between operations (M clients),
from its own random stream drawn from the seed. An answer is matched to its request by
`in_reply_to`, whichever node sends it (a node may pass a request on to another); a late one
(after its timeout) or one nobody asked for is counted and dropped. An answer of the wrong type,
an error without an integer code, or an `*_ok` without the fields its type promises is the node
breaking the protocol: `on_protocol_error` ends the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random
from typing import Any

import trio

from bhandar_cli.check.maelstrom_history import MaelstromHistory, MaelstromOperation
from bhandar_cli.check.maelstrom_workload import BadAnswer, MaelstromWorkload
from bhandar_cli.check.protocol import MaelstromProtocolError, Message, error_name
from bhandar_cli.check.router import Router

FINAL_TRIES = 3
SAMPLES = 3  # unmatched answers quoted per node
FINAL_ROUNDS = 100  # rounds of final operations that follow from answers (kafka's pages)


@dataclass
class Account:
    """What one node answered its clients, request by request."""

    matched: int = 0
    late: int = 0  # to a request that had already timed out
    repeated: int = 0  # a second answer to a request already answered
    unmatched: int = 0  # no in_reply_to, or one matching no request of that client
    without_reply_to: int = 0  # of the unmatched: no in_reply_to at all
    samples: list[str] = field(default_factory=list)  # the first unmatched answers, raw
    errors: Counter[tuple[int, str]] = field(default_factory=Counter)  # (code, text) of matched errors

    def error_lines(self) -> list[str]:
        """`11 temporarily-unavailable x 40: 'not leader'`, most frequent first."""
        return [
            f"{code} {error_name(code)} x {n}" + (f": {text!r}" if text else "")
            for (code, text), n in self.errors.most_common()
        ]

    def plain(self) -> dict[str, object]:
        return {
            "matched": self.matched,
            "late": self.late,
            "repeated": self.repeated,
            "unmatched": self.unmatched,
            "without_in_reply_to": self.without_reply_to,
            "unmatched_samples": list(self.samples),
            "errors": [
                {"code": code, "name": error_name(code), "text": text, "count": n}
                for (code, text), n in self.errors.most_common()
            ],
        }


class Clients:
    def __init__(
        self,
        router: Router,
        workload: MaelstromWorkload,
        history: MaelstromHistory,
        timeout: float,
        on_protocol_error: Callable[[MaelstromProtocolError], None],
    ) -> None:
        self.router = router
        self.workload = workload
        self.history = history
        self.timeout = timeout
        self.on_protocol_error = on_protocol_error
        self.accounts: dict[str, Account] = {}  # node asked (or, unmatched, node answering) -> account
        # (client, msg_id) -> node asked, of requests waiting, timed out and answered
        self._pending: dict[tuple[str, int], tuple[trio.Event, list[Message], str]] = {}
        self._timed_out: dict[tuple[str, int], str] = {}
        self._answered: dict[tuple[str, int], str] = {}
        self._next_id = 0

    def account(self, node: str) -> Account:
        return self.accounts.setdefault(node, Account())

    @property
    def late(self) -> int:
        """Answers after their request timed out, or to nothing asked."""
        return sum(a.late + a.unmatched for a in self.accounts.values())

    # --- requests and answers ------------------------------------------------------------------------

    async def call(
        self,
        client: str,
        node: str,
        body: dict[str, Any],
        copies: int = 1,
        op: MaelstromOperation | None = None,
    ) -> Message | None:
        """Send `body` from `client` to `node` and wait for the answer (None: none in time)."""
        self._next_id += 1
        msg_id = self._next_id
        if op is not None:
            op.msg_id = msg_id
        body = {**body, "msg_id": msg_id}
        done, box = trio.Event(), list[Message]()
        self._pending[(client, msg_id)] = (done, box, node)
        self.router.send_to_node(client, node, body, copies)
        try:
            with trio.move_on_after(self.timeout):
                await done.wait()
        finally:
            if self._pending.pop((client, msg_id), None) is not None:
                self._timed_out[(client, msg_id)] = node
        return box[0] if box else None

    def on_answer(self, msg: Message) -> None:
        """A message a node sent to a client (the router's `on_client`)."""
        key = (msg.dest, msg.in_reply_to if msg.in_reply_to is not None else -1)
        waiting = self._pending.pop(key, None)
        if waiting is not None:
            done, box, node = waiting
            self._answered[key] = node
            account = self.account(node)
            account.matched += 1
            code = msg.body.get("code")
            if msg.type == "error" and type(code) is int:
                account.errors[(code, str(msg.body.get("text", ""))[:200])] += 1
            box.append(msg)
            done.set()
        elif key in self._timed_out:
            self.account(self._timed_out[key]).late += 1
        elif key in self._answered:
            self.account(self._answered[key]).repeated += 1
        else:
            account = self.account(msg.src)
            account.unmatched += 1
            account.without_reply_to += msg.in_reply_to is None
            if len(account.samples) < SAMPLES:
                account.samples.append(msg.raw.decode("utf-8", "replace")[:200])

    def complete(self, op: MaelstromOperation, answer: Message | None) -> None:
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

    def _bad(self, answer: Message, op: MaelstromOperation, what: str) -> None:
        op.gave_up(self.router.now(), "malformed answer")
        text = answer.raw.decode("utf-8", "replace")[:200]
        self.on_protocol_error(
            MaelstromProtocolError(
                f"{answer.src} answered {op.client}'s {op.f} (#{op.index}) with {what}: {text!r}"
            )
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
        FINAL_TRIES times); then those that follow from their answers, round after round (at
        most FINAL_ROUNDS), as long as the workload asks for more."""
        batch = self.workload.finals()
        for _ in range(FINAL_ROUNDS):
            if not batch:
                return
            async with trio.open_nursery() as nursery:
                for i, (node, f, value) in enumerate(batch):
                    nursery.start_soon(self._final, f"c{i % clients + 1}", node, f, value)
            batch = self.workload.more_finals()

    async def _final(self, client: str, node: str, f: str, value: Any) -> None:
        for _ in range(FINAL_TRIES):
            op = self.history.invoke(self.router.now(), client, node, f, value, final=True)
            self.complete(op, await self.call(client, node, self.workload.request(f, value), 1, op))
            if op.ok:
                return
            if op.type == "info":
                continue  # timed out: the timeout was the pause
            await trio.sleep(self.timeout / 4)
