"""REPL commands that act on the cluster: faults (partition, heal, kill, revive, delay), membership
(add, decommission, remove) and maintenance (repair, flush, compact, snapshot, restore, upgrade, config)."""

from __future__ import annotations

from functools import partial
from typing import Any

from bhandar_cli.core.model import SETTINGS, BadInput
from bhandar_cli.core.protocol import NODE_OPERATIONS, NodeOperation
from bhandar_cli.repl.grammar import parse_duration, partition_groups
from bhandar_cli.repl.kinds import (
    DIRECTORY,
    DURATION,
    INTEGER,
    MILLISECONDS,
    MOMENT,
    NAME,
    NEW_NODE,
    NODE,
    NODE_GROUPS,
    VALUE,
    ZONE,
    choices,
    keyword,
)
from bhandar_cli.repl.session import Session
from bhandar_cli.repl.table import Arg, Command, CommandSpec, CommandTable, Option
from bhandar_cli.repl.views_ops import (
    nodes_timed,
    render_add,
    render_config,
    render_decommission,
    render_delay,
    render_heal,
    render_kill,
    render_partition,
    render_remove,
    render_repair,
    render_restore,
    render_revive,
    render_snapshot,
    render_upgrade,
)

TABLE: CommandTable[Session] = CommandTable()
ANY_NODE = (Arg(NODE, optional=True),)  # the node to work on; every live node when not given


@TABLE.command(
    "partition",
    "split the network (unlisted nodes form one more group)",
    args=(Arg(NODE_GROUPS, repeats=True),),
    help="""Groups are separated by | (which may touch the names: A|B); nodes not listed form one
    more group. Messages between groups are lost until heal; a new partition replaces the last.""",
    examples=("partition A | B C",),
    renderer=render_partition,
)
async def partition(session: Session, cmd: Command) -> dict[str, Any]:
    return await session.client.admin.partition(partition_groups(cmd.args))


@TABLE.command(
    "heal",
    "remove every partition",
    help="Every node can reach every other again; hints and anti-entropy then catch up.",
    renderer=render_heal,
)
async def heal(session: Session, cmd: Command) -> dict[str, Any]:
    return await session.client.admin.heal()


@TABLE.command(
    "kill",
    "crash a node (memory lost, data kept)",
    args=(Arg(NODE),),
    help="""No clean shutdown: the node's in-memory state is lost and its durable state stays.
    Its peers notice through failure detection; revive restarts it.""",
    examples=("kill C",),
    renderer=render_kill,
)
async def kill(session: Session, cmd: Command) -> dict[str, Any]:
    return await session.client.admin.kill(cmd.arg(0))


@TABLE.command(
    "revive",
    "restart a killed node",
    args=(Arg(NODE),),
    help="""The node starts again from its durable state; its peers see it up through gossip and
    deliver the hints they kept for it.""",
    examples=("revive C",),
    renderer=render_revive,
)
async def revive(session: Session, cmd: Command) -> dict[str, Any]:
    return await session.client.admin.revive(cmd.arg(0))


def add_interrupted(session: Session, name: str) -> str:
    if name not in session.client.backend.names:
        return f"cancelled: {name} was not started"
    return (
        f"stopped waiting, but {name} was started and goes on joining: status shows when it owns its "
        f"ranges; decommission {name} removes it again"
    )


def decommission_interrupted(name: str) -> str:
    return (
        f"stopped waiting, but {name} goes on leaving once asked: status shows it until it has left "
        "(a decommission that cannot progress stops by itself and the node stays)"
    )


@TABLE.command(
    "add",
    "bootstrap a new node",
    args=(Arg(NEW_NODE),),
    options=(Option("zone", ZONE),),
    help="""NODE is a capital letter, then letters, digits, _ or -. It takes tokens on the ring and
    streams the records of its new ranges from their replicas before it serves them; zone= places
    it (default: the next zone in turn). A replica that is down is not waited for once the other
    replicas of the ranges it loses have streamed them; the progress lines name it
    (docs/membership-and-anti-entropy.md says what that keeps).""",
    examples=("add F zone=z2",),
    renderer=render_add,
    interrupted=lambda session, cmd: add_interrupted(session, cmd.arg(0)),
)
async def add(session: Session, cmd: Command) -> dict[str, Any]:
    return await session.client.admin.add(cmd.arg(0), cmd.options.get("zone"), session.show_progress)


@TABLE.command(
    "decommission",
    "stream a node's ranges away and remove it",
    args=(Arg(NODE),),
    help="""The node streams every range it replicates to the nodes that take it over, then leaves
    the ring and stops; every key stays readable throughout. While it leaves, writes go to the old
    and the new replicas of its ranges. If a node it streams to starts leaving too, what that node
    has not acknowledged goes to the ranges' current owners. If the decommission makes no progress
    for 60 s (a node it streams to is down, or no replica is up to take its hints), it stops: the
    node is normal again, keeps its data, and the command fails saying what it waited for.""",
    examples=("decommission E",),
    renderer=render_decommission,
    interrupted=lambda session, cmd: decommission_interrupted(cmd.arg(0)),
)
async def decommission(session: Session, cmd: Command) -> dict[str, Any]:
    return await session.client.admin.decommission(cmd.arg(0))


@TABLE.command(
    "remove",
    "take a dead or untrusted node out for good, without its help",
    args=(Arg(NODE),),
    help="""An issuing node (one holding the cluster CA key) seals the removal and gossip spreads
    it: every node calls NODE left and refuses its certificate from then on, after restarts too.
    Nothing is streamed: the new replicas of its ranges get the data from the other replicas
    (read repair, anti-entropy), so with N=3 every key stays readable. A healthy node leaves
    with decommission instead.""",
    examples=("kill E; remove E",),
    renderer=render_remove,
)
async def remove(session: Session, cmd: Command) -> dict[str, Any]:
    return await session.client.admin.remove(cmd.arg(0))


@TABLE.command(
    "delay",
    "add latency to every message of a node (0 removes it)",
    args=(Arg(NODE), Arg(MILLISECONDS)),
    help="MS is 0 to 60000 milliseconds; a slow replica shows in trace, metrics and read repair.",
    examples=("delay B 200",),
    renderer=render_delay,
)
async def delay(session: Session, cmd: Command) -> dict[str, Any]:
    text = cmd.arg(1)
    try:
        ms = float(text)
    except ValueError:
        raise BadInput(f"MS must be a number (got {text!r})") from None
    return await session.client.admin.delay(cmd.arg(0), ms)


@TABLE.command(
    "repair",
    "run anti-entropy now",
    args=ANY_NODE,
    help="""On NODE (default: every live node), compare the Merkle tree of each range with the
    range's other replicas and exchange exactly the keys that differ.""",
    examples=("repair", "repair A"),
    renderer=render_repair,
)
async def repair(session: Session, cmd: Command) -> dict[str, Any]:
    return await session.client.admin.repair(_node_or_all(cmd))


def node_operation_command(operation: NodeOperation) -> CommandSpec[Session]:
    """The REPL command of a node operation (core/protocol/node_operations.py): `NAME [NODE]`, on
    one node or every live one, answered with each node's time."""

    async def run(session: Session, cmd: Command) -> dict[str, Any]:
        return await session.client.admin.on_nodes(operation.name, _node_or_all(cmd))

    return CommandSpec(
        operation.name,
        operation.summary,
        run,
        ANY_NODE,
        help=operation.help,
        examples=(f"{operation.name} A",),
        renderer=partial(nodes_timed, operation.done),
    )


for _operation in NODE_OPERATIONS.values():  # flush, compact: here in `help` and the man page
    TABLE.add(node_operation_command(_operation))


@TABLE.command(
    "snapshot",
    "flush and hard-link every node's SSTables",
    args=(Arg(NAME),),
    options=(Option("to", DIRECTORY),),
    help="""NAME is letters, digits, _ . - (up to 64); restore NAME goes back to it. to=DIR
    copies the tables off to DIR/NAME instead of hard-linking them. Every snapshot has a checksum
    manifest (CHECKSUMS), and from then on each node keeps the WALs it writes with the snapshot
    (up to 1 GiB per node; deleting the snapshot's directory releases them), so a restore can
    bring back the writes made after it.""",
    examples=("snapshot before", "snapshot nightly to=backups"),
    renderer=render_snapshot,
)
async def snapshot(session: Session, cmd: Command) -> dict[str, Any]:
    return await session.client.admin.snapshot(cmd.arg(0), cmd.options.get("to"))


@TABLE.command(
    "restore",
    "restore a snapshot (and writes up to a time), then repair",
    args=(Arg(NAME),),
    options=(Option("until", MOMENT),),
    help="""Waits (up to 10 s) for replication and hints to settle, verifies the snapshot's
    checksums (a damaged file refuses the restore and names it), then every node goes back to its
    SSTables of snapshot NAME plus, with until=TIME, every write it logged up to TIME (ISO 8601,
    a time of day today such as 17:45:03, @UNIX-SECONDS, now, or now-30s), and repair runs. The
    report gives RTO (how long it took), the writes replayed, the writes acknowledged later that
    are discarded, and RPO (how far after TIME, or the snapshot, the last of those was made).""",
    examples=("snapshot before; restore before", "restore before until=now"),
    renderer=render_restore,
)
async def restore(session: Session, cmd: Command) -> dict[str, Any]:
    return await session.client.admin.restore(cmd.arg(0), cmd.options.get("until"))


@TABLE.command(
    "upgrade",
    "rolling upgrade, one node at a time",
    options=(Option("to", INTEGER),),
    help="""Each node in turn is flushed, stopped cleanly (it finishes the requests it has and
    refuses new ones, which go to another replica), started again and must serve before the next
    one stops: every peer sees it up, its hints are delivered, its ranges repaired and its reads
    fast again. A step that would leave two replicas of a key down (another node is down) is
    refused. Progress is shown as it goes (node, phase, seconds). With to=N each node starts
    again at wire protocol N (for example upgrade to=5): that is for node processes, in bhandar
    repl --connect DIR (or bhandar cluster upgrade --to N); the REPL's own in-process cluster
    restarts its nodes as they are.""",
    examples=("upgrade",),
    renderer=render_upgrade,
)
async def upgrade(session: Session, cmd: Command) -> dict[str, Any]:
    given = cmd.options.get("to")
    if given is not None and not given.isdigit():
        raise BadInput(f"to must be a wire protocol version number (got {given!r})")
    to = int(given) if given is not None else None
    return await session.client.admin.upgrade(to, session.show_progress)


def _node_or_all(cmd: Command) -> str | None:
    return cmd.arg(0) if cmd.args else None


@TABLE.command(
    "config",
    "show the cluster configuration, or change it one node at a time",
    args=(
        Arg(keyword("set", "show")),
        Arg(choices("config-key", tuple(sorted(SETTINGS))), "KEY", optional=True),
        Arg(VALUE, optional=True),
    ),
    options=(Option("window", DURATION.offering("1s", "2s", "5s")),),
    usage_template="{name} set KEY VALUE {options} | {name} show",
    help=f"""config show lists each node's configuration version and values (the keys set so far,
    and whether every node runs the same version). config set KEY VALUE makes the next version and
    rolls it out one node at a time: each node's health is measured over a window (default 2s:
    QUORUM probes through it, their errors and p99, and whether its peers see it up and it sees
    them), the node takes the new value at runtime, its health is measured again, and only then
    does the next node take it. A regression (more errors, a p99 three times worse, a peer seen
    down) puts that node, and the nodes that took the value before it, back on their previous
    version and stops the rollout, so one bad value never reaches every node at once. An unknown
    key or a bad value is refused before anything changes. A time is seconds or a duration (1500ms,
    2s, 5m, 1d). Progress is shown as it goes (node, phase, seconds). Keys:
    {", ".join(sorted(SETTINGS))}.""",
    examples=("config show", "config set phi_threshold 10", "config set request_timeout 2s window=3s"),
    renderer=render_config,
)
async def config(session: Session, cmd: Command) -> dict[str, Any]:
    if cmd.keyword(0) == "show":
        if len(cmd.args) != 1:
            raise BadInput("usage: config show")
        return await session.client.admin.config_show()
    if len(cmd.args) != 3:
        raise BadInput(f"usage: {cmd.spec.usage}")
    window = cmd.options.get("window")
    seconds = parse_duration(window) if window is not None else None
    if seconds is not None and not 0.1 <= seconds <= 600:
        raise BadInput(f"window must be 0.1s to 600s (got {window})")
    return await session.client.admin.config_set(cmd.arg(1), cmd.arg(2), session.show_progress, seconds)
