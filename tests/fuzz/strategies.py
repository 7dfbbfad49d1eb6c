"""Hypothesis strategies shared by the fuzz tests: frame bodies, byte mutations, wire messages."""

from __future__ import annotations

from hypothesis import strategies as st

from bhandar_cli.core.wire import message_fields, registry

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.binary(max_size=12)
)
# Small bodies, cheap to draw, for tests that send many of them over a socket.
small_bodies = (
    scalars | st.lists(scalars, max_size=3) | st.dictionaries(st.text(max_size=4), scalars, max_size=3)
)
# Bodies the codec accepts: what a peer can make a node's `from_wire` see.
bodies = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(st.text(max_size=8) | st.binary(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)


def message_of(
    name: str, values: st.SearchStrategy[object] | None = None
) -> st.SearchStrategy[dict[str, object]]:
    """A wire message `{"$t": name, ...}` with the type's field names (some missing, some extra)
    holding arbitrary `values` (bodies and records by default): what a buggy or hostile peer sends."""
    fields = list(message_fields(registry()[name]))
    values = bodies | well_formed_records | records if values is None else values
    # Every field present gets past the constructor to the code that uses the values.
    complete = st.fixed_dictionaries(dict.fromkeys(fields, values))
    loose = st.builds(
        lambda chosen, extra: {**chosen, **extra},
        st.fixed_dictionaries({}, optional=dict.fromkeys(fields, values)),
        st.dictionaries(st.text(max_size=6), values, max_size=2),
    )
    return (complete | loose).map(lambda message: {"$t": name, **message})


# A record's plain form (`records.to_plain`), well formed or nearly so.
sibling_plain = st.lists(
    st.one_of(
        st.text(max_size=4),
        st.integers(min_value=-(2**64), max_value=2**64),
        st.dictionaries(st.text(max_size=4), st.integers(-5, 2**64) | st.text(max_size=3), max_size=3),
        st.none() | st.binary(max_size=8) | st.integers(min_value=-(2**64), max_value=2**64),
        st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=4),
    ),
    min_size=5,
    max_size=7,
)
counters = st.integers(0, 2**64)
well_formed_records = st.one_of(
    st.builds(
        lambda sibs: {"$r": ["v", sibs]},
        st.lists(
            st.tuples(
                st.text(max_size=3),
                counters,
                st.dictionaries(st.text(max_size=3), counters, max_size=3),
                st.none() | st.binary(max_size=8),
                st.sampled_from(["", "json", "x"]),
                st.floats(allow_nan=False, allow_infinity=False),
            ).map(list),
            max_size=3,
        ),
    ),
    st.builds(
        lambda actors: {"$r": ["c", actors]},
        st.dictionaries(
            st.text(max_size=3),
            st.tuples(
                counters,
                counters,
                counters,
                st.lists(st.tuples(st.text(max_size=3), counters).map(list), max_size=2),
            ).map(list),
            max_size=3,
        ),
    ),
)
records = well_formed_records | st.builds(
    lambda kind, body: {"$r": [kind, body]},
    st.sampled_from(["v", "c", "x"]),
    st.lists(sibling_plain, max_size=3) | st.dictionaries(st.text(max_size=3), bodies, max_size=3) | bodies,
)
wire_messages = st.sampled_from(sorted(registry())).flatmap(message_of)


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` with a few bytes flipped, inserted, deleted or the tail cut off."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if action == "flip" and out:
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "set" and out:
            out[at] = draw(st.sampled_from([0x00, 0x1B, 0x5B, 0x7B, 0x9B, 0xBB, 0xC1, 0xD8, 0xF7, 0xFF]))
        elif action == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=9))
        elif action == "delete" and out:
            del out[at : at + draw(st.integers(1, 4))]
        elif action == "truncate":
            del out[at:]
    return bytes(out)
