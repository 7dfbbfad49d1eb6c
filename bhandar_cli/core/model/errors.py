"""Error kinds, named by whose fault they are.

`bad_input`, `too_large`, `unknown_keyspace` and `conflict` are the caller's fault, and so are
`unauthenticated` (no valid token), `forbidden` (a token without the role) and `rate_limited` (a
token past its rate: slow down); `unavailable`, `timeout` and `refused` are the cluster's state;
`not_found` is an answer, not a failure; `internal` is our bug.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

ErrorCode = Literal[
    "bad_input",
    "too_large",
    "unknown_keyspace",
    "conflict",
    "unavailable",
    "timeout",
    "refused",
    "not_found",
    "internal",
    "unauthenticated",
    "forbidden",
    "rate_limited",
]
ERROR_CODES: tuple[ErrorCode, ...] = get_args(ErrorCode)
# Input the store refuses before anything is applied: a usage error (exit 2) in the CLI.
REFUSED_INPUT: frozenset[ErrorCode] = frozenset({"bad_input", "too_large", "unknown_keyspace"})
# A failed write with one of these codes was refused before anything was stored: it did not happen
# and never will (every other failure of a write may have been applied somewhere).
# ("unreachable": the client's own code for a node it could not reach.)
NOT_APPLIED: frozenset[str] = REFUSED_INPUT | {"unavailable", "unreachable"}


class BhandarError(Exception):
    """Base class; `code` is the stable machine-readable kind used in JSON and exit codes."""

    code: ErrorCode = "internal"


# What a traced request went through: (milliseconds since the request arrived, what happened).
TraceSteps = tuple[tuple[float, str], ...]


class ClientError(BhandarError):
    """A failed operation as a client reports it (a node's `Failure`, or the client's own words):
    its `code`, a sentence, the replies it had and needed, and its trace when one was asked for."""

    def __init__(
        self, code: str, message: str, answered: int = 0, needed: int = 0, trace: TraceSteps = ()
    ) -> None:
        super().__init__(message)
        self.code = code  # type: ignore[assignment]
        self.answered = answered
        self.needed = needed
        self.trace = trace

    def to_json(self, cmd: str) -> dict[str, Any]:
        out: dict[str, Any] = {"cmd": cmd, "ok": False, "error": str(self), "code": self.code}
        if self.needed:
            out.update(answered=self.answered, needed=self.needed)
        if self.trace:
            out["trace"] = [list(step) for step in self.trace]
        return out


class BadInput(BhandarError):
    """The request itself is wrong (syntax, unknown node, malformed context...)."""

    code: ErrorCode = "bad_input"


class TooLarge(BadInput):
    """A key or value above the configured limit."""

    code: ErrorCode = "too_large"


class UnknownKeyspace(BadInput):
    """A request names a keyspace nobody created (keyspaces are never created by first use)."""

    code: ErrorCode = "unknown_keyspace"


class KeyspaceConflict(BadInput):
    """A keyspace of that name exists with another definition."""

    code: ErrorCode = "conflict"


class Unavailable(BhandarError):
    """Not enough replicas are reachable to meet the consistency level."""

    code: ErrorCode = "unavailable"


class Timeout(BhandarError):
    """The replicas did not answer in time."""

    code: ErrorCode = "timeout"


class Refused(BhandarError):
    """The store refuses the operation to protect itself (for example, too many siblings)."""

    code: ErrorCode = "refused"


class NotFound(BhandarError):
    """The key has no live value."""

    code: ErrorCode = "not_found"


class Unauthenticated(BhandarError):
    """The client showed no token, or one the cluster does not know (or revoked)."""

    code: ErrorCode = "unauthenticated"


class Forbidden(BhandarError):
    """The client's token is valid but lacks the role the operation needs."""

    code: ErrorCode = "forbidden"


class RateLimited(BhandarError):
    """The client's token went past its rate on this node; `retry_after` seconds from now a
    request passes again."""

    code: ErrorCode = "rate_limited"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def sole_exception(exc: BaseException) -> BaseException:
    """The one exception inside `exc` when it is an exception group (trio's nurseries wrap what a
    task raises, even a SystemExit or KeyboardInterrupt), else `exc` itself; a group holding
    several stays a group."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
