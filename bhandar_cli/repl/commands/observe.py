"""REPL commands that show the cluster: status, ring, prefs, clock, merkle, hints, members, metrics,
hot."""

from __future__ import annotations

from typing import Any

from bhandar_cli.client import ClockView, HintsView, MembersView, PrefsView, RingOwnershipView, StatusView
from bhandar_cli.core.model import BadInput, metrics_parts
from bhandar_cli.repl.kinds import INTEGER, KEY, KEYSPACE, NODE, choices
from bhandar_cli.repl.session import Session
from bhandar_cli.repl.table import Arg, Command, CommandTable, Option
from bhandar_cli.repl.views_cluster import (
    render_clock,
    render_hints,
    render_metrics,
    render_prefs,
    render_ring,
    render_status,
)
from bhandar_cli.repl.views_hot import render_hot
from bhandar_cli.repl.views_ops import render_members, render_merkle

TABLE: CommandTable[Session] = CommandTable()


@TABLE.command(
    "status",
    "nodes: state, zone, tokens, ownership, keys, hints",
    help="""One row per node: its state, zone, tokens, share of the ring, keys and hints it holds,
    and the peers it believes down; then ranges streaming to joining or from leaving nodes, and
    the cluster in one line, as the bottom bar and the web page say it (5/5 running · down C).
    The states: up; suspected (running, but a peer that can reach it believes it down);
    partitioned (running, cut off from the other groups by partition); down (its process does
    not run); joining, leaving; left.""",
    renderer=render_status,
)
async def status(session: Session, cmd: Command) -> StatusView:
    return await session.client.views.status()


@TABLE.command(
    "ring",
    "token ranges, owners and ownership per node",
    help="""The ring drawn as a circle of owner letters, clockwise from token 0; each node's share
    of the ring; and every token range with its owner.""",
    renderer=render_ring,
)
async def ring(session: Session, cmd: Command) -> RingOwnershipView:
    return await session.client.views.ring()


@TABLE.command(
    "prefs",
    "the key's token, replicas (with zones) and fallbacks",
    args=(Arg(KEYSPACE), Arg(KEY)),
    help="""Where a key lives: its token, the node owning the first token clockwise, the keyspace's
    N replicas with their zones and whether they are up, then the fallbacks a write uses (with a
    hint) while a replica is down.""",
    examples=("prefs kv cart:42",),
    renderer=render_prefs,
)
async def prefs(session: Session, cmd: Command) -> PrefsView:
    return await session.client.views.prefs(cmd.arg(0), cmd.arg(1))


@TABLE.command(
    "clock",
    "what each replica holds, with descends/concurrent relations",
    args=(Arg(KEYSPACE), Arg(KEY)),
    help="""Asks each replica of the key (and any fallback holding it) what it stores: dots, version
    vectors and values, or counter entries; then how the versions relate (equal, descends,
    concurrent). It reads replicas directly and repairs nothing.""",
    examples=("clock kv cart:42",),
    renderer=render_clock,
)
async def clock(session: Session, cmd: Command) -> ClockView:
    return await session.client.views.clock(cmd.arg(0), cmd.arg(1))


@TABLE.command(
    "merkle",
    "compare two replicas' Merkle trees",
    args=(Arg(NODE), Arg(NODE)),
    help="""Compares the two nodes' Merkle trees over every range both replicate, as anti-entropy
    does, without repairing: each differing range shows its keys and the tree down to them.""",
    examples=("merkle A B",),
    renderer=render_merkle,
)
async def merkle(session: Session, cmd: Command) -> dict[str, Any]:
    return await session.client.admin.merkle(cmd.arg(0), cmd.arg(1))


@TABLE.command(
    "hints",
    "hinted-handoff queues: holder, target, count, oldest",
    help="""Writes a fallback node keeps for a replica that was down: who holds them, for whom, how
    many and how old the oldest is. They are delivered once the target is reachable again.""",
    renderer=render_hints,
)
async def hints(session: Session, cmd: Command) -> HintsView:
    return await session.client.views.hints()


@TABLE.command(
    "members",
    "the gossip membership view of one node",
    options=(Option("from", NODE),),
    help="""The membership as one node sees it through gossip and phi-accrual failure detection
    (from=, default: the first live node): each member's zone, status, up or down, phi, heartbeat,
    generation and tokens; then the members the live nodes' views disagree about, with each other
    or with the facts, and why (a process that stopped and who has not noticed yet, a partition, a
    restart not yet gossiped, late heartbeats).""",
    examples=("members from=B",),
    renderer=render_members,
)
async def members(session: Session, cmd: Command) -> MembersView:
    return await session.client.admin.members(cmd.options.get("from"))


# What `metrics show=PART` keeps of the reply (besides cmd and ok): the metrics table says.
METRICS_PARTS: dict[str, tuple[str, ...]] = metrics_parts()


@TABLE.command(
    "metrics",
    "latency per operation and level, success, stale reads, repairs, hints",
    help="""Per operation and consistency level: count, success rate and p50/p99/max latency; then
    stale reads, read repairs, hints, anti-entropy (sessions, keys repaired, the oldest range
    repair) and, on disk-backed nodes, storage per node. show=ops, show=repairs or show=storage
    shows that part alone.""",
    options=(Option("show", choices("part", ("all", *METRICS_PARTS))),),
    examples=("metrics show=repairs",),
    renderer=render_metrics,
)
async def metrics(session: Session, cmd: Command) -> dict[str, Any]:
    show = cmd.options.get("show", "all")
    if show != "all" and show not in METRICS_PARTS:
        raise BadInput(f"show= takes all, {', '.join(METRICS_PARTS)}; not {show!r}")
    data = await session.client.views.metrics()
    if show == "all":
        return data
    return {k: v for k, v in data.items() if k in ("cmd", "ok", *METRICS_PARTS[show])}


@TABLE.command(
    "hot",
    "the keys clients ask for most: rate, share, replicas, node load",
    args=(Arg(INTEGER, optional=True),),
    help="""The N keys (default 10, at most 32) with the highest client request rates, from a
    bounded sketch each node keeps of the requests that enter it (rates decay over about ten
    seconds): each key's requests per second, its share of all requests, its replicas and the nodes
    its requests entered at; then the share of all requests each node serves as a replica of those
    keys. Virtual nodes spread keys, not requests: a hot key loads its N replicas whatever the
    tokens.""",
    examples=("hot", "hot 3"),
    renderer=render_hot,
)
async def hot(session: Session, cmd: Command) -> dict[str, Any]:
    text = cmd.arg(0) if cmd.args else "10"
    if not text.isdigit():
        raise BadInput(f"hot takes a number of keys, not {text!r}")
    return await session.client.views.hot(int(text))
