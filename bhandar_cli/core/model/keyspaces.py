"""The keyspace definitions a node knows, kept in its store's metadata so a restart remembers them.

A keyspace exists only once someone created it (`kv` and `counters` exist from the start): a
request naming any other keyspace is refused, never a reason to make one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import astuple, replace
from types import MappingProxyType

from bhandar_cli.core.model.config import (
    COUNTERS,
    KEYSPACE_NAME_RULE,
    KV,
    KeyspaceDef,
    show_ttl,
    valid_keyspace_name,
)
from bhandar_cli.core.model.errors import BadInput, KeyspaceConflict, UnknownKeyspace
from bhandar_cli.core.model.store import Store

# Each keyspace costs every node work in every round (gossip carries every definition, anti-entropy
# walks each one), so their number is bounded.
MAX_KEYSPACES = 1000
NAMES_SHOWN = 10  # keyspaces an unknown-keyspace error lists by name


class Keyspaces:
    """Definitions by name: the built-in kv and counters keyspaces, those created or learned since."""

    def __init__(self, store: Store, default_n: int) -> None:
        self._store = store
        self._defs: dict[str, KeyspaceDef] = {ks.name: replace(ks, n=default_n) for ks in (KV, COUNTERS)}
        for fields in store.get_meta("keyspaces") or []:
            ks = KeyspaceDef(*fields)
            self._defs[ks.name] = ks

    def get(self, name: str) -> KeyspaceDef | None:
        return self._defs.get(name)

    def __getitem__(self, name: str) -> KeyspaceDef:
        return self._defs[name]

    def require(self, name: str) -> KeyspaceDef:
        """The definition of a keyspace a request names; UnknownKeyspace (saying what exists and
        what is closest) when there is none."""
        ks = self._defs.get(name)
        if ks is not None:
            return ks
        raise unknown_keyspace(name, self._defs)

    def create(self, ks: KeyspaceDef) -> bool:
        """Define a keyspace: True when it is new, False when an identical one exists already."""
        known = self._defs.get(ks.name)
        if known == ks:
            return False
        if known is not None:
            raise KeyspaceConflict(
                f"keyspace {ks.name} already exists with policy={known.policy} n={known.n} "
                f"quorum={known.quorum}" + (f" ttl={show_ttl(known.ttl)}" if known.ttl else "")
            )
        if len(self._defs) >= MAX_KEYSPACES:
            raise BadInput(
                f"cannot create keyspace {ks.name}: this cluster has {len(self._defs)} keyspaces, "
                f"the most it allows"
            )
        self.learn(ks)
        return True

    def all(self) -> tuple[KeyspaceDef, ...]:
        """Every definition, in the order they became known (what gossip and schema updates carry)."""
        return tuple(self._defs.values())

    def view(self) -> Mapping[str, KeyspaceDef]:
        """A read-only view by name, for tools."""
        return MappingProxyType(self._defs)

    def policy(self, name: str) -> str:
        """The keyspace's conflict policy ("siblings" for one this node has not heard of)."""
        ks = self._defs.get(name)
        return ks.policy if ks is not None else "siblings"

    def widest(self) -> int:
        """The largest replication factor of any keyspace."""
        return max(ks.n for ks in self._defs.values())

    def learn(self, ks: KeyspaceDef) -> None:
        """A definition from a peer (a schema update, gossip, or a replica message carrying it).
        Learned even past MAX_KEYSPACES: the bound is checked where keyspaces are created, and a
        replica must not refuse data for a keyspace another node created."""
        known = self._defs.get(ks.name)
        if known is ks or known == ks:
            return
        if known is not None and astuple(known) < astuple(ks):
            # Two nodes created the name differently while they could not hear each other: every
            # node keeps the same one (the smaller in a fixed order), so the cluster converges
            # instead of flipping with each gossip round.
            return
        self._defs[ks.name] = ks
        # A ttl is saved only where there is one: the form of the others stays what older builds read.
        saved = [list(astuple(k)[: 5 if k.ttl else 4]) for k in self._defs.values()]
        self._store.put_meta("keyspaces", saved)

    def learn_all(self, keyspaces: Iterable[KeyspaceDef]) -> None:
        for ks in keyspaces:
            self.learn(ks)


def unknown_keyspace(name: str, known: Iterable[str]) -> UnknownKeyspace:
    """The error for a keyspace that does not exist: what exists, and what is closest."""
    names = sorted(known)
    closest = difflib.get_close_matches(str(name).lower(), names, n=1)
    rule = "" if valid_keyspace_name(name) else f" (a name is {KEYSPACE_NAME_RULE})"
    guess = f"; did you mean {closest[0]}?" if closest else "."
    shown = ", ".join(names[:NAMES_SHOWN])
    if len(names) > NAMES_SHOWN:
        shown += f" ... ({len(names)} in all)"
    return UnknownKeyspace(
        f"unknown keyspace {name!r}{rule}{guess} Keyspaces: {shown}. Create a new one with keyspace create."
    )
