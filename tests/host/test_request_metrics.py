"""The executor counts every client data request where its answer goes out: by outcome, and the
latency of a success from its arrival to its answer on the environment's clock. A read at ONE that
the node answers from its own copy, in the very step that received it, still has the latency it
waited in the inbox (the core's `now` alone would say 0 ms: the bug this guards against)."""

from __future__ import annotations

from bhandar_cli.core.membership.ring import Ring
from bhandar_cli.core.model.config import NodeConfig
from bhandar_cli.core.model.store import MemoryStore
from bhandar_cli.core.model.versions import JSON
from bhandar_cli.core.protocol.client_messages import GetRequest, PutRequest
from bhandar_cli.core.protocol.messages import Result
from bhandar_cli.host.executor import NodeHost


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lone_node(clock: Clock) -> NodeHost:
    ring = Ring.build(["A"], 8)
    host = NodeHost(
        name="A",
        zone="z1",
        ring=ring,
        store=MemoryStore(),
        config=NodeConfig(),
        seed=1,
        send=lambda *_: None,
        clock=clock,
    )
    host.start(clock.now)
    return host


def run(host: NodeHost, now: float) -> None:
    """Step the node at `now` until it has nothing left to do (a put's own ack comes back to it)."""
    for _ in range(10):
        if not host.ready(now):
            return
        host.step(now)
        while (sync := host.begin_sync()) is not None:
            sync.fsync()
            host.end_sync(sync)


def test_a_read_at_one_answered_in_one_step_has_the_latency_it_waited() -> None:
    clock = Clock()
    host = lone_node(clock)
    answers: list[Result] = []
    host.submit(PutRequest(1, "kv", "k", b'"v"', JSON, None, "ONE"), answers.append)
    clock.now += 0.004  # the request waited 4 ms in the inbox
    run(host, clock.now)
    host.submit(GetRequest(2, "kv", "k", "ONE"), answers.append)
    clock.now += 0.0025
    run(host, clock.now)
    assert len(answers) == 2
    ops = host.metrics().ops
    put, get = ops[("put", "ONE")], ops[("get", "ONE")]
    assert (put.count, put.ok, put.latency.count) == (1, 1, 1)
    assert abs(put.latency.total_ms - 4.0) < 1e-6
    assert (get.count, get.ok, get.latency.count) == (1, 1, 1)
    assert abs(get.latency.total_ms - 2.5) < 1e-6 and get.latency.percentile(99) > 2.0


def test_failures_are_counted_by_outcome_and_the_clients_fault_is_not_judged() -> None:
    clock = Clock()
    host = lone_node(clock)
    answers: list[Result] = []
    host.submit(GetRequest(1, "kv", "k", "TWO"), answers.append)  # no such level: the client's fault
    host.submit(GetRequest(2, "kv", "k", "ALL"), answers.append)  # 1 node, 3 replicas wanted
    host.submit(GetRequest(3, "kv", "k", "ONE"), answers.append)
    run(host, clock.now)
    host.submit(GetRequest(4, "kv", "k", "ONE"), answers.append)
    host.kill()  # the waiting read is answered "timeout" (it may have been applied)
    host.submit(GetRequest(5, "kv", "k", "ONE"), answers.append)  # refused: the node is down
    assert len(answers) == 5
    ops = host.metrics().ops
    assert ops[("get", "TWO")].outcomes() == {"ok": 0, "bad_input": 1}
    assert ops[("get", "TWO")].count == 0  # the success ratio does not judge the client's mistakes
    assert ops[("get", "ALL")].outcomes() == {"ok": 0, "unavailable": 1}
    assert ops[("get", "ONE")].outcomes() == {"ok": 1, "timeout": 1, "unavailable": 1}
    assert ops[("get", "ONE")].count == 3 and ops[("get", "ONE")].latency.count == 1
