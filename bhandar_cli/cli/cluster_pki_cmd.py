"""`bhandar cluster init|cert`: the cluster CA and node certificates, for nodes started by hand."""

from __future__ import annotations

from pathlib import Path

import typer

from bhandar_cli.cli.cluster_cmd import DIR_OPTION, _print, run_async
from bhandar_cli.cli.output import OUTPUT_OPTION, OutputFormat, emit_json


def init(directory: str | None = DIR_OPTION, output: OutputFormat = OUTPUT_OPTION) -> None:
    """Make the cluster CA in DIR/tls and the data key in DIR/keys/data.key, for a cluster whose
    nodes you start by hand (give each `--data-key-file DIR/keys/data.key` to encrypt at rest).

    Then give each node a certificate with `bhandar cluster cert NODE --host HOST --out DATA_DIR/tls`
    and start it with `bhandar node run --id NODE --host HOST --data-dir DATA_DIR --tls-dir DATA_DIR/tls`.
    """
    from bhandar_cli.fleet.cluster_file import resolve_dir
    from bhandar_cli.security import pki
    from bhandar_cli.security.data_key import ensure_key, key_path

    where = resolve_dir(directory).resolve()

    async def body() -> Path:
        pki.private_dir(where)
        ensure_key(where)
        return pki.create_ca(where / pki.TLS_DIR, where.name)

    ca = run_async("cluster init", output, body)
    if output is OutputFormat.json:
        emit_json(
            {"cmd": "cluster init", "ok": True, "dir": str(where), "ca_cert": str(ca)}
            | {"data_key": str(key_path(where))}
        )
        return
    _print(f"cluster CA made: {ca} (its key {ca.with_name(pki.CA_KEY)} stays with you)")
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
    from bhandar_cli.core.model.errors import BadInput
    from bhandar_cli.fleet import cluster_file
    from bhandar_cli.security import pki

    where = cluster_file.resolve_dir(directory)
    target = Path(out)

    async def body() -> pki.NodeTls:
        if not (where / pki.TLS_DIR / pki.CA_KEY).is_file():
            raise pki.PkiError(f"no cluster CA in {where / pki.TLS_DIR} (make one with bhandar cluster init)")
        if (target / pki.NODE_KEY).exists():
            raise pki.PkiError(f"{target / pki.NODE_KEY} exists already; a node keeps its key")
        # The ids of the cluster `cluster up` made here, if it did: no new certificate may name them.
        members = cluster_file.load(where).names if cluster_file.path_of(where).exists() else []
        try:
            return pki.issue_node(where / pki.TLS_DIR, node, host, target, members)
        except pki.NameRefused as exc:
            raise BadInput(str(exc)) from None

    files = run_async("cluster cert", output, body)
    if output is OutputFormat.json:
        emit_json({"cmd": "cluster cert", "ok": True, "node": node, "cert": str(files.cert)})
        return
    _print(f"certificate for node {node} ({', '.join(host)}): {files.cert}; start it with --tls-dir {target}")
