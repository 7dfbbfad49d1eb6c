"""What the roles of one node share: `RoleContext`, handed to each role as it is built (core/node.py).

Every role of a node works on the same store, keyspace definitions, membership view, table of
operations in flight, metrics, hint queue and sibling limit, under the node's id. Handed one by
one, they made each role's constructor a list of seven to ten positional arguments in an order of
its own; one frozen object names them once. A role takes from it what it uses, and is handed
besides only what is its own (its collaborators among the roles, the time it starts). The
configuration is not here: `reconfigure` points each role at a new one (core/model/live_config.py
`retune`), and a frozen context would keep the old one.
"""

from __future__ import annotations

from dataclasses import dataclass

from bhandar_cli.core.membership import RingView
from bhandar_cli.core.model import Keyspaces, NodeMetrics, SiblingLimit, Store
from bhandar_cli.core.protocol import IdSource, PendingTable
from bhandar_cli.core.roles.hints import HintQueue


@dataclass(frozen=True, kw_only=True, slots=True)
class RoleContext:
    """The parts of one node its roles share (see the module docstring)."""

    node_id: str
    store: Store  # the indexed store: every write through it keeps the hash index
    keyspaces: Keyspaces
    ring_view: RingView
    ids: IdSource  # op ids, repair and stream session ids: one sequence per node life
    pending: PendingTable  # what this node is coordinating, by pending id
    metrics: NodeMetrics
    hints: HintQueue
    sibling_limit: SiblingLimit
