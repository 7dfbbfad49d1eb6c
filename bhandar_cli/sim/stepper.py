"""The simulator's environment for one `NodeHost`: when it steps, and how long its fsyncs take.

An input that reaches an idle host schedules a step at the current instant, after the events
already due then, so messages arriving together are handled as one batch, as in the trio runtime.
After a step the host is stepped again at once if more input waits, else at its next deadline. The
sync a step's durable effects wait for (`NodeHost.begin_sync`) takes `sync_delay` simulated
seconds (none by default: it runs inline); the host goes on stepping meanwhile, and the batches
handled during one sync share the next, as in production (pipelined group commit). The fsync
itself runs when the delay ends, so a crash during it loses the unsynced writes and sends none of
the effects waiting for it.

Background jobs (flush, compaction) run beside the node as they do in production: handed out
after a step, built and installed `job_delay` simulated seconds later while the node goes on.

Exceptions: one of `crash_errors` (a simulated power cut inside a disk operation) is the
machine's death, reported to `on_machine_crash`; any other is a bug: the node crashes, as it would
in production, and `on_internal_error` is told, for the checker to report.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from random import Random

from bhandar_cli.core.model import StoreJob
from bhandar_cli.host import NodeHost, PendingSync
from bhandar_cli.sim.loop import EventLoop


class SimStepper:
    def __init__(
        self,
        loop: EventLoop,
        host: NodeHost,
        on_machine_crash: Callable[[], None],
        on_internal_error: Callable[[str], None],
        crash_errors: tuple[type[BaseException], ...] = (),
        sync_delay: Callable[[Random], float] | None = None,
        disk_rng: Random | None = None,
        job_delay: Callable[[Random], float] = lambda rng: 0.0,
    ) -> None:
        self.loop = loop
        self.host = host
        self.on_machine_crash = on_machine_crash
        self.on_internal_error = on_internal_error
        self.crash_errors = crash_errors
        self.sync_delay = sync_delay
        self.disk_rng = disk_rng or Random(0)
        self.job_delay = job_delay
        self._token = 0  # bumped to cancel the scheduled step
        self._at = math.inf  # when the scheduled step runs (inf: none)
        self._syncing = False  # a sync's simulated delay is running
        host.wake = self.wake

    def start(self) -> None:
        """Boot a new life of the host now."""
        try:
            self.host.start(self.loop.now)
        except self.crash_errors:
            self.on_machine_crash()
            return
        self._after_step()

    def halt(self) -> None:
        """Forget the scheduled step and any step waiting for its fsync (the host died)."""
        self._token += 1
        self._at = math.inf
        self._syncing = False

    def wake(self) -> None:
        self._step_at(self.loop.now)

    def _step_at(self, when: float) -> None:
        if when < self._at:
            self._at = when
            self._token += 1
            self.loop.push(when, self._step, (self._token,))

    def _step(self, token: int) -> None:
        host = self.host
        if token != self._token or not host.alive:
            if token != self._token:
                self.loop.discard()
            return
        self._at = math.inf
        try:
            host.step(self.loop.now)
            self._sync()
        except self.crash_errors:
            self.on_machine_crash()  # the machine died inside this step; nothing it meant to send left
            return
        except Exception as exc:
            self._internal_error(exc)
            return
        self._after_step()

    def _sync(self) -> None:
        """Begin the sync the waiting durable effects need, unless one is running: inline without
        a `sync_delay`, else ended by an event once the delay has passed."""
        host = self.host
        while not self._syncing and (sync := host.begin_sync()) is not None:
            if self.sync_delay is None:
                sync.fsync()
                host.end_sync(sync)
                continue
            self._syncing = True
            when = self.loop.now + self.sync_delay(self.disk_rng)
            self.loop.push(when, self._end_sync, (host.generation, sync))

    def _end_sync(self, life: int, sync: PendingSync) -> None:
        host = self.host
        if host.generation != life or not host.alive:
            return  # the host died while its fsync ran: the effects waiting for it never go out
        self._syncing = False
        try:
            sync.fsync()
            host.end_sync(sync)
            self._sync()  # for the batches handled meanwhile
        except self.crash_errors:
            self.on_machine_crash()  # the power went out inside the fsync: nothing waiting left
        except Exception as exc:
            self._internal_error(exc)

    def _internal_error(self, exc: Exception) -> None:
        self.on_internal_error(f"{type(exc).__name__}: {exc}")
        self.host.crash(exc)

    def _after_step(self) -> None:
        host = self.host
        if host.alive:
            now = self.loop.now
            self._step_at(now if host.ready(now) else host.next_deadline())
            self._start_job()

    def _start_job(self) -> None:
        """A due flush or compaction runs as in production, beside the node: built in simulated
        time (`job_delay`), installed at its end; the node goes on stepping meanwhile."""
        try:
            job = self.host.background_job()
        except self.crash_errors:
            self.on_machine_crash()
            return
        if job is not None:
            when = self.loop.now + self.job_delay(self.disk_rng)
            self.loop.push(when, self._finish_job, (self.host.generation, job))

    def _finish_job(self, life: int, job: StoreJob) -> None:
        host = self.host
        if host.generation != life or not host.alive:
            return  # the machine died meanwhile: its store was crashed and reopened without it
        job.run()
        try:
            if isinstance(job.error, self.crash_errors):
                raise job.error  # the power went out inside the job's disk writes
            job.finish()
        except self.crash_errors:
            self.on_machine_crash()
            return
        except Exception as exc:
            self.on_internal_error(f"background {job.kind}: {type(exc).__name__}: {exc}")
            host.crash(exc, f"failed in a background {job.kind}")
            return
        self._start_job()  # another may be due (a compaction after a flush)
