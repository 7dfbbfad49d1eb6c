"""The one vocabulary of node state, and the one function that summarises a cluster in it.

Every face says what a node is in these words, computed here from the same facts: the REPL's
bottom bar, `status`, the REPL's notices, the web page's header and cards, and `cluster status`.

Who the nodes are is the membership as the nodes hold it (client/membership.py): a node that
joined with a join token is one of them, a node the nodes say has left is *left* even while it is
down, and what the nodes' tables disagree on is said beside the summary (`disagree`).

Facts come first. A node whose process does not run is *down* at once, whatever its peers have
noticed yet; a node behind a partition the operator made is *partitioned* away, not down, though
the other side's failure detectors believe it is. A running node that a peer *on its own side*
believes down is *suspected* (a detector's opinion against the facts: a slow node, or one that
was just revived). *joining*, *leaving* and *left* are its membership status. What the detectors
believe is kept beside the state (`seen_down_by`); `noticed` says when they have all caught up
with the facts, which is when the REPL announces a change (one line per change, never one per
node that noticed it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from bhandar_cli.core.model import BhandarError

if TYPE_CHECKING:
    from bhandar_cli.client.backend import Backend
    from bhandar_cli.client.membership import ClusterMembership
    from bhandar_cli.core import NodeInfo

UP = "up"
JOINING = "joining"
LEAVING = "leaving"
SUSPECTED = "suspected"
PARTITIONED = "partitioned"
DOWN = "down"
LEFT = "left"
STATES = (UP, JOINING, LEAVING, SUSPECTED, PARTITIONED, DOWN, LEFT)

# How a state is written where it stands alone (a card, a table cell): a mark, then the word,
# so the state is never told by colour only.
MARKS = {
    UP: "● UP",
    JOINING: "◐ JOINING",
    LEAVING: "◑ LEAVING",
    SUSPECTED: "▲ SUSPECTED",
    PARTITIONED: "✂ PARTITIONED",
    DOWN: "✖ DOWN",
    LEFT: "○ LEFT",
}
MEANINGS = {
    UP: "running, and no running peer believes it down",
    JOINING: "running, streaming in the ranges it will own",
    LEAVING: "running, streaming its ranges out before it leaves",
    SUSPECTED: "running, but a peer on its side of the network believes it down",
    PARTITIONED: "running, cut off from the other partition groups (they believe it down)",
    DOWN: "its process does not run (killed or crashed)",
    LEFT: "decommissioned: no longer part of the ring",
}


class NodeFacts(TypedDict):
    """What `summarise` is told of one node (a `status` node row says more)."""

    id: str
    up: bool  # its process runs
    status: str  # its membership status
    sees_down: list[str]  # the peers it believes down


class NodeHealthView(TypedDict):
    """A node in the vocabulary, as JSON."""

    id: str
    state: str
    running: bool
    group: int | None
    seen_down_by: list[str]


class HealthView(TypedDict):
    """The summary as JSON (`status`'s `summary`, the web page's header)."""

    line: str
    nodes: int
    running: int
    states: dict[str, list[str]]
    partitions: list[list[str]]
    disagree: list[str]


@dataclass(frozen=True)
class NodeHealth:
    id: str
    state: str  # one of STATES
    running: bool
    status: str  # membership status: normal, joining, leaving, left
    group: int | None  # its partition group (1-based) while the network is partitioned
    seen_down_by: tuple[str, ...]  # running peers whose failure detector believes it down

    def to_json(self) -> NodeHealthView:
        return {
            "id": self.id,
            "state": self.state,
            "running": self.running,
            "group": self.group,
            "seen_down_by": list(self.seen_down_by),
        }


@dataclass(frozen=True)
class ClusterHealth:
    nodes: tuple[NodeHealth, ...]
    groups: tuple[tuple[str, ...], ...] = ()  # partition groups (empty: one network)
    disagree: tuple[str, ...] = ()  # members whose status the nodes' tables differ on, in words

    def named(self, *states: str) -> list[str]:
        return [n.id for n in self.nodes if n.state in states]

    def node(self, name: str) -> NodeHealth | None:
        return next((n for n in self.nodes if n.id == name), None)

    @property
    def members(self) -> int:
        """Nodes that are part of the cluster (those that left are not)."""
        return sum(1 for n in self.nodes if n.state != LEFT)

    @property
    def running(self) -> int:
        return sum(1 for n in self.nodes if n.running and n.state != LEFT)

    def parts(self) -> list[tuple[str, str]]:
        """The summary as (kind, text) parts; kind is the state a part names ("" for the count and
        the partition), so a face can colour or shorten it."""
        parts: list[tuple[str, str]] = [("", f"{self.running}/{self.members} running")]
        if down := self.named(DOWN):
            parts.append((DOWN, "down " + ", ".join(down)))
        for n in self.nodes:
            if n.state == SUSPECTED:
                parts.append((SUSPECTED, f"{n.id} suspected by {', '.join(n.seen_down_by)}"))
        if len(self.groups) > 1:
            parts.append((PARTITIONED, "partitioned " + show_groups(self.groups)))
        for state in (JOINING, LEAVING, LEFT):
            if names := self.named(state):
                parts.append((state, f"{state} {', '.join(names)}"))
        if self.disagree:
            parts.append(("", "nodes disagree on " + ", ".join(d.split(":")[0] for d in self.disagree)))
        return parts

    def line(self) -> str:
        """The cluster in one line: `5/5 running · partitioned {A} | {B, C} | {D, E}`."""
        return " · ".join(text for _, text in self.parts())

    def to_json(self) -> HealthView:
        return {
            "line": self.line(),
            "nodes": self.members,
            "running": self.running,
            "states": {state: self.named(state) for state in STATES},
            "partitions": [list(g) for g in self.groups],
            "disagree": list(self.disagree),
        }


def show_groups(groups: Iterable[Iterable[str]]) -> str:
    return " | ".join("{" + ", ".join(g) + "}" for g in groups)


def summarise(
    nodes: Iterable[NodeFacts], partitions: Sequence[Sequence[str]] = (), disagree: Sequence[str] = ()
) -> ClusterHealth:
    """The cluster in the vocabulary, from `status`-shaped nodes (each with `id`, `up` (its process
    runs), `status` and `sees_down`, the peers it believes down), the partition groups and what the
    nodes' membership tables disagree on (ClusterMembership.disagreements)."""
    facts = list(nodes)
    groups = tuple(tuple(g) for g in partitions) if len(partitions) > 1 else ()
    group_of = {name: i + 1 for i, g in enumerate(groups) for name in g}
    running = {n["id"] for n in facts if n["up"] and n["status"] != LEFT}
    seen_by: dict[str, list[str]] = {}
    for n in facts:
        if n["id"] in running:
            for peer in n["sees_down"]:
                seen_by.setdefault(peer, []).append(n["id"])
    out = []
    for n in facts:
        name, status = n["id"], n["status"] or "normal"
        by = tuple(sorted(seen_by.get(name, [])))
        group = group_of.get(name)
        if status == LEFT:
            state = LEFT
        elif name not in running:
            state = DOWN
        elif any(group_of.get(p) == group for p in by):
            state = SUSPECTED  # by a peer that can reach it: no partition explains that
        elif group is not None:
            state = PARTITIONED
        elif status in (JOINING, LEAVING):
            state = status
        else:
            state = UP
        out.append(NodeHealth(name, state, name in running, status, group, by))
    return ClusterHealth(tuple(out), groups, tuple(disagree))


def member_status(name: str, up: bool, info: NodeInfo, membership: ClusterMembership) -> str:
    """A node's membership status: its own word while it runs, else what the nodes' tables say
    (a node that left and was stopped is left, not down)."""
    if up and "status" in info:
        return info["status"]
    return membership.status_of(name) or "normal"


async def cluster_health(backend: Backend) -> ClusterHealth:
    """The summary from the nodes' own views, without counting keys: cheap enough for a status
    bar refreshed several times a second."""
    membership = await backend.membership()
    nodes: list[NodeFacts] = []
    for name in backend.names:
        up = backend.is_alive(name)
        info: NodeInfo = await backend.node_info(name, counts=False) if up else {}
        peers = info.get("peers") or {}
        nodes.append(
            {
                "id": name,
                "up": up,
                "status": member_status(name, up, info, membership),
                "sees_down": [p for p, ok in peers.items() if not ok],
            }
        )
    return summarise(nodes, backend.partitions(), membership.disagreements())


# --- notices: a change is announced when the failure detectors have caught up with it ----------


def noticed(node: NodeHealth, health: ClusterHealth) -> str | None:
    """What the running peers' detectors say of `node`, once they agree with the facts: "down"
    (every running peer sees it down), "partitioned" (exactly the peers across the partition do),
    "suspected", "up" (nobody does); None while they are still catching up."""
    if node.state == LEFT:
        return None
    peers = {n.id for n in health.nodes if n.running and n.state != LEFT and n.id != node.id}
    by = set(node.seen_down_by)
    if node.state == DOWN:
        return DOWN if by >= peers else None
    if node.state == SUSPECTED:
        return SUSPECTED
    if not by:
        return UP
    if node.state == PARTITIONED:
        across = {p for p in peers if (o := health.node(p)) is not None and o.group != node.group}
        return PARTITIONED if by == across else None
    return None


@dataclass
class Notices:
    """Announces each change of what the cluster has noticed once: `fold` is given each new
    summary (and the nodes' other notes: joins, departures) and answers the lines to print.

    A partition is announced as one change of the cluster (when every group sees the others
    down), and so is its heal (when every node sees every other up again), not node by node."""

    said: dict[str, str] = field(default_factory=dict)  # node -> what was last noticed of it
    partition: tuple[tuple[str, ...], ...] = ()  # the partition last announced as noticed
    started: bool = False  # the first summary only sets what is known: nothing changed yet

    def fold(
        self, health: ClusterHealth, notes: Iterable[tuple[str, Mapping[str, Any], str]] = ()
    ) -> list[str]:
        lines: list[str] = []
        for text, data, _observer in notes:
            if "peer" not in data and text not in lines:  # a detector's own verdicts are below
                lines.append(text)
        changed: dict[tuple[str, str], list[NodeHealth]] = {}
        for node in health.nodes:
            now = noticed(node, health)
            before = self.said.get(node.id)
            if now == SUSPECTED and before in (DOWN, PARTITIONED):
                now = None  # the detectors catching up after a revive or a heal: not news
            if now is None:
                if node.state == LEFT:
                    self.said.pop(node.id, None)  # a node that left is not down, and no news
                continue
            self.said[node.id] = now
            if before is not None and before != now and PARTITIONED not in (before, now):
                changed.setdefault((before, now), []).append(node)
        for name in list(self.said):
            if health.node(name) is None:
                del self.said[name]  # gone from the cluster (retired after it left)
        if self.started:
            lines += [_notice(before, now, nodes) for (before, now), nodes in changed.items()]
            lines += self._partition(health)
        else:
            self.partition = health.groups if PARTITIONED in self.said.values() else ()
        self.started = True
        return lines

    def _partition(self, health: ClusterHealth) -> list[str]:
        cut = [n.id for n in health.nodes if n.group is not None and n.state != DOWN]
        if health.groups and health.groups != self.partition:
            if cut and all(self.said.get(name) == PARTITIONED for name in cut):
                self.partition = health.groups
                return [f"partition noticed: each group sees the others down, {show_groups(health.groups)}"]
        elif self.partition and not health.groups and PARTITIONED not in self.said.values():
            self.partition = ()
            return ["heal noticed: every node sees every other up again"]
        return []


def _notice(before: str, now: str, nodes: list[NodeHealth]) -> str:
    names = ", ".join(n.id for n in nodes)
    if now == DOWN:
        by = sorted({p for n in nodes for p in n.seen_down_by})
        return f"down: {names}" + (f" (noticed by {', '.join(by)})" if by else "")
    if now == SUSPECTED:
        return "suspected: " + ", ".join(f"{n.id} (by {', '.join(n.seen_down_by)})" for n in nodes)
    if before == DOWN:
        return f"up again: {names}"
    return f"no longer suspected: {names}"


async def news(backend: Backend, notices: Notices) -> tuple[ClusterHealth | None, list[str]]:
    """The cluster's summary (None if no node answers) and what it noticed on its own since
    `notices` last looked: the lines a session prints after a command (the interactive REPL and
    a script alike)."""
    try:
        health = await cluster_health(backend)
    except BhandarError:
        return None, []
    return health, notices.fold(health, await backend.drain_notes())
