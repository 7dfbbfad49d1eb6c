"""Values at the size limit (core/model/limits.py MAX_VALUE_BYTES) through every path that carries them
between nodes, on a simulated cluster: replicated by a write, hinted for a down replica and handed
off when it is back, repaired by anti-entropy, and streamed to a joining node in batches cut by
bytes (a batch of a hundred of them would be a frame no peer takes)."""

from __future__ import annotations

from typing import Any

import pytest

from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.config import KeyspaceDef, NodeConfig
from bhandar_cli.core.model.limits import MAX_VALUE_BYTES
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.protocol.client_messages import Failure, GetRequest, GetResult, PutRequest
from bhandar_cli.core.protocol.messages import KeyspaceRequest, RepairRequest, Send
from bhandar_cli.core.repair.repair_transfer import BATCH_BYTES, record_bytes
from bhandar_cli.core.roles import streaming
from bhandar_cli.sim.sim_cluster import SimCluster
from tests.support.sim_calls import put, wait_until

BLOB = "application/octet-stream"
BIG = KeyspaceDef("big")


def big_value(i: int) -> bytes:
    return bytes([i % 251]) * MAX_VALUE_BYTES


def cluster(**config: Any) -> SimCluster:
    c = SimCluster(seed=3, nodes=4, zones=1, config=NodeConfig(**config))
    assert not isinstance(c.call("A", KeyspaceRequest(c.new_rid(), BIG)), Failure)
    c.run_for(1.0)
    return c


def held(c: SimCluster, name: str, key: str) -> bytes | None:
    node = c.hosts[name].node
    assert node is not None
    record, _ = node.records("big", key)
    return record.siblings[0].value if isinstance(record, Versioned) and record.siblings else None


def replicas(c: SimCluster, key: str) -> list[str]:
    return list(c.ring.preference_list(key_token("big", key), 3))


def test_a_value_at_the_limit_is_replicated_hinted_and_handed_off() -> None:
    c = cluster()
    put(c, "A", "k0", big_value(0), "QUORUM", "big", ctype=BLOB)
    assert all(held(c, r, "k0") == big_value(0) for r in replicas(c, "k0"))
    too_big = c.call("A", PutRequest(c.new_rid(), "big", "k-", big_value(1) + b"x", BLOB, None, "QUORUM"))
    assert isinstance(too_big, Failure) and too_big.code == "too_large"

    down = replicas(c, "k1")[2]
    c.kill(down)
    c.run_for(5.0)
    for i in range(1, 6):
        put(c, "A" if down != "A" else "B", f"k{i}", big_value(i), "QUORUM", "big", ctype=BLOB)
    assert c.hints_pending() > 0
    c.revive(down)
    wait_until(c, lambda: c.hints_pending() == 0)
    for i in range(1, 6):
        key = f"k{i}"
        if down in replicas(c, key):
            assert held(c, down, key) == big_value(i), key
    result = c.call(down, GetRequest(c.new_rid(), "big", "k1", "ALL"))
    assert isinstance(result, GetResult) and isinstance(result.record, Versioned)
    assert result.record.siblings[0].value == big_value(1)


def test_anti_entropy_repairs_values_at_the_limit() -> None:
    c = cluster(hinted_handoff=False, repair_interval=0)
    down = replicas(c, "k0")[1]
    c.kill(down)
    c.run_for(5.0)
    via = next(n for n in "ABCD" if n != down)
    keys = [f"k{i}" for i in range(6)]
    for i, key in enumerate(keys):
        put(c, via, key, big_value(i), "QUORUM", "big", ctype=BLOB)
    c.revive(down)
    c.run_for(3.0)
    missing = [k for k in keys if down in replicas(c, k) and held(c, down, k) is None]
    assert missing, "no hint was kept, so the revived replica must miss these"
    result = c.call(down, RepairRequest(c.new_rid()), timeout=60.0)
    assert not isinstance(result, Failure), result
    assert all(held(c, down, k) == big_value(keys.index(k)) for k in missing)


@pytest.mark.patches_compiled
def test_a_joining_node_is_streamed_values_at_the_limit_in_batches_cut_by_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batches: list[int] = []
    send_next = streaming.Streaming._send_next

    def counted(self: streaming.Streaming, now: float, stream: streaming.OutStream) -> Any:
        effects = send_next(self, now, stream)
        for effect in effects:
            assert isinstance(effect, Send) and isinstance(effect.msg, streaming.StreamBatch)
            records = effect.msg.items
            assert len(records) == 1 or sum(record_bytes(r) for _, _, r in records) <= BATCH_BYTES
            batches.append(len(records))
        return effects

    monkeypatch.setattr(streaming.Streaming, "_send_next", counted)
    c = cluster()
    keys = [f"k{i}" for i in range(12)]
    for i, key in enumerate(keys):
        put(c, "A", key, big_value(i), "QUORUM", "big", ctype=BLOB)
    c.add_node("E", "z1")
    wait_until(c, lambda: all(c.status_of("E", n) == "normal" for n in "ABCDE"), limit=120.0)
    owned = [k for k in keys if "E" in c.ring_view().preference_list(key_token("big", k), 3)]
    assert owned and batches and max(batches) == 1  # one value at the limit per batch
    assert all(held(c, "E", k) == big_value(keys.index(k)) for k in owned)
