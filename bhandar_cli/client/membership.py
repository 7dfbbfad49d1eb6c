"""The cluster's membership as its nodes hold it: the gossip table of every node that answered
(each member's state: core/membership/members.py), merged as gossip merges, the freshest state of
each member winning, and what the nodes disagree about.

Every view of the client takes its nodes, zones, ring and statuses from here (cluster_views.py,
cluster_health.py), so `status`, the REPL's bar, `ring`, `prefs` and the web page show the same
members: a node that joined with a join token (in no cluster file), a node of the cluster file
that the nodes say has left, a member that is down. The cluster file of a process cluster is only
where to start asking (client/backends/tcp_backend.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from bhandar_cli.core.membership import MemberState, Ring, node_tokens

ASK_EVERY = 1.0  # seconds a membership is reused: the REPL's bar asks several times a second
LEFT = "left"
OWNING = ("normal", "leaving")  # the statuses of the current ring's members (members.py)
UNKNOWN = "unknown"  # what a node that has not heard of a member says of it


# Whose tables the membership is from, and what they disagree on (`status`'s `membership`). "from"
# is a keyword, hence the functional form.
MembershipView = TypedDict("MembershipView", {"from": list[str], "disagree": list[str]})


@dataclass(frozen=True)
class ClusterMembership:
    """Who is in the cluster by the nodes' own tables."""

    members: Mapping[str, MemberState] = field(default_factory=dict)  # every member any node knows
    views: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # node asked -> member -> status

    @property
    def answered(self) -> list[str]:
        """The nodes whose tables this is made of."""
        return sorted(self.views)

    def status_of(self, name: str) -> str | None:
        member = self.members.get(name)
        return None if member is None else member.status

    def in_service(self) -> list[str]:
        """Members that have not left, by name."""
        return sorted(m for m, state in self.members.items() if state.status != LEFT)

    def ring(self) -> Ring | None:
        """The current ring (normal and leaving members, with their tokens), as the nodes route
        by it; None when no node answered."""
        if not self.views:
            return None
        owning = sorted(
            (m for m in self.members.values() if m.status in OWNING and m.tokens), key=lambda m: m.id
        )
        return Ring({m.id: m.tokens for m in owning}, {m.id: m.zone for m in owning})

    def disagreements(self) -> list[str]:
        """One sentence per member whose status the nodes do not agree on (a node that has not
        heard of it yet included), e.g. `E: normal to A, B; not known to C`: a change still
        spreading, or a node cut off from it."""
        out = []
        for name in sorted(self.members):
            said: dict[str, list[str]] = {}
            for node, view in sorted(self.views.items()):
                said.setdefault(view.get(name, UNKNOWN), []).append(node)
            if len(said) > 1:
                parts = [
                    ("not known to " if status == UNKNOWN else f"{status} to ") + ", ".join(nodes)
                    for status, nodes in sorted(said.items(), key=lambda kv: (kv[0] == UNKNOWN, kv[0]))
                ]
                out.append(f"{name}: " + "; ".join(parts))
        return out

    def to_json(self) -> MembershipView:
        return {"from": self.answered, "disagree": self.disagreements()}


def merge_tables(tables: Mapping[str, Iterable[MemberState]]) -> ClusterMembership:
    """The membership of the tables of the nodes that answered (node -> the states it holds)."""
    members: dict[str, MemberState] = {}
    views: dict[str, dict[str, str]] = {}
    for node, states in tables.items():
        view = views[node] = {}
        for state in states:
            view[state.id] = state.status
            held = members.get(state.id)
            if held is None or state.version > held.version:
                members[state.id] = state
    return ClusterMembership(members, views)


def state_of_row(row: Mapping[str, Any]) -> MemberState:
    """A member's state from a row of a node's `members` view asked with `placement`."""
    name = str(row["id"])
    positions: Iterable[int] | None = row.get("token_positions")
    if positions is None:
        # A node of an earlier version sends only a count: every node places its tokens by the
        # ring's scheme (core/membership/ring.py), so the count gives them.
        positions = node_tokens(name, int(row.get("tokens") or 0))
    return MemberState(
        id=name,
        zone=str(row.get("zone") or name),
        tokens=tuple(int(t) for t in positions),
        status=str(row.get("status") or "normal"),
        generation=int(row.get("generation") or 0),
        heartbeat=int(row.get("heartbeat") or 0),
        address=str(row.get("address") or ""),
        http=str(row.get("http") or ""),
    )
