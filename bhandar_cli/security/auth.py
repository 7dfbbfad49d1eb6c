"""Who may do what on a node: minting tokens, the one table of what each operation needs, and the
check every RPC call and HTTP request goes through.

A token is `bht_<id>_<secret>`; the cluster keeps its id and the SHA-256 of the whole text
(core/model/access_tokens.py), compared in constant time. Roles are read < write < admin, per keyspace or on
`*`. Data operations need a role on the keyspace they name; views need any valid token; operations
that change the cluster (partition, heal, delay, shutdown, keyspaces, tokens, storage) need admin
on `*`. An operation missing from `NEEDS` is refused: a new one is never open by accident.

Authentication is on in every node but one run with `--admit-anyone` (loopback only): its table
starts with the records of its auth file (`node run --auth-file`, hashed) and what its store kept,
and gossip brings the rest; a table without a valid record admits no one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bhandar_cli.core.model import (
    ALL_KEYSPACES,
    BadInput,
    Forbidden,
    RateLimited,
    TokenRecord,
    TokenTable,
    Unauthenticated,
    check_record,
    grants_of,
)
from bhandar_cli.core.protocol import (
    ADMIN,
    NODE_CALLS,
    NODE_OPERATIONS,
    VIEW,
    ClientRequest,
    DecommissionRequest,
    GetRequest,
    IncrRequest,
    KeyspaceRequest,
    PutRequest,
    RepairRequest,
)
from bhandar_cli.security.pki import write_private
from bhandar_cli.security.rate_limit import RateLimiter

TOKEN_PREFIX = "bht"
ON_KEYSPACE = ("read", "write")  # roles checked on the keyspace an operation names

# What each operation needs: every client request kind and HTTP route is named here, and every
# call a node serves through its entry in core/protocol/node_operations.py.
NEEDS: dict[str, str] = {
    # data, on the keyspace the request names
    "get": "read",
    "put": "write",
    "delete": "write",
    "incr": "write",
    "keyspaces": VIEW,  # the HTTP API's list of keyspaces
    # client requests that change the cluster: admin on every keyspace
    "keyspace_create": ADMIN,
    "repair": ADMIN,
    "decommission": ADMIN,
    # the views and admin calls a node serves, as their entries say
    **{call.name: call.needs for call in NODE_CALLS.values()},
    # each node operation, as its entry says (flush, compact)
    **{op.name: op.needs for op in NODE_OPERATIONS.values()},
}


def digest_of(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def mint(grants: Mapping[str, str], rate: float, burst: int, now: float) -> tuple[str, TokenRecord]:
    """A new token and its record (the only time the secret exists in full: show it once)."""
    token_id = secrets.token_hex(6)
    token = f"{TOKEN_PREFIX}_{token_id}_{secrets.token_urlsafe(32)}"
    record = check_record(TokenRecord(token_id, digest_of(token), grants_of(grants), rate, burst, now))
    return token, record


def request_op(request: ClientRequest) -> tuple[str, str | None]:
    """The name in NEEDS of a client request, and the keyspace it names."""
    if isinstance(request, GetRequest):
        return "get", request.keyspace
    if isinstance(request, PutRequest):
        return ("put" if request.value is not None else "delete"), request.keyspace
    if isinstance(request, IncrRequest):
        return "incr", request.keyspace
    if isinstance(request, KeyspaceRequest):
        return "keyspace_create", None
    if isinstance(request, RepairRequest):
        return "repair", None
    if isinstance(request, DecommissionRequest):
        return "decommission", None
    return type(request).__name__, None  # not in NEEDS: refused


@dataclass(frozen=True)
class Credential:
    """A token as a client presented it: its id and digest, or why it cannot be valid."""

    token_id: str = ""
    digest: str = ""
    problem: str = (
        "no token given: this node admits clients by token (show one in $BHANDAR_TOKEN; "
        "`bhandar cluster token create` mints one)"
    )

    @classmethod
    def of(cls, token: Any) -> Credential:
        if token is None or token == "":
            return cls()
        parts = token.split("_", 2) if isinstance(token, str) else []
        if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1] or not parts[2]:
            return cls(problem="malformed token (a token looks like bht_ID_SECRET)")
        return cls(parts[1], digest_of(token), "")


class Authenticator:
    """Checks a credential against the node's token table (its collaborator, read at each check
    so a revocation counts at once) and the token's rate on this node."""

    def __init__(self, table: Callable[[], TokenTable]) -> None:
        self.table = table
        self.limiter = RateLimiter()

    def check(self, credential: Credential, op: str, keyspace: str | None, now: float) -> TokenRecord:
        """The token's record if it may do `op` (on `keyspace`) now; raises Unauthenticated,
        Forbidden or RateLimited with a one-line reason."""
        record = self.identify(credential)
        need = NEEDS.get(op)
        if need is None:
            raise Forbidden(f"unknown operation {op!r}: no token may call it")
        if need in ON_KEYSPACE:
            where = keyspace or ALL_KEYSPACES
            if not record.allows(where, need):
                have = record.role_on(where) or "no role"
                raise Forbidden(
                    f"token {record.id} may not {op} in keyspace {where}: that needs the {need} role "
                    f"(it has {have})"
                )
        elif need != VIEW and not record.allows(ALL_KEYSPACES, need):
            raise Forbidden(
                f"token {record.id} may not {op}: that needs the {need} role on * (all keyspaces)"
            )
        wait = self.limiter.admit(record, now)
        if wait > 0:
            raise RateLimited(
                f"slow down: token {record.id} allows {record.rate:g} requests/s; retry in {wait:.2f} s", wait
            )
        return record

    def knows(self, token: Any) -> bool:
        """Whether `token` (as a client presented it) is a valid token of this node's table."""
        try:
            self.identify(Credential.of(token))
        except Unauthenticated:
            return False
        return True

    def identify(self, credential: Credential) -> TokenRecord:
        if credential.problem:
            raise Unauthenticated(credential.problem)
        record = self.table().get(credential.token_id)
        if record is None or not hmac.compare_digest(record.digest, credential.digest):
            raise Unauthenticated(f"unknown token {credential.token_id} (or a wrong secret)")
        if record.revoked:
            raise Unauthenticated(f"token {record.id} was revoked")
        return record


class AuthFileError(Exception):
    """The auth file cannot be used (the operator's setup, not a bug)."""


def write_auth_file(path: Path, records: list[TokenRecord]) -> None:
    """The auth file a node starts with: token records (hashed), readable by the owner only."""
    write_private(path, json.dumps({"tokens": [r.to_plain() for r in records]}, indent=1).encode())


def load_auth_file(path: Path) -> list[TokenRecord]:
    """The token records of an auth file; refuses one that others may read (it names every token
    of the cluster) or one that is malformed."""
    try:
        mode = os.stat(path).st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise AuthFileError(f"auth file {path} is readable by others (chmod 600 {path})")
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise AuthFileError(f"cannot read auth file {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise AuthFileError(f"auth file {path} is not JSON: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("tokens"), list):
        raise AuthFileError(f'auth file {path} must be {{"tokens": [records...]}}')
    try:
        return [check_record(r) for r in raw["tokens"]]
    except BadInput as exc:
        raise AuthFileError(f"auth file {path}: {exc}") from None
