"""The record store's values on disk: a format version on every record, readers for each version.

Every value is one CBOR item. Format 2 (what this build writes) is an array whose first item is
the format version inside the CBOR tag RECORD_TAG, and whose second says what the value is:

    data value   [RECORD_TAG(2), "data", policy, record]
    hint value   [RECORD_TAG(2), "hint", created, record]
    held value   [RECORD_TAG(2), "held", [operand, ...]]     (see "Unreadable records")

where `record` is the plain form of `core.model.records.to_plain`. Format 1, the first one, had no
version: a data value was [policy, record] and a hint [created, record]. This build reads both
and writes format 2; the engine's merge rewrites a format-1 value in format 2 when it merges it.
Metadata values (keyspace definitions, counters, status: no records) stay plain CBOR.

Telling the formats apart needs no guess: format 1 values were written by cbor2 from lists,
strings and numbers and hold no tag, while every versioned value is an array that starts with
one. (Only the version is tagged: cbor2 decodes whatever is inside a tag as tuples and frozen
dicts, which costs every read.) The array, its tagged version and its kind keep their meaning in
every later version; only what follows the kind may change. So this build can tell, of a value
from a newer build, which version wrote it and whether it is a record to merge ("data", "held")
or one replaced whole (any other kind). A change to the layout after the kind, or to the plain
form of a record, must raise `FORMAT_VERSION` and keep a reader for the old layout.

Unreadable records (a newer version, after a downgrade; or a value no version of us wrote) are
refused with `RecordFormatError`, a `StorageError` that names the version, and are never lost:
- the record stays on disk as it is. `RecordStore` reports it once (log, `unreadable`) and treats
  its key as holding nothing: `get` returns None and scans skip it, so the node keeps serving,
  repairing and handing off every other key (an exception there would stop the node's loop);
- the engine's merge cannot combine what it cannot read, so when a write (a client's, a repair,
  a hint) meets such a record it keeps every operand, verbatim, in a "held" value. A build that
  reads every operand merges them when it reads the key; until then the key stays unreadable.
A versioned metadata value (only a newer build could write one) is refused too, but raised to
the caller: a setting must not be guessed (a dot counter read as absent would reuse dots).
"""

from __future__ import annotations

import functools
from typing import Any, Final

import cbor2

from bhandar_cli.core.model import POLICIES, Record, from_plain, merge_records, to_plain
from bhandar_cli.storage import StorageError

FORMAT_VERSION: Final = 2
"""The format this build writes; it reads every version from 1 to this one."""

RECORD_TAG: Final = 0xBDA0
"""The CBOR tag around the version of every versioned value: in the first-come-first-served range
(RFC 8949 §9.2) and below 2**16, so it costs 3 bytes; cbor2 gives it no meaning of its own."""

DATA, HINT, HELD = "data", "hint", "held"
_MERGED_KINDS: Final = frozenset({DATA, HELD})
# How a data value of this format starts: the head of a 4-item array, the tagged version, "data".
_CURRENT_DATA: Final = b"\x84" + cbor2.dumps([cbor2.CBORTag(RECORD_TAG, FORMAT_VERSION), DATA])[1:]
_DATA_VALUE = "a data value"


class RecordFormatError(StorageError):
    """A stored value this build cannot read. `version` is its format version when it names one
    (a newer build wrote it: upgrade to read it), None when the value is malformed."""

    def __init__(self, where: str, why: str, version: int | None = None) -> None:
        self.where = where
        self.why = why
        self.version = version
        super().__init__(f"cannot read {where}: {why}")

    def at(self, where: str) -> RecordFormatError:
        """The same error, naming where the value was found (the store knows; the reader not)."""
        return RecordFormatError(where, self.why, self.version)


def encode_data(policy: str, record: Record) -> bytes:
    # The bytes of `_dump(DATA, policy, to_plain(record))`, without building the envelope: a CBOR
    # array of known length is its head and its items' encodings one after the other, and the
    # head, tag, version and kind never change (tests/store/test_record_codec.py compares them).
    head = _DATA_HEADS.get((FORMAT_VERSION, policy))
    if head is None:
        if policy not in POLICIES:  # not a policy of this build: the engine refuses it on reading
            return _dump(DATA, policy, to_plain(record))
        head = _DATA_HEADS[FORMAT_VERSION, policy] = cbor2.dumps(
            [cbor2.CBORTag(RECORD_TAG, FORMAT_VERSION), DATA, policy, None]
        )[:-1]  # the array's head, the tagged version, the kind, the policy: all but the last item
    return head + cbor2.dumps(to_plain(record))


# A data value's first bytes, by format version (a test makes up a later one) and policy.
_DATA_HEADS: dict[tuple[int, str], bytes] = {}


def decode_data(raw: bytes, where: str = "a data value") -> tuple[str, Record]:
    """(policy, record) of a data value of any known version; raises `RecordFormatError`."""
    try:
        return _decoded(raw)
    except RecordFormatError as exc:
        raise exc.at(where) from None  # every error names the outermost `where`: this one


@functools.lru_cache(maxsize=4096)
def _decoded(raw: bytes) -> tuple[str, Record]:
    """Decoding is most of a read's and a merge's cost, and the same bytes come back (reads of a
    hot key, each compaction level merging the same older value): decode each value once.
    Records are immutable values (the memory store shares them the same way)."""
    return _data_of(_load(raw, _DATA_VALUE), _DATA_VALUE)


def encode_hint(created: float, record: Record) -> bytes:
    return _dump(HINT, created, to_plain(record))


def decode_hint(raw: bytes, where: str = "a hint") -> tuple[float, Record]:
    """(created, record) of a hint value of any known version; raises `RecordFormatError`."""
    stored = _load(raw, where)
    if _is_versioned(stored):
        _, kind, body = _envelope(stored, where)
        if kind != HINT or len(body) != 2:
            raise RecordFormatError(where, f"a {kind!r} value of {len(body)} items is not a hint")
        created, plain = body
    elif isinstance(stored, list) and len(stored) == 2:  # format 1: [created, record]
        created, plain = stored
    else:
        raise RecordFormatError(where, "malformed hint (no version of Bhandar writes this shape)")
    if isinstance(created, bool) or not isinstance(created, int | float):
        raise RecordFormatError(where, f"hint creation time {created!r} is not a number")
    return float(created), _record(plain, where)


def encode_meta(value: Any) -> bytes:
    return cbor2.dumps(value)


def decode_meta(raw: bytes, where: str = "a metadata value") -> Any:
    """A metadata value; a versioned one (only a newer build could write it) is refused."""
    stored = _load(raw, where)
    if _is_versioned(stored):
        version, _, _ = _envelope(stored, where)
        raise RecordFormatError(where, f"metadata in format version {version} is not plain CBOR", version)
    return stored


def merge_stored(newer: bytes, older: bytes) -> bytes:
    """The engine's merge operator, for every key of the store.

    Data values merge by the versioning rules (the policy stored beside the record decides), in
    any known format, into a format-2 value; operands this build cannot read are kept in a "held"
    value (see the module docstring). Hints and metadata are replaced whole: the newer wins.
    """
    if newer == older:
        return newer
    try:  # the usual case: both readable
        newest, oldest = _decoded(newer), _decoded(older)
    except RecordFormatError:
        return _merge_unusual(newer, older)
    policy, merged = _merge_all([newest, oldest])
    # Most merges return one operand unchanged (a replica writes what it merged already): then
    # that operand's bytes are the answer, if they are this format's, under this policy.
    for raw, (was_policy, record) in ((newer, newest), (older, oldest)):
        if merged is record and was_policy == policy and raw.startswith(_CURRENT_DATA):
            return raw
    return encode_data(policy, merged)


def _merge_unusual(newer: bytes, older: bytes) -> bytes:
    """`merge_stored` of operands not both readable data values: a hint or metadata value (the
    newer wins), or a record this build cannot read (kept beside the others, "held")."""
    new, old = _load_or_none(newer), _load_or_none(older)
    if not (_is_data(new) and _is_data(old)):
        return newer
    readable: list[tuple[str, Record]] = []
    unreadable: set[bytes] = set()
    for raw, stored in (*_operands(newer, new), *_operands(older, old)):  # newest first
        try:
            readable.append(_data_of(stored, "a merge operand"))
        except RecordFormatError:
            unreadable.add(raw)
    # A deterministic order, so equal operands give equal bytes whichever way they were folded.
    held = ([encode_data(*_merge_all(readable))] if readable else []) + sorted(unreadable)
    return _dump(HELD, held)


# --- envelope ---------------------------------------------------------------------------------


def _dump(kind: str, *body: Any) -> bytes:
    return cbor2.dumps([cbor2.CBORTag(RECORD_TAG, FORMAT_VERSION), kind, *body])


def _load(raw: bytes, where: str) -> Any:
    try:
        return cbor2.loads(raw)
    except Exception as exc:  # cbor2 raises several types on bad input, not one
        raise RecordFormatError(where, f"undecodable CBOR ({exc})") from exc


def _is_versioned(stored: Any) -> bool:
    """Format 2 or later: an array whose first item is a tag (format 1 values hold none)."""
    return isinstance(stored, list) and bool(stored) and isinstance(stored[0], cbor2.CBORTag)


def _envelope(stored: list[Any], where: str) -> tuple[int, str, list[Any]]:
    """(version, kind, the items after them) of a versioned value this build can read."""
    tag = stored[0]
    version = tag.value
    kind = stored[1] if len(stored) > 1 else None
    if tag.tag != RECORD_TAG or isinstance(version, bool) or not isinstance(version, int):
        raise RecordFormatError(where, f"malformed versioned value (tag {tag.tag}, version {version!r})")
    if version > FORMAT_VERSION:
        raise RecordFormatError(
            where,
            f"it is in record format version {version}, written by a newer Bhandar; this build reads "
            f"versions 1 to {FORMAT_VERSION} (upgrade to read it; it stays on disk unchanged)",
            version,
        )
    if version < 2 or not isinstance(kind, str):  # format 1 had no version item
        raise RecordFormatError(where, f"malformed versioned value (version {version}, kind {kind!r})")
    return version, kind, stored[2:]


def _load_or_none(raw: bytes) -> Any:
    try:
        return cbor2.loads(raw)
    except Exception:  # not CBOR: certainly not a record to merge
        return None


def _is_data(stored: Any) -> bool:
    """Whether a stored value is a record that merges (any version), rather than one replaced
    whole; decided from the parts of the envelope that never change, or format 1's shape."""
    if _is_versioned(stored):
        kind = stored[1] if len(stored) > 1 else None
        return stored[0].tag == RECORD_TAG and isinstance(kind, str) and kind in _MERGED_KINDS
    # Format 1: data is [policy, record]; a hint starts with a number; metadata is no such pair.
    return isinstance(stored, list) and len(stored) == 2 and stored[0] in POLICIES


def _operands(raw: bytes, stored: Any) -> list[tuple[bytes, Any]]:
    """(raw, decoded) of the operands a value stands for: those a held value keeps, or itself."""
    if (
        _is_versioned(stored)
        and stored[0] == cbor2.CBORTag(RECORD_TAG, FORMAT_VERSION)
        and stored[1:2] == [HELD]
        and len(stored) == 3
        and isinstance(stored[2], list)
        and all(isinstance(b, bytes) for b in stored[2])
    ):
        return [(b, _load_or_none(b)) for b in stored[2]]
    return [(raw, stored)]  # a malformed held value is kept whole, as an unreadable operand


def _data_of(stored: Any, where: str) -> tuple[str, Record]:
    if _is_versioned(stored):
        _, kind, body = _envelope(stored, where)
        if kind == HELD:
            return _merge_held(body, where)
        if kind != DATA or len(body) != 2:
            raise RecordFormatError(where, f"a {kind!r} value of {len(body)} items is not a data value")
        policy, plain = body
    elif isinstance(stored, list) and len(stored) == 2:  # format 1: [policy, record]
        policy, plain = stored
    else:
        raise RecordFormatError(where, "malformed data value (no version of Bhandar writes this shape)")
    if policy not in POLICIES:
        raise RecordFormatError(where, f"unknown keyspace policy {policy!r}")
    return str(policy), _record(plain, where)


def _merge_held(body: list[Any], where: str) -> tuple[str, Record]:
    if len(body) != 1 or not isinstance(body[0], list) or not body[0]:
        raise RecordFormatError(where, "malformed held value")
    readable: list[tuple[str, Record]] = []
    for operand in body[0]:
        if not isinstance(operand, bytes):
            raise RecordFormatError(where, "malformed held value")
        try:
            readable.append(decode_data(operand, where))
        except RecordFormatError as exc:
            raise RecordFormatError(
                where, f"it holds a record this build cannot read, kept beside it: {exc.why}", exc.version
            ) from exc
    return _merge_all(readable)


def _merge_all(records: list[tuple[str, Record]]) -> tuple[str, Record]:
    """One (policy, record) of several, newest first: the newest's policy, every record merged."""
    policy, merged = records[0]
    for _, record in records[1:]:
        out = merge_records(policy, merged, record)
        assert out is not None  # merging two records never yields nothing
        merged = out
    return policy, merged


def _record(plain: Any, where: str) -> Record:
    try:
        return from_plain(plain)
    except ValueError as exc:
        raise RecordFormatError(where, str(exc)) from exc
