"""Client requests to a simulated cluster, run until answered, as the scenario tests send them: a
write that must be acknowledged (`put`), a read that must be answered (`get`); a running node
(`node`), and running the simulation until something holds (`wait_until`)."""

from __future__ import annotations

from collections.abc import Callable

from bhandar_cli.core.model.versions import JSON
from bhandar_cli.core.node import Node
from bhandar_cli.core.protocol.client_messages import GetRequest, GetResult, PutRequest, PutResult
from bhandar_cli.sim.sim_cluster import SimCluster


def put(
    c: SimCluster,
    via: str,
    key: str,
    value: bytes | None,
    level: str = "QUORUM",
    keyspace: str = "kv",
    *,
    ctype: str = JSON,
    context: dict[str, int] | None = None,
) -> PutResult:
    """Write `value` (a delete when None) to `key` through node `via`; it must be acknowledged."""
    result = c.call(via, PutRequest(c.new_rid(), keyspace, key, value, ctype, context, level))
    assert isinstance(result, PutResult), result
    return result


def get(c: SimCluster, via: str, key: str, level: str = "ALL", keyspace: str = "kv") -> GetResult:
    """Read `key` through node `via`; it must be answered."""
    result = c.call(via, GetRequest(c.new_rid(), keyspace, key, level))
    assert isinstance(result, GetResult), result
    return result


def node(c: SimCluster, name: str) -> Node:
    """The core node `name` runs now (it must be running)."""
    found = c.hosts[name].node
    assert found is not None, f"{name} is not running"
    return found


def wait_until(c: SimCluster, condition: Callable[[], bool], limit: float = 60.0) -> None:
    """Run the simulation until `condition` holds, for at most `limit` simulated seconds."""
    assert c.loop.run_until_true(condition, c.now + limit), "the cluster never got there"
