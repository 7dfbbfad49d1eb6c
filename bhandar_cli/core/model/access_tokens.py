"""Access tokens (client credentials) as the cluster keeps them: a record per token (its id, the
SHA-256 of its secret, its grants, its rate, when it was made, whether it is revoked), the role
order, and the table each node holds.

The table rides along gossip (core/membership/gossip.py) the way keyspace definitions do, so a node that was
down or joins later learns every token and every revocation. Its merge keeps, per token id, the
larger record in one fixed order in which a revoked record is larger than any live one: merging is
commutative, associative and idempotent, and a revocation always wins. Gossip compares `version`
(a hash of the whole table) and sends the records only when the versions differ.

Only an issuer may make or revoke a token (core/membership/authorship.py): in a cluster with a CA,
a record carries the issuer's seal and the table takes from gossip only the records whose seal
checks (`TokenAuthority`); records from this node's own store and auth file are its operator's.

Sans-I/O: the secret is minted, and a presented token checked, by security/auth.py.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import astuple, dataclass, replace
from typing import Any, Protocol

from bhandar_cli.core.model.config import valid_keyspace_name
from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.core.model.store import Store

ROLES = ("read", "write", "admin")  # each role allows everything the ones before it do
ALL_KEYSPACES = "*"
MAX_TOKENS = 1000  # every token travels in gossip when tables differ: their number is bounded
_ID = re.compile(r"[0-9a-f]{8,32}")
_DIGEST = re.compile(r"[0-9a-f]{64}")


def role_rank(role: str) -> int:
    """0 for read, 1 write, 2 admin; -1 for no role."""
    return ROLES.index(role) if role in ROLES else -1


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """What the cluster knows of one token; never its secret."""

    id: str
    digest: str  # hex SHA-256 of the whole token text
    grants: tuple[tuple[str, str], ...]  # (keyspace or "*", role), sorted by keyspace
    rate: float = 0.0  # requests per second on each node; 0: no limit
    burst: int = 0  # requests allowed at once; 0: one second's worth of the rate
    created: float = 0.0
    revoked: bool = False
    seal: str = ""  # hex: an issuer's signature over `token_content` ("" in a cluster without a CA)

    def role_on(self, keyspace: str) -> str | None:
        """The highest role this token holds on `keyspace` (its own grant or the one on "*")."""
        ranks = [role_rank(role) for ks, role in self.grants if ks in (keyspace, ALL_KEYSPACES)]
        best = max(ranks, default=-1)
        return ROLES[best] if best >= 0 else None

    def allows(self, keyspace: str, role: str) -> bool:
        return role_rank(self.role_on(keyspace) or "") >= role_rank(role)

    def to_plain(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "digest": self.digest,
            "grants": dict(self.grants),
            "rate": self.rate,
            "burst": self.burst,
            "created": self.created,
            "revoked": self.revoked,
            "seal": self.seal,
        }


def token_content(record: TokenRecord) -> bytes:
    """The bytes an issuer seals: every field of the record but the seal."""
    fields = (record.id, record.digest, record.grants, record.rate, record.burst, record.created)
    return repr(("token", *fields, record.revoked)).encode()


class TokenAuthority(Protocol):
    """Who may make and revoke tokens (core/membership/authorship.py has the whole interface)."""

    def seal_token(self, record: TokenRecord) -> TokenRecord:
        """`record` sealed by this node; Refused if it holds no CA key (it is no issuer)."""
        ...

    def admits_token(self, record: TokenRecord) -> str | None:
        """None if an issuer sealed `record`, else why not (one line)."""
        ...


class _UncheckedTokens:
    def seal_token(self, record: TokenRecord) -> TokenRecord:
        return record

    def admits_token(self, record: TokenRecord) -> str | None:
        return None


UNCHECKED: TokenAuthority = _UncheckedTokens()
"""A cluster without a CA: token records are neither sealed nor checked."""


def grants_of(mapping: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Grants in their one order; BadInput for an unknown role or a keyspace name that is not one."""
    for keyspace, role in mapping.items():
        if role not in ROLES:
            raise BadInput(f"unknown role {role!r} (a role is {', '.join(ROLES)})")
        if keyspace != ALL_KEYSPACES and not valid_keyspace_name(keyspace):
            raise BadInput(f"{keyspace!r} is not a keyspace name (or * for every keyspace)")
    return tuple(sorted(mapping.items()))


def check_record(raw: Any) -> TokenRecord:
    """A record from outside (a peer, the auth file, an admin): well-typed or BadInput."""
    if isinstance(raw, Mapping):
        grants = raw.get("grants")
        if not isinstance(grants, Mapping):
            raise BadInput("a token record's grants must map keyspaces to roles")
        try:
            raw = TokenRecord(
                str(raw.get("id", "")),
                str(raw.get("digest", "")),
                tuple(grants.items()),
                raw.get("rate", 0.0),
                raw.get("burst", 0),
                raw.get("created", 0.0),
                raw.get("revoked", False),
                raw.get("seal", ""),
            )
        except TypeError:  # compiled (bhandar_cli/native.py), the fields' types are checked here
            raise BadInput(f"token {raw.get('id')!r}: rate, burst and created must be numbers") from None
    if not isinstance(raw, TokenRecord):
        raise BadInput(f"expected a token record, got {type(raw).__name__}")
    if not isinstance(raw.id, str) or not _ID.fullmatch(raw.id):
        raise BadInput(f"a token id is 8 to 32 hex digits (got {raw.id!r})")
    if not isinstance(raw.digest, str) or not _DIGEST.fullmatch(raw.digest):
        raise BadInput(f"token {raw.id}: the digest must be a hex SHA-256")
    if not isinstance(raw.grants, tuple) or not all(
        isinstance(g, tuple) and len(g) == 2 and all(isinstance(x, str) for x in g) for g in raw.grants
    ):
        raise BadInput(f"token {raw.id}: grants must map keyspaces to roles")
    grants = grants_of(dict(raw.grants))
    numbers = (raw.rate, raw.burst, raw.created)
    if any(isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) for x in numbers):
        raise BadInput(f"token {raw.id}: rate, burst and created must be numbers")
    if raw.rate < 0 or raw.burst < 0 or not isinstance(raw.revoked, bool):
        raise BadInput(f"token {raw.id}: rate and burst must be zero or more")
    if not isinstance(raw.seal, str) or len(raw.seal) > 512:
        raise BadInput(f"token {raw.id}: the seal must be a hex signature")
    return replace(raw, grants=grants, rate=float(raw.rate), burst=int(raw.burst), created=float(raw.created))


def _order(record: TokenRecord) -> tuple[Any, ...]:
    """The merge's fixed order: revoked above live, then the fields (only one version of a record
    is ever made, so this only decides between copies that somehow differ)."""
    return (record.revoked, astuple(record))


class TokenTable:
    """Every token this node knows, kept in its store's metadata so a restart remembers them (and
    their revocations). `authority` seals the records this node makes and checks those it hears."""

    def __init__(self, store: Store, authority: TokenAuthority = UNCHECKED) -> None:
        self._store = store
        self._authority = authority
        self.refused = 0  # records from peers whose seal did not check (forgeries, or a bug)
        self.last_refusal = ""
        self._records: dict[str, TokenRecord] = {}
        for plain in store.get_meta("tokens") or []:
            record = check_record(plain)
            self._records[record.id] = record
        self._version = self._hash()

    @property
    def version(self) -> int:
        """A hash of the whole table (0 when empty): equal versions, equal tables."""
        return self._version

    def get(self, token_id: str) -> TokenRecord | None:
        return self._records.get(token_id)

    def records(self) -> tuple[TokenRecord, ...]:
        return tuple(self._records[i] for i in sorted(self._records))

    def merge(self, records: Iterable[Any]) -> bool:
        """Merge records from a peer; malformed ones and those no issuer sealed are dropped (a
        peer's bug must not stop this node learning the rest, and a forgery changes nothing).
        True when the table changed."""
        return self._merge(records, checked=True)

    def adopt(self, records: Iterable[TokenRecord]) -> bool:
        """Merge records from this node's own auth file: its operator's word, taken unchecked."""
        return self._merge(records, checked=False)

    def _merge(self, records: Iterable[Any], checked: bool) -> bool:
        changed = False
        for raw in records:
            try:
                record = check_record(raw)
            except BadInput:
                continue
            why = self._authority.admits_token(record) if checked else None
            if why is not None:
                self.refused += 1
                self.last_refusal = f"token {record.id}: {why}"
                continue
            known = self._records.get(record.id)
            if known is None or _order(known) < _order(record):
                self._records[record.id] = record
                changed = True
        if changed:
            self._save()
        return changed

    def add(self, record: TokenRecord) -> None:
        """A new token made by an admin; BadInput if its id is taken or the table is full."""
        record = check_record(record)
        if record.id in self._records:
            raise BadInput(f"token {record.id} exists already")
        if sum(not r.revoked for r in self._records.values()) >= MAX_TOKENS:
            raise BadInput(f"this cluster has {MAX_TOKENS} live tokens, the most it allows; revoke some")
        self._records[record.id] = self._authority.seal_token(replace(record, seal=""))
        self._save()

    def revoke(self, token_id: str) -> TokenRecord:
        """Mark a token revoked for good; BadInput if no such token."""
        known = self._records.get(token_id)
        if known is None:
            raise BadInput(f"no token with id {token_id!r}")
        if not known.revoked:
            known = self._authority.seal_token(replace(known, revoked=True, seal=""))
            self._records[token_id] = known
            self._save()
        return known

    def _save(self) -> None:
        self._version = self._hash()
        self._store.put_meta("tokens", [r.to_plain() for r in self.records()])

    def _hash(self) -> int:
        if not self._records:
            return 0
        text = repr([astuple(r) for r in self.records()]).encode()
        return int.from_bytes(hashlib.sha256(text).digest()[:8], "big") or 1
