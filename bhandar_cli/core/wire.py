"""Messages as plain values for CBOR frames (and back), with a closed registry of types.

A message becomes {"$t": type name, field: value, ...}; a record becomes {"$r": its plain form};
lists come back as tuples (the dataclasses are frozen). Anything not in the registry, or with
fields its type does not have, is refused with a `ValueError`, never constructed.

Records travel in their plain form (`records.to_plain`), not in the versioned disk format: the
frame's protocol version already covers everything in it, and a node answers an older peer in
that peer's version, which a per-record version would not follow. The disk format versions values
that outlive the build that wrote them, and carries what a message holds in its own fields (the
policy, a hint's time).

Versions: `ADDED_IN` lists the fields each protocol version added to a message, and
`to_wire_at(msg, version)` leaves out what a reader of an older version does not know, so a node
writes to each peer what that peer reads (node/net/codec.py negotiates the version). A field added in
a version must be optional (a default the older side's messages decode to) and belong to a
top-level message, which is where `to_wire_at` looks. Version 2 added:

- `GossipSyn.sent` and `GossipAck.echo`: a syn carries its sender's clock and the ack gives it
  back, so a node measures the round trip to each peer that speaks version 2 (`members` shows it
  as rtt_ms; a version-1 peer shows none).
- `Goodbye` (a new message, `MESSAGES_ADDED_IN`): a node stopping cleanly says so, and its
  version-2 peers call it down at once (writes for it become hints at once, rather than after the
  failure detector's seconds). A version-1 peer is never sent one (it could not read it).

Version 3 sends batches (node/net/codec.py). Version 4 added:

- `PutRequest.dot`, `PutRequest.ts` and `ClientReply.stored`: a node forwarding a put mints its
  exact dot (and stamps its time), and the coordinator says whether it stored the put under it
  (core/roles/exact_dots.py). A version-3 peer reads the put without them and mints its own dot,
  as before.

Version 5 added who said what (core/membership/authorship.py):

- `MemberState.cert` and `MemberState.seal`: a member's certificate and its signature over its
  state, so a node hearing it second-hand can check it. A version-4 peer gets its states without
  them, and a version-5 node takes an unsealed state only from the member itself.
- `TokenRecord.seal`: an issuer's signature over a token record (a revocation is a new record).
- `GossipSyn.removals`, `GossipAck.removals`: issuers' removals of members (`cluster remove`). A
  version-4 peer is not told; it still refuses nothing of the removed node until it is upgraded.
- `GossipSyn.schema_seals`, `GossipAck.schema_seals`, `SchemaUpdate.seals`: issuers' seals of
  keyspace definitions; a version-5 node changes a definition it knows only for a sealed one.

Version 6 added why a write was forwarded (core/roles/coordinator.py):

- `PutResult.forward_reason` and `IncrResult.forward_reason`: the node a client asked says why it
  did not coordinate the write (not a replica of the key, leaving the ring, ...). A version-5
  reader gets the result without it, and its client says less.

`MemberState`, `TokenRecord` and the results travel inside other messages, so `to_wire_at` strips
added fields at any depth when it writes for an older reader.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bhandar_cli.core.model import BhandarError, KeyspaceDef, PNCounter, Versioned, from_plain, to_plain
from bhandar_cli.core.protocol import (
    Failure,
    GetRequest,
    GetResult,
    IncrRequest,
    IncrResult,
    PutRequest,
    PutResult,
    field_names,
)

# What a one-shot command sends and receives (core/protocol/client_messages.py). The rest (keyspace
# requests, the node-to-node messages of gossip, repair, streaming and core/protocol/messages.py) are
# registered on first need (`_register_peers`): their modules cost a one-shot command, which
# never sees them, half its start-up.
CLIENT_TYPES: tuple[type, ...] = (
    KeyspaceDef,
    PutRequest,
    GetRequest,
    IncrRequest,
    PutResult,
    GetResult,
    IncrResult,
    Failure,
)


def _peer_types() -> tuple[type, ...]:
    from bhandar_cli.core.membership import Goodbye, GossipAck, GossipSyn, GossipTokens, MemberState, Removal
    from bhandar_cli.core.model import TokenRecord
    from bhandar_cli.core.protocol import (
        ClientReply,
        DecommissionRequest,
        KeyspaceRequest,
        KeyspaceResult,
        MoveResult,
        Ping,
        Pong,
        RepairRequest,
        RepairResult,
        ReplicaAck,
        ReplicaRead,
        ReplicaReadReply,
        ReplicaWrite,
        SchemaUpdate,
    )
    from bhandar_cli.core.repair import (
        HashProbe,
        RepairDone,
        RepairFetch,
        RepairFetchReply,
        RepairProbe,
        RepairProbeReply,
        RepairPush,
    )
    from bhandar_cli.core.roles import StreamAck, StreamBatch, StreamRequest

    return (
        KeyspaceRequest,
        KeyspaceResult,
        ClientReply,
        ReplicaWrite,
        ReplicaAck,
        ReplicaRead,
        ReplicaReadReply,
        SchemaUpdate,
        Ping,
        Pong,
        RepairRequest,
        DecommissionRequest,
        RepairResult,
        MoveResult,
        MemberState,
        Removal,
        Goodbye,
        GossipSyn,
        GossipAck,
        GossipTokens,
        TokenRecord,
        HashProbe,
        RepairProbe,
        RepairProbeReply,
        RepairFetch,
        RepairFetchReply,
        RepairPush,
        RepairDone,
        StreamRequest,
        StreamBatch,
        StreamAck,
    )


REGISTRY: dict[str, type] = {}
"""Type name -> message class, of every type registered so far: read it through `registry()`."""

# Each registered class's field names, read once: `dataclasses.fields` on every message was a
# visible cost of the frame path.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_peers_registered = False
_PLAIN = frozenset({str, int, bytes, float, bool, type(None)})

# Keyspace definitions decoded before, by their wire form. Every replica message carries one, and
# building it with its checks was two thirds of decoding a ReplicaRead; it is frozen, so one
# instance serves every message that names it. Only forms of plain str and int fields are kept
# (1, 1.0 and True are equal keys but not the same field), and at most INTERNED_MAX of them.
_INTERNED_TYPES = frozenset({KeyspaceDef})
_interned: dict[tuple[tuple[str, Any], ...], Any] = {}
INTERNED_MAX = 1024


def register(cls: type) -> type:
    """Add a message type (later features register theirs)."""
    REGISTRY[cls.__name__] = cls
    _FIELD_NAMES[cls] = message_fields(cls)
    return cls


def message_fields(cls: type) -> tuple[str, ...]:
    """A message type's fields in order: a dataclass's, or a value class's (core/protocol/value_fields.py)."""
    if dataclasses.is_dataclass(cls):
        return tuple(f.name for f in dataclasses.fields(cls))
    return field_names(cls)


def _is_message(obj: Any) -> bool:
    """Whether `obj` is a message-shaped instance (of a dataclass or a value class), registered or not."""
    return (dataclasses.is_dataclass(obj) and not isinstance(obj, type)) or hasattr(
        type(obj), "__match_args__"
    )


for _cls in CLIENT_TYPES:
    register(_cls)


def _register_peers() -> bool:
    """Register the node-to-node messages if they are not yet; whether this call did."""
    global _peers_registered
    if _peers_registered:
        return False
    for cls in _peer_types():
        register(cls)
    _peers_registered = True
    return True


def registry() -> dict[str, type]:
    """Every message type: type name -> class."""
    _register_peers()
    return REGISTRY


ADDED_IN: dict[int, dict[str, tuple[str, ...]]] = {
    2: {"GossipSyn": ("sent",), "GossipAck": ("echo",)},
    4: {"PutRequest": ("dot", "ts"), "ClientReply": ("stored",)},
    5: {
        "MemberState": ("cert", "seal"),
        "TokenRecord": ("seal",),
        "GossipSyn": ("removals", "schema_seals"),
        "GossipAck": ("removals", "schema_seals"),
        "SchemaUpdate": ("seals",),
    },
    6: {"PutResult": ("forward_reason",), "IncrResult": ("forward_reason",)},
}
"""Protocol version -> message type name -> the fields that version added."""

MESSAGES_ADDED_IN: dict[str, int] = {"Goodbye": 2}
"""Message types newer than version 1 -> the version that added them."""


def readable_at(obj: Any, version: int) -> bool:
    """Whether a reader of protocol `version` knows this message's type."""
    return MESSAGES_ADDED_IN.get(type(obj).__name__, 1) <= version


_NEWEST_ADDED = max(ADDED_IN)


# The messages that carry a member state, a token record or a client's result (a forwarded
# request's answer) inside them: only these are walked.
_HOLDERS = frozenset({"GossipSyn", "GossipAck", "GossipTokens", "StreamRequest", "ClientReply"})


def to_wire_at(obj: Any, version: int) -> Any:
    """`to_wire(obj)` as a reader of protocol `version` knows it: without the fields of later
    versions, at any depth (only an older reader pays for the walk, and only for a message that
    holds a member state or a token record: a replica write is not walked)."""
    out = to_wire(obj)
    if version < _NEWEST_ADDED and isinstance(out, dict):
        unknown = _unknown_at(version)
        name = out.get("$t")
        if name in _HOLDERS:
            _strip(out, unknown)
        else:
            for field in unknown.get(str(name), ()):
                out.pop(field, None)
    return out


def _unknown_at(version: int) -> dict[str, list[str]]:
    """Type name -> the fields a reader of `version` does not know (cached per version)."""
    known = _UNKNOWN.get(version)
    if known is None:
        known = {}
        for added, types in ADDED_IN.items():
            if added > version:
                for name, fields in types.items():
                    known.setdefault(name, []).extend(fields)
        _UNKNOWN[version] = known
    return known


_UNKNOWN: dict[int, dict[str, list[str]]] = {}


def _strip(out: Any, unknown: dict[str, list[str]]) -> None:
    if isinstance(out, dict):
        for field in unknown.get(str(out.get("$t")), ()):
            out.pop(field, None)
        if "$r" not in out:  # a record's plain form holds no message
            for value in out.values():
                _strip(value, unknown)
    elif isinstance(out, list):
        for value in out:
            _strip(value, unknown)


def to_wire(obj: Any) -> Any:
    cls = type(obj)
    if cls in _PLAIN:
        return obj
    names = _FIELD_NAMES.get(cls)
    if names is not None:
        out: dict[str, Any] = {"$t": cls.__name__}
        for name in names:
            out[name] = to_wire(getattr(obj, name))
        if cls is KeyspaceDef and not obj.ttl:
            del out["ttl"]  # a keyspace without expiry travels as before ttl existed (older peers)
        return out
    if isinstance(obj, Versioned | PNCounter):
        return {"$r": to_plain(obj)}
    if _is_message(obj):
        if _register_peers():
            return to_wire(obj)
        raise ValueError(f"{cls.__name__} is not a wire message type")
    if isinstance(obj, list | tuple):
        return [to_wire(x) for x in obj]
    if isinstance(obj, dict):
        return {k: to_wire(v) for k, v in obj.items()}
    if isinstance(obj, frozenset | set):
        return [to_wire(x) for x in sorted(obj)]
    return obj


def from_wire(data: Any) -> Any:
    if type(data) in _PLAIN:
        return data
    if isinstance(data, dict):
        if "$r" in data:
            return from_plain(data["$r"])
        if "$t" in data:
            cls = REGISTRY.get(data["$t"]) if isinstance(data["$t"], str) else None
            if cls is None and _register_peers():
                return from_wire(data)
            if cls is None:
                raise ValueError(f"unknown message type {data['$t']!r}")
            if cls in _INTERNED_TYPES:
                return _interned_instance(cls, data)
            return _construct(cls, data)
        return {k: from_wire(v) for k, v in data.items()}
    if isinstance(data, list):
        return tuple(from_wire(x) for x in data)
    return data


def _construct(cls: type, data: dict[str, Any]) -> Any:
    fields = {k: from_wire(v) for k, v in data.items() if k != "$t"}
    try:
        return cls(**fields)
    except (TypeError, BhandarError) as exc:  # BadInput: a type's own checks (KeyspaceDef)
        raise ValueError(f"malformed {data['$t']}: {exc}") from exc


def _interned_instance(cls: type, data: dict[str, Any]) -> Any:
    if not all(type(v) is str or type(v) is int for v in data.values()):
        return _construct(cls, data)
    key = tuple(data.items())
    found = _interned.get(key)
    if found is None:
        found = _construct(cls, data)
        if len(_interned) >= INTERNED_MAX:
            _interned.clear()
        _interned[key] = found
    return found
