"""Fuzz the causal-context token decoder (core/model/context.py): a valid context or a clear `BadInput`.

A token comes from whoever calls the HTTP API, the CLI or the REPL, so it may be anything: any
text, a real token with characters changed, or well-formed base64 of any bytes, including CBOR that
cbor2 would decode into tags, sets, dates or shared references.
"""

from __future__ import annotations

import base64
import datetime

import cbor2
from hypothesis import example, given
from hypothesis import strategies as st

from bhandar_cli.core.model.context import decode_context, encode_context
from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.core.model.limits import ACTOR, MAX_INTEGER

from .conftest import fuzz_settings
from .strategies import bodies

# Node actors as the store names them (A, B~3, node-7.r1); ACTOR is the rule they follow.
ACTOR_CHARS = "ABCxyz0189_.~-"
actors = st.text(ACTOR_CHARS, min_size=1, max_size=64)
contexts = st.dictionaries(actors, st.integers(1, MAX_INTEGER), max_size=8)


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def check(token: str) -> None:
    try:
        context = decode_context(token)
    except BadInput as exc:
        assert str(exc)
        return
    # Whatever is accepted is a context the store can use as it is.
    assert all(isinstance(a, str) and ACTOR.match(a) for a in context)
    assert all(type(c) is int and 0 < c <= MAX_INTEGER for c in context.values())
    assert decode_context(encode_context(context)) == context


@fuzz_settings()
@given(vv=contexts)
def test_a_real_token_decodes_to_its_context(vv: dict[str, int]) -> None:
    assert decode_context(encode_context(vv)) == vv


@fuzz_settings()
@given(token=st.text(max_size=300))
@example(token="=")
@example(token="A" * 5000).via("over the length limit")
def test_arbitrary_text(token: str) -> None:
    check(token)


@fuzz_settings()
@given(vv=contexts.filter(bool), data=st.data())
def test_mutated_real_tokens(vv: dict[str, int], data: st.DataObject) -> None:
    token = list(encode_context(vv))
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(token) - 1))
        token[at] = data.draw(st.sampled_from("AZaz09-_=+/ .\x00é"))
    check("".join(token))


# CBOR a forged token could carry: tags cbor2 decodes itself, shared references, odd keys.
cbor_oddities = st.sampled_from(
    [
        cbor2.dumps(datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)),
        cbor2.dumps({1: 2, 1.5: 3}),
        cbor2.dumps(frozenset({1, 2})),
        cbor2.dumps(cbor2.CBORTag(28, [cbor2.CBORTag(29, 0)])),
        cbor2.dumps({"A": 2**80}),
        cbor2.dumps({"A": True}),
        cbor2.dumps({"A": cbor2.CBORTag(2, b"\x01" * 40)}),
        b"\xd8\x1c\xa1\x61A\xd8\x1d\x00",  # a map holding a reference to itself
        b"\x81" * 600 + b"\x00",  # nested deeper than cbor2's own limit
        b"\xbb" + b"\xff" * 8,  # a map declaring 2^64-1 entries
    ]
)


@fuzz_settings()
@given(raw=st.binary(max_size=200) | cbor_oddities | bodies.map(cbor2.dumps))
def test_base64_of_arbitrary_cbor(raw: bytes) -> None:
    check(b64(raw))
