"""Records for the digest and disk-format tests: strategies for records of any shape, and three
fixed records with what the code before versioned records (commit 708604d) made of them."""

from __future__ import annotations

from hypothesis import strategies as st

from bhandar_cli.core.model.crdt import ActorCount, PNCounter
from bhandar_cli.core.model.records import Record, Versioned
from bhandar_cli.core.model.versions import Sibling

# Non-ASCII names, and integers past 64 bits (bignums in CBOR).
names = st.text(alphabet="ABZé€\U0001f600", min_size=1, max_size=3)
counts = st.integers(0, 2**70)
deltas = st.integers(-(2**70), 2**70)
# No NaN (a record holding one is not equal to itself); 0.0 rather than -0.0 (see test_record_digest).
times = st.floats(allow_nan=False).map(lambda x: x + 0.0)


@st.composite
def versioned(draw: st.DrawFn) -> Versioned:
    dots = draw(st.lists(st.tuples(names, st.integers(1, 2**70)), unique=True, max_size=4))
    return Versioned(
        tuple(
            Sibling(
                dot,
                draw(st.dictionaries(names, counts, max_size=3)),
                draw(st.none() | st.binary(max_size=8)),
                draw(st.sampled_from(["application/json", "text/plain"]) | st.text(max_size=4)),
                draw(times),
            )
            for dot in sorted(dots)
        )
    )


counters = st.dictionaries(
    names,
    st.builds(ActorCount, counts, counts, counts, st.lists(st.tuples(names, deltas), max_size=3).map(tuple)),
    max_size=3,
).map(PNCounter)

records: st.SearchStrategy[Record] = versioned() | counters


SIBLINGS = Versioned(
    (
        Sibling(("A", 3), {"B": 2, "A": 2}, "café".encode(), "application/json", 1712.25),
        Sibling(("B", 3), {"B": 2}, None, "application/json", 1713.5),
        Sibling(("Zé", 1), {}, b"\x00\xff", "application/octet-stream", 0.0),
    )
)
LWW = Versioned((Sibling(("C", 7), {"C": 6}, b"latest", "text/plain", 99.125),))
COUNTER = PNCounter(
    {"A": ActorCount(5, 2, 3, (("r1", 4), ("r2", 1), ("r3", -2))), "B": ActorCount(1, 0, 1, (("r9", 1),))}
)
SAMPLES: dict[str, Record] = {"siblings": SIBLINGS, "lww": LWW, "counter": COUNTER}
"""By keyspace policy (each sample is stored in a keyspace of the policy it is named after)."""

# Captured once from that code, never regenerated. The stored values, as `RecordStore` wrote them
# (a data value per sample in a keyspace of its policy, and a hint of LWW created at 7.5):
FORMAT1_DATA = {
    "siblings": bytes.fromhex(
        "82687369626c696e67738261768386614103a261410261420245636166c3a9706170706c69636174696f6e2f"
        "6a736f6efb409ac1000000000086614203a1614202f6706170706c69636174696f6e2f6a736f6efb409ac600"
        "0000000086635ac3a901a04200ff78186170706c69636174696f6e2f6f637465742d73747265616dfb000000"
        "0000000000"
    ),
    "lww": bytes.fromhex(
        "82636c77778261768186614307a1614306466c61746573746a746578742f706c61696efb4058c80000000000"
    ),
    "counter": bytes.fromhex(
        "8267636f756e746572826163a261418405020383826272310482627232018262723321614284010001818262723901"
    ),
}
FORMAT1_HINT = bytes.fromhex(
    "82fb401e0000000000008261768186614307a1614306466c61746573746a746578742f706c61696efb4058c80000000000"
)
# The digests that code computed (it hashed cbor2.dumps(to_plain(record))):
FORMAT1_DIGESTS = {
    "siblings": "dffc900b76d5dbaba1b26875",
    "lww": "e8429f2d00aece5a9924a42f",
    "counter": "03049bcb66903edc9451a802",
}
