"""The keyspace definitions a node knows, kept in its store's metadata so a restart remembers them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType

from bhandar_cli.core.config import COUNTERS, KeyspaceDef
from bhandar_cli.core.store import Store


class Keyspaces:
    """Definitions by name: the built-in counters keyspace, those created or learned since."""

    def __init__(self, store: Store, default_n: int) -> None:
        self._store = store
        self._default_n = default_n
        counters = replace(COUNTERS, n=default_n)
        self._defs: dict[str, KeyspaceDef] = {counters.name: counters}
        for fields in store.get_meta("keyspaces") or []:
            ks = KeyspaceDef(*fields)
            self._defs[ks.name] = ks

    def get(self, name: str) -> KeyspaceDef | None:
        return self._defs.get(name)

    def __getitem__(self, name: str) -> KeyspaceDef:
        return self._defs[name]

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

    def implicit(self, name: str) -> KeyspaceDef:
        """The definition a keyspace gets when a request uses its name first."""
        return KeyspaceDef(name, n=self._default_n)

    def learn(self, ks: KeyspaceDef) -> None:
        known = self._defs.get(ks.name)
        if known is ks or known == ks:
            return
        if known is not None and ks == self.implicit(ks.name):
            # A keyspace created by first use never replaces a defined one: a node that had not
            # heard of it yet would otherwise redefine it cluster-wide through gossip (a strict
            # keyspace turned sloppy). Found by `bhandar chaos --seed 38 --ops 3000 --faults all`.
            return
        self._defs[ks.name] = ks
        self._store.put_meta("keyspaces", [[k.name, k.policy, k.n, k.quorum] for k in self._defs.values()])

    def learn_all(self, keyspaces: Iterable[KeyspaceDef]) -> None:
        for ks in keyspaces:
            self.learn(ks)
