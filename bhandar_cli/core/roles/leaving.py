"""What a leaving node streams, and to whom: every record it holds (its hinted records too), to
each replica the future ring gives the record's key; and what a stopped decommission tells its
operator. streaming.py runs the decommission itself."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from bhandar_cli.core.membership import Ring, key_token
from bhandar_cli.core.model import KeyspaceDef, Keyspaces, Record, Store
from bhandar_cli.core.roles.hints import HintQueue

Item = tuple[KeyspaceDef, str, Record]  # one record on its way: its keyspace, key and record


class Stalled(Protocol):
    """A stream of the decommission that is not done: to whom, and how far it got."""

    peer: str
    sent: int
    items: list[Item]


def held_items(store: Store, keyspaces: Keyspaces, hints: HintQueue) -> list[Item]:
    """Every record the node holds, its own and (merged per key) those it keeps as hints."""
    items: list[Item] = [(ks, key, record) for ks in keyspaces.all() for key, record in store.items(ks.name)]
    for _, keyspace, key in list(hints.keys()):
        hinted = hints.record_for(keyspace, key)
        known = keyspaces.get(keyspace)
        if hinted is not None and known is not None:
            items.append((known, key, hinted))
    return items


def by_replica(items: Iterable[Item], future: Ring) -> dict[str, list[Item]]:
    """The items each replica of the future ring is to receive: every replica of an item's key."""
    per_target: dict[str, list[Item]] = {}
    for ks, key, record in items:
        for target in future.preference_list(key_token(ks.name, key), ks.n):
            per_target.setdefault(target, []).append((ks, key, record))
    return per_target


def stop_reason(node: str, stall: float, stalled: Iterable[Stalled], hints: int) -> str:
    """Why the decommission of `node` stopped, and what its operator can do."""
    waits = [f"a stream to {s.peer} ({s.sent} of {len(s.items)} records acknowledged)" for s in stalled]
    if hints:
        waits.append(f"{hints} hint(s) that no replica up could take")
    return (
        f"decommission of {node} stopped: no progress for {stall:g} s waiting for {'; '.join(waits)}. "
        f"{node} is normal again and keeps its data; decommission it again once those nodes are up"
    )
