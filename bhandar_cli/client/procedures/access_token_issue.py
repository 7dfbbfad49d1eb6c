"""Issuing an access token so that it can be used at once: the record goes to an issuing node
(which seals it; gossip carries it to the others), then every live node is asked, under a
deadline, until each holds it. A token one node knows and another does not yet gets a 401
"unknown token" there, so `token create` answers only once none would, or says which nodes
do not know it yet and how long to wait.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import trio

# Gossip takes a token record to every node in a few rounds (about a second each); ten seconds
# covers a loaded machine, and past it the token still exists: the caller is told to wait.
SPREAD_DEADLINE = 10.0
POLL_EVERY = 0.2  # seconds between two rounds of asking the nodes that do not know it yet


class TokenNodes(Protocol):
    """What the spread needs of a process cluster's backend (client/backends/tcp_backend.py)."""

    @property
    def names(self) -> Iterable[str]: ...

    def is_alive(self, name: str) -> bool: ...

    async def on_issuer(self, op: str, skip: str = "", **args: Any) -> tuple[str, Any]: ...

    async def rpc(self, name: str, op: str, timeout: float = ..., **args: Any) -> Any: ...


@dataclass(frozen=True)
class TokenCreated:
    id: str
    by: str  # the issuing node that sealed it
    known_by: tuple[str, ...]  # every live node that holds it
    not_yet: tuple[str, ...]  # live nodes that did not hold it by the deadline (they may 401 it)
    waited: float  # seconds from the issuer's answer to the last node's

    def warning(self) -> str | None:
        """What to tell the user when not every node knows the token yet; None when all do."""
        if not self.not_yet:
            return None
        who = ", ".join(self.not_yet)
        verb = "does" if len(self.not_yet) == 1 else "do"
        return (
            f"token {self.id} is created, but {who} {verb} "
            f"not know it yet after {self.waited:.0f} s (gossip is still carrying it): requests there "
            "get 401 until it arrives; try again in a few seconds, or check with bhandar cluster token list"
        )


async def create_token(nodes: TokenNodes, record: Any, deadline: float = SPREAD_DEADLINE) -> TokenCreated:
    """Send the token `record` (wire form) to an issuer, then wait until every live node holds it
    (or `deadline` seconds pass)."""
    by, token_id = await nodes.on_issuer("token_create", record=record)
    started = trio.current_time()
    known = {by}
    pending = {n for n in nodes.names if n != by and nodes.is_alive(n)}
    with trio.move_on_after(deadline):
        while pending:
            for name in sorted(pending):
                if not nodes.is_alive(name):  # it stopped meanwhile: nobody can send it requests
                    pending.discard(name)
                elif await _holds(nodes, name, str(token_id)):
                    pending.discard(name)
                    known.add(name)
            if pending:
                await trio.sleep(POLL_EVERY)
    return TokenCreated(
        str(token_id), by, tuple(sorted(known)), tuple(sorted(pending)), trio.current_time() - started
    )


async def _holds(nodes: TokenNodes, name: str, token_id: str) -> bool:
    from bhandar_cli.node.net import RpcError

    try:
        records = await nodes.rpc(name, "token_list")
    except RpcError:  # restarting, or not answering: ask again next round
        return False
    return any(r.get("id") == token_id for r in records)
