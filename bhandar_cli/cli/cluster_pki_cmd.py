"""`bhandar cluster init|cert`: the cluster CA and node certificates, for nodes started by hand."""

from __future__ import annotations

from pathlib import Path

import typer

from bhandar_cli.cli.cluster_cmd import DIR_OPTION, _print, run_async
from bhandar_cli.cli.output import OUTPUT_OPTION, emit_json
from bhandar_cli.client import OutputFormat


def init(directory: str | None = DIR_OPTION, output: OutputFormat = OUTPUT_OPTION) -> None:
    """Make the cluster CA in DIR/tls and the data key in DIR/keys/data.key, for a cluster whose
    nodes you start by hand (give each `--data-key-file DIR/keys/data.key` to encrypt at rest).

    Then give each node a certificate with `bhandar cluster cert NODE --host HOST --out DATA_DIR/tls`
    and start it with `bhandar node run --id NODE --host HOST --data-dir DATA_DIR --tls-dir DATA_DIR/tls`.
    """
    from bhandar_cli.fleet import resolve_dir
    from bhandar_cli.security import CA_KEY, TLS_DIR, create_ca, ensure_key, key_path, private_dir

    where = resolve_dir(directory).resolve()

    async def body() -> Path:
        private_dir(where)
        ensure_key(where)
        return create_ca(where / TLS_DIR, where.name)

    ca = run_async("cluster init", output, body)
    if output is OutputFormat.json:
        emit_json(
            {"cmd": "cluster init", "ok": True, "dir": str(where), "ca_cert": str(ca)}
            | {"data_key": str(key_path(where))}
        )
        return
    _print(f"cluster CA made: {ca} (its key {ca.with_name(CA_KEY)} stays with you)")
    _print(f"data key: {key_path(where)} (mode 0600; nodes take it with --data-key-file)")
    _print(f"next, per node: bhandar cluster cert NODE --host HOST --out DATA_DIR/tls --dir {where}")


def cert(
    node: str = typer.Argument(..., help="The node's id (its certificate's name)."),
    host: list[str] = typer.Option(..., "--host", help="Address or name the node listens on (repeatable)."),
    out: str = typer.Option(..., "--out", help="Directory for ca.crt, node.crt and node.key."),
    directory: str | None = DIR_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Issue a node certificate from the cluster CA (made by `cluster init` or `cluster up`).

    It names the node's id and each --host: an IP address, or a host name that is no node's id in
    any case (the CA remembers every id it signed), so no certificate can pass as another node."""
    from bhandar_cli.core.model import BadInput
    from bhandar_cli.fleet import load, path_of
    from bhandar_cli.fleet import resolve_dir as cluster_file_resolve_dir
    from bhandar_cli.security import CA_KEY, NODE_KEY, TLS_DIR, NameRefused, NodeTls, PkiError, issue_node

    where = cluster_file_resolve_dir(directory)
    target = Path(out)

    async def body() -> NodeTls:
        if not (where / TLS_DIR / CA_KEY).is_file():
            raise PkiError(f"no cluster CA in {where / TLS_DIR} (make one with bhandar cluster init)")
        if (target / NODE_KEY).exists():
            raise PkiError(f"{target / NODE_KEY} exists already; a node keeps its key")
        # The ids of the cluster `cluster up` made here, if it did: no new certificate may name them.
        members = load(where).names if path_of(where).exists() else []
        try:
            return issue_node(where / TLS_DIR, node, host, target, members)
        except NameRefused as exc:
            raise BadInput(str(exc)) from None

    files = run_async("cluster cert", output, body)
    if output is OutputFormat.json:
        emit_json({"cmd": "cluster cert", "ok": True, "node": node, "cert": str(files.cert)})
        return
    _print(f"certificate for node {node} ({', '.join(host)}): {files.cert}; start it with --tls-dir {target}")
