"""Where a new cluster's nodes listen (fleet/placement.py): `--hosts` lists and ports per address."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from bhandar_cli.fleet.placement import parse_hosts
from bhandar_cli.fleet.supervisor import plan


def test_hosts_are_listed_or_ranged_in_node_order() -> None:
    assert parse_hosts("127.0.0.2-5") == ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
    assert parse_hosts("127.0.0.9, 127.0.0.2-3,lab-pc.local") == [
        "127.0.0.9",
        "127.0.0.2",
        "127.0.0.3",
        "lab-pc.local",
    ]
    assert parse_hosts("127.0.0.2,127.0.0.2") == ["127.0.0.2", "127.0.0.2"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("127.0.0.5-2", "lower to a higher"),
        ("127.0.0.2-300", "at most 255"),
        ("a b", "not an address"),
        ("127.0.0.2,", "not an address"),
        ("10.0.0.0-255", "more than 26"),
    ],
)
def test_a_bad_hosts_list_says_which_entry_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_hosts(text)


def test_each_node_gets_its_address_and_two_ports_free_on_it(tmp_path: Path) -> None:
    hosts = ("127.0.0.2", "127.0.0.3", "127.0.0.2")
    cluster = plan(tmp_path, 3, 1, 0, 8, 3, hosts)
    assert [n.host for n in cluster.nodes] == list(hosts)
    on_2 = [p for n in cluster.nodes if n.host == "127.0.0.2" for p in (n.port, n.http_port)]
    assert len(set(on_2)) == 4  # two nodes on one address never share a port
    for node in cluster.nodes:
        for port in (node.port, node.http_port):
            with socket.socket() as sock:
                sock.bind((node.host, port))  # free on that very address
    fixed = plan(tmp_path, 2, 1, 21000, 8, 3, ("127.0.0.4", "127.0.0.5"))
    assert [(n.host, n.port, n.http_port) for n in fixed.nodes] == [
        ("127.0.0.4", 21000, 21001),
        ("127.0.0.5", 21002, 21003),
    ]
    assert {n.host for n in plan(tmp_path, 2, 1, 0, 8, 3).nodes} == {"127.0.0.1"}
