"""A keyspace in bulk through the client API: its keys page by page, the export line of one key,
the writes that import one line, and the JSON form of a value both use (and `pipe -i json`).

Keys are listed one ring range at a time, from the hash index of every live replica of the range
(the `tree` view `merkle` reads), so a page is one range's keys and a key that only some replicas
hold (a write at QUORUM while one was down) is still listed. Each key is then read through the
normal read path at the level asked for, so what is exported is what a get would return.

An export is JSON Lines: a header naming the keyspace and its definition, then one line per key:

    {"bhandar_export": 1, "keyspace": "kv", "policy": "siblings", "n": 3, "quorum": "sloppy"}
    {"key": K, "siblings": [{"value": V}, {"base64": B, "ctype": T}], "context": TOKEN}
    {"key": K, "counter": N, "shares": {"A": {"p": P, "n": N}}}

A JSON value is written as JSON; any other bytes (or stored JSON that no longer parses) as base64
with its content type beside it, so every value comes back byte for byte or JSON-equal. Keys whose
every sibling is a tombstone are left out (they read as not found).

Import writes each sibling as a blind write (no context): blind writes cover nothing, so the
siblings come back as siblings, beside anything the key already holds. A counter comes back as one
increment by its value through the key's coordinator. Preserved: keys, each key's set of live
sibling values with their content types, each counter's value. Not preserved: dots, clocks and
timestamps (the target cluster issues its own) and a counter's per-node shares (the coordinator's
share holds the total), and the exported context, which names the source cluster's counters.

A read or write that times out is tried again (see `_retrying`), without storing a value twice.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from bhandar_cli.client.outcomes import GetOutcome
from bhandar_cli.core.model import (
    BYTES,
    JSON,
    BadInput,
    ClientError,
    KeyspaceDef,
    NotJson,
    encode_json,
    parse_json,
)

if TYPE_CHECKING:
    from bhandar_cli.client.backend import Backend
    from bhandar_cli.client.data_client import DataClient

EXPORT_FORMAT = 1
RETRIES = 3  # times a read or write that timed out is tried again
T = TypeVar("T")


def value_json(raw: bytes, ctype: str) -> dict[str, Any]:
    """{"value": V} for a JSON value, else {"base64": B, "ctype": T}: reversible either way."""
    if ctype == JSON:
        try:
            return {"value": parse_json(raw)}
        except (NotJson, BadInput):
            pass  # stored as JSON before the limits were strict: keep its bytes
    return {"base64": base64.b64encode(raw).decode("ascii"), "ctype": ctype}


def value_from_json(obj: dict[str, Any]) -> tuple[bytes, str]:
    """The stored bytes and content type of a `value_json` form (BadInput if it is neither)."""
    if "base64" in obj:
        ctype = obj.get("ctype", BYTES)
        if not isinstance(obj["base64"], str) or not isinstance(ctype, str):
            raise BadInput("base64 and ctype must be strings")
        try:
            return base64.b64decode(obj["base64"], validate=True), ctype
        except binascii.Error:
            raise BadInput("base64 is not valid base64") from None
    if "value" in obj:
        return encode_json(obj["value"]), JSON
    raise BadInput('a value needs "value" (JSON) or "base64" (bytes)')


@dataclass(frozen=True)
class ExportHeader:
    """The first line of an export: which keyspace, and how to create it again."""

    keyspace: KeyspaceDef

    def to_json(self) -> dict[str, Any]:
        ks = self.keyspace
        header: dict[str, Any] = {
            "bhandar_export": EXPORT_FORMAT,
            "keyspace": ks.name,
            "policy": ks.policy,
            "n": ks.n,
            "quorum": ks.quorum,
        }
        if ks.ttl:
            header["ttl"] = ks.ttl
        return header

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ExportHeader:
        if obj.get("bhandar_export") != EXPORT_FORMAT:
            raise BadInput(f"not a format {EXPORT_FORMAT} export header: {obj.get('bhandar_export')!r}")
        try:
            return cls(
                KeyspaceDef(
                    str(obj["keyspace"]),
                    str(obj["policy"]),
                    int(obj["n"]),
                    str(obj["quorum"]),
                    int(obj.get("ttl", 0)),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BadInput(f"the export header is incomplete: {exc}") from None


async def keyspace_def(backend: Backend, name: str) -> KeyspaceDef | None:
    """The definition of keyspace `name` as the first node to answer knows it, or None if it has
    none. No answer at all is an unavailable cluster, not an unknown keyspace (a node too busy to
    answer within the admin timeout shows an empty view)."""
    for node in backend.names:
        if not backend.is_alive(node):
            continue
        info = await backend.node_info(node, counts=False)
        if "keyspaces" not in info:
            continue  # it did not answer
        for ks in info["keyspaces"]:
            if ks["name"] == name:
                ttl = int(ks.get("ttl", 0))
                return KeyspaceDef(ks["name"], ks["policy"], int(ks["n"]), ks["quorum"], ttl)
        return None
    raise ClientError("unavailable", "no node answered with its keyspaces (all down or too busy); try again")


async def key_pages(backend: Backend, keyspace: KeyspaceDef) -> AsyncIterator[list[str]]:
    """Every key of the keyspace, one ring range per page, sorted within the page (tombstoned
    keys included: their read says so). A range with no live replica is an error, not a gap."""
    ring = backend.ring
    for rng in ring.ranges():
        replicas = [r for r in ring.preference_list(rng.hi, keyspace.n) if backend.is_alive(r)]
        if not replicas:
            raise ClientError("unavailable", f"no replica of the range ({rng.lo}, {rng.hi}] is up")
        keys: set[str] = set()
        for name in replicas:
            keys.update(
                str(key)
                for _token, key, _digest in await backend.node_tree(name, keyspace.name, rng.lo, rng.hi)
            )
        yield sorted(keys)


async def export_key(client: DataClient, keyspace: str, key: str, level: str | None) -> dict[str, Any] | None:
    """Read one key at `level` and give its export line (None: nothing live to export). A read
    that times out is tried again: reading twice changes nothing."""
    try:
        outcome = await _retrying(partial(client.get, keyspace, key, level))
        assert outcome is not None  # without `landed` a retry ends with an answer or raises
        return export_line(outcome)
    finally:
        client.forget(keyspace, key)


def export_line(outcome: GetOutcome) -> dict[str, Any] | None:
    """One key's export line, or None when nothing of it is live (only tombstones, or gone)."""
    if outcome.counter is not None:
        shares = {actor: {"p": p, "n": n} for actor, (p, n) in outcome.counter_entries.items()}
        return {"key": outcome.key, "counter": outcome.counter, "shares": shares}
    live = [s for s in outcome.siblings if not s.tombstone and s.raw is not None]
    if not live:
        return None
    return {
        "key": outcome.key,
        "siblings": [value_json(s.raw, s.ctype) for s in live if s.raw is not None],
        "context": outcome.context,
    }


@dataclass(frozen=True)
class ImportedKey:
    key: str
    siblings: int  # values written (0 for a counter)
    counter: bool


async def import_line(
    client: DataClient, keyspace: str, obj: dict[str, Any], level: str | None
) -> ImportedKey:
    """Write one export line back (raises BadInput for a malformed line, ClientError for a
    refused or failed write). Siblings go one after another through the key's coordinator."""
    key = obj.get("key")
    if not isinstance(key, str):
        raise BadInput('a line needs "key" (a string)')
    try:
        return await _write_back(client, keyspace, key, obj, level)
    finally:
        client.forget(keyspace, key)


async def _write_back(
    client: DataClient, keyspace: str, key: str, obj: dict[str, Any], level: str | None
) -> ImportedKey:
    if "counter" in obj:
        total = obj["counter"]
        if not isinstance(total, int) or isinstance(total, bool):
            raise BadInput('"counter" must be an integer')
        request_id = uuid.uuid4().hex[:16]  # the same on every try: replicas count it once
        await _retrying(partial(client.incr, keyspace, key, total, request_id, level))
        return ImportedKey(key, 0, True)
    siblings = obj.get("siblings")
    if not isinstance(siblings, list) or not siblings or not all(isinstance(s, dict) for s in siblings):
        raise BadInput('a line needs "siblings" (a list of values) or "counter"')
    values = [value_from_json(s) for s in siblings]  # all checked before the first write
    for data, ctype in values:
        write = partial(client.put, keyspace, key, data, ctype, "none", level)
        await _retrying(write, partial(_holds, client, keyspace, key, data, ctype, level))
    return ImportedKey(key, len(values), False)


async def _retrying(
    call: Callable[[], Awaitable[T]], landed: Callable[[], Awaitable[bool]] | None = None
) -> T | None:
    """`call`'s answer, tried again after a timeout (a node busy flushing under a bulk load), at
    most RETRIES times. A timed-out write may have been stored all the same: a blind write is
    tried again only if `landed` says the key does not hold its value yet (None then: it does),
    else it would come back twice, as two siblings; an increment is retried with its request id,
    which counts once."""
    retries = 0
    while True:
        try:
            return await call()
        except ClientError as exc:
            retries += 1
            if exc.code != "timeout" or retries > RETRIES:
                raise
        if landed is not None and await landed():
            return None


async def _holds(
    client: DataClient, keyspace: str, key: str, data: bytes, ctype: str, level: str | None
) -> bool:
    """Whether the key (read at `level`) has a live sibling with these bytes and content type."""
    got = await client.get(keyspace, key, level)
    return any(s.raw == data and s.ctype == ctype for s in got.siblings if not s.tombstone)
