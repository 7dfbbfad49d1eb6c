"""What a client sends a node for data (get, put, delete, incr) and gets back, and `Failure`.

A one-shot command (cli/oneshot.py) needs these and nothing else of the messages, and making a
frozen dataclass costs import time (its methods are generated and compiled when the class is
made), so they live apart from the node-to-node messages, the other client requests (keyspace, repair,
decommission) and the effects (core/protocol/messages.py, which re-exports them: `messages.GetRequest` is
this module's class).
"""

from __future__ import annotations

from dataclasses import dataclass

from bhandar_cli.core.model import Record, Sibling, TraceSteps

# --- client requests (from a client, or forwarded by a node that is not a replica) ------------


@dataclass(frozen=True, slots=True)
class PutRequest:
    """put (value is bytes) or delete (value is None). `context is None` means a blind write."""

    rid: int
    keyspace: str
    key: str
    value: bytes | None
    ctype: str
    context: dict[str, int] | None
    consistency: str = "QUORUM"
    trace: bool = False
    hops: int = 0
    avoid: tuple[str, ...] = ()  # coordinators that did not answer it in time (a fallback)
    # The exact dot a forwarding node minted for it (core/roles/exact_dots.py), and the time it
    # minted it: every coordinator that takes the put stores it under this dot with this time, so
    # the copies are one sibling, identical. A client never sets them.
    dot: tuple[str, int] | None = None
    ts: float = 0.0


@dataclass(frozen=True, slots=True)
class GetRequest:
    """Read a key at a consistency level."""

    rid: int
    keyspace: str
    key: str
    consistency: str = "QUORUM"
    trace: bool = False
    hops: int = 0


@dataclass(frozen=True, slots=True)
class IncrRequest:
    """Add `delta` to a counter; `request_id` makes a retry count once."""

    rid: int
    keyspace: str
    key: str
    delta: int
    request_id: str
    consistency: str = "QUORUM"
    trace: bool = False
    hops: int = 0


# --- results -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PutResult:
    """A write's coordinator, the replicas that acknowledged it and how many it needed."""

    coordinator: str
    acks: int
    needed: int
    warnings: tuple[str, ...] = ()
    hinted: tuple[str, ...] = ()  # "E for D": fallbacks that took a hint
    trace: TraceSteps = ()
    # Why the node the client asked did not coordinate it (it forwarded the write: not a replica
    # of the key, leaving the ring, ...), in its words; "" when it coordinated. Protocol 6
    # (core/wire.py): an older node leaves it out, and the client says less.
    forward_reason: str = ""


@dataclass(frozen=True, slots=True)
class GetResult:
    """A read's merged record (None: no replica has one), its coordinator and the replies merged."""

    coordinator: str
    record: Record | None
    replies: int
    needed: int
    trace: TraceSteps = ()
    # lww keyspaces: versions the replicas held that last-writer-wins discarded in this merge
    dropped: tuple[Sibling, ...] = ()
    warnings: tuple[str, ...] = ()  # e.g. a key merges left over the sibling limit


@dataclass(frozen=True, slots=True)
class IncrResult:
    """A counter's value after an increment, and the replicas that acknowledged it."""

    coordinator: str
    value: int
    acks: int
    needed: int
    trace: TraceSteps = ()
    forward_reason: str = ""  # as PutResult's


@dataclass(frozen=True, slots=True)
class Failure:
    """A request that failed; `code` is an ErrorCode, `error` a sentence for a person."""

    code: str
    error: str
    answered: int = 0
    needed: int = 0
    coordinator: str = ""
    trace: TraceSteps = ()
