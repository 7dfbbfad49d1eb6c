"""Input limits (core/model/limits.py) as the core enforces them, and forged contexts that cannot lock a key.

Requests are handed to the nodes as raw frames would deliver them: nothing checked them first.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import cbor2
import pytest

from bhandar_cli.core.membership.ring import key_token
from bhandar_cli.core.model.context import decode_context, encode_context
from bhandar_cli.core.model.errors import BadInput, TooLarge
from bhandar_cli.core.model.limits import (
    MAX_CONTEXT_ACTORS,
    MAX_CONTEXT_CHARS,
    MAX_INTEGER,
    NotJson,
    check_context,
    check_json_value,
    decode_url_part,
    json_depth,
    parse_json,
)
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import BYTES, JSON, context_of
from bhandar_cli.core.protocol.client_messages import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    PutRequest,
    PutResult,
)
from bhandar_cli.core.protocol.messages import ClientRequest
from bhandar_cli.sim.sim_cluster import SimCluster

KV, COUNTERS = "kv", "counters"


# --- the checks themselves ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text", ["NaN", "-Infinity", "[1, Infinity]", '{"a": NaN}', "1e400", "[-1e999]", "[" * 65 + "]" * 65]
)
def test_json_that_is_refused(text: str) -> None:
    with pytest.raises(BadInput):
        parse_json(text)


@pytest.mark.parametrize("text", ["NaNcy", "hello", "[1,", "Infinity and beyond", "1" * 5000])
def test_text_that_is_not_json_at_all(text: str) -> None:
    with pytest.raises(NotJson):
        parse_json(text)


def test_json_within_the_limits() -> None:
    assert parse_json("[" * 64 + "]" * 64) == json.loads("[" * 64 + "]" * 64)
    assert parse_json('{"a": "[[[[NaN"}') == {"a": "[[[[NaN"}  # brackets in strings do not nest
    assert parse_json('"\\"[["') == '"[['
    assert parse_json("1.5e300") == 1.5e300


def test_depth_is_measured_without_recursion() -> None:
    deep = "[" * 1_000_000
    assert json_depth(deep) == 65  # counted up to one past the limit, then it stops
    with pytest.raises(BadInput, match="nested deeper than 64"):
        parse_json(deep)
    check_json_value(b"\xff\xfe not JSON, kept as bytes")  # not JSON at all: stored as it is


def test_percent_decoding_is_strict() -> None:
    assert decode_url_part(b"cart%3A1%2Fx%C3%A9") == "cart:1/xé"
    for raw in (b"%FF", b"%FE", b"a%C3", b"%", b"%4", b"%zz"):
        with pytest.raises(BadInput):
            decode_url_part(raw)


def test_contexts_are_bounded() -> None:
    assert check_context({"A": 1, "B~3": MAX_INTEGER}) == {"A": 1, "B~3": MAX_INTEGER}
    # An exact dot beyond its actor's prefix is an entry of its own; one that follows on is folded.
    assert check_context({"E~x": 2, "E~x:5": 5}) == {"E~x": 2, "E~x:5": 5}
    assert check_context({"E~x": 2, "E~x:3": 3, "E~x:5": 5}) == {"E~x": 3, "E~x:5": 5}
    for bad in (
        {"A": MAX_INTEGER + 1},
        {"A": 0},
        {"A": -1},
        {"A": True},
        {"A": 1.0},
        {"bad name": 1},
        {"E~x:5": 6},  # a cloud entry names its own counter
        {"A:5": 5},  # only an exact actor's dots are named one by one
        {"E~x:five": 5},
        {f"N{i}": 1 for i in range(MAX_CONTEXT_ACTORS + 1)},
    ):
        with pytest.raises(BadInput):
            check_context(bad)
    with pytest.raises(BadInput, match="too long"):
        decode_context("A" * (MAX_CONTEXT_CHARS + 1))


# --- the core refuses bad inputs from raw frames and stores nothing ------------------------------


def listing(c: SimCluster) -> dict[str, Any]:
    """Every record and hint of every node: a cluster-wide listing to compare."""
    out: dict[str, Any] = {}
    for name, host in c.hosts.items():
        store = host.store
        out[name] = {
            "records": {ks: dict(store.items(ks)) for ks in store.keyspaces()},
            "hints": sorted(repr(h) for h in store.hints()),
        }
    return out


def bad_requests(c: SimCluster) -> list[tuple[str, ClientRequest]]:
    rid = c.new_rid

    def put(
        key: str, value: bytes | None, ctx: dict[str, Any] | None = None, ctype: str = JSON
    ) -> PutRequest:
        return PutRequest(rid(), KV, key, value, ctype, ctx, "ALL")

    def incr(delta: int, request_id: str = "r") -> IncrRequest:
        return IncrRequest(rid(), COUNTERS, "c", delta, request_id, "ALL")

    return [
        ("empty key", put("", b"1")),
        ("key too long", put("k" * 1025, b"1")),
        ("key not UTF-8", put("k\udcff", b"1")),
        ("value too large", put("k", b'"' + b"x" * (1 << 20) + b'"')),
        ("NaN", put("k", b"NaN")),
        ("Infinity inside", put("k", b"[1,-Infinity]")),
        ("float overflow", put("k", b"1e400")),
        ("too deep", put("k", b"[" * 65 + b"]" * 65)),
        ("very deep", put("k", b"[" * 100_000)),
        ("counter over 2^53-1", put("k", b"2", {"A": 2**53})),
        ("zero counter", put("k", b"2", {"A": 0})),
        ("too many actors", put("k", b"2", {f"N{i}": 1 for i in range(MAX_CONTEXT_ACTORS + 1)})),
        ("bad actor", put("k", b"2", {"A B": 1})),
        ("put on counters", PutRequest(rid(), COUNTERS, "c", b"1", JSON, None, "ALL")),
        ("delta 2^53", incr(2**53)),
        ("delta -2^53", incr(-(2**53))),
        ("delta huge", incr(10**30)),
        ("empty request id", incr(1, "")),
        ("long request id", incr(1, "r" * 129)),
        ("incr on kv", IncrRequest(rid(), KV, "k", 1, "r", "ALL")),
    ]


def test_the_core_refuses_every_bad_input_and_stores_nothing() -> None:
    c = SimCluster(seed=21, nodes=5, zones=3)
    assert isinstance(c.call("A", PutRequest(c.new_rid(), KV, "k", b'"v"', JSON, None, "ALL")), PutResult)
    assert isinstance(c.call("A", IncrRequest(c.new_rid(), COUNTERS, "c", 5, "first", "ALL")), IncrResult)
    c.run_for(1.0)
    before = listing(c)
    for via in "AC":
        for what, request in bad_requests(c):
            result = c.call(via, request)
            assert isinstance(result, Failure), (what, result)
            assert result.code in ("bad_input", "too_large"), (what, result)
            assert "Traceback" not in result.error and result.error, what
    c.run_for(1.0)
    assert listing(c) == before


def test_bytes_that_are_not_json_are_kept_as_bytes() -> None:
    c = SimCluster(seed=22, nodes=3, zones=3)
    blob = b"\x00\xffNaN["  # not JSON: the NaN inside is just bytes
    assert isinstance(c.call("A", PutRequest(c.new_rid(), KV, "b", blob, BYTES, None, "ALL")), PutResult)
    mislabelled = b"plain text"  # not JSON although labelled so: shown as base64, never parsed as JSON
    assert isinstance(
        c.call("A", PutRequest(c.new_rid(), KV, "t", mislabelled, JSON, None, "ALL")), PutResult
    )


def test_a_counter_stays_within_2_to_the_53() -> None:
    c = SimCluster(seed=23, nodes=3, zones=3)

    def incr(delta: int, rid: str) -> IncrResult | Failure:
        result = c.call("A", IncrRequest(c.new_rid(), COUNTERS, "big", delta, rid, "ALL"))
        assert isinstance(result, IncrResult | Failure)
        return result

    top = incr(MAX_INTEGER, "1")
    assert isinstance(top, IncrResult) and top.value == MAX_INTEGER
    over = incr(1, "2")
    assert isinstance(over, Failure) and over.code == "bad_input" and "outside" in over.error
    back = incr(-1, "3")  # towards zero is always allowed
    assert isinstance(back, IncrResult) and back.value == MAX_INTEGER - 1
    low = incr(-MAX_INTEGER, "4")
    assert isinstance(low, IncrResult) and low.value == -1


# --- forged contexts ------------------------------------------------------------------------------


def homes(c: SimCluster, key: str) -> tuple[str, ...]:
    return c.ring.preference_list(key_token(KV, key), 3)


def read(c: SimCluster, via: str, key: str) -> tuple[list[Any], dict[str, int], Versioned]:
    result = c.call(via, GetRequest(c.new_rid(), KV, key, "ALL"))
    assert isinstance(result, GetResult), result
    record = result.record
    assert isinstance(record, Versioned)
    live = [json.loads(s.value) for s in record.siblings if s.value is not None]
    return live, context_of(record.siblings), record


def write(
    c: SimCluster, via: str, key: str, value: object, ctx: dict[str, int] | None
) -> PutResult | Failure:
    result = c.call(via, PutRequest(c.new_rid(), KV, key, json.dumps(value).encode(), JSON, ctx, "ALL"))
    assert isinstance(result, PutResult | Failure)
    return result


def raw_token(vv: dict[str, int]) -> str:
    """A context token made by hand, as a forger would (no encode_context)."""
    return base64.urlsafe_b64encode(cbor2.dumps(vv)).rstrip(b"=").decode("ascii")


def test_a_context_claiming_the_coordinators_own_counter_from_the_future_is_refused() -> None:
    c = SimCluster(seed=24, nodes=5, zones=3)
    key = "future"
    first = homes(c, key)[0]
    assert isinstance(write(c, first, key, "v1", None), PutResult)
    _, ctx, _ = read(c, first, key)
    forged = decode_context(raw_token({**ctx, first: MAX_INTEGER}))
    refused = write(c, first, key, "forged", forged)
    assert isinstance(refused, Failure) and refused.code == "bad_input"
    assert "context from the future" in refused.error and f"{first}:{MAX_INTEGER}" in refused.error
    assert read(c, first, key)[0] == ["v1"]
    # A context the coordinator did issue is accepted, of course.
    assert isinstance(write(c, first, key, "v2", ctx), PutResult)
    assert read(c, first, key)[0] == ["v2"]


@pytest.mark.parametrize("victim_index", [0, 1, 2])
def test_a_forged_huge_counter_leaves_the_key_writable_through_every_coordinator(victim_index: int) -> None:
    c = SimCluster(seed=25 + victim_index, nodes=5, zones=3)
    key = "forged"
    replicas = homes(c, key)
    victim = replicas[victim_index]  # the node whose actor the context lies about
    sender = next(r for r in replicas if r != victim)  # a coordinator that cannot prove the lie
    assert isinstance(write(c, sender, key, "v1", None), PutResult)
    _, ctx, _ = read(c, sender, key)
    forged = decode_context(raw_token({**ctx, victim: MAX_INTEGER}))
    assert isinstance(write(c, sender, key, "after the forgery", forged), PutResult)
    c.run_for(1.0)
    # Every replica coordinates a write with the context it just read, blind writes too, and the
    # key stays readable with contexts that decode.
    for round_ in range(2):
        for via in replicas:
            live, ctx, record = read(c, via, key)
            token = encode_context(ctx)
            assert decode_context(token) == ctx  # every counter in range: a valid token
            result = write(c, via, key, f"{via}-{round_}", decode_context(token))
            assert isinstance(result, PutResult), (via, result)
            assert read(c, via, key)[0] == [f"{via}-{round_}"]
            assert all(s.dot[1] <= MAX_INTEGER for s in record.siblings)
    blind = write(c, victim, key, "blind", None)
    assert isinstance(blind, PutResult), blind
    live, ctx, record = read(c, replicas[0], key)
    assert sorted(live) == sorted([f"{replicas[-1]}-1", "blind"])
    assert all(counter <= MAX_INTEGER for counter in ctx.values())
    # The victim moved to a new actor id for good: it survives a restart.
    new_actor = next(s.dot[0] for s in record.siblings if s.value == b'"blind"')
    assert new_actor.startswith(f"{victim}~")
    c.kill(victim)
    c.run_for(c.config.detection_bound())
    c.revive(victim)
    c.run_for(c.config.detection_bound())
    _, ctx, _ = read(c, victim, key)
    assert isinstance(write(c, victim, key, "after restart", ctx), PutResult)
    live, _, record = read(c, victim, key)
    assert live == ["after restart"] and record.siblings[0].dot[0] == new_actor


def test_forged_counters_for_many_actors_still_leave_the_key_writable() -> None:
    c = SimCluster(seed=29, nodes=5, zones=3)
    key = "many"
    replicas = homes(c, key)
    nodes = sorted(c.hosts)
    # Claims about every node's actor and the fallback actors it would take next.
    claims = {n: MAX_INTEGER for n in nodes} | {f"{n}~{e}": MAX_INTEGER for n in nodes for e in range(1, 8)}
    claims = dict(list(claims.items())[:64])
    for via in replicas:
        mine = {a: v for a, v in claims.items() if a != via}  # its own claim would be refused
        assert isinstance(write(c, via, key, f"forged by {via}", mine), PutResult)
    for via in replicas:
        _, ctx, _ = read(c, via, key)
        assert isinstance(write(c, via, key, f"fixed by {via}", ctx), PutResult)
        assert read(c, via, key)[0] == [f"fixed by {via}"]


def test_size_errors_are_too_large() -> None:
    with pytest.raises(TooLarge):
        from bhandar_cli.core.model.limits import check_value_size

        check_value_size(b"x" * ((1 << 20) + 1))
