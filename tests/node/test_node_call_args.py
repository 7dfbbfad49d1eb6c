"""A node process reads each admin call's arguments into the type its NODE_CALLS entry names
(core/protocol/node_operations.py): a missing or mistyped field is refused in one line, as the
caller's fault (`bad_input`), the node going on; the bodies clients always sent still work."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from bhandar_cli.node.net.blocking_rpc import RpcError
from bhandar_cli.node.net.rpc import rpc_once
from bhandar_cli.node.node_options import NodeOptions
from bhandar_cli.node.process import NodeProcess
from bhandar_cli.security.access import ClientAccess
from bhandar_cli.security.auth import mint, write_auth_file


@asynccontextmanager
async def node(tmp_path: Path) -> AsyncIterator[tuple[int, ClientAccess]]:
    """A node process on loopback: its RPC port, and how an admin reaches it."""
    admin, record = mint({"*": "admin"}, 10_000.0, 10_000, time.time())
    write_auth_file(tmp_path / "auth.json", [record])
    auth = str(tmp_path / "auth.json")
    options = NodeOptions(id="A", data_dir=str(tmp_path / "A"), fsync="none", auth_file=auth)
    process = NodeProcess(options, None)
    async with trio.open_nursery() as nursery:
        port, _ = await nursery.start(process.run)
        yield port, ClientAccess(token=admin)
        nursery.cancel_scope.cancel()


def test_a_call_missing_or_mistyping_an_argument_is_refused_in_one_line_and_the_node_goes_on(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        async with node(tmp_path) as (port, admin):

            async def call(op: str, **args: Any) -> Any:
                return await rpc_once("127.0.0.1", port, op, 5.0, "A", admin, **args)

            async def refusal(op: str, **args: Any) -> RpcError:
                with pytest.raises(RpcError) as refused:
                    await call(op, **args)
                return refused.value

            missing = await refusal("tree", keyspace="kv", hi=9)
            assert str(missing) == "node A: bad tree arguments: field lo is missing"
            assert missing.code == "bad_input"
            mistyped = await refusal("tree", keyspace="kv", lo="5", hi=9)
            assert str(mistyped) == "node A: bad tree arguments: field lo must be int, got str"
            nested = await refusal("range_hashes", ranges=[[0, "9"]])
            assert str(nested).endswith("field ranges must be list[list[int]], got list")
            copied_to = await refusal("snapshot", snapshot="s1", to=3)
            assert copied_to.code == "bad_input" and "field to must be str | None, got int" in str(copied_to)
            # The bodies clients sent before the table named argument types: read as they were.
            assert (await call("info", counts=False))["id"] == "A"
            assert (await call("info"))["keys"] == (await call("info", counts=True))["keys"]
            assert await call("heal") is True
            assert "version" in await call("config")

    trio.run(main)
