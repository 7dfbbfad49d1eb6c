"""Keyspaces exist only once created: sim tests create the ones they use through this helper."""

from __future__ import annotations

from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.protocol.messages import KeyspaceRequest, KeyspaceResult
from bhandar_cli.sim.sim_cluster import SimCluster


def create_keyspace(c: SimCluster, ks: KeyspaceDef | str, via: str = "A") -> KeyspaceDef:
    """Create `ks` through `via` as a client would, then run until every live node knows it (as
    the REPL's keyspace create waits for), so the test's first request may go anywhere."""
    definition = KeyspaceDef(ks, n=c.config.default_n) if isinstance(ks, str) else ks
    result = c.call(via, KeyspaceRequest(c.new_rid(), definition))
    assert isinstance(result, KeyspaceResult), result

    def everyone_knows() -> bool:
        nodes = [h.node for name, h in c.hosts.items() if c.is_alive(name)]
        return all(node is not None and definition.name in node.keyspaces for node in nodes)

    assert c.loop.run_until_true(everyone_knows, c.now + 10.0), f"{definition.name} did not reach every node"
    return definition
