"""Who may say what in gossip: the interface a node checks every fact against before it merges it.

Gossip relays everyone's facts, so the node that hands one over is rarely its author. Each fact has
one author who may say it:

- a member's own state (address, zone, ring tokens, status, generation, heartbeat): that member.
  It seals each state with its node key and carries its certificate, so any node can check a state
  it hears second-hand; an unsealed state is taken only first-hand (from the member itself, over a
  link whose certificate the peer gate checked), which is all a peer of protocol 4 or older sends;
- an access token record, a revocation, a removal from the cluster, a keyspace definition: an
  issuer (a holder of the cluster CA key), which seals them with that key after an admin asked it
  to (a definition of a name a node has never heard of it still learns from anyone:
  core/model/keyspaces.py).

The node's driver hands the core an implementation: security/signed_authorship.py checks seals with the
cluster CA; `TRUST_ALL` believes everything, for clusters with no CA (the in-process cluster, the
simulator, `cluster up --insecure`), where any peer may say anything anyway.

Sans-I/O: what is sealed is `member_content(state)` / `removal_content(removal)` and
`tokens.token_content(record)`, `keyspaces.keyspace_content(ks)`, bytes every implementation
agrees on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from bhandar_cli.core.membership.members import MemberState
from bhandar_cli.core.model import KeyspaceDef, TokenRecord


@dataclass(frozen=True, slots=True)
class Removal:
    """An issuer's word that `node` is out of the cluster for good (`cluster remove`): every node
    calls it left, takes none of its states again and refuses its certificate, after restarts too."""

    node: str
    at: float  # when it was removed (the issuer's clock), for a person reading `members`
    seal: bytes = b""  # the issuer's signature over `removal_content`


def member_content(state: MemberState) -> bytes:
    """The bytes a member seals: every field of its state but the seal and certificate."""
    fields = (state.id, state.zone, state.tokens, state.status, state.generation, state.heartbeat)
    return repr(("member", *fields, state.address, state.http)).encode()


def removal_content(removal: Removal) -> bytes:
    return repr(("removal", removal.node, removal.at)).encode()


class Authorship(Protocol):
    """Seals what this node authors and checks what it hears (the module docstring says who may
    say what). `admits_*` answer None for a fact it may take, else why not (one line); `seal_*`
    of what only an issuer may say raise Refused on a node that holds no CA key (but
    `seal_keyspace`, which answers b"": a keyspace is created unsealed there). A token table and
    the keyspaces are handed the same object as their `TokenAuthority` and `KeyspaceAuthority`."""

    def seal_member(self, state: MemberState) -> MemberState:
        """This node's own state, sealed so that others can check it second-hand."""
        ...

    def admits_member(self, state: MemberState, src: str) -> str | None:
        """Whether `state`, handed over by node `src`, was said by its member."""
        ...

    def seal_token(self, record: TokenRecord) -> TokenRecord: ...

    def admits_token(self, record: TokenRecord) -> str | None: ...

    def seal_removal(self, removal: Removal) -> Removal: ...

    def admits_removal(self, removal: Removal) -> str | None: ...

    def seal_keyspace(self, ks: KeyspaceDef) -> bytes: ...

    def admits_keyspace(self, ks: KeyspaceDef, seal: bytes) -> str | None: ...


class TrustAll:
    """A cluster without a CA: every peer may say anything (nothing is sealed or checked)."""

    def seal_member(self, state: MemberState) -> MemberState:
        return state

    def admits_member(self, state: MemberState, src: str) -> str | None:
        return None

    def seal_token(self, record: TokenRecord) -> TokenRecord:
        return record

    def admits_token(self, record: TokenRecord) -> str | None:
        return None

    def seal_removal(self, removal: Removal) -> Removal:
        return removal

    def admits_removal(self, removal: Removal) -> str | None:
        return None

    def seal_keyspace(self, ks: KeyspaceDef) -> bytes:
        return b""

    def admits_keyspace(self, ks: KeyspaceDef, seal: bytes) -> str | None:
        return None


TRUST_ALL: TrustAll = TrustAll()  # typed: the compiled build reads it through the face, in an import cycle
