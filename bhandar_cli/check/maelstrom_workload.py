"""What every workload provides the harness (the table of them by name is check/workloads/'s).

A workload says what clients ask (`next_op`, as the request `request` builds), what a correct
answer looks like (`parse`: a malformed one is the node breaking the protocol), what to read
once the faults are healed (`finals`) and how to judge the whole history (`check`). One module
per workload in `check/workloads/`, each with its checker; that package names them once.
"""

from __future__ import annotations

from random import Random
from typing import Any

from bhandar_cli.check.maelstrom_history import MaelstromHistory, MaelstromOperation, Verdict


class BadAnswer(ValueError):
    """An answer without the fields its type promises (the node's protocol error)."""


class MaelstromWorkload:
    """The interface (every method is meant to be overridden where the default does not fit)."""

    name = ""
    doc = ""  # one line for --help and the report
    consistency_models: tuple[str, ...] = ()  # what a transactional checker judges by (--consistency-models)

    def __init__(self, rng: Random, nodes: list[str]) -> None:
        self.rng = rng
        self.nodes = nodes
        self.serial = 0  # unique values handed out (broadcast messages, elements, writes)

    def unique(self) -> int:
        self.serial += 1
        return self.serial

    def setup(self) -> list[tuple[str, dict[str, Any]]]:
        """Requests (node, body) to make and see answered before the clients start."""
        return []

    def next_op(self, rng: Random, client: int) -> tuple[str, Any]:
        """The next operation (f, value) of client number `client` (from 1)."""
        raise NotImplementedError

    def request(self, f: str, value: Any) -> dict[str, Any]:
        """The request body of an operation (the harness adds `msg_id`)."""
        raise NotImplementedError

    def parse(self, f: str, body: dict[str, Any]) -> Any:
        """The result an `*_ok` answer carries; BadAnswer when it lacks what its type promises."""
        return None

    def completed(self, op: MaelstromOperation) -> None:
        """`op` has its outcome (a client's next operation may depend on what it saw)."""

    def finals(self) -> list[tuple[str, str, Any]]:
        """Operations (node, f, value) made after the heal, each retried until answered."""
        return []

    def more_finals(self) -> list[tuple[str, str, Any]]:
        """Final operations that follow from the answers to the last ones (the next page of a
        kafka log), until it returns none."""
        return []

    def check(self, history: MaelstromHistory) -> Verdict:
        raise NotImplementedError

    def show(self, op: MaelstromOperation) -> str:
        """An operation as a verdict names it: what was asked and what came back."""
        asked = op.f if op.value is None else f"{op.f} {op.value}"
        return f"{asked} -> {outcome(op)}"


def outcome(op: MaelstromOperation, shown: Any = None) -> str:
    if op.type == "ok":
        return "ok" if op.result is None and shown is None else str(op.result if shown is None else shown)
    if op.type == "invoke":
        return "no answer yet"
    return op.error or op.type


def named(op: MaelstromOperation, what: str) -> str:
    """`what` with the operation's identity: `read -> 3 (#12, c2 at n1, 0.104-0.131 s)`."""
    final = "final " if op.final else ""
    return f"{final}{what} (#{op.index}, {op.client} at {op.node}, {op.when()})"


def require(body: dict[str, Any], field: str, kinds: tuple[type, ...] | None = None) -> Any:
    if field not in body:
        raise BadAnswer(f'{body.get("type")} without "{field}"')
    value = body[field]
    if kinds is not None and (type(value) not in kinds):
        raise BadAnswer(f'{body.get("type")} whose "{field}" is not {" or ".join(k.__name__ for k in kinds)}')
    return value
