"""One program: a node fed the same inputs under the simulator and under the trio runtime executes
the same effects, in the same order, at the same times.

The trace is real: everything node A of a simulated three-node cluster received while clients
wrote and read through it and its peers (gossip, replica traffic, client requests), with the times
it arrived. Replayed into a lone node A (same seed, fresh store) under the simulator's environment
and under trio's (on a mock clock), it must do exactly what it did in the cluster: the same sends,
answers and syncs. A difference would mean the checker checks a different program than users run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from bhandar_cli.core.membership.ring import Ring
from bhandar_cli.core.model.config import NodeConfig
from bhandar_cli.core.model.store import MemoryStore
from bhandar_cli.core.protocol.client_messages import GetRequest, PutRequest
from bhandar_cli.core.protocol.messages import Result
from bhandar_cli.host.executor import NodeHost, Responder
from bhandar_cli.node.runtime import NodeRunner
from bhandar_cli.sim.loop import EventLoop
from bhandar_cli.sim.sim_cluster import SimCluster
from bhandar_cli.sim.stepper import SimStepper

Input = tuple[float, str | None, Any]  # (time, sender or None for a client, message or request)
Effect = tuple[Any, ...]


class Recorder:
    """What a node did: sends, answers and syncs, each with the time it happened."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.effects: list[Effect] = []

    def send(self, src: str, dst: str, msg: Any) -> None:
        self.effects.append((self.clock(), "send", dst, msg))

    def answer(self, rid: int) -> Responder:
        return lambda result: self.effects.append((self.clock(), "answer", rid, result))

    def wrap_sync(self, host: NodeHost) -> None:
        """Record each sync a step waits for (the store's in-memory sync hands out nothing to wait
        for, so the recorder hands out one of its own)."""

        def begin_sync() -> Callable[[], None]:
            return lambda: self.effects.append((self.clock(), "sync"))

        host.store.begin_sync = begin_sync  # type: ignore[method-assign]


def record_cluster_run() -> tuple[list[Input], list[Effect], float, NodeHost, Ring, NodeConfig]:
    """Run a small simulated cluster with clients; return node A's inputs and executed effects."""
    cluster = SimCluster(seed=3, nodes=3)
    host = cluster.hosts["A"]
    inputs: list[Input] = []
    recorder = Recorder(lambda: cluster.now)
    deliver, submit, send = host.deliver, host.submit, host.send

    def recorded_deliver(src: str, msg: Any) -> bool:
        inputs.append((cluster.now, src, msg))
        return deliver(src, msg)

    def recorded_submit(request: Any, responder: Responder) -> int:
        inputs.append((cluster.now, None, request))
        answer = recorder.answer(request.rid)

        def both(result: Result) -> None:
            answer(result)
            responder(result)

        return submit(request, both)

    def recorded_send(src: str, dst: str, msg: Any) -> None:
        recorder.send(src, dst, msg)
        send(src, dst, msg)

    host.deliver, host.submit, host.send = recorded_deliver, recorded_submit, recorded_send  # type: ignore[method-assign]
    recorder.wrap_sync(host)
    for i in range(40):
        via = "ABC"[i % 3]
        key = f"k{i % 7}"
        cluster.call(
            via, PutRequest(cluster.new_rid(), "kv", key, f'"{i}"'.encode(), "application/json", None)
        )
        cluster.call(via, GetRequest(cluster.new_rid(), "kv", key))
        cluster.run_for(0.05)
    cluster.run_for(3.0)
    return inputs, recorder.effects, cluster.now, host, cluster.ring, cluster.config


def lone_host(original: NodeHost, ring: Ring, config: NodeConfig, recorder: Recorder) -> NodeHost:
    return NodeHost(
        name="A",
        zone=original.zone,
        ring=ring,
        store=MemoryStore(),
        config=config,
        seed=original.seed,
        send=recorder.send,
    )


def replay_in_simulator(
    inputs: list[Input], end: float, original: NodeHost, ring: Ring, config: NodeConfig
) -> list[Effect]:
    loop = EventLoop()
    recorder = Recorder(lambda: loop.now)
    host = lone_host(original, ring, config, recorder)
    stepper = SimStepper(loop, host, lambda: None, lambda error: None)
    for when, src, msg in inputs:
        if src is None:
            loop.call_at(when, host.submit, msg, recorder.answer(msg.rid))
        else:
            loop.call_at(when, host.deliver, src, msg)
    stepper.start()
    recorder.wrap_sync(host)  # after the boot's sync, as in the cluster run
    loop.run_until(end)
    return recorder.effects


def replay_on_trio(
    inputs: list[Input], end: float, original: NodeHost, ring: Ring, config: NodeConfig
) -> list[Effect]:
    recorder = Recorder(trio.current_time)
    host = lone_host(original, ring, config, recorder)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(NodeRunner(host).run)
            recorder.wrap_sync(host)  # after the boot's sync, as in the cluster run
            i = 0
            while i < len(inputs):
                when = inputs[i][0]
                await trio.sleep_until(when)
                # Every input of one instant before the node runs: the simulator batches them too.
                while i < len(inputs) and inputs[i][0] == when:
                    _, src, msg = inputs[i]
                    if src is None:
                        host.submit(msg, recorder.answer(msg.rid))
                    else:
                        host.deliver(src, msg)
                    i += 1
            await trio.sleep_until(end)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return [e for e in recorder.effects if e[0] <= end]


@pytest.mark.patches_compiled  # records by replacing the host's methods
def test_the_simulator_and_trio_execute_the_same_effects_for_the_same_trace() -> None:
    inputs, in_cluster, end, original, ring, config = record_cluster_run()
    kinds = {e[1] for e in in_cluster}
    requests = sum(1 for _, src, _ in inputs if src is None)
    # The trace exercises the node for real: client requests, peer traffic, group-commit syncs.
    assert requests >= 20 and len(inputs) > 150 and kinds == {"send", "answer", "sync"}, (requests, kinds)
    simulated = replay_in_simulator(inputs, end, original, ring, config)
    on_trio = replay_on_trio(inputs, end, original, ring, config)
    assert simulated == in_cluster
    assert on_trio == in_cluster
