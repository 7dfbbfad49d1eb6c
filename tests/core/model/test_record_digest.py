"""The record digest: defined by its own canonical encoding, equal for equal records everywhere,
unchanged from the first format's digests, and independent of the disk and wire forms."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from hashlib import blake2b

import cbor2
import pytest
from hypothesis import given, settings

from bhandar_cli.core.model import records as records_module
from bhandar_cli.core.model.crdt import ActorCount, PNCounter
from bhandar_cli.core.model.record_digest import canonical_bytes, digest
from bhandar_cli.core.model.records import Record, Versioned, to_plain
from bhandar_cli.core.model.versions import Sibling
from tests.support.record_samples import FORMAT1_DIGESTS, LWW, SAMPLES, records


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_digests_are_those_of_the_first_format(name: str) -> None:
    # Had they moved, nodes of two builds would see every key as different during an upgrade.
    assert digest(SAMPLES[name]).hex() == FORMAT1_DIGESTS[name]


@settings(deadline=None)  # timing is not the point; a loaded machine must not fail it
@given(records)
def test_canonical_bytes_equal_the_bytes_the_first_format_hashed(record: Record) -> None:
    # An independent encoder (cbor2) as the reference, over bignums, non-ASCII text and any float.
    assert canonical_bytes(record) == cbor2.dumps(to_plain(record))
    assert len(digest(record)) == 12


def test_equal_records_have_equal_digests_whatever_their_python_representation() -> None:
    a = Versioned((Sibling(("A", 1), {"B": 1, "C": 2}, b"x", ts=1.0),))
    b = Versioned((Sibling(("A", 1), {"C": 2, "B": 1}, b"x", ts=1),))  # other order, int ts
    c = Versioned((Sibling(("A", True), {"C": 2, "B": True}, b"x", ts=1.0),))  # bools as ints
    assert a == b == c
    assert digest(a) == digest(b) == digest(c)
    zero, minus_zero = (Versioned((Sibling(("A", 1), {}, b"x", ts=t),)) for t in (0.0, -0.0))
    assert zero == minus_zero and digest(zero) == digest(minus_zero)


def test_any_change_to_a_record_changes_its_digest() -> None:
    base = digest(LWW)
    (s,) = LWW.siblings
    variants = [
        Sibling(("C", 8), s.context, s.value, s.ctype, s.ts),
        Sibling(s.dot, {"C": 5}, s.value, s.ctype, s.ts),
        Sibling(s.dot, s.context, b"latesT", s.ctype, s.ts),
        Sibling(s.dot, s.context, None, s.ctype, s.ts),
        Sibling(s.dot, s.context, s.value, "text/html", s.ts),
        Sibling(s.dot, s.context, s.value, s.ctype, 99.25),
    ]
    assert len({base, *(digest(Versioned((v,))) for v in variants)}) == len(variants) + 1


def test_special_floats_and_bignums_have_fixed_encodings() -> None:
    def ts_bytes(ts: float) -> bytes:
        return canonical_bytes(Versioned((Sibling(("A", 1), {}, None, "t", ts),)))[-9:]

    assert ts_bytes(float("nan")).endswith(b"\xf9\x7e\x00")
    assert ts_bytes(float("inf")).endswith(b"\xf9\x7c\x00")
    assert ts_bytes(float("-inf")).endswith(b"\xf9\xfc\x00")
    assert ts_bytes(1.5) == bytes.fromhex("fb3ff8000000000000")
    big = PNCounter({"A": ActorCount(2**64, 0, 0, (("r", -(2**64) - 1),))})
    encoded = canonical_bytes(big)
    assert bytes.fromhex("c249010000000000000000") in encoded  # tag 2: 2**64
    assert bytes.fromhex("c349010000000000000000") in encoded  # tag 3: -(2**64) - 1


def test_not_a_record_is_a_caller_bug() -> None:
    # Compiled (bhandar_cli/native.py), the argument's declared type is checked before the body runs.
    with pytest.raises(
        TypeError,
        match=r"not a record|Versioned, bhandar_cli\.core\.model\.crdt\.PNCounter\] object expected",
    ):
        canonical_bytes(("v", []))  # type: ignore[arg-type]


@pytest.mark.patches_compiled
def test_digest_does_not_use_the_plain_form_that_disk_and_wire_carry(monkeypatch: pytest.MonkeyPatch) -> None:
    before = {name: digest(r) for name, r in SAMPLES.items()}
    monkeypatch.setattr(records_module, "to_plain", lambda record: ["changed layout"])
    assert {name: digest(r) for name, r in SAMPLES.items()} == before


_PROBE = """
import json, sys
from bhandar_cli.core.model.crdt import ActorCount, PNCounter
from bhandar_cli.core.model.record_digest import digest
from bhandar_cli.core.model.records import Versioned
from bhandar_cli.core.model.versions import Sibling
actors = {f"actor-{i}" for i in range(40)}  # set and dict order follow the per-process hash seed
context = {a: int(a.split("-")[1]) for a in actors}
record = Versioned((Sibling(("A", 1), context, b"v", ts=2.5),))
counter = PNCounter({a: ActorCount(1, 0, 1, ((a, 1),)) for a in actors})
print(json.dumps([digest(record).hex(), digest(counter).hex()]))
"""


def test_digests_are_the_same_in_every_process_whatever_the_hash_seed() -> None:
    outputs = set()
    for seed in ("0", "1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True, timeout=60
        )
        outputs.add(tuple(json.loads(result.stdout)))
    assert len(outputs) == 1


def test_a_remembered_digest_is_never_given_to_another_record() -> None:
    # Recent digests are remembered by the record's identity: a record made after another was
    # dropped (often at the same address) must still get its own digest.
    for i in range(2000):
        record = Versioned((Sibling(("A", i + 1), {}, str(i).encode(), ts=float(i)),))
        assert digest(record) == blake2b(cbor2.dumps(to_plain(record)), digest_size=12).digest()
        del record
    big = Versioned((Sibling(("A", 1), {}, bytes(1 << 17), ts=1.0),))  # too large to be remembered
    assert digest(big) == digest(Versioned((Sibling(("A", 1), {}, bytes(1 << 17), ts=1.0),)))
