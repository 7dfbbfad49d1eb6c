"""Pipelined group commit in the executor: a write is never answered before a sync that began after
it (the coordinator's own copy counts as an ack only then); the node keeps handling inputs while a
sync runs, and those share the next sync; a node killed during a sync sends nothing that sync
covered. The store's sync is a fake the test runs by hand (or, on trio, one that blocks until the
test lets it finish)."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from bhandar_cli.core.membership.ring import Ring
from bhandar_cli.core.model.config import NodeConfig
from bhandar_cli.core.model.store import MemoryStore
from bhandar_cli.core.model.versions import JSON
from bhandar_cli.core.protocol.client_messages import Failure, PutRequest, PutResult
from bhandar_cli.core.protocol.messages import Result
from bhandar_cli.host.executor import NodeHost
from bhandar_cli.node.runtime import NodeRunner


class HeldSyncStore(MemoryStore):
    """A store whose syncs log when they run, so the log shows fsyncs and answers in order."""

    def __init__(self, log: list[str], gate: threading.Event | None = None) -> None:
        super().__init__()
        self.log = log
        self.gate = gate  # when given, an fsync blocks until it is set
        self.began = 0

    def begin_sync(self) -> Callable[[], None]:
        self.began += 1
        written = sorted(self.keys("kv"))  # what this sync covers: the writes made before it began

        def fsync() -> None:
            if self.gate is not None:
                self.gate.wait(timeout=30)
            self.log.append(f"fsync {','.join(written)}")

        return fsync


def lone_node(store: MemoryStore) -> NodeHost:
    host = NodeHost(
        name="A",
        zone="z1",
        ring=Ring.build(["A"], 8),
        store=store,
        config=NodeConfig(),
        seed=1,
        send=lambda *_: None,
    )
    host.start(0.0)
    return host


def put(rid: int, key: str) -> PutRequest:
    return PutRequest(rid, "kv", key, b'"v"', JSON, None, "ONE")


def answer_to(log: list[str], key: str) -> Callable[[Result], None]:
    def responder(result: Result) -> None:
        log.append(f"answer {key} {type(result).__name__}")

    return responder


def test_answers_go_out_after_the_sync_that_covers_them_and_later_writes_share_the_next() -> None:
    log: list[str] = []
    host = lone_node(HeldSyncStore(log))
    host.submit(put(1, "k1"), answer_to(log, "k1"))
    host.step(1.0)
    first = host.begin_sync()
    assert first is not None and log == []  # written, not answered: the sync has not run
    for rid, key in ((2, "k2"), (3, "k3")):  # arrive while the first sync runs: handled at once
        host.submit(put(rid, key), answer_to(log, key))
        host.step(1.0)
    assert host.store.get("kv", "k3") is not None and log == []
    assert host.begin_sync() is None  # one sync at a time: the next covers both
    first.fsync()
    assert log == ["fsync k1"]
    host.end_sync(first)  # the coordinator's ack of its own synced copy: its next input
    assert log == ["fsync k1"]
    host.step(1.0)
    assert log == ["fsync k1", "answer k1 PutResult"]
    second = host.begin_sync()
    assert second is not None and host.begin_sync() is None
    second.fsync()
    host.end_sync(second)
    host.step(1.0)
    assert log[2:] == ["fsync k1,k2,k3", "answer k2 PutResult", "answer k3 PutResult"]
    assert host.begin_sync() is None  # nothing waits any more


def test_a_node_killed_while_its_sync_runs_sends_nothing_that_sync_covered() -> None:
    log: list[str] = []
    store = HeldSyncStore(log)
    host = lone_node(store)
    host.submit(put(1, "k1"), answer_to(log, "k1"))
    host.step(1.0)
    sync = host.begin_sync()
    assert sync is not None
    host.kill()
    sync.fsync()
    host.end_sync(sync)
    assert not host.ready(3.0)  # not even the coordinator's ack of its own copy is left
    assert log == ["answer k1 Failure", "fsync k1"]  # the kill's timeout, never a PutResult
    host.start(2.0)  # the next life does not inherit the old life's waiting effects either
    assert host.begin_sync() is None


def test_on_trio_a_node_keeps_handling_requests_while_its_fsync_runs_on_the_sync_thread() -> None:
    log: list[str] = []
    gate = threading.Event()
    store = HeldSyncStore(log, gate)
    host = NodeHost(
        name="A",
        zone="z1",
        ring=Ring.build(["A"], 8),
        store=store,
        config=NodeConfig(),
        seed=1,
        send=lambda *_: None,
    )
    results: dict[str, Any] = {}
    answered = trio.Event()

    def responder(key: str) -> Callable[[Result], None]:
        def respond(result: Result) -> None:
            log.append(f"answer {key}")
            results[key] = result
            if len(results) == 2:
                answered.set()

        return respond

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(NodeRunner(host, offload=True).run)
            host.submit(put(1, "k1"), responder("k1"))
            await trio.testing.wait_all_tasks_blocked()  # k1 stepped; its fsync waits at the gate
            host.submit(put(2, "k2"), responder("k2"))
            await trio.testing.wait_all_tasks_blocked()
            assert store.get("kv", "k2") is not None and results == {}  # handled, not answered
            gate.set()
            with trio.fail_after(30):
                await answered.wait()
            nursery.cancel_scope.cancel()

    trio.run(main)
    # k2 waited for a sync that began after it; each answer follows the sync that covers it.
    assert sorted(log) == ["answer k1", "answer k2", "fsync k1", "fsync k1,k2"], log
    assert log.index("answer k1") > log.index("fsync k1")
    assert log.index("answer k2") > log.index("fsync k1,k2")
    assert all(isinstance(r, PutResult) for r in results.values()), results


class FullDiskStore(MemoryStore):
    """A store whose disk is full when a sync begins (its buffered WAL cannot be written)."""

    def begin_sync(self) -> Callable[[], None]:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_stops_the_node_saying_so_not_as_an_internal_error() -> None:
    failures: list[Result] = []
    host = lone_node(FullDiskStore())
    host.submit(put(1, "k1"), failures.append)
    host.step(1.0)
    with pytest.raises(OSError) as raised:
        host.begin_sync()
    host.crash(raised.value, "failed to sync its store")
    assert not host.alive and host.disk_trouble == "its disk is full: No space left on device"
    assert host.crash_reason == "failed to sync its store: its disk is full: No space left on device"
    (failure,) = failures  # the write was never acknowledged, and its client is told why
    assert isinstance(failure, Failure) and failure.code == "timeout"
    assert "A stopped (its disk is full: No space left on device)" in failure.error
    assert "internal error" not in failure.error


def test_any_other_failure_is_still_an_internal_error() -> None:
    failures: list[Result] = []
    host = lone_node(MemoryStore())
    host.submit(put(1, "k1"), failures.append)
    host.step(1.0)
    host.crash(ValueError("a bug"), "failed to sync its store")
    assert host.disk_trouble is None and host.crash_reason == "failed to sync its store: ValueError: a bug"
    (failure,) = failures
    assert isinstance(failure, Failure) and "A crashed (internal error)" in failure.error
