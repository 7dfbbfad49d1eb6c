"""The TCP backend writes each admin call's body from the arguments' class of its NODE_CALLS entry
(core/protocol/node_operations.py): the bodies on the wire are the ones it always sent, key for
key, so nodes of an older release read them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from bhandar_cli.client.backends.tcp_backend import TcpBackend
from bhandar_cli.fleet import ClusterFile, NodeEntry


class Recorded(TcpBackend):
    """A TCP backend whose calls are written down instead of sent (every node alive, answering
    nothing but a snapshot's count of files)."""

    def __init__(self, nursery: trio.Nursery, directory: Path) -> None:
        entries = tuple(NodeEntry(n, "z1", "127.0.0.1", 1, 0, "", "", pid=1) for n in ("A", "B"))
        super().__init__(ClusterFile(dir=str(directory), nodes=entries), nursery)
        self.sent: list[tuple[str, str, dict[str, Any]]] = []

    def is_alive(self, name: str) -> bool:
        return True

    async def rpc(self, name: str, op: str, timeout: float = 0.0, **args: Any) -> Any:
        self.sent.append((name, op, args))
        return 0 if op == "snapshot" else None


def test_admin_call_bodies_are_the_ones_sent_before_the_table_named_their_types(
    tmp_path: Path,
) -> None:
    async def main() -> list[tuple[str, str, dict[str, Any]]]:
        async with trio.open_nursery() as nursery:
            backend = Recorded(nursery, tmp_path)
            await backend.node_info("A")
            await backend.node_info("A", counts=False)
            await backend.node_records("A", "kv", "k")
            await backend.node_hints("A")
            await backend.node_metrics("A")
            await backend.node_members("A")
            await backend.node_members("B", placement=True)
            await backend.node_tree("A", "kv", -5, 9)
            await backend._read_notes("B", 3, "boot-1")
            await backend.set_node_config("A", {"version": 2, "values": {"x": 1}})
            await backend.remove_member("B")
            await backend.snapshot("s1")
            await backend.snapshot("s2", to=str(tmp_path / "off"))
            return backend.sent

    # What the backend wrote by hand before (git show 09376df:bhandar_cli/client/backends/tcp_backend.py).
    assert trio.run(main) == [
        ("A", "info", {"counts": True}),
        ("A", "info", {"counts": False}),
        ("A", "records", {"keyspace": "kv", "key": "k"}),
        ("A", "hints", {}),
        ("A", "metrics", {}),
        ("A", "members", {"placement": False}),
        ("B", "members", {"placement": True}),
        ("A", "tree", {"keyspace": "kv", "lo": -5, "hi": 9}),
        ("B", "notes", {"since": 3, "boot": "boot-1"}),
        ("A", "config", {"config": {"version": 2, "values": {"x": 1}}}),
        ("A", "remove", {"node": "B"}),
        *[(n, "snapshot", {"snapshot": "s1"}) for n in ("A", "B")],
        *[(n, "snapshot", {"snapshot": "s2", "to": str((tmp_path / "off").resolve())}) for n in ("A", "B")],
    ]


def test_a_call_with_another_calls_arguments_is_a_bug_caught_before_anything_is_sent(tmp_path: Path) -> None:
    from bhandar_cli.core.protocol import InfoArgs

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            backend = Recorded(nursery, tmp_path)
            with pytest.raises(TypeError, match="node call 'tree' takes TreeArgs, not InfoArgs"):
                await backend.call("A", "tree", InfoArgs())
            assert backend.sent == []

    trio.run(main)
