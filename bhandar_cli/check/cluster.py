"""The nodes of a check: starting each program, `init`, the faults that strike processes and
links, restarts, and what the nodes did that nobody asked them to (exits, floods).

A restarted node (the kill fault; Bhandar's extension: Maelstrom never restarts a node) gets
`init` again and then the workload's setup messages addressed to it (broadcast's `topology`),
each to be answered, since a node that keeps its topology in memory has lost it; a node that
does not answer them did not come back, as one that does not answer `init`.

Every line a node writes is decoded here (check/protocol.py) and handed to the router; a line
that is not a message ends the run as the node's protocol error, naming it. So does a node that
writes more than `flood_limit` messages within one second. A node that exits while nobody
killed it is a finding of the run (its exit status and the last words of its log), and so is a
node that does not come back after a kill; both make the verdict invalid.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from bhandar_cli.check.checked_process import CheckedProcess
from bhandar_cli.check.nemesis import Fault
from bhandar_cli.check.protocol import MaelstromProtocolError, Message, decode, error_name, quoted
from bhandar_cli.check.router import HARNESS, Router

FLOOD_CHECK = 1000  # lines between two looks at the clock


class SetupError(Exception):
    """The run could not start (no such program, no init_ok, ...): the message says which node."""


class NodeCluster:
    def __init__(
        self,
        names: list[str],
        argv: list[str],
        log_dir: Path,
        env: dict[str, str],
        flood_limit: int,
        on_error: Callable[[MaelstromProtocolError], None],
        clients: frozenset[str] = frozenset(),
    ) -> None:
        self.names = names
        self.clients = clients  # ids a node may pass a request on for (as `src`, to another node)
        # After a restart's init: the workload's setup for that node (SetupError if unanswered).
        self.resetup: Callable[[str], Awaitable[None]] | None = None
        self.flood_limit = flood_limit
        self.on_error = on_error
        self.router: Router | None = None
        self.procs: dict[str, CheckedProcess] = {}
        for name in names:
            data = log_dir / "data" / name
            data.mkdir(parents=True, exist_ok=True)
            node_env = {**env, "BHANDAR_CHECK_DIR": str(data)}
            self.procs[name] = CheckedProcess(
                name, argv, log_dir / f"{name}.log", node_env, self._line, self._ended
            )
        self.events: list[str] = []  # what nodes did unasked: exits, failed restarts
        self.restarts = 0
        self._initing: dict[str, trio.Event] = {}
        self._init_ok: dict[str, str | None] = {}  # node -> None (answered) or why it failed
        self._init_id_of: dict[str, int] = {}  # node -> msg_id of the init it was sent last
        self._lines = dict.fromkeys(names, 0)  # lines read from each node
        self._window: dict[str, tuple[float, int]] = {}  # node -> (window start, lines then)
        self._init_id = 0

    def attach(self, router: Router) -> None:
        self.router = router

    # --- lines from nodes -------------------------------------------------------------------------

    def _line(self, proc: CheckedProcess, line: bytes) -> None:
        count = self._lines[proc.name] = self._lines[proc.name] + 1
        if count % FLOOD_CHECK == 0:
            self._flood_check(proc.name, count)
        try:
            msg = decode(line, proc.name, self.clients)
        except MaelstromProtocolError as exc:
            self.on_error(exc)
            return
        if msg.src != proc.name and msg.dest not in self.procs:
            self.on_error(
                MaelstromProtocolError(
                    f"{proc.name} wrote a message from client {msg.src!r} to {msg.dest!r}: a node may "
                    f"pass a client's request on only to another node: {quoted(line)}"
                )
            )
            return
        if msg.dest == HARNESS:
            self._harness_answer(msg)
        elif self.router is not None:
            self.router.from_node(msg, proc.name)

    def _flood_check(self, name: str, count: int) -> None:
        now = trio.current_time()
        start, lines = self._window.setdefault(name, (now, count))
        if now - start >= 1.0:
            self._window[name] = (now, count)
        elif count - lines > self.flood_limit:
            self.on_error(
                MaelstromProtocolError(
                    f"{name} flooded the harness: more than {self.flood_limit:,} messages within one "
                    "second (--flood-limit sets the bound)"
                )
            )

    def _harness_answer(self, msg: Message) -> None:
        node = msg.src
        waiting = self._initing.get(node)
        if waiting is None or msg.in_reply_to != self._init_id_of.get(node):
            return  # an answer to a topology message, or a late one: nothing waits for it
        if msg.type == "init_ok":
            self._init_ok[node] = None
        else:
            code = msg.body.get("code")
            what = f"error {code} ({error_name(code)})" if type(code) is int else repr(msg.type)
            self._init_ok[node] = (
                f"{node} answered init with {what}: {msg.raw.decode('utf-8', 'replace')[:200]}"
            )
        waiting.set()

    def _ended(self, proc: CheckedProcess, status: int | None, why: str) -> None:
        waiting = self._initing.get(proc.name)
        if waiting is not None and not waiting.is_set():
            if not proc.killed:  # (killed by the next fault while it restarted: that one restarts it)
                self._init_ok[proc.name] = (
                    f"{proc.name} exited (status {status}) before answering init" + self._last(proc)
                )
            waiting.set()
            return
        if not proc.killed and self.router is not None:
            at = self.router.now()
            self.events.append(
                f"{proc.name} exited on its own (status {status}) at {at:.2f} s" + self._last(proc)
            )

    @staticmethod
    def _last(proc: CheckedProcess) -> str:
        tail = proc.tail()
        return f"; its log ({proc.log}) ends: {tail}" if tail else f"; its log ({proc.log}) is empty"

    # --- lives --------------------------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery, names: list[str], timeout: float) -> None:
        """Start `names` and give each `init`; SetupError naming every node that failed."""
        problems: list[str] = []
        lines_before = {name: self.procs[name].lines for name in names}  # to tell silence from chatter
        for name in names:
            proc = self.procs[name]
            try:
                await proc.start(nursery)
            except OSError as exc:
                raise SetupError(f"cannot start {' '.join(proc.argv)!r}: {exc.strerror or exc}") from None
            self._initing[name] = trio.Event()
            self._init_ok.pop(name, None)
            self._init_id += 1
            self._init_id_of[name] = self._init_id
            body = {"type": "init", "msg_id": self._init_id, "node_id": name, "node_ids": self.names}
            assert self.router is not None
            self.router.send_to_node(HARNESS, name, body)
        with trio.move_on_after(timeout):
            for name in names:
                await self._initing[name].wait()
        for name in names:
            event = self._initing.pop(name)
            if not event.is_set():
                wrote = self.procs[name].lines - lines_before[name]
                saw = (
                    ": it wrote nothing on standard output (is it flushing? each message is one line "
                    "ending in a newline; Python: print(..., flush=True))"
                    if not wrote
                    else f": it wrote {wrote} line(s), none an init_ok answering init "
                    f"(msg_id {self._init_id_of[name]})"
                )
                problems.append(
                    f"{name} did not answer init within {timeout:g} s{saw}" + self._last(self.procs[name])
                )
            elif self._init_ok.get(name):
                problems.append(str(self._init_ok[name]))
        if problems:
            raise SetupError("; ".join(problems))

    async def restart(self, nursery: trio.Nursery, name: str, timeout: float) -> None:
        """Bring a killed node back (a new life, `init` again, then the workload's setup for it);
        a failure is a finding."""
        self.restarts += 1
        try:
            await self.start(nursery, [name], timeout)
            if self.resetup is not None:
                await self.resetup(name)
        except SetupError as exc:
            self.events.append(f"{name} did not come back after its kill: {exc}")

    async def stop(self) -> None:
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as nursery:
                for proc in self.procs.values():
                    nursery.start_soon(proc.stop)

    # --- faults ---------------------------------------------------------------------------------------

    def begin(self, fault: Fault) -> None:
        router = self.router
        assert router is not None
        model = router.model
        if fault.kind == "partition":
            model.partition([fault.nodes], self.names)
        elif fault.kind == "kill":
            for name in fault.nodes:
                self.procs[name].kill()
        elif fault.kind == "pause":
            for name in fault.nodes:
                self.procs[name].pause()
        elif fault.kind == "slow":
            for name in fault.nodes:
                model.set_delay(name, fault.amount)
        elif fault.kind == "loss":
            model.loss = fault.amount
        elif fault.kind == "duplicate":
            model.duplicate = fault.amount

    async def end(self, nursery: trio.Nursery, fault: Fault, init_timeout: float) -> None:
        router = self.router
        assert router is not None
        model = router.model
        if fault.kind == "partition":
            router.network.heal()
        elif fault.kind == "kill":
            for name in fault.nodes:
                if not self.procs[name].running and self.procs[name].killed:
                    await self.restart(nursery, name, init_timeout)
        elif fault.kind == "pause":
            for name in fault.nodes:
                self.procs[name].resume()
        elif fault.kind == "slow":
            for name in fault.nodes:
                model.set_delay(name, 0.0)
        elif fault.kind == "loss":
            model.loss = 0.0
        elif fault.kind == "duplicate":
            model.duplicate = 0.0
