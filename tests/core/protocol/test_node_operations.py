"""The node-operation table is the one place flush and compact are declared: every reader finds
each entry there (the REPL's command and its words, the role a token needs, the RPC a node
serves, the client on one node or all), and an in-process cluster runs them from it."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from bhandar_cli.client.openers import ClusterOptions, open_in_process_client
from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.core.protocol.node_operations import NODE_OPERATIONS, NodeOperation
from bhandar_cli.node.rpc_service import RpcService
from bhandar_cli.repl.commands import COMMANDS
from bhandar_cli.security.auth import NEEDS

OPERATIONS = list(NODE_OPERATIONS.values())


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_each_operation_is_a_repl_command_in_its_own_words(op: NodeOperation) -> None:
    spec = COMMANDS.get(op.name)
    assert spec is not None and spec.summary == op.summary and spec.help == op.help
    assert spec.usage == f"{op.name} [NODE]" and spec.examples == (f"{op.name} A",)
    assert spec.renderer is not None
    shown = str(spec.renderer({"nodes": [{"node": "A", "ms": 1.25}]}))
    assert shown == f"{op.done}: A 1.2 ms"


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_each_operation_needs_the_role_it_declares_and_a_node_serves_it(op: NodeOperation) -> None:
    assert NEEDS[op.name] == op.needs == "admin"
    ran: list[str] = []

    class Store:
        def flush(self) -> str | None:
            ran.append("flush")
            return "000007.sst"

        def compact(self) -> int:
            ran.append("compact")
            return 2

    process: Any = type("Process", (), {"store": Store()})()
    handler = RpcService(process)._node_operation(op.name)
    assert handler is not None and handler({}) == op.run(Store()) and ran == [op.name, op.name]
    assert RpcService(process)._node_operation("no_such_operation") is None


def test_an_in_process_cluster_runs_them_on_one_node_or_all_and_a_memory_one_says_it_cannot() -> None:
    async def main() -> None:
        async with open_in_process_client(ClusterOptions(nodes=2, zones=1)) as client:
            await client.data.put("kv", "k", b'"v"', "application/json", "none")
            one = await client.admin.on_nodes("flush", "a")
            assert one["cmd"] == "flush" and [n["node"] for n in one["nodes"]] == ["A"]
            assert set(one["nodes"][0]) == {"node", "sstable", "ms"}
            every = await client.admin.on_nodes("compact")
            assert [n["node"] for n in every["nodes"]] == ["A", "B"]
            assert all(isinstance(n["compactions"], int) for n in every["nodes"])
        async with open_in_process_client(ClusterOptions(nodes=1, memory=True)) as client:
            with pytest.raises(BadInput, match="keeps its data in memory"):
                await client.admin.on_nodes("flush")

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_every_node_call_has_one_handler_and_the_role_its_entry_declares() -> None:
    from bhandar_cli.core.protocol.node_operations import NODE_CALLS
    from bhandar_cli.node import rpc_service

    assert set(rpc_service._HANDLERS) == set(NODE_CALLS)
    assert set(rpc_service._SLOW_HANDLERS) <= set(NODE_OPERATIONS)
    for call in NODE_CALLS.values():
        assert NEEDS[call.name] == call.needs, call.name
    with pytest.raises(LookupError, match="no node call 'frobnicate'"):
        rpc_service._serves("frobnicate")
    with pytest.raises(LookupError, match="served twice"):
        rpc_service._serves("info")
