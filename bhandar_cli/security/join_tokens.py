"""Join tokens: what lets a machine the cluster has never seen ask one node for a certificate.

A token is one line an operator copies to the new machine (as with `kubeadm join`), where
`node run --join` reads it from a file, standard input or $BHANDAR_JOIN_TOKEN:

    bhj1.<host>:<port>.<expires>.<secret>.<ca-sha256>

- `<host>:<port>` is where the issuing node listens: the new node asks that node, and only that
  node can redeem the token (it alone holds the secret's hash);
- `<expires>` is the end of its life in Unix seconds (the issuing node decides; the joiner reads it
  only to say "expired" without asking);
- `<secret>` is 128 random bits in hex; the node keeps only its SHA-256, so a copy of the node's
  data directory mints nothing;
- `<ca-sha256>` pins the cluster CA (`pki.fingerprint`): the joiner trusts the CA certificate the
  node hands it only if it hashes to this, so a man in the middle cannot hand it another CA.
The fields are split from the right, so the address may itself hold dots (and IPv6 colons).

`JoinTokens` is the issuing node's book of unused tokens and of the ids it has issued
certificates for, kept in memory and in DATA_DIR/join-tokens.json (0600) so a restart forgets
neither. Redeeming a token removes it before anything else happens: single use.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from bhandar_cli.core.model import seconds_of
from bhandar_cli.security.pki import write_private

PREFIX = "bhj1"
# Where `node run --join` finds the token without --token-file: never on its command line, which
# every local user can read (/proc/PID/cmdline is 0444, /proc/PID/environ 0400).
JOIN_TOKEN_ENV = "BHANDAR_JOIN_TOKEN"
FILE_NAME = "join-tokens.json"
DEFAULT_TTL = 15 * 60.0
MAX_TTL = 7 * 24 * 3600.0
_SECRET = re.compile(r"[0-9a-f]{32}")
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")


class JoinRefused(Exception):
    """A join the cluster will not grant (a bad, expired or used token, an id in use, a CA that
    is not the pinned one): the joiner's input or situation, never a bug. One line, said as is."""


@dataclass(frozen=True)
class JoinToken:
    address: str  # host:port of the issuing node
    expires: int  # Unix seconds
    secret: str
    ca_fingerprint: str

    def __str__(self) -> str:
        return f"{PREFIX}.{self.address}.{self.expires}.{self.secret}.{self.ca_fingerprint}"

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.address.rpartition(":")
        return host.strip("[]"), int(port)

    @classmethod
    def parse(cls, text: str) -> JoinToken:
        """The token in `text`; raises JoinRefused saying what does not fit."""
        text = text.strip()
        head, sep, rest = text.partition(".")
        if head != PREFIX or not sep:
            raise JoinRefused(f"not a join token (it must start with {PREFIX}.)")
        parts = rest.rsplit(".", 3)
        if len(parts) != 4:
            raise JoinRefused("malformed join token: expected bhj1.HOST:PORT.EXPIRES.SECRET.CA_SHA256")
        address, expires, secret, fingerprint = parts
        host, colon, port = address.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise JoinRefused(f"malformed join token: {address!r} is not HOST:PORT")
        if not expires.isdigit():
            raise JoinRefused("malformed join token: the expiry is not a number")
        if not _SECRET.fullmatch(secret):
            raise JoinRefused("malformed join token: the secret must be 32 hex digits")
        if not _FINGERPRINT.fullmatch(fingerprint):
            raise JoinRefused("malformed join token: the CA pin must be 64 hex digits (SHA-256)")
        return cls(address, int(expires), secret, fingerprint)


def parse_ttl(text: str) -> float:
    """`90`, `90s`, `15m`, `2h`, `1d` -> seconds; ValueError outside (0, 7 days]."""
    seconds = seconds_of(text)
    if seconds is None:
        raise ValueError(f"a lifetime is a number with s, m, h or d (got {text!r})")
    if not 0 < seconds <= MAX_TTL:
        raise ValueError(f"a join token lives more than 0 s and at most 7 days (got {text!r})")
    return seconds


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class JoinTokens:
    """One node's unused join tokens (by the hash of their secret) and the ids it certified."""

    def __init__(self, data_dir: str | Path) -> None:
        self.path = Path(data_dir) / FILE_NAME
        self._expiry: dict[str, float] = {}  # secret hash -> expiry (Unix seconds)
        self.issued: set[str] = set()  # node ids this node signed a certificate for
        self._load()

    def _load(self) -> None:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            self._expiry = {str(h): float(e) for h, e in raw["tokens"].items()}
            self.issued = {str(i) for i in raw["issued"]}
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            # Forgetting tokens only makes joins fail (mint new ones); never start insecure.
            raise OSError(f"the join token file {self.path} is unreadable ({exc}); remove it") from exc

    def _save(self) -> None:
        data = {"tokens": self._expiry, "issued": sorted(self.issued)}
        write_private(self.path, json.dumps(data, indent=1).encode())

    def mint(self, address: str, ca_fingerprint: str, now: float, ttl: float) -> JoinToken:
        """A new token for joining through `address`, valid until now + ttl."""
        if not 0 < ttl <= MAX_TTL:
            raise ValueError(f"a join token lives more than 0 s and at most 7 days (got {ttl:g} s)")
        self._expiry = {h: e for h, e in self._expiry.items() if e > now}  # forget the expired
        token = JoinToken(address, int(now + ttl), secrets.token_hex(16), ca_fingerprint)
        self._expiry[_hash(token.secret)] = token.expires
        self._save()
        return token

    def check(self, secret: str, now: float) -> None:
        """Raise JoinRefused unless `secret` is an unused, unexpired token of this node (an
        expired one is forgotten); spends nothing."""
        expires = self._expiry.get(_hash(secret))
        if expires is None:
            raise JoinRefused("join token unknown or already used (a token admits one node)")
        if expires <= now:
            del self._expiry[_hash(secret)]
            self._save()
            raise JoinRefused("join token expired; mint a new one with `bhandar cluster join-token create`")

    def redeem(self, secret: str, now: float) -> None:
        """Use up the token with `secret`; raises JoinRefused if it is unknown, used or expired.

        Synchronous from the check to the file: no other join can slip in between."""
        key = _hash(secret)
        expires = self._expiry.pop(key, None)
        if expires is None:
            raise JoinRefused("join token unknown or already used (a token admits one node)")
        self._save()
        if expires <= now:
            raise JoinRefused("join token expired; mint a new one with `bhandar cluster join-token create`")

    def record_issued(self, node_id: str) -> None:
        self.issued.add(node_id)
        self._save()
