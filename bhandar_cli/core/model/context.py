"""The context string: the opaque printable form of the causal context a client gets from `get`
and hands back to `put`/`delete`.

It is base64url (unpadded) of CBOR of the joined version vector. Clients must treat it as opaque;
the store validates it strictly, so a malformed or forged context string is a clear `BadInput`,
never a crash.
"""

from __future__ import annotations

import base64

import cbor2

from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.core.model.limits import MAX_CONTEXT_CHARS, check_context
from bhandar_cli.core.model.versions import VersionVector

# What a delete without a context does not do, told wherever one is made (CLI, REPL, HTTP).
BLIND_DELETE_WARNING = (
    "a blind delete (no context) removes nothing already stored in a siblings keyspace: its "
    "tombstone covers no version, so every existing value survives it as a sibling (an lww "
    "keyspace keeps the newest by time instead). Delete without a context to read the key first "
    "and delete what the read finds"
)


def encode_context(context: VersionVector) -> str:
    if not context:
        return ""
    raw = cbor2.dumps({k: context[k] for k in sorted(context)})
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_context(text: str | None) -> dict[str, int]:
    """Parse a context string; '' or None means "no context" (a blind write)."""
    if not text:
        return {}
    if len(text) > MAX_CONTEXT_CHARS:
        raise BadInput(f"context string too long ({len(text)} characters, the limit is {MAX_CONTEXT_CHARS})")
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        data = cbor2.loads(raw)
    except Exception as exc:  # binascii, cbor2 and value errors all mean "not ours"
        raise BadInput("malformed context string (use the context a get returned)") from exc
    if not isinstance(data, dict):
        raise BadInput("malformed context string (not a version vector)")
    return check_context(data)
