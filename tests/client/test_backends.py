"""Every backend of the full client implements the whole `Backend` protocol, and says what its
cluster cannot do in its `Capabilities` instead of leaving a method out to be probed for."""

from __future__ import annotations

import inspect

import pytest
import trio

from bhandar_cli.client.backend import Backend, Capabilities, RequestBackend
from bhandar_cli.client.backends.blocking_backend import BlockingBackend
from bhandar_cli.client.backends.in_process_backend import InProcessBackend
from bhandar_cli.client.backends.tcp_backend import TcpBackend
from bhandar_cli.client.client import Client
from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.core.protocol.node_operations import NODE_OPERATIONS
from bhandar_cli.fleet.in_process_cluster import InProcessCluster

# Set in a backend's __init__ (the TCP ones keep their ring as an attribute), so not on the class.
INSTANCE_ATTRIBUTES = {"names", "zones", "ring", "capabilities"}


def members(protocol: type) -> set[str]:
    return {name for name in dir(protocol) if not name.startswith("_")} | set(
        getattr(protocol, "__annotations__", {})
    )


@pytest.mark.parametrize("backend", [InProcessBackend, TcpBackend], ids=lambda b: b.__name__)
def test_a_full_backend_has_every_member_of_the_protocol(backend: type) -> None:
    missing = {name for name in members(Backend) if not hasattr(backend, name)} - INSTANCE_ATTRIBUTES
    assert missing == set()
    for name in members(Backend) - INSTANCE_ATTRIBUTES:
        if inspect.iscoroutinefunction(getattr(Backend, name)):
            assert inspect.iscoroutinefunction(getattr(backend, name)), name


def test_the_one_shot_backend_has_the_data_part_and_no_more() -> None:
    missing = {name for name in members(RequestBackend) if not hasattr(BlockingBackend, name)}
    assert missing - INSTANCE_ATTRIBUTES == set()
    assert not hasattr(BlockingBackend, "kill") and not hasattr(BlockingBackend, "node_info")


def test_an_in_process_cluster_declares_what_it_cannot_do() -> None:
    memory = InProcessBackend(InProcessCluster(nodes=1))
    assert memory.capabilities == Capabilities(storage_engine=False, node_processes=False)
    assert memory.protocol_of("A") is None
    assert TcpBackend.capabilities == Capabilities(storage_engine=True, node_processes=True)

    async def main() -> None:
        with pytest.raises(BadInput, match="keeps its data in memory"):
            await memory.run_on_node(NODE_OPERATIONS["flush"], "A")
        with pytest.raises(BadInput, match="only node processes start at another"):
            await memory.revive("A", protocol=1)
        with pytest.raises(BadInput, match="to=N changes the wire protocol of node processes"):
            await Client(memory).admin.upgrade(to=1)

    trio.run(main)


def test_the_client_is_composed_of_parts_sharing_its_backend() -> None:
    backend = InProcessBackend(InProcessCluster(nodes=1))
    client = Client(backend, "ONE")
    assert client.data.backend is client.views.backend is client.admin.backend is backend
    assert client.admin.data is client.data and client.admin.views is client.views
    assert client.data.consistency == "ONE"
    assert [c.__name__ for c in type(client).__mro__] == ["Client", "Generic", "object"]
