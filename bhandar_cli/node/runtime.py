"""A node's lives on trio: the trio environment of the effect executor (`host.executor.NodeHost`).

`NodeRunner.run` is one life of a node, a cancel scope inside the nursery of whoever runs the
node (the in-process cluster, or a node process). It boots the node, then steps it whenever it is
ready (an input arrived or a deadline passed). Without `offload` it runs the sync a step needs
inline, at once; with `offload` a task of its own runs the syncs one after another on the node's
sync thread (sync_worker.py) while the node goes on stepping, so the steps handled during one
sync share the next (pipelined group commit, see the executor). The store's background jobs
(flush, compaction) run in a nursery of its own. `kill` ends the life at once; `stopped` waits
until its tasks are gone, so two lives never share the store. Nothing inside a node escapes
`run`: a failed boot, a failed background job or a bug becomes a crash of that node
(`host.crash_reason`), never an exception of the caller.

Who may touch the store: only trio's thread, except for the two functions the store hands out for
a worker thread (the sync of a step, a background job's `run`), whose ownership rule the storage
engine states.
"""

from __future__ import annotations

import trio

from bhandar_cli.host.executor import NodeHost
from bhandar_cli.node.sync_worker import SyncWorker
from bhandar_cli.storage.errors import StorageError
from bhandar_cli.storage.jobs import BackgroundJob

# Errors that end a node's life rather than one message: its disk failed, its store is in doubt.
FATAL: tuple[type[BaseException], ...] = (StorageError, OSError)


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
        self._wakeup = trio.Event()
        self._sync_wanted = trio.Event()  # a step left durable effects waiting for a sync

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
        """Crash the node now (no clean shutdown); False if it was not running."""
        if not self.host.alive and self._scope is None:
            return False
        self.host.kill(reason)
        if self._scope is not None:
            self._scope.cancel()
        return True

    async def stopped(self) -> None:
        """Wait until the current life's tasks are gone (a thread in a sync or job finishes first)."""
        await self._done.wait()

    def _wake(self) -> None:
        self._wakeup.set()

    async def _serve(self, jobs: trio.Nursery) -> None:
        host = self.host
        worker = SyncWorker(host.name) if self.offload else None
        if worker is not None:
            jobs.start_soon(self._sync_in_worker, worker)
        try:
            while host.alive:
                now = trio.current_time()
                if not host.ready(now):
                    deadline = host.next_deadline()
                    with trio.move_on_at(deadline):
                        await self._wakeup.wait()
                    self._wakeup = trio.Event()
                    continue
                try:
                    host.step(now)
                    if worker is None:
                        while (sync := host.begin_sync()) is not None:
                            sync.fsync()
                            host.end_sync(sync)
                    elif host.wants_sync:
                        self._sync_wanted.set()
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
                worker.close()

    async def _sync_in_worker(self, worker: SyncWorker) -> None:
        """Run the syncs the steps ask for, one at a time, on the worker thread."""
        host = self.host
        life = host.generation
        while True:
            try:
                sync = host.begin_sync()
                if sync is None:
                    await self._sync_wanted.wait()
                    self._sync_wanted = trio.Event()
                    continue
                with trio.CancelScope(shield=True):  # a kill waits for the fsync: it holds the WAL
                    await worker.run(sync.fsync)
            except Exception as exc:  # a failed fsync: the store is in doubt
                if host.generation == life and host.alive:
                    host.crash(exc, "failed to sync its store")
                if self._scope is not None:
                    self._scope.cancel()
                return
            host.end_sync(sync)

    async def _run_job(self, job: BackgroundJob) -> None:
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
