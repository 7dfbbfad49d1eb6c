"""The soak's client drives the client session (core/session/client_session.py): contexts per key
from its reads, the session's node choice, and a delete with no context read first and recorded
as a get, then the delete with the context that read returned. Run on an in-process cluster under
trio's mock clock."""

from __future__ import annotations

from itertools import pairwise
from random import Random

import trio
import trio.testing

from bhandar_cli.client.backends.in_process_backend import InProcessBackend
from bhandar_cli.client.client import Client
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import context_of
from bhandar_cli.fleet.in_process_cluster import InProcessCluster
from bhandar_cli.sim.history import History
from bhandar_cli.soak.load import KEYSPACES, VERSIONED, LoadStats, SoakClient

STEPS = 300


def test_the_soak_client_runs_the_session_and_records_every_operation() -> None:
    cluster = InProcessCluster(nodes=5)
    backend = InProcessBackend(cluster)
    history, stats = History(), LoadStats()
    soak = SoakClient(0, backend, history, stats, Random(11), keys=4)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(cluster.run)
            client = Client(backend)
            for keyspace in KEYSPACES:
                await client.admin.keyspace_create(keyspace.name, keyspace.policy)
            for _ in range(STEPS):
                await soak.step()
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    ops = history.ops
    assert len(ops) >= STEPS and all(op.outcome == "ok" for op in ops), [op for op in ops if not op.ok]
    assert stats.total == len(ops)
    # Read, modify, write: puts carry the context the session remembered from the key's last read.
    assert any(op.kind == "put" and op.context for op in ops)
    assert any(soak.session.context(VERSIONED.name, f"k{i}") for i in range(4))
    # A delete that had no context read first: a get of the same key just before it, whose
    # siblings' clocks are the delete's context.
    read_first = [
        (before, op)
        for before, op in pairwise(ops)
        if op.kind == "delete"
        and before.kind == "get"
        and before.key == op.key
        and before.completed == op.invoked
    ]
    assert read_first
    for read, delete in read_first:
        siblings = read.record.siblings if isinstance(read.record, Versioned) else ()
        assert delete.context == (context_of(siblings) or None)
