"""The keyspace definitions a node knows, kept in its store's metadata so a restart remembers them.

A keyspace exists only once someone created it (`kv` and `counters` exist from the start): a
request naming any other keyspace is refused, never a reason to make one.

Creating a keyspace is an admin's act, so in a cluster with a CA an issuing node seals each
definition it creates (core/membership/authorship.py), and a node changes a definition it knows
only for one an issuer sealed: a member cannot switch `kv` to LWW with N=1 by gossip or by a
replica message. A name it has never heard of it learns from anyone (a replica must not refuse
data for a keyspace another node created), until a sealed definition comes.
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterable, Mapping
from dataclasses import astuple, replace
from types import MappingProxyType
from typing import Any, Protocol

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


Seals = tuple[tuple[str, bytes], ...]  # (keyspace name, an issuer's seal over its definition)


def keyspace_content(ks: KeyspaceDef) -> bytes:
    """The bytes an issuer seals: the whole definition."""
    return repr(("keyspace", *astuple(ks))).encode()


class KeyspaceAuthority(Protocol):
    """Who may define keyspaces (core/membership/authorship.py has the whole interface)."""

    def seal_keyspace(self, ks: KeyspaceDef) -> bytes:
        """An issuer's seal over `ks`; b"" on a node that cannot seal (no CA key, or no CA)."""
        ...

    def admits_keyspace(self, ks: KeyspaceDef, seal: bytes) -> str | None:
        """None if `ks` may replace another definition of its name, else why not."""
        ...


class _UncheckedKeyspaces:
    def seal_keyspace(self, ks: KeyspaceDef) -> bytes:
        return b""

    def admits_keyspace(self, ks: KeyspaceDef, seal: bytes) -> str | None:
        return None


UNCHECKED: KeyspaceAuthority = _UncheckedKeyspaces()
"""A cluster without a CA: definitions are neither sealed nor checked."""


class Keyspaces:
    """Definitions by name: the built-in kv and counters keyspaces, those created or learned since.
    `authority` seals the definitions this node creates and checks the changes it hears."""

    def __init__(self, store: Store, default_n: int, authority: KeyspaceAuthority = UNCHECKED) -> None:
        self._store = store
        self._authority = authority
        self._defs: dict[str, KeyspaceDef] = {ks.name: replace(ks, n=default_n) for ks in (KV, COUNTERS)}
        for fields in store.get_meta("keyspaces") or []:
            ks = KeyspaceDef(*fields)
            self._defs[ks.name] = ks
        saved = store.get_meta("keyspace_seals") or {}
        self._seals: dict[str, bytes] = {name: bytes.fromhex(seal) for name, seal in saved.items()}
        self.refused = 0  # changes of a known definition that no issuer sealed
        self.last_refusal = ""

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
        self.learn(ks, self._authority.seal_keyspace(ks))
        return True

    def seals(self) -> Seals:
        """The issuers' seals of the definitions this node knows (what gossip carries with them)."""
        return tuple(sorted(self._seals.items()))

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

    def learn(self, ks: KeyspaceDef, seal: bytes = b"") -> None:
        """A definition from a peer (a schema update, gossip, or a replica message carrying it),
        with an issuer's seal when it has one. Learned even past MAX_KEYSPACES: the bound is
        checked where keyspaces are created, and a replica must not refuse data for a keyspace
        another node created."""
        if seal and self._authority.admits_keyspace(ks, seal) is not None:
            seal = b""  # a seal that does not check is no seal
        known = self._defs.get(ks.name)
        if known is ks or known == ks:
            if seal and not self._seals.get(ks.name):
                self._seals[ks.name] = seal
                self._save_seals()
            return
        if known is not None:
            why = self._authority.admits_keyspace(ks, seal)
            if why is not None:  # a change no issuer sealed (in a cluster without a CA: None)
                self.refused += 1
                self.last_refusal = f"keyspace {ks.name} redefined: {why}"
                return
            # Sealed beats unsealed; otherwise two nodes created the name differently while they
            # could not hear each other: every node keeps the same one (the smaller in a fixed
            # order), so the cluster converges instead of flipping with each gossip round.
            known_sealed = bool(self._seals.get(ks.name))
            if known_sealed > bool(seal) or (known_sealed == bool(seal) and astuple(known) < astuple(ks)):
                return
        self._defs[ks.name] = ks
        # A ttl is saved only where there is one: the form of the others stays what older builds read.
        saved = [list(astuple(k)[: 5 if k.ttl else 4]) for k in self._defs.values()]
        self._store.put_meta("keyspaces", saved)
        if self._seals.get(ks.name, b"") != seal:
            if seal:
                self._seals[ks.name] = seal
            else:
                del self._seals[ks.name]
            self._save_seals()

    def learn_all(self, keyspaces: Iterable[KeyspaceDef], seals: Any = ()) -> None:
        """Definitions from a peer, with the seals it sent (checked here: a peer may be hostile)."""
        sealed: dict[str, bytes] = {}
        with contextlib.suppress(TypeError, ValueError):  # malformed: learned as unsealed ones
            sealed = {str(name): seal for name, seal in seals if isinstance(seal, bytes)}
        for ks in keyspaces:  # an ill-typed one fails here: the node counts the broken message
            self.learn(ks, sealed.get(ks.name, b""))

    def _save_seals(self) -> None:
        self._store.put_meta("keyspace_seals", {name: seal.hex() for name, seal in self._seals.items()})


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
