"""The opaque causal-context token a client gets from `get` and hands back to `put`/`delete`.

It is base64url (unpadded) of CBOR of the joined version vector. Clients must treat it as opaque;
the store validates it strictly, so a malformed or forged token is a clear `BadInput`, never a crash.
"""

from __future__ import annotations

import base64
import re

import cbor2

from bhandar_cli.core.errors import BadInput
from bhandar_cli.core.versions import VersionVector

MAX_TOKEN_CHARS = 4096
MAX_ENTRIES = 64
_ACTOR = re.compile(r"^[A-Za-z0-9_.~-]{1,64}$")


def encode_context(vv: VersionVector) -> str:
    if not vv:
        return ""
    raw = cbor2.dumps({k: vv[k] for k in sorted(vv)})
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_context(token: str | None) -> dict[str, int]:
    """Parse a token; '' or None means "no context" (a blind write)."""
    if not token:
        return {}
    if len(token) > MAX_TOKEN_CHARS:
        raise BadInput(f"context token too long ({len(token)} characters)")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = cbor2.loads(raw)
    except Exception as exc:  # binascii, cbor2 and value errors all mean "not ours"
        raise BadInput("malformed context token (use the context a get returned)") from exc
    if not isinstance(data, dict) or len(data) > MAX_ENTRIES:
        raise BadInput("malformed context token (not a version vector)")
    out: dict[str, int] = {}
    for actor, counter in data.items():
        if not isinstance(actor, str) or not _ACTOR.match(actor):
            raise BadInput("malformed context token (bad node name inside)")
        if not isinstance(counter, int) or isinstance(counter, bool) or not 0 < counter < 2**53:
            raise BadInput("malformed context token (bad counter inside)")
        out[actor] = counter
    return out
