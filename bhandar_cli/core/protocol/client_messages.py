"""What a client sends a node for data (get, put, delete, incr) and gets back, and `Failure`.

A one-shot command (cli/oneshot.py) needs these and nothing else of the messages, so they live
apart from the node-to-node messages, the other client requests (keyspace, repair, decommission)
and the effects (core/protocol/messages.py, which re-exports them: `messages.GetRequest` is this
module's class). Each is a value class, immutable, that mypyc compiles to a native class
(core/protocol/value_fields.py).
"""

from __future__ import annotations

from typing import ClassVar, Final, final

from bhandar_cli.core.model import Record, Sibling, TraceSteps
from bhandar_cli.core.protocol.value_fields import ValueClass

# --- client requests (from a client, or forwarded by a node that is not a replica) ------------


@final
class PutRequest(ValueClass):
    """put (value is bytes) or delete (value is None). `context is None` means a blind write."""

    __match_args__: ClassVar = (
        "rid",
        "keyspace",
        "key",
        "value",
        "ctype",
        "context",
        "consistency",
        "trace",
        "hops",
        "avoid",
        "dot",
        "ts",
    )
    __slots__ = (
        "avoid",
        "consistency",
        "context",
        "ctype",
        "dot",
        "hops",
        "key",
        "keyspace",
        "rid",
        "trace",
        "ts",
        "value",
    )

    def __init__(
        self,
        rid: int,
        keyspace: str,
        key: str,
        value: bytes | None,
        ctype: str,
        context: dict[str, int] | None,
        consistency: str = "QUORUM",
        trace: bool = False,
        hops: int = 0,
        avoid: tuple[str, ...] = (),
        dot: tuple[str, int] | None = None,
        ts: float = 0.0,
    ) -> None:
        self.rid: Final = rid
        self.keyspace: Final = keyspace
        self.key: Final = key
        self.value: Final = value
        self.ctype: Final = ctype
        self.context: Final = context
        self.consistency: Final = consistency
        self.trace: Final = trace
        self.hops: Final = hops
        self.avoid: Final = avoid  # coordinators that did not answer it in time (a fallback)
        # The exact dot a forwarding node minted for it (core/roles/exact_dots.py), and the time it
        # minted it: every coordinator that takes the put stores it under this dot with this time, so
        # the copies are one sibling, identical. A client never sets them.
        self.dot: Final = dot
        self.ts: Final = ts


@final
class GetRequest(ValueClass):
    """Read a key at a consistency level."""

    __match_args__: ClassVar = ("rid", "keyspace", "key", "consistency", "trace", "hops")
    __slots__ = ("consistency", "hops", "key", "keyspace", "rid", "trace")

    def __init__(
        self,
        rid: int,
        keyspace: str,
        key: str,
        consistency: str = "QUORUM",
        trace: bool = False,
        hops: int = 0,
    ) -> None:
        self.rid: Final = rid
        self.keyspace: Final = keyspace
        self.key: Final = key
        self.consistency: Final = consistency
        self.trace: Final = trace
        self.hops: Final = hops


@final
class IncrRequest(ValueClass):
    """Add `delta` to a counter; `request_id` makes a retry count once."""

    __match_args__: ClassVar = (
        "rid",
        "keyspace",
        "key",
        "delta",
        "request_id",
        "consistency",
        "trace",
        "hops",
    )
    __slots__ = ("consistency", "delta", "hops", "key", "keyspace", "request_id", "rid", "trace")

    def __init__(
        self,
        rid: int,
        keyspace: str,
        key: str,
        delta: int,
        request_id: str,
        consistency: str = "QUORUM",
        trace: bool = False,
        hops: int = 0,
    ) -> None:
        self.rid: Final = rid
        self.keyspace: Final = keyspace
        self.key: Final = key
        self.delta: Final = delta
        self.request_id: Final = request_id
        self.consistency: Final = consistency
        self.trace: Final = trace
        self.hops: Final = hops


# --- results -------------------------------------------------------------------------------


@final
class PutResult(ValueClass):
    """A write's coordinator, the replicas that acknowledged it and how many it needed."""

    __match_args__: ClassVar = (
        "coordinator",
        "acks",
        "needed",
        "warnings",
        "hinted",
        "trace",
        "forward_reason",
    )
    __slots__ = ("acks", "coordinator", "forward_reason", "hinted", "needed", "trace", "warnings")

    def __init__(
        self,
        coordinator: str,
        acks: int,
        needed: int,
        warnings: tuple[str, ...] = (),
        hinted: tuple[str, ...] = (),
        trace: TraceSteps = (),
        forward_reason: str = "",
    ) -> None:
        self.coordinator: Final = coordinator
        self.acks: Final = acks
        self.needed: Final = needed
        self.warnings: Final = warnings
        self.hinted: Final = hinted  # "E for D": fallbacks that took a hint
        self.trace: Final = trace
        # Why the node the client asked did not coordinate it (it forwarded the write: not a replica
        # of the key, leaving the ring, ...), in its words; "" when it coordinated. Protocol 6
        # (core/wire.py): an older node leaves it out, and the client says less.
        self.forward_reason: Final = forward_reason


@final
class GetResult(ValueClass):
    """A read's merged record (None: no replica has one), its coordinator and the replies merged."""

    __match_args__: ClassVar = ("coordinator", "record", "replies", "needed", "trace", "dropped", "warnings")
    __slots__ = ("coordinator", "dropped", "needed", "record", "replies", "trace", "warnings")

    def __init__(
        self,
        coordinator: str,
        record: Record | None,
        replies: int,
        needed: int,
        trace: TraceSteps = (),
        dropped: tuple[Sibling, ...] = (),
        warnings: tuple[str, ...] = (),
    ) -> None:
        self.coordinator: Final = coordinator
        self.record: Final = record
        self.replies: Final = replies
        self.needed: Final = needed
        self.trace: Final = trace
        # lww keyspaces: versions the replicas held that last-writer-wins discarded in this merge
        self.dropped: Final = dropped
        self.warnings: Final = warnings  # e.g. a key merges left over the sibling limit


@final
class IncrResult(ValueClass):
    """A counter's value after an increment, and the replicas that acknowledged it."""

    __match_args__: ClassVar = ("coordinator", "value", "acks", "needed", "trace", "forward_reason")
    __slots__ = ("acks", "coordinator", "forward_reason", "needed", "trace", "value")

    def __init__(
        self,
        coordinator: str,
        value: int,
        acks: int,
        needed: int,
        trace: TraceSteps = (),
        forward_reason: str = "",
    ) -> None:
        self.coordinator: Final = coordinator
        self.value: Final = value
        self.acks: Final = acks
        self.needed: Final = needed
        self.trace: Final = trace
        self.forward_reason: Final = forward_reason  # as PutResult's


@final
class Failure(ValueClass):
    """A request that failed; `code` is an ErrorCode, `error` a sentence for a person."""

    __match_args__: ClassVar = ("code", "error", "answered", "needed", "coordinator", "trace")
    __slots__ = ("answered", "code", "coordinator", "error", "needed", "trace")

    def __init__(
        self,
        code: str,
        error: str,
        answered: int = 0,
        needed: int = 0,
        coordinator: str = "",
        trace: TraceSteps = (),
    ) -> None:
        self.code: Final = code
        self.error: Final = error
        self.answered: Final = answered
        self.needed: Final = needed
        self.coordinator: Final = coordinator
        self.trace: Final = trace
