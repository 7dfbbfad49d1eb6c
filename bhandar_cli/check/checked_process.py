"""One node program's lives under the harness: its process, its pipes, its log, its faults.

A `CheckedProcess` is a slot (n0, n1, ...) that a program runs in. Each life is a process in a
session of its own (so a kill reaches whatever the program started too), with standard input
and output as pipes and standard error appended to the slot's log. Lines the node writes go to
`on_line` as they arrive; what the harness sends waits in a bounded queue that one task writes
out, so a node that stops reading (paused, hung) costs the harness memory up to the bound and
then loses messages (counted), never a blocked harness. `kill` is SIGKILL, `pause` SIGSTOP,
`resume` SIGCONT, `stop` the end of the run: SIGTERM, and SIGKILL to the whole session after a
grace period; after `stop` nothing the program started is left running.

A child that leaves the session (setsid, a daemon's double fork) escapes a signal to the
group, so on Linux `kill` and `stop` also SIGKILL, from /proc, every process that descends from
the node or carries the slot's mark in its environment (`BHANDAR_CHECK_SLOT`, set for each slot
and inherited by whatever it starts): a process tree walk alone misses a child whose parent died
first (it is reparented to init). Elsewhere only the session is signalled. Reading /proc takes
milliseconds, so it runs on a worker thread: `kill` stops the session at once (SIGSTOP: the node
is silent, and its children stay in its tree) and the SIGKILLs follow from there; a new life
starts only once they have.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path

import trio

from bhandar_cli.check.protocol import MAX_LINE

QUEUE_BYTES = 16 << 20  # bytes waiting for a node's standard input before messages are dropped
READ_SIZE = 1 << 16
STOP_GRACE = 0.5  # seconds between SIGTERM and SIGKILL at the end of a run
SLOT_MARK = "BHANDAR_CHECK_SLOT"  # environment variable naming a slot's processes
STRAY_ROUNDS = 3  # scans for strays in one kill (one may fork while the last scan ran)
PROC = "/proc"

OnLine = Callable[["CheckedProcess", bytes], None]
OnEnd = Callable[["CheckedProcess", int | None, str], None]  # (slot, exit status, why the output ended)


class CheckedProcess:
    def __init__(
        self, name: str, argv: list[str], log: Path, env: dict[str, str], on_line: OnLine, on_end: OnEnd
    ):
        self.name = name
        self.argv = argv
        self.log = log
        self.mark = f"{name}-{uuid.uuid4().hex}"
        self.env = {**env, SLOT_MARK: self.mark}
        self.on_line = on_line
        self.on_end = on_end
        self.proc: trio.Process | None = None
        self.life = 0  # lives started
        self.paused = False
        self.killed = False  # the harness ended this life on purpose (kill nemesis, end of run)
        self.dropped = 0  # messages not delivered because the queue was full or the node was down
        self.lines = 0  # lines read from this node, every life
        self._live = False  # the current life's process has not been seen to end or killed
        self._queue: deque[bytes] = deque()
        self._queued = 0
        self._ready = trio.Event()
        self._nursery: trio.Nursery | None = None
        self._killing: trio.Event | None = None  # set once the last kill has killed everything

    @property
    def running(self) -> bool:
        # Not `proc.returncode`: that is a waitpid() per call, and `send` asks for every message.
        return self.proc is not None and self._live

    async def start(self, nursery: trio.Nursery) -> None:
        """A new life; raises OSError when the program cannot be started (no such file...)."""
        await self._killed()
        self._nursery = nursery
        self.life += 1
        self.paused = self.killed = False
        self._queue.clear()
        self._queued = 0
        with self.log.open("ab") as log:
            log.write(f"--- harness: {self.name} life {self.life}: {' '.join(self.argv)}\n".encode())
            log.flush()
            proc = await trio.lowlevel.open_process(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log.fileno(),
                start_new_session=True,
                env=self.env,
            )
        self.proc, self._live = proc, True
        nursery.start_soon(self._read, proc, self.life)
        nursery.start_soon(self._write, proc)

    def send(self, line: bytes) -> bool:
        """Queue one line for the node's standard input; False (and counted) if it is down or its
        queue is full."""
        if not self.running or self._queued + len(line) > QUEUE_BYTES:
            self.dropped += 1
            return False
        self._queue.append(line)
        self._queued += len(line)
        self._ready.set()
        return True

    async def _write(self, proc: trio.Process) -> None:
        assert proc.stdin is not None
        queue = self._queue
        try:
            while self._live and self.proc is proc:
                if not queue:
                    self._ready = trio.Event()
                    await self._ready.wait()
                    if self.proc is not proc:
                        return
                    continue
                data = b"".join(queue)
                queue.clear()
                self._queued = 0
                await proc.stdin.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return  # the node exited (its reader reports it)

    async def _read(self, proc: trio.Process, life: int) -> None:
        assert proc.stdout is not None
        pending = b""
        why = "its standard output closed"
        try:
            while True:
                try:
                    chunk = await proc.stdout.receive_some(READ_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    break
                if not chunk:
                    break
                pending += chunk
                if b"\n" not in chunk:
                    if len(pending) > MAX_LINE:
                        self.on_line(self, pending)  # the decoder names it: a line too long
                        pending = b""
                    continue
                *lines, pending = pending.split(b"\n")
                self.lines += len(lines)
                on_line = self.on_line
                for line in lines:
                    if line.strip():
                        on_line(self, line)
                    if self.proc is not proc:
                        return
            with trio.move_on_after(STOP_GRACE * 4):
                await proc.wait()
        finally:
            if self.proc is proc and life == self.life:
                self._live = False
                self._ready.set()  # the writer notices the life is over
                self.on_end(self, proc.returncode, why)

    # --- faults ----------------------------------------------------------------------------------

    def _signal_group(self, signum: int) -> None:
        proc = self.proc
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):  # gone already
            os.killpg(proc.pid, signum)

    async def _strays(self, proc: trio.Process) -> set[int]:
        """What the node started, in its session or not (Linux only: see the docstring), found
        on a worker thread. Looked for while the node lives: a child whose parent died is no
        longer in its tree."""
        # Only a process not yet reaped keeps its pid: a reaped one's may be someone else's now.
        root = proc.pid if proc.returncode is None else None
        marker = f"{SLOT_MARK}={self.mark}".encode()
        found = await trio.to_thread.run_sync(stray_processes, root, marker)
        found.discard(proc.pid)  # the node itself: its session is signalled (and it is reaped)
        return found

    async def _kill_all(
        self, proc: trio.Process, done: trio.Event, seen: frozenset[int] = frozenset()
    ) -> None:
        """SIGKILL the node's session and every process it started outside it (and `seen`: ones
        found earlier, while the node lived); `done` is set when no stray is left."""
        with trio.CancelScope(shield=True):
            try:
                strays = await self._strays(proc) | seen
                if proc.returncode is None:  # (a reaped node's pid may name someone else's group)
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)
                for _ in range(STRAY_ROUNDS):
                    for pid in strays:
                        with contextlib.suppress(ProcessLookupError, PermissionError):
                            os.kill(pid, signal.SIGKILL)
                    strays = await self._strays(proc)  # one may have forked while the last scan ran
                    if not strays:
                        break
            finally:
                done.set()

    async def _killed(self) -> None:
        """Wait until the last kill has killed everything it had to."""
        if self._killing is not None:
            await self._killing.wait()

    def kill(self) -> None:
        """Kill the node and whatever it started (the kill fault): SIGSTOP to its session now,
        SIGKILL to it and its strays as soon as they are found."""
        self.killed = True
        self.paused = False
        self._live = False
        proc = self.proc
        if proc is None or self._nursery is None:
            return
        self._signal_group(signal.SIGSTOP)
        done = self._killing = trio.Event()
        self._nursery.start_soon(self._kill_all, proc, done)

    def pause(self) -> None:
        if self.running and not self.paused:
            self.paused = True
            self._signal_group(signal.SIGSTOP)

    def resume(self) -> None:
        if self.paused:
            self.paused = False
            self._signal_group(signal.SIGCONT)

    async def stop(self) -> None:
        """End the run for this node: SIGTERM, then SIGKILL after a grace period, and wait until
        the process is gone. SIGKILL goes to its whole session in any case, so a
        child it left behind does not outlive the run."""
        proc = self.proc
        if proc is None:
            return
        self.killed = True
        with trio.CancelScope(shield=True):
            await self._killed()
            self.resume()
            seen = frozenset(await self._strays(proc))
            if proc.returncode is None:
                self._signal_group(signal.SIGTERM)
                with trio.move_on_after(STOP_GRACE):
                    await proc.wait()
            await self._kill_all(proc, trio.Event(), seen)
            await proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    await stream.aclose()

    def tail(self, lines: int = 5) -> str:
        """The last lines of the node's log (what it said before dying), on one line."""
        try:
            data = self.log.read_bytes()[-4096:]
        except OSError:
            return ""
        kept = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
        kept = [ln for ln in kept if not ln.startswith("--- harness:")]
        return " | ".join(kept[-lines:])


def stray_processes(root: int | None, marker: bytes) -> set[int]:
    """Live processes (not zombies) that descend from `root` or whose environment holds `marker`
    (`NAME=value`), from Linux's /proc; empty where there is no /proc. Never this process."""
    try:
        entries = [e.name for e in os.scandir(PROC) if e.name.isdigit()]
    except OSError:
        return set()
    me = os.getpid()
    children: dict[int, list[int]] = {}
    found: set[int] = set()
    for entry in entries:
        pid = int(entry)
        try:
            with open(f"{PROC}/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] == b"Z":
                continue
            children.setdefault(int(fields[1]), []).append(pid)
            with open(f"{PROC}/{pid}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    found.add(pid)
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
    stack = [root] if root is not None else []
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    found.discard(me)
    return found
