"""`bhandar cluster up|down|status|kill|start|partition|heal|delay|add`: real node processes
(`cluster upgrade` is in cluster_upgrade_cmd.py).

Parsing and rendering only: processes are started and stopped by fleet/supervisor.py, and everything
else goes through client/client.py over the TCP backend (client/backends/tcp_backend.py), opened by
client/openers.py. Also home of what the other commands on a process cluster share: `run_async`
(known failures as one line) and `on_cluster` (an action on a client of the cluster, printed).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json, fail, fail_json
from bhandar_cli.client import EXIT_FAILED, EXIT_USAGE, OutputFormat
from bhandar_cli.node.net import MIN_COMPATIBLE_VERSION, PROTOCOL_VERSION, PROTOCOLS

if TYPE_CHECKING:
    from bhandar_cli.client import Client, TcpBackend

cluster_app = typer.Typer(
    help="Run a cluster of real node processes on 127.0.0.1 and break it on purpose.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)

CLUSTER_HELP = "Cluster directory (default ./.bhandar or $BHANDAR_CLUSTER)."
DIR_OPTION = typer.Option(None, "--cluster", "--dir", metavar="DIR", help=CLUSTER_HELP)


def run_async(cmd: str, output: OutputFormat | str, body: Callable[[], Awaitable[Any]]) -> Any:
    """Run `body` on trio; known failures become one line on stderr (and JSON) and exit 1."""
    import trio

    from bhandar_cli.core.model import BhandarError, sole_exception
    from bhandar_cli.fleet import ClusterFileError, StartError
    from bhandar_cli.security import PkiError

    async def unwrapped() -> Any:
        try:
            return await body()
        except BaseExceptionGroup as group:  # a failure inside a nursery: say the failure itself
            sole = sole_exception(group)
            if sole is group:
                raise
            raise sole from None

    try:
        return trio.run(unwrapped)
    except (ClusterFileError, StartError) as exc:
        fail_json(
            cmd, output, str(exc), "no_cluster" if isinstance(exc, ClusterFileError) else "start_failed"
        )
    except PkiError as exc:
        fail_json(cmd, output, str(exc), "tls")
    except BhandarError as exc:
        fail_json(cmd, output, str(exc), exc.code)
    except KeyboardInterrupt:
        fail("interrupted", EXIT_FAILED)


def added_line(data: dict[str, Any]) -> str:
    """What `cluster add` says it did, in the REPL's `add` words: the keys the node holds and the
    records streamed to it (a key has one per replica that sent it: one key, three records)."""
    from bhandar_cli.repl import add_counts

    return f"added {data['node']} (zone {data['zone']}): {add_counts(data)} in {data['seconds']:g} s"


def _print(renderable: Any) -> None:
    from rich.console import Console

    Console(soft_wrap=True, width=None if sys.stdout.isatty() else 120).print(renderable)


@cluster_app.command("up")
def up(
    nodes: int = typer.Option(5, "--nodes", "-n", help="Number of nodes (A, B, C, ...), 1 to 26."),
    zones: int = typer.Option(3, "--zones", help="Zones z1, z2, ... assigned round-robin."),
    directory: str | None = DIR_OPTION,
    base_port: int = typer.Option(
        0, "--base-port", help="Node i uses ports P+2i and P+2i+1 (0: free ports)."
    ),
    vnodes: int = typer.Option(8, "--vnodes", help="Tokens (virtual nodes) per node."),
    replicas: int = typer.Option(3, "--replicas", help="Replication factor N of new keyspaces."),
    fsync: str = typer.Option("batch", "--fsync", help="Nodes' WAL fsync policy: always, batch or none."),
    timeout: float = typer.Option(30.0, "--timeout", help="Seconds to wait for the cluster to be ready."),
    hosts: str = typer.Option(
        "", "--hosts", help="Each node's address, in order: 127.0.0.2,127.0.0.3 or 127.0.0.2-6 (a range)."
    ),
    node_args: list[str] = typer.Option([], "--node-arg", hidden=True, help="Extra `node run` option."),
    http_workers: int = typer.Option(
        0,
        "--http-workers",
        metavar="N",
        help="Each node holds its HTTP connections (TLS, parsing) in N processes in front of it, "
        "on other cores (`node run --http-workers`); 0: in the node's own process.",
    ),
    insecure: bool = typer.Option(
        False, "--insecure", help="Plain TCP without certificates (loopback only; for experiments)."
    ),
    protocol: int = typer.Option(
        PROTOCOL_VERSION,
        "--protocol",
        metavar=PROTOCOLS,
        help="Wire protocol the nodes speak (cluster upgrade --to moves it).",
    ),
    no_encrypt: bool = typer.Option(
        False, "--no-encrypt", help="Keep the nodes' WAL and SSTables plain (default: encrypted at rest)."
    ),
    issuers: str = typer.Option(
        "", "--issuers", metavar="A,B", help="Nodes given the CA key, to admit joining machines (default: A)."
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Start node processes (detached, logs in the cluster directory) and wait until they all answer.

    The nodes speak TLS with certificates of a cluster CA made in DIR/tls, unless --insecure, and
    encrypt their data at rest with the key in DIR/keys/data.key, unless --no-encrypt."""
    from bhandar_cli.fleet import parse_hosts

    try:
        addresses = tuple(parse_hosts(hosts)) if hosts else ()
    except ValueError as exc:
        fail(f"--hosts: {exc}", EXIT_USAGE)
    if addresses and len(addresses) != nodes:
        fail(f"--hosts names {len(addresses)} addresses for {nodes} nodes (one per node)", EXIT_USAGE)
    if not 1 <= nodes <= 26:
        fail(f"--nodes must be between 1 and 26 (got {nodes})", EXIT_USAGE)
    if not 1 <= zones <= nodes:
        fail(f"--zones must be between 1 and the number of nodes (got {zones})", EXIT_USAGE)
    if base_port and not 1024 <= base_port <= 65535 - 2 * nodes:
        fail(f"--base-port must be 0 or leave room for {2 * nodes} ports below 65536", EXIT_USAGE)
    if not 1 <= vnodes <= 1024 or not 1 <= replicas <= min(nodes, 9):
        fail("--vnodes must be 1..1024 and --replicas 1..min(nodes, 9)", EXIT_USAGE)
    if fsync not in ("always", "batch", "none"):
        fail(f"--fsync must be always, batch or none (got {fsync!r})", EXIT_USAGE)
    if not MIN_COMPATIBLE_VERSION <= protocol <= PROTOCOL_VERSION:
        fail(f"--protocol must be {MIN_COMPATIBLE_VERSION}..{PROTOCOL_VERSION} (got {protocol})", EXIT_USAGE)
    from bhandar_cli.fleet import parse_issuers

    try:
        issuing = parse_issuers(issuers, nodes, tls=not insecure)
    except ValueError as exc:
        fail(f"--issuers: {exc}", EXIT_USAGE)
    if not 0 <= http_workers <= 64:
        fail(f"--http-workers must be 0..64 (got {http_workers})", EXIT_USAGE)
    extra = [*node_args, "--fsync", fsync, *(("--http-workers", str(http_workers)) if http_workers else ())]
    from bhandar_cli.fleet import node_set_mismatch, resolve_dir, running_cluster
    from bhandar_cli.fleet import up as supervisor_up

    where = resolve_dir(directory)
    grow = "start the first nodes with --nodes, then `cluster add` the others"
    wrong = node_set_mismatch(str(where / "data"), nodes, str(where), grow)
    if wrong and running_cluster(where) is None:  # a running one: up says so itself
        fail(wrong, EXIT_USAGE)

    async def body() -> Any:
        import trio

        started = trio.current_time()
        shape = (where, nodes, zones, base_port, vnodes, replicas, extra, timeout)
        tls, encrypt = not insecure, not no_encrypt
        cluster = await supervisor_up(
            *shape, tls=tls, hosts=addresses, protocol=protocol, encrypt=encrypt, issuers=issuing
        )
        return cluster, trio.current_time() - started

    cluster, took = run_async("cluster up", output, body)
    rows = [
        {"id": n.id, "zone": n.zone, "host": n.host, "port": n.port, "http_port": n.http_port, "pid": n.pid}
        | {"data_dir": n.data_dir, "log": n.log}
        for n in cluster.nodes
    ]
    if output is OutputFormat.json:
        emit_json(
            {"cmd": "cluster up", "ok": True, "dir": cluster.dir, "ready_s": round(took, 3)}
            | {"tls": cluster.tls, "encrypt": cluster.encrypt, "nodes": rows}
        )
        return
    from rich.table import Table

    table = Table("node", "zone", "address", "http", "pid", box=None, title_justify="left")
    for r in rows:
        table.add_row(r["id"], r["zone"], f"{r['host']}:{r['port']}", str(r["http_port"]), str(r["pid"]))
    _print(table)
    security = "TLS, CA in " + str(Path(cluster.dir) / "tls") if cluster.tls else "plain TCP (insecure)"
    security += ", data encrypted at rest" if cluster.encrypt else ", data plain on disk"
    _print(
        f"[green]ready[/green]: {len(rows)} nodes in {took:.1f} s ({security}); "
        f"cluster file {cluster.dir}/cluster.json"
    )


# The columns of `cluster status`: where each node runs, then what it holds and sees.
STATUS_WHERE = ("state", "node", "zone", "address", "http", "pid")
STATUS_STATE = ("keys", "owns", "tokens", "sees down", "protocol", "config")


@cluster_app.command("status")
def status(directory: str | None = DIR_OPTION, output: OutputFormat = OUTPUT_OPTION) -> None:
    """Nodes, zones, addresses, pids, ownership and who sees whom down (like nodetool status)."""

    from bhandar_cli.client import open_tcp_client

    async def body() -> Any:
        async with open_tcp_client(directory) as client:
            data = await client.views.status()
            backend = client.backend
            for node in data["nodes"]:
                where = backend.placement(node["id"])  # a node that joined by token: what gossip says
                node.update({"host": where["host"], "port": where["port"], "http_port": where["http_port"]})
                node.update({"log": where["log"], "joined": where["joined"]})
                node["protocol"] = node.get("protocol") or where["protocol"]  # down: what it starts with
                node["pid"] = where["pid"] if node["up"] else None
            data.update({"dir": backend.cluster.dir, "delays": dict(backend.cluster.delays)})
            return data

    data = run_async("status", output, body)
    if output is OutputFormat.json:
        emit_json(data)
        return
    from rich.table import Table
    from rich.text import Text

    from bhandar_cli.repl import state_text

    table = Table(*STATUS_WHERE, *STATUS_STATE, box=None)
    for n in data["nodes"]:
        up = n["up"]
        table.add_row(
            state_text(n["state"]),
            n["id"],
            n["zone"],
            f"{n['host']}:{n['port']}",
            str(n["http_port"] or "-"),
            str(n["pid"] or "-"),
            str(n.get("keys", "")) if up else "-",
            f"{100 * n['owns']:.1f}%",
            str(n["tokens"]),
            ", ".join(n.get("sees_down", [])) if up else "-",
            str(n.get("protocol") or "-"),
            f"v{n['config']}" if n.get("config") is not None else "-",  # its configuration version
        )
    _print(table)
    for n in data["nodes"]:
        for condition in n.get("conditions", []):
            _print(Text(f"{n['id']} {condition}", style="yellow"))
        if n.get("crashed"):  # why a node is down, when it said so as it stopped
            _print(Text(f"{n['id']} {n['crashed']}", style="bold red"))
    for n in data["nodes"]:
        if n["joined"] == "token":
            said = "joined with a join token: it is in no cluster file; its address is what gossip says"
            _print(Text(f"{n['id']} {said}"))
        elif n["state"] == "left":
            said = "has left the ring, the nodes say; the cluster file still lists it"
            _print(Text(f"{n['id']} {said}", style="yellow"))
    for line in data["summary"]["disagree"]:
        _print(Text(f"the nodes disagree: {line}", style="yellow"))
    for node, ms in data["delays"].items():
        _print(Text(f"delayed: {node} +{ms:g} ms", style="yellow"))
    _print(Text(data["summary"]["line"]))  # the words the REPL and the web page use


@cluster_app.command("down")
def down(directory: str | None = DIR_OPTION, output: OutputFormat = OUTPUT_OPTION) -> None:
    """Stop every node cleanly (admin shutdown, then SIGTERM, then SIGKILL as a last resort);
    returns once their processes have exited, or exits 1 naming those that did not."""
    from bhandar_cli.fleet import STILL_RUNNING, load
    from bhandar_cli.fleet import down as supervisor_down
    from bhandar_cli.fleet import resolve_dir as cluster_file_resolve_dir

    async def body() -> Any:
        return await supervisor_down(load(cluster_file_resolve_dir(directory)))

    outcome = run_async("cluster down", output, body)
    running = [node for node, what in outcome.items() if what == STILL_RUNNING]
    if output is OutputFormat.json:
        emit_json({"cmd": "cluster down", "ok": not running, "nodes": outcome})
    else:
        _print("\n".join(f"{node}: {what}" for node, what in outcome.items()))
    if running:
        fail(f"{', '.join(running)} did not exit, even after SIGKILL", EXIT_FAILED)


def on_cluster(
    cmd: str,
    output: OutputFormat,
    directory: str | None,
    action: Callable[[Client[TcpBackend]], Awaitable[Any]],
) -> Any | None:
    """Run `action` on a client of the running cluster of `directory`: its reply, or None once it
    is printed as JSON (`-o json`); a failure is one line and its exit code (run_async)."""

    from bhandar_cli.client import open_tcp_client

    async def body() -> Any:
        async with open_tcp_client(directory) as client:
            return await action(client)

    data = run_async(cmd, output, body)
    if output is OutputFormat.json:
        emit_json(data)
        return None
    return data


def _fault(
    cmd: str,
    output: OutputFormat,
    directory: str | None,
    action: Callable[[Client[TcpBackend]], Awaitable[Any]],
) -> None:
    data = on_cluster(cmd, output, directory, action)
    if data is None:
        return
    details: dict[str, Callable[[dict[str, Any]], str]] = {
        "kill": lambda d: f"killed {d['node']}" if d["changed"] else f"{d['node']} was not running",
        "start": lambda d: f"started {d['node']}" if d["changed"] else f"{d['node']} is already running",
        "partition": lambda d: "partitioned: " + " | ".join(" ".join(g) for g in d["groups"]),
        "heal": lambda d: "healed: every node reaches every other",
        "delay": lambda d: f"{d['node']}: +{d['ms']:g} ms on every message to or from it",
    }
    _print(details[cmd](data))


@cluster_app.command("remove")
def remove(
    node: str = typer.Argument(..., metavar="NODE", help="The member to take out (dead, or not trusted)."),
    directory: str | None = DIR_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Take a member out for good without its help (admin): an issuing node seals the removal,
    every node calls it left and refuses its certificate from then on, after restarts too. Its
    ranges go to other nodes, which get the data from the remaining replicas. For a healthy node,
    `decommission` (in the REPL) streams its data first."""
    data = on_cluster("remove", output, directory, lambda c: c.admin.remove(node))
    if data is None:
        return
    known = "every live node knows" if data["everyone_knows"] else "gossip is still spreading it"
    _print(f"removed {data['node']} (sealed by {data['by']}; {known})")


@cluster_app.command("kill")
def kill(
    node: str = typer.Argument(..., metavar="NODE", help="Node to crash (SIGKILL)."),
    directory: str | None = DIR_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Crash a node: SIGKILL, no clean shutdown (what is not durable is lost)."""
    _fault("kill", output, directory, lambda c: c.admin.kill(node))


@cluster_app.command("start")
def start(
    node: str = typer.Argument(..., metavar="NODE", help="Node to (re)start."),
    directory: str | None = DIR_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Restart a node with its data directory and ports; waits until it knows the cluster."""

    async def revive(client: Client[TcpBackend]) -> Any:
        data = await client.admin.revive(node)
        data["cmd"] = "start"
        return data

    _fault("start", output, directory, revive)


@cluster_app.command("partition")
def partition(
    groups: list[str] = typer.Argument(
        ..., metavar="GROUPS", help="Groups separated by '|' (quote it): 'A B | C D E'."
    ),
    directory: str | None = DIR_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Cut the network between groups of nodes; unlisted nodes form one more group."""
    parsed = [g.replace(",", " ").split() for g in " ".join(groups).split("|")]
    parsed = [g for g in parsed if g]
    if not parsed:
        fail("partition needs groups, e.g. bhandar cluster partition 'A B | C D E'", EXIT_USAGE)
    _fault("partition", output, directory, lambda c: c.admin.partition(parsed))


@cluster_app.command("heal")
def heal(directory: str | None = DIR_OPTION, output: OutputFormat = OUTPUT_OPTION) -> None:
    """Remove every partition."""
    _fault("heal", output, directory, lambda c: c.admin.heal())


@cluster_app.command("delay")
def delay(
    node: str = typer.Argument(..., metavar="NODE", help="Node whose messages are slowed."),
    ms: float = typer.Argument(
        ..., metavar="MS", help="Extra milliseconds per message to or from it (0 removes it)."
    ),
    directory: str | None = DIR_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Slow every message to or from a node."""
    _fault("delay", output, directory, lambda c: c.admin.delay(node, ms))


@cluster_app.command("add")
def add(
    node: str | None = typer.Argument(
        None, metavar="[NODE]", help="Name of the new node (default: the next free name)."
    ),
    zone: str | None = typer.Option(None, "--zone", help="Its zone (default: the zones in turn)."),
    directory: str | None = DIR_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Start a new node that joins the running cluster; waits until it owns its ranges (progress
    on stderr: its sources, and what it does about one that is down)."""

    from bhandar_cli.fleet import names_taken
    from bhandar_cli.host import next_node_name
    from bhandar_cli.repl import node_progress, sources_down_lines

    async def join(client: Client[TcpBackend]) -> Any:
        # Not a name the nodes know either (one that joined by token, or left, is in no file).
        known = (await client.backend.membership()).members
        name = node or next_node_name(names_taken(client.backend.cluster) | set(known))
        with node_progress(sys.stderr) as progress:
            return await client.admin.add(name, zone, progress)

    data = on_cluster("add", output, directory, join)
    if data is None:
        return
    _print(added_line(data))
    for line in sources_down_lines(data):
        _print(line)
