"""A node's lives on trio: the trio environment of the effect executor (`host.executor.NodeHost`).

`NodeRunner.run` is one life of a node, a cancel scope inside the nursery of whoever runs the
node (the in-process cluster, or a node process). It boots the node, then steps it whenever it is
ready (an input arrived or a deadline passed). Without `offload` it runs the sync a step needs
inline, at once; with `offload` the syncs run one after another on the node's sync thread
(node/sync_worker.py) while the node goes on stepping, so the steps handled during one sync share the
next (pipelined group commit, see the executor): a step that leaves a sync wanted hands it to the
thread if none runs, and the end of each sync (a callback on trio's thread) sends its effects and
hands over the next. The store's background jobs
(flush, compaction) run in a nursery of its own. `kill` ends the life at once; `stopped` waits
until its tasks are gone, so two lives never share the store. Nothing inside a node escapes
`run`: a failed boot, a failed background job or a bug becomes a crash of that node
(`host.crash_reason`), never an exception of the caller.

`call` submits a client request and waits for its result on trio (the in-process cluster's
requests, and the HTTP gateway's in a node process): `host.executor.Call`, which forgets the
request if the wait times out.

Who may touch the store: only trio's thread, except for the two functions the store hands out for
a worker thread (the sync of a step, a background job's `run`), whose ownership rule the storage
engine states.
"""

from __future__ import annotations

from typing import Any

import trio

from bhandar_cli.core.model import StoreJob
from bhandar_cli.core.protocol import ClientRequest, Result
from bhandar_cli.host import Call, Forget, NodeHost, PendingSync, Submit
from bhandar_cli.node.sync_worker import SyncWorker
from bhandar_cli.storage import StorageError

# Errors that end a node's life rather than one message: its disk failed, its store is in doubt.
FATAL: tuple[type[BaseException], ...] = (StorageError, OSError)


async def call(submit: Submit, forget: Forget, request: ClientRequest, timeout: float, who: str) -> Result:
    """Submit `request` and wait up to `timeout` seconds for its result; on timeout the request is
    forgotten where it was submitted and the result says no answer came from `who`."""
    answered = trio.Event()
    pending = Call(submit, forget, request, answered.set)
    with trio.move_on_after(timeout):
        await answered.wait()
    return pending.outcome(who, timeout)


class NodeRunner:
    """The trio side of one `NodeHost`: its current life, if any."""

    def __init__(self, host: NodeHost, offload: bool = False) -> None:
        # Off for in-process nodes: a virtual clock would jump while a thread runs, and their
        # syncs and flushes are short; on in node processes, whose other tasks must keep going.
        self.host = host
        self.offload = offload
        self._scope: trio.CancelScope | None = None
        self._done = trio.Event()
        self._done.set()  # no life running
        self._parked: trio.lowlevel.Task | None = None  # the stepping loop, while it waits
        self._in_flight = False  # a sync is on the sync thread
        self._landed: trio.Event | None = None  # set when it ends, if the life's end waits for it
        self._alarm_scope = trio.CancelScope()  # the deadline that wakes the loop (`_alarm`)

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """One life: boot, report started, serve until killed or crashed."""
        if self.running:
            raise RuntimeError(f"node {self.host.name} already has a running life")
        host = self.host
        self._done = trio.Event()
        try:
            with trio.CancelScope() as scope:
                self._scope = scope
                host.wake = self._wake
                try:
                    host.start(trio.current_time())
                except Exception as exc:  # a store that cannot be read, a node that cannot boot
                    host.crash(exc, "failed to start")
                    task_status.started()
                    return
                task_status.started()
                async with trio.open_nursery() as jobs:
                    await self._serve(jobs)
                    jobs.cancel_scope.cancel()
        finally:
            self._scope = None
            self._done.set()

    def kill(self, reason: str = "was killed") -> bool:
        """Crash the node now (no clean shutdown); False if it was not running. (A second kill
        before the first life's tasks have unwound still finds it dead: `kill B; kill B` kills once.)"""
        was_running = self.host.alive
        self.host.kill(reason)
        if self._scope is not None:
            self._scope.cancel()  # a life that crashed on its own has tasks to end all the same
        return was_running

    async def stopped(self) -> None:
        """Wait until the current life's tasks are gone (a thread in a sync or job finishes first)."""
        await self._done.wait()

    def _wake(self) -> None:
        """An input arrived or the deadline passed: the loop steps if it waits. A wake while it
        does not wait is not kept: the loop checks `ready` before it waits, which sees the input
        or the deadline. (A parked task rather than a trio.Event made per wait: one per step.)"""
        task = self._parked
        if task is not None:
            self._parked = None
            trio.lowlevel.reschedule(task)

    def _unpark(self, _: Any) -> trio.lowlevel.Abort:
        self._parked = None  # cancelled while waiting (the life ends)
        return trio.lowlevel.Abort.SUCCEEDED

    async def _serve(self, jobs: trio.Nursery) -> None:
        host = self.host
        worker = SyncWorker(host.name) if self.offload else None
        self._in_flight, self._landed = False, None
        await jobs.start(self._alarm)
        try:
            while host.alive:
                now = trio.current_time()
                if not host.ready(now):
                    deadline, alarm = host.next_deadline(), self._alarm_scope
                    if deadline < alarm.deadline:
                        alarm.deadline = deadline
                    self._parked = trio.lowlevel.current_task()
                    await trio.lowlevel.wait_task_rescheduled(self._unpark)
                    continue
                try:
                    host.step(now)
                    if worker is None:
                        while (sync := host.begin_sync()) is not None:
                            sync.fsync()
                            host.end_sync(sync)
                    elif host.wants_sync:
                        self._hand_sync(worker)
                except Exception as exc:  # a bug, or a store that failed: this node's crash alone
                    host.crash(exc)
                    return
                job = host.background_job()
                if job is not None:
                    jobs.start_soon(self._run_job, job)
                if host.ready(trio.current_time()):
                    # A busy node still lets the others run. A node with nothing left to do
                    # yields in its wait just above instead: a second trip through the scheduler
                    # per step was a visible cost of every message under load.
                    await trio.lowlevel.checkpoint()
        finally:
            if worker is not None:
                if self._in_flight:
                    # The life ends only once its fsync has: that fsync holds the WAL.
                    self._landed = trio.Event()
                    with trio.CancelScope(shield=True):
                        await self._landed.wait()
                worker.close()

    async def _alarm(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Wake the stepping loop when the node's next deadline passes. The loop waits for its
        wake-up with no timer of its own (a cancel scope per wait was a visible cost of every
        step): before it waits it moves this task's deadline earlier if the node's is earlier.
        Once fired, the deadline is gone until the loop sets one again; a deadline that moved
        later meanwhile (its timer was handled) at worst wakes the loop once for nothing."""
        with trio.CancelScope() as self._alarm_scope:
            task_status.started()
            await trio.sleep_forever()
        while True:
            self._wake()
            with trio.CancelScope() as self._alarm_scope:
                await trio.sleep_forever()

    def _hand_sync(self, worker: SyncWorker) -> None:
        """Hand the sync the steps wait for to the worker thread, unless one runs there."""
        if self._in_flight:
            return  # its end hands over the next
        host = self.host
        try:
            sync = host.begin_sync()
        except Exception as exc:  # the store failed: this node's crash alone
            self._failed(exc, "failed to sync its store")
            return
        if sync is None:
            return
        self._in_flight = True
        life = host.generation
        worker.submit(sync.fsync, lambda error: self._synced(worker, sync, life, error))

    def _synced(self, worker: SyncWorker, sync: PendingSync, life: int, error: BaseException | None) -> None:
        """A sync ended (a callback on trio's thread: it must not raise): its effects go out, and
        the next sync, if steps meanwhile left one wanted, goes to the thread."""
        self._in_flight = False
        host = self.host
        try:
            if host.generation != life or not host.alive:
                return  # killed meanwhile: what waited for this sync never goes out
            if error is not None:  # a failed fsync: the store is in doubt
                self._failed(error, "failed to sync its store")
                return
            try:
                host.end_sync(sync)
            except Exception as exc:
                self._failed(exc, "failed sending what a sync made durable")
                return
            if host.wants_sync:
                self._hand_sync(worker)
        finally:
            if self._landed is not None and not self._in_flight:
                self._landed.set()

    def _failed(self, exc: BaseException, what: str) -> None:
        if self.host.alive:
            self.host.crash(exc, what)
        if self._scope is not None:
            self._scope.cancel()

    async def _run_job(self, job: StoreJob) -> None:
        """Build the job's output (in a worker thread with `offload`), then install it here. `finish`
        runs whatever happened meanwhile (a kill included): it discards what no longer fits, and
        only then may the store hand out the next job of that kind."""
        with trio.CancelScope(shield=True):  # a kill waits for it: the next life needs the slot
            if self.offload:
                await trio.to_thread.run_sync(job.run)
            else:
                job.run()
        try:
            job.finish()
        except Exception as exc:  # the job's disk failed: the store is in doubt
            self.host.crash(exc, f"failed in a background {job.kind}")
            if self._scope is not None:
                self._scope.cancel()
