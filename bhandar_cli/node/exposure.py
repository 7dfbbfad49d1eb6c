"""Where a node may listen, and how exposed: the loopback rule, checked before the node makes anything.

A node without TLS (plain TCP) and a node without token checks (`--admit-anyone`) are for
experiments on one machine: anyone who could reach them could join the cluster, or write, mint
admin tokens and stop it. So either listens on a loopback address only; asked for any other (a
LAN address, 0.0.0.0, a name resolving to one) it refuses to start, with one line that says what
to do instead.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import TYPE_CHECKING

from bhandar_cli.security import CA_CERT, NODE_CERT, NODE_KEY, NodeTls, PkiError

if TYPE_CHECKING:
    from bhandar_cli.node.node_options import NodeOptions


class ListenRefused(Exception):
    """The node was asked to listen where it will not (the operator's options)."""


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback one (names are resolved first)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def node_tls(options: NodeOptions) -> NodeTls | None:
    """The node's TLS files, checked; raises ListenRefused for plain TCP or no token checks off
    loopback, and PkiError for a TLS directory without its files."""
    if options.admit_anyone and not is_loopback(options.host):
        raise ListenRefused(
            f"refusing --admit-anyone on {options.host}: anyone who can reach it could write, mint "
            "admin tokens or stop the cluster; leave it out (the node then checks tokens) or listen "
            "on 127.0.0.1"
        )
    if options.tls_dir is None:
        if not is_loopback(options.host):
            raise ListenRefused(
                f"refusing to listen on {options.host} without TLS: anyone who can reach it could "
                "join the cluster; give the node --tls-dir (cluster up makes one) or listen on 127.0.0.1"
            )
        return None
    files = NodeTls.in_dir(options.tls_dir)
    if not files.exists():
        raise PkiError(
            f"{options.tls_dir} lacks {CA_CERT}, {NODE_CERT} or {NODE_KEY} (bhandar cluster cert makes them)"
        )
    return files
