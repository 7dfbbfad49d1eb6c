"""Where the nodes of a new process cluster listen: an address each, and two ports on it.

`cluster up --hosts` takes a comma-separated list with one entry per node, in node order (A, B,
C, ...); an entry whose last number is a range stands for one address per number:

    127.0.0.2,127.0.0.3,127.0.0.4    three nodes, one per address
    127.0.0.2-6                      five nodes on 127.0.0.2 ... 127.0.0.6
    127.0.0.2-3,127.0.0.9            three nodes
    127.0.0.2,127.0.0.2              two nodes sharing an address (on different ports)

Every 127.x.y.z address is this machine's (Linux answers the whole 127.0.0.0/8), which is how one
machine plays a cluster that spans several.
"""

from __future__ import annotations

import re
import socket

DEFAULT_HOST = "127.0.0.1"
MAX_HOSTS = 26  # as many as a cluster has nodes
_RANGE = re.compile(r"(\d{1,3}\.\d{1,3}\.\d{1,3}\.)(\d{1,3})-(\d{1,3})")
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.:-]{0,251}[A-Za-z0-9])?")


def parse_hosts(text: str) -> list[str]:
    """The addresses `text` names, in order; ValueError saying which entry is wrong."""
    hosts: list[str] = []
    for entry in (e.strip() for e in text.split(",")):
        ranged = _RANGE.fullmatch(entry)
        if ranged:
            prefix, first, last = ranged.group(1), int(ranged.group(2)), int(ranged.group(3))
            if not first <= last <= 255:
                raise ValueError(f"{entry!r}: a range runs from a lower to a higher number, at most 255")
            hosts.extend(f"{prefix}{n}" for n in range(first, last + 1))
        elif _NAME.fullmatch(entry):
            hosts.append(entry)
        else:
            raise ValueError(f"{entry!r} is not an address, a host name or a range like 127.0.0.2-6")
        if len(hosts) > MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS} hosts")
    return hosts


def free_ports(count: int, host: str = DEFAULT_HOST) -> list[int]:
    """`count` distinct ports free right now (held open together so none is handed out twice)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def node_ports(hosts: list[str], base_port: int) -> list[int]:
    """Peer and HTTP port of node i at [2i] and [2i+1]: base port P gives P+2i and P+2i+1; 0 gives
    ports free on each node's own address."""
    ports = list(range(base_port, base_port + 2 * len(hosts)))
    if base_port == 0:
        for host in set(hosts):
            mine = [i for i, h in enumerate(hosts) if h == host]
            found = free_ports(2 * len(mine), host)
            for k, i in enumerate(mine):
                ports[2 * i : 2 * i + 2] = found[2 * k : 2 * k + 2]
    return ports


def parse_issuers(text: str, nodes: int, tls: bool) -> tuple[str, ...]:
    """The nodes `cluster up --issuers A,B` gives the CA key to (() : the first); ValueError for a
    name that is not one of the cluster's nodes, or for any without certificates."""
    from bhandar_cli.host import node_names

    names = node_names(nodes)
    issuing = tuple(dict.fromkeys(i.strip().upper() for i in text.split(",") if i.strip()))
    if any(i not in names for i in issuing):
        raise ValueError(f"name nodes of this cluster: {', '.join(names)} (got {text!r})")
    if issuing and not tls:
        raise ValueError("issuing certificates needs certificates: leave out --insecure")
    return issuing
