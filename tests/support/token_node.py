"""One node process run in the test's own trio loop, on loopback, checking tokens: an admin token
and a read-only one, what tests of a node's ports (floods, HTTP fronts) start from."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from bhandar_cli.node.node_options import NodeOptions
from bhandar_cli.node.process import NodeProcess
from bhandar_cli.security.auth import mint, write_auth_file


@asynccontextmanager
async def token_node(
    tmp_path: Path, http_workers: int = 0
) -> AsyncIterator[tuple[NodeProcess, int, int, dict[str, str]]]:
    """A node with an admin token and a read-only one: (process, port, HTTP port, tokens: "admin",
    "admin_id", "reader", "reader_id"); its HTTP connections held by `http_workers` front
    processes (node/http/fronts.py), or by itself."""
    admin, admin_record = mint({"*": "admin"}, 10_000.0, 10_000, time.time())
    reader, reader_record = mint({"*": "read"}, 10_000.0, 10_000, time.time())
    write_auth_file(tmp_path / "auth.json", [admin_record, reader_record])
    options = NodeOptions(
        id="A",
        data_dir=str(tmp_path / "A"),
        fsync="none",
        auth_file=str(tmp_path / "auth.json"),
        http_workers=http_workers,
    )
    process = NodeProcess(options, None)
    tokens = {"admin": admin, "admin_id": admin_record.id, "reader": reader, "reader_id": reader_record.id}
    async with trio.open_nursery() as nursery:
        port, http_port = await nursery.start(process.run)
        yield process, port, http_port, tokens
        nursery.cancel_scope.cancel()
