"""`bhandar node run`: one node process in the foreground (what `cluster up` starts, detached).

Also runnable as `python -m bhandar_cli.cli.node_cmd run ...`, which is how the supervisor starts
nodes: it does not depend on a `bhandar` script being on PATH.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import typer

from bhandar_cli.cli.output import fail
from bhandar_cli.client import EXIT_USAGE
from bhandar_cli.core.model import LEVELS, NODE_ID, NODE_ID_RULE, one_of
from bhandar_cli.node.net import MIN_COMPATIBLE_VERSION, PROTOCOL_VERSION, PROTOCOLS
from bhandar_cli.security import JOIN_TOKEN_ENV

MAX_TOKEN_TEXT = 4096  # a join token is some 150 characters; a larger file is not one

node_app = typer.Typer(
    help="Run one node of a process cluster (cluster up starts these for you).",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@node_app.callback()
def _node() -> None:
    """Run one node of a process cluster."""


def parse_seeds(text: str) -> tuple[tuple[str, int], ...]:
    seeds: list[tuple[str, int]] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        host, sep, port = part.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            fail(f"--seeds takes HOST:PORT,HOST:PORT,... (got {part!r})", EXIT_USAGE)
        seeds.append((host, int(port)))
    return tuple(seeds)


def join_token_source(token_file: str) -> Callable[[], str]:
    """Where the join token comes from: --token-file PATH, --token-file - (standard input), else
    $BHANDAR_JOIN_TOKEN; never the command line, which every local user can read in
    /proc/PID/cmdline (the environment, /proc/PID/environ, is the owner's only).

    Read only when it is needed (a restart with its certificate in place joins nothing, and its
    token file may be gone); the variable is taken out of the environment at once, so nothing
    this node starts inherits it. Exits 2 with one line when there is no token to read."""
    if token_file:
        return lambda: _read_token_file(token_file)
    from_env = os.environ.pop(JOIN_TOKEN_ENV, "")
    if not from_env.strip():
        fail(
            f"--join needs the join token: --token-file PATH, --token-file - (standard input) or "
            f"${JOIN_TOKEN_ENV}",
            EXIT_USAGE,
        )
    return lambda: from_env


def _read_token_file(token_file: str) -> str:
    where = "standard input" if token_file == "-" else token_file
    try:
        if token_file == "-":
            text = sys.stdin.readline(MAX_TOKEN_TEXT)
        else:
            with open(token_file, encoding="utf-8") as file:
                text = file.read(MAX_TOKEN_TEXT)
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--token-file: cannot read {where}: {getattr(exc, 'strerror', None) or exc}", EXIT_USAGE)
    if not text.strip():
        fail(f"--token-file: {where} holds no join token", EXIT_USAGE)
    return text


@node_app.command("run")
def run(
    node_id: str = typer.Option(..., "--id", help="This node's name (A, B, ...)."),
    port: int = typer.Option(0, "--port", help="Peer and RPC port (0: any free port)."),
    data_dir: str = typer.Option(..., "--data-dir", help="Where the node keeps its data."),
    seeds: str = typer.Option("", "--seeds", help="HOST:PORT,... of nodes to join through."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    http_port: int = typer.Option(0, "--http-port", help="HTTP API port (0: any free port, -1: none)."),
    http_workers: int = typer.Option(
        0,
        "--http-workers",
        metavar="N",
        help="Hold the HTTP connections (TLS, parsing, their limits) in N processes in front of the "
        "node, sharing its port, so they run on other cores; 0: in the node's own process.",
    ),
    zone: str = typer.Option("z1", "--zone", help="Availability zone of this node."),
    vnodes: int = typer.Option(8, "--vnodes", help="Tokens per node (the same on every node)."),
    replicas: int = typer.Option(3, "--replicas", help="Replication factor of new keyspaces."),
    fsync: str = typer.Option("batch", "--fsync", help="WAL fsync policy: always, batch or none."),
    join: str = typer.Option(
        "",
        "--join",
        metavar="HOST:PORT",
        help=f"Join a cluster through this node, with the join token of --token-file or ${JOIN_TOKEN_ENV}.",
    ),
    token_file: str = typer.Option(
        "",
        "--token-file",
        metavar="PATH",
        help="Read the join token (from `bhandar cluster join-token create`) from PATH (mode 0600 "
        f"advisable), or from standard input with -; without it, ${JOIN_TOKEN_ENV}. Never give the "
        "token itself as an argument: every user of the machine can read a command line.",
    ),
    literal_token: str = typer.Option("", "--token", hidden=True, help="Refused: see --token-file."),
    ca_key: str = typer.Option(
        "", "--ca-key", help="The cluster CA's key (DIR/tls/ca.key): this node may admit new nodes."
    ),
    frame_timeout: float = typer.Option(
        5.0, "--frame-timeout", hidden=True, help="Seconds a client may leave a frame half-sent."
    ),
    tls_dir: str | None = typer.Option(
        None,
        "--tls-dir",
        help="Directory with ca.crt, node.crt and node.key: speak TLS (without it, loopback only).",
    ),
    auth_file: str = typer.Option(
        "",
        "--auth-file",
        metavar="FILE",
        help="Token records to start with: FILE (JSON, mode 0600) holds them, hashed. The node "
        "checks tokens with or without it (it learns more from its peers).",
    ),
    admit_anyone: bool = typer.Option(
        False,
        "--admit-anyone",
        help="Check no tokens: every client may do anything (loopback addresses only; what "
        "`cluster up --insecure` runs).",
    ),
    snapshot_dir: str = typer.Option(
        "", "--snapshot-dir", metavar="DIR", help="Where snapshots go (default: DATA_DIR/../snapshots)."
    ),
    bootstrap: bool = typer.Option(
        False, "--bootstrap", help="Join a running cluster: stream this node's ranges, then serve."
    ),
    data_key_file: str = typer.Option(
        "",
        "--data-key-file",
        metavar="FILE",
        help="Encrypt the WAL and SSTables at rest with the data key in FILE (base64, mode 0600; "
        "cluster up makes DIR/keys/data.key). Without it: $BHANDAR_DATA_KEY, else plain.",
    ),
    protocol: int = typer.Option(
        PROTOCOL_VERSION,
        "--protocol",
        metavar=PROTOCOLS,
        help="Newest wire protocol this node reads and writes (1 to 3: as a build of that version "
        f"does, to run a mixed cluster; `cluster upgrade --to {PROTOCOL_VERSION}` moves it).",
    ),
    config: str = typer.Option(
        "", "--config", hidden=True, metavar="JSON", help="Cluster configuration to start with."
    ),
) -> None:
    """Run one node until it is told to stop (RPC shutdown, SIGTERM or Ctrl-C)."""
    if literal_token:  # before anything: the token is on view in /proc/PID/cmdline while we run
        fail(
            "a join token on the command line is readable by every user of this machine; pass it with "
            f"--token-file PATH, --token-file - (standard input) or ${JOIN_TOKEN_ENV} instead",
            EXIT_USAGE,
        )
    if not NODE_ID.fullmatch(node_id):
        fail(f"--id must be {NODE_ID_RULE} (got {node_id!r})", EXIT_USAGE)
    if not 0 <= port < 65536 or not -1 <= http_port < 65536:
        fail("ports must be between 0 and 65535", EXIT_USAGE)
    if not 0 <= http_workers <= 64:
        fail(f"--http-workers must be 0..64 (got {http_workers})", EXIT_USAGE)
    if http_workers and http_port < 0:
        fail("--http-workers needs the HTTP API: leave out --http-port -1", EXIT_USAGE)
    if fsync not in ("always", "batch", "none"):
        fail(f"--fsync must be always, batch or none (got {fsync!r})", EXIT_USAGE)
    if not 1 <= vnodes <= 1024 or not 1 <= replicas <= 9:
        fail("--vnodes must be 1..1024 and --replicas 1..9", EXIT_USAGE)
    if not 0.05 <= frame_timeout <= 3600:
        fail("--frame-timeout must be between 0.05 and 3600 seconds", EXIT_USAGE)

    if config:
        from bhandar_cli.core.model import BadInput, LiveConfig

        try:
            LiveConfig.from_plain(json.loads(config))
        except (ValueError, BadInput) as exc:
            fail(f"--config: {exc}", EXIT_USAGE)
    if not MIN_COMPATIBLE_VERSION <= protocol <= PROTOCOL_VERSION:
        fail(f"--protocol must be {MIN_COMPATIBLE_VERSION}..{PROTOCOL_VERSION} (got {protocol})", EXIT_USAGE)
    from bhandar_cli.node import ListenRefused, NodeCrashed, NodeOptions, run_node
    from bhandar_cli.security import PkiError

    seed_list = parse_seeds(seeds)
    if token_file and not join:
        fail("--token-file goes with --join HOST:PORT", EXIT_USAGE)
    if join:
        join_seeds = parse_seeds(join)
        if len(join_seeds) != 1:
            fail("--join takes one HOST:PORT", EXIT_USAGE)
        if tls_dir is not None:
            fail("--join keeps the node's certificate in DATA_DIR/tls; leave out --tls-dir", EXIT_USAGE)
        if admit_anyone:
            fail("a node that joins a cluster checks its tokens; leave out --admit-anyone", EXIT_USAGE)
        token = join_token_source(token_file)
        from bhandar_cli.node import JoinUnreachable, join_once
        from bhandar_cli.security import JoinRefused

        try:
            tls_dir = str(join_once(join_seeds[0], token, node_id, host, data_dir))
        except (JoinRefused, JoinUnreachable) as exc:
            fail(f"node {node_id} cannot join: {exc}")
        seed_list = (*join_seeds, *seed_list)
        # A new member streams its ranges before it serves them (a restart keeps its saved status).
        bootstrap = True
    if ca_key and tls_dir is None:
        fail("--ca-key needs --tls-dir: new nodes join over TLS", EXIT_USAGE)
    if ca_key:
        from bhandar_cli.security import CA_CERT, CA_KEY

        key = Path(ca_key)
        if key.name != CA_KEY or not key.is_file() or not key.with_name(CA_CERT).is_file():
            fail(f"--ca-key must name a cluster CA's {CA_KEY} with its {CA_CERT} beside it", EXIT_USAGE)
    from bhandar_cli.security import AuthFileError, DataKeyProblem, node_key
    from bhandar_cli.storage import DataKeyError
    from bhandar_cli.store import DataDirInUse

    try:
        data_key = node_key(data_key_file)
    except DataKeyProblem as exc:
        fail(f"node {node_id} could not start: {exc}", EXIT_USAGE)

    options = NodeOptions(
        id=node_id,
        data_dir=data_dir,
        host=host,
        port=port,
        http_port=http_port,
        http_workers=http_workers,
        zone=zone,
        seeds=seed_list,
        vnodes=vnodes,
        replicas=replicas,
        fsync=fsync,
        frame_timeout=frame_timeout,
        tls_dir=tls_dir,
        ca_key=str(Path(ca_key).resolve()) if ca_key else "",
        auth_file=auth_file,
        admit_anyone=admit_anyone,
        snapshot_dir=snapshot_dir,
        bootstrap=bootstrap,
        protocol=protocol,
        data_key=data_key,
        config=config,
    )
    try:
        run_node(options)
    except (ListenRefused, PkiError) as exc:
        fail(str(exc), EXIT_USAGE)
    except AuthFileError as exc:
        fail(f"node {node_id} could not start: {exc}", EXIT_USAGE)
    except DataKeyError as exc:
        hint = "give it --data-key-file (the cluster's DIR/keys/data.key) or $BHANDAR_DATA_KEY"
        fail(f"node {node_id} could not start: {exc}: {hint}", EXIT_USAGE)
    except DataDirInUse as exc:
        fail(f"node {node_id} could not start: {exc}")
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            fail(
                f"node {node_id} could not start: another process listens on its port {port} or its "
                f"HTTP port {http_port} on {host}; stop that process, or give the node other ports"
            )
        fail(f"node {node_id} could not start: {exc}")
    except NodeCrashed as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        pass


@node_app.command("maelstrom")
def maelstrom(
    data_dir: str = typer.Option(
        "", "--data-dir", help="Keep the store here (default: $BHANDAR_CHECK_DIR, else in memory)."
    ),
    vnodes: int = typer.Option(8, "--vnodes", help="Tokens per node (the same on every node)."),
    consistency: str = typer.Option("QUORUM", "--consistency", "-c", help=f"{one_of(LEVELS)}."),
) -> None:
    """Run Bhandar's node as a Maelstrom node: one JSON message per line on standard input and
    output (bhandar check starts it, and so can Maelstrom). It serves dynamo-kv, g-counter,
    pn-counter and lin-kv (cas answered with error 10, not supported)."""
    from bhandar_cli.core.model import BadInput, parse_level

    try:
        level = parse_level(consistency)
    except BadInput as exc:
        fail(str(exc), EXIT_USAGE)
    if not 1 <= vnodes <= 1024:
        fail("--vnodes must be 1..1024", EXIT_USAGE)
    from bhandar_cli.node import run_maelstrom_node

    run_maelstrom_node(data_dir, vnodes, level)


if __name__ == "__main__":
    node_app(prog_name="bhandar node")
