"""The sibling limit through the deterministic simulator: writes past it are refused, merges of
replicas that each stayed under it keep every sibling and report the excess (get, status, metrics)."""

from __future__ import annotations

from bhandar_cli.core.model.config import NodeConfig
from bhandar_cli.core.model.metrics import NodeMetrics
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.sibling_limit import LISTED, TRACKED, SiblingLimit
from bhandar_cli.core.model.versions import JSON, Sibling
from bhandar_cli.core.protocol.client_messages import Failure, GetRequest, GetResult, PutRequest, PutResult
from bhandar_cli.core.protocol.messages import RepairRequest, RepairResult
from bhandar_cli.sim.sim_cluster import SimCluster
from tests.support.sim_calls import node

KS = "kv"
LIMIT = 10
EACH_SIDE = 7  # under the limit on each side of the partition, over it once merged


def blind_put(c: SimCluster, via: str, value: str, level: str) -> PutResult | Failure:
    result = c.call(via, PutRequest(c.new_rid(), KS, "cart", f'"{value}"'.encode(), JSON, None, level))
    assert isinstance(result, PutResult | Failure)
    return result


def split_brain(seed: int = 31, read_repair: bool = False) -> SimCluster:
    """Three replicas; A and {B, C} each take EACH_SIDE blind writes of the same key while cut off."""
    config = NodeConfig(sibling_warn=5, sibling_max=LIMIT, read_repair=read_repair, repair_interval=0)
    c = SimCluster(seed=seed, nodes=3, zones=3, config=config)
    c.model.partition([["A"], ["B", "C"]], c.ring.nodes)
    c.run_for(config.detection_bound())
    for i in range(EACH_SIDE):
        assert isinstance(blind_put(c, "A", f"a{i}", "ONE"), PutResult)
        assert isinstance(blind_put(c, "B", f"b{i}", "QUORUM"), PutResult)
    c.net.release(c.model.heal())
    c.run_for(config.detection_bound())
    return c


def live(c: SimCluster, name: str) -> list[bytes]:
    record = c.hosts[name].store.get(KS, "cart")
    assert isinstance(record, Versioned)
    return sorted(s.value for s in record.siblings if s.value is not None)


def every_value() -> list[bytes]:
    return sorted(f'"{side}{i}"'.encode() for side in "ab" for i in range(EACH_SIDE))


def test_anti_entropy_merging_two_replicas_near_the_limit_keeps_every_sibling_and_reports_it() -> None:
    c = split_brain()
    assert len(live(c, "A")) == EACH_SIDE and len(live(c, "B")) == EACH_SIDE
    assert all(node(c, n).metrics.sibling_limit_exceeded == 0 for n in "ABC")
    repaired = c.call("A", RepairRequest(c.new_rid(), KS))
    assert isinstance(repaired, RepairResult) and repaired.keys >= 1, repaired
    c.run_for(1.0)
    for name in "AB":
        assert live(c, name) == every_value()  # 14 > 10: nothing dropped
        assert node(c, name).metrics.sibling_limit_exceeded == 1
        over = node(c, name).info(c.now)["siblings_over_limit"]
        assert over == {"limit": LIMIT, "count": 1, "keys": [{"keyspace": KS, "key": "cart", "siblings": 14}]}
    read = c.call("C", GetRequest(c.new_rid(), KS, "cart", "ALL"))
    assert isinstance(read, GetResult) and isinstance(read.record, Versioned)
    assert len(read.record.siblings) == 2 * EACH_SIDE
    [warning] = read.warnings
    assert warning.startswith(f"cart has 14 siblings, over the limit of {LIMIT}")
    # The limit still holds where writes are accepted: a blind write would add a 15th.
    refused = blind_put(c, "A", "more", "QUORUM")
    assert isinstance(refused, Failure) and refused.code == "refused" and "limit 10" in refused.error


def test_read_repair_merging_two_replicas_near_the_limit_keeps_every_sibling_and_reports_it() -> None:
    c = split_brain(seed=32, read_repair=True)
    read = c.call("A", GetRequest(c.new_rid(), KS, "cart", "ALL"))
    assert isinstance(read, GetResult) and read.warnings, read
    c.run_for(1.0)  # read repair sends the merge to the replicas that answered with less
    for name in "ABC":
        assert live(c, name) == every_value()
        assert node(c, name).info(c.now)["siblings_over_limit"]["count"] == 1
    assert sum(node(c, n).metrics.sibling_limit_exceeded for n in "ABC") == 3


def test_the_record_of_keys_over_the_limit_is_bounded_and_forgets_a_key_brought_back_under() -> None:
    metrics = NodeMetrics()
    limit = SiblingLimit(2, metrics)

    def siblings(n: int, tombstones: int = 0) -> Versioned:
        live = [Sibling(("A", i), {}, b"1", JSON, 0.0) for i in range(1, n + 1)]
        dead = [Sibling(("B", i), {}, None, JSON, 0.0) for i in range(1, tombstones + 1)]
        return Versioned(tuple(live + dead))

    limit.stored(KS, "tombs", siblings(2, tombstones=5))  # tombstones do not count
    assert limit.view()["count"] == 0
    for i in range(TRACKED + 5):
        limit.stored(KS, f"k{i}", siblings(3))
    view = limit.view()
    assert view["count"] == TRACKED and len(view["keys"]) == LISTED
    assert metrics.sibling_limit_exceeded == TRACKED + 5
    limit.stored(KS, "k5", siblings(3))  # still over: counted once
    assert metrics.sibling_limit_exceeded == TRACKED + 5
    limit.stored(KS, "k5", siblings(1))  # merged by a client: no longer over
    assert limit.view()["count"] == TRACKED - 1
