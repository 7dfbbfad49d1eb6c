"""What the client returns and the nodes say match their declared shapes: every key a view carries
is one its TypedDict declares, every required key is there, and so on down its declared parts
(client/cluster_views.py, client/cluster_health.py, client/membership.py, core/node_views.py,
core/membership/gossip.py, core/roles/streaming.py). mypy checks each reader against the
TypedDicts; this checks the TypedDicts against what the writers really send, from an in-process
cluster and from a node process over RPC, so a key added to a view and not to its type fails."""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, NotRequired, Required, get_args, get_origin

import pytest
import trio
import trio.testing

from bhandar_cli.client.backend import RestoreDone, SnapshotDone
from bhandar_cli.client.cluster_admin import MembersView
from bhandar_cli.client.cluster_views import (
    ClockView,
    HintsView,
    KeyspacesView,
    PrefsView,
    RingOwnershipView,
    StatusView,
)
from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.core.membership import MemberRow
from bhandar_cli.core.node_views import HintQueueRow, NodeInfo
from bhandar_cli.node.net.rpc import open_rpc
from bhandar_cli.node.node_options import NodeOptions
from bhandar_cli.node.process import NodeProcess
from bhandar_cli.repl.batch import open_session


def declared(shape: type) -> tuple[dict[str, Any], set[str]]:
    """A TypedDict's keys with their types, and which are required. (Python 3.11 does not see
    Required/NotRequired in postponed annotations, so they are read here; a TypedDict's own
    `total` applies to all its keys, as every shape declared here keeps one totality.)"""
    hints = typing.get_type_hints(shape, include_extras=True)
    keys, required = {}, set()
    for key, hint in hints.items():
        origin = get_origin(hint)
        if origin is Required or (origin is not NotRequired and getattr(shape, "__total__", True)):
            required.add(key)
        keys[key] = get_args(hint)[0] if origin in (Required, NotRequired) else hint
    return keys, required


def mismatches(value: Any, shape: Any, path: str = "") -> list[str]:
    """Where `value` does not have `shape`: keys undeclared or missing in a TypedDict, and the
    same inside its lists, maps and optional parts; a scalar of another type."""
    origin, args = get_origin(shape), get_args(shape)
    if typing.is_typeddict(shape):
        if not isinstance(value, dict):
            return [f"{path or 'the view'}: {type(value).__name__}, not a {shape.__name__}"]
        keys, required = declared(shape)
        out = [f"{path}.{k}: not declared in {shape.__name__}" for k in sorted(set(value) - set(keys))]
        out += [f"{path}.{k}: required by {shape.__name__}, missing" for k in sorted(required - set(value))]
        for key in sorted(set(value) & set(keys)):
            out += mismatches(value[key], keys[key], f"{path}.{key}")
        return out
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return []
        tries = [mismatches(value, arg, path) for arg in args if arg is not type(None)]
        return [] if any(not t for t in tries) else min(tries, key=len)
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, not a list"]
        return [m for i, item in enumerate(value) for m in mismatches(item, args[0], f"{path}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not a map"]
        return [m for k, item in value.items() for m in mismatches(item, args[1], f"{path}[{k!r}]")]
    if shape is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif shape is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif shape in (str, bool):
        ok = isinstance(value, shape)
    else:
        return []  # Any, object, Literal, Mapping: the keys above are the contract
    return [] if ok else [f"{path}: {value!r} is not a {shape.__name__}"]


def test_the_shape_check_finds_an_undeclared_a_missing_and_a_mistyped_key() -> None:
    row: dict[str, Any] = {"holder": "A", "target": "B", "count": 2, "oldest_s": 1.5}
    assert mismatches(row, HintQueueRow) == []
    assert mismatches({**row, "extra": 1}, HintQueueRow) == [".extra: not declared in HintQueueRow"]
    del row["count"]
    assert mismatches(row, HintQueueRow) == [".count: required by HintQueueRow, missing"]
    assert mismatches({**row, "count": "2"}, HintQueueRow) == [".count: '2' is not a int"]
    assert mismatches({"id": "A", "up": True}, MemberRow) == [".status: required by MemberRow, missing"]


def in_process_views() -> list[tuple[str, Any, Any]]:
    """Every view of an in-process cluster with something in each: a key written, a node down
    (so hints are kept for it, and `status` says it is down)."""

    async def main() -> list[tuple[str, Any, Any]]:
        async with open_session(ClusterOptions(nodes=4, memory=True), "json") as session:
            # Virtual time (MockClock): the detectors notice C, then the fallbacks store the hints.
            lines = [
                "put kv k 1",
                "kill C",
                "sleep 5s",
                *(f"put kv k{i} {i} c=ONE" for i in range(4)),
                "sleep 1s",
            ]
            for line in lines:
                (reply,) = await session.run_line(line)
                assert reply.ok, (line, reply.to_json())
            client, backend = session.client, session.client.backend
            out: list[tuple[str, Any, Any]] = [
                ("status", await client.views.status(), StatusView),
                ("ring", await client.views.ring(), RingOwnershipView),
                ("prefs", await client.views.prefs("kv", "k"), PrefsView),
                ("clock", await client.views.clock("kv", "k"), ClockView),
                ("hints", await client.views.hints(), HintsView),
                ("keyspaces", await client.views.keyspace_list(), KeyspacesView),
                ("members", await client.admin.members(), MembersView),
            ]
            for name in backend.names:
                out.append((f"info {name}", await backend.node_info(name), NodeInfo))
                placed = await backend.node_members(name, placement=True)
                out += [(f"members {name}", row, MemberRow) for row in placed]
                out += [(f"members {name}", row, MemberRow) for row in await backend.node_members(name)]
                out += [(f"hints {name}", row, HintQueueRow) for row in await backend.node_hints(name)]
            return out

    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_every_view_of_an_in_process_cluster_has_its_declared_shape() -> None:
    views = in_process_views()
    found = [f"{name}: {m}" for name, value, shape in views for m in mismatches(value, shape)]
    assert found == []
    # What the check went through: a down node and hints held for it, so the optional parts ran.
    (status,) = [v for name, v, _ in views if name == "status"]
    assert {n["id"]: n["state"] for n in status["nodes"]}["C"] == "down"
    assert [v for name, v, _ in views if name.startswith("hints ")], "no hint was held for C"


def test_a_node_process_says_its_info_members_and_hints_in_their_declared_shapes(tmp_path: Path) -> None:
    options = NodeOptions(id="A", data_dir=str(tmp_path / "A"), http_port=-1, fsync="none", admit_anyone=True)

    async def main() -> list[tuple[str, Any, Any]]:
        process = NodeProcess(options, None)
        async with trio.open_nursery() as nursery:
            port, _ = await nursery.start(process.run)
            async with open_rpc("127.0.0.1", port, "A") as rpc:
                said = [
                    ("info", await rpc.call("info", 5.0, counts=True), NodeInfo),
                    *[("members", row, MemberRow) for row in await rpc.call("members", 5.0, placement=True)],
                    *[("hints", row, HintQueueRow) for row in await rpc.call("hints", 5.0)],
                ]
            process.shutdown.set()
        return said

    said = trio.run(main)
    assert [m for name, value, shape in said for m in mismatches(value, shape)] == []
    (info,) = [v for name, v, _ in said if name == "info"]
    assert {"pid", "protocol", "connections", "members"} <= set(info)  # the process's own part
    assert next(v for name, v, _ in said if name == "members")["protocol"] == info["protocol"]


def test_a_snapshot_and_a_restore_on_an_in_process_cluster_have_their_declared_shapes(tmp_path: Path) -> None:
    async def main() -> list[tuple[str, Any, Any]]:
        async with open_session(ClusterOptions(nodes=3, data_dir=str(tmp_path)), "json") as session:
            (reply,) = await session.run_line("put kv k 1")
            assert reply.ok, reply.to_json()
            backend = session.client.backend
            snapshot = await backend.snapshot("s1")
            restored = await backend.restore("s1")
            return [("snapshot", snapshot, SnapshotDone), ("restore", restored, RestoreDone)]

    said = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert [f"{name}: {m}" for name, value, shape in said for m in mismatches(value, shape)] == []
    assert said[1][1]["nodes"] == ["A", "B", "C"]


@pytest.mark.parametrize("shape", [StatusView, NodeInfo, MemberRow, ClockView, RestoreDone])
def test_each_shape_resolves(shape: type) -> None:
    """Every type a shape names is importable at run time (a reader's `get_type_hints` works)."""
    keys, required = declared(shape)
    assert required <= set(keys) and keys
