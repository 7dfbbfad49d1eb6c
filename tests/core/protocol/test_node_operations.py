"""The node-operation table is the one place flush and compact are declared: every reader finds
each entry there (the REPL's command and its words, the role a token needs, the RPC a node
serves, the client on one node or all), and an in-process cluster runs them from it."""

from __future__ import annotations

import types
from dataclasses import MISSING, fields
from typing import Any, Union, get_args, get_origin, get_type_hints

import pytest
import trio
import trio.testing

from bhandar_cli.client.openers import ClusterOptions, open_in_process_client
from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.core.protocol.node_operations import (
    NODE_CALLS,
    NODE_OPERATIONS,
    BadArguments,
    DelayArgs,
    InfoArgs,
    NoArgs,
    NodeCall,
    NodeOperation,
    RangeHashesArgs,
    SnapshotArgs,
    TreeArgs,
    call_body,
    parse_args,
)
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
    from bhandar_cli.node import rpc_service

    assert set(rpc_service._HANDLERS) == set(NODE_CALLS)
    assert set(rpc_service._SLOW_HANDLERS) <= set(NODE_OPERATIONS)
    for call in NODE_CALLS.values():
        assert NEEDS[call.name] == call.needs, call.name
    with pytest.raises(LookupError, match="no node call 'frobnicate'"):
        rpc_service._serves("frobnicate", NoArgs)
    with pytest.raises(LookupError, match="served twice"):
        rpc_service._serves("info", InfoArgs)


# --- the arguments of each node call ----------------------------------------------------------

CALLS = list(NODE_CALLS.values())


def sample(hint: Any) -> Any:
    """A wire value of the annotated type (the first option of a union that is not None)."""
    origin = get_origin(hint)
    if origin is Union or origin is types.UnionType:
        return sample(next(h for h in get_args(hint) if h is not type(None)))
    if origin is list:
        return [sample(get_args(hint)[0]), sample(get_args(hint)[0])]
    if origin is dict:
        return {"k": sample(get_args(hint)[1])}
    return {str: "s", int: 7, float: 2.5, bool: False, object: {"any": [1, "x"]}}[hint]


def good_body(call: NodeCall) -> dict[str, Any]:
    """A body with every field of the call's arguments, each of its type."""
    return {name: sample(hint) for name, hint in get_type_hints(call.args).items()}


def required(call: NodeCall) -> list[str]:
    return [f.name for f in fields(call.args) if f.default is MISSING and f.default_factory is MISSING]


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.name)
def test_every_call_reads_a_good_body_and_writes_it_back_the_same(call: NodeCall) -> None:
    body = good_body(call)
    framed = {"id": 12, "op": call.name, **body}  # the frame's own keys are no argument
    args: object = parse_args(call.args, framed, call.name)
    assert type(args) is call.args and args == call.args(**body)
    assert call_body(call.name, args) == body
    # Every field left out that may be: the defaults, as a body an older client sent.
    least = {name: body[name] for name in required(call)}
    assert parse_args(call.args, least, call.name) == call.args(**least)


@pytest.mark.parametrize(
    ("call", "field"),
    [(call, name) for call in CALLS for name in required(call)],
    ids=lambda x: x if isinstance(x, str) else x.name,
)
def test_a_missing_field_is_refused_in_one_line_naming_the_call_and_the_field(
    call: NodeCall, field: str
) -> None:
    body = good_body(call)
    del body[field]
    with pytest.raises(BadArguments) as refused:
        parse_args(call.args, body, call.name)
    assert str(refused.value) == f"bad {call.name} arguments: field {field} is missing"
    assert refused.value.code == "bad_input"  # the caller's fault


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (call, name)
        for call in CALLS
        for name, hint in get_type_hints(call.args).items()
        if hint is not object
    ],
    ids=lambda x: x if isinstance(x, str) else x.name,
)
def test_a_mistyped_field_is_refused_in_one_line_saying_what_it_must_be(call: NodeCall, field: str) -> None:
    body = {**good_body(call), field: b"\x00"}  # bytes: a CBOR value no argument type is
    with pytest.raises(BadArguments) as refused:
        parse_args(call.args, body, call.name)
    message = str(refused.value)
    assert message.startswith(f"bad {call.name} arguments: field {field} must be ")
    assert message.endswith(", got bytes")
    assert "\n" not in message


def test_the_checks_go_inside_lists_and_maps_and_keep_bools_apart_from_numbers() -> None:
    def refusal(cls: type, body: dict[str, Any]) -> str:
        with pytest.raises(BadArguments) as refused:
            parse_args(cls, body, "x")
        return str(refused.value)

    assert (
        refusal(TreeArgs, {"keyspace": "kv", "lo": "5", "hi": 9})
        == "bad x arguments: field lo must be int, got str"
    )
    assert refusal(TreeArgs, {"keyspace": "kv", "lo": True, "hi": 9}).endswith(
        "field lo must be int, got bool"
    )
    assert refusal(RangeHashesArgs, {"ranges": [[1, 2], [3, "4"]]}).endswith(
        "field ranges must be list[list[int]], got list"
    )
    assert refusal(DelayArgs, {"delays": {"A": "5"}}).endswith("must be dict[str, float], got dict")
    assert refusal(InfoArgs, {"counts": 1}).endswith("field counts must be bool, got int")
    assert refusal(SnapshotArgs, {"snapshot": "s", "to": 3}).endswith("field to must be str | None, got int")
    # What JSON writes for a float it may write as an int; None is what an optional holds.
    assert parse_args(DelayArgs, {"delays": {"A": 5}}, "delay") == DelayArgs(delays={"A": 5})
    assert parse_args(SnapshotArgs, {"snapshot": "s", "to": None}, "snapshot") == SnapshotArgs(snapshot="s")


def test_a_body_is_written_only_from_its_own_calls_arguments() -> None:
    with pytest.raises(TypeError, match="node call 'tree' takes TreeArgs, not InfoArgs"):
        call_body("tree", InfoArgs())
    assert call_body("snapshot", SnapshotArgs(snapshot="s")) == {"snapshot": "s"}  # `to` unset: not sent
    assert call_body("heal", NoArgs()) == {}


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.name)
def test_every_handler_takes_its_tables_arguments_type(call: NodeCall) -> None:
    from bhandar_cli.node import rpc_service

    handler = rpc_service._HANDLERS[call.name]
    assert get_type_hints(handler, vars(rpc_service))["args"] is call.args


def test_a_handler_for_other_arguments_than_its_entrys_fails_at_import(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bhandar_cli.node import rpc_service

    monkeypatch.delitem(rpc_service._HANDLERS, "tree")
    with pytest.raises(TypeError, match="node call 'tree' takes TreeArgs, not InfoArgs"):
        rpc_service._serves("tree", InfoArgs)
