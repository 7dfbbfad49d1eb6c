"""How user values become stored bytes and back.

In the REPL and CLI a VALUE is a JSON literal when it parses as one, else a bare string; either way
it is stored as JSON (content type application/json). A bare string that starts like JSON (`{`, `[`
or `"`) is most likely a typo: the write goes through, with a warning that says so. Bytes that
are not JSON (`put ... -` from a binary stdin, or an HTTP body of another type) are stored as
they are and shown in JSON output as {"base64": "..."}.

JSON is parsed strictly (core/model/limits.py): text that is JSON except for NaN, Infinity or nesting
deeper than the limit is an error, not a bare string, so `put ks k NaN` says why it is refused.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from bhandar_cli.core.model.errors import BadInput
from bhandar_cli.core.model.limits import NotJson, parse_json
from bhandar_cli.core.model.versions import BYTES, JSON


@dataclass(frozen=True)
class ParsedValue:
    """A value as it will be stored, and a warning when text that starts like JSON (an object, an
    array or a quoted string) did not parse and is stored as a bare string: most likely a typo."""

    data: bytes
    ctype: str
    warning: str = ""


def parse_value_text(text: str) -> ParsedValue:
    """REPL/CLI value text -> what is stored; raises BadInput for refused JSON."""
    try:
        return ParsedValue(encode_json(parse_json(text)), JSON)
    except NotJson as exc:
        return ParsedValue(encode_json(text), JSON, _broken_json_warning(text, str(exc)))


def _broken_json_warning(text: str, reason: str) -> str:
    if not text.lstrip().startswith(("{", "[", '"')):
        return ""
    shown = text if len(text) <= 40 else text[:39] + "…"
    return f"stored as the string {shown!r}: it starts like JSON but does not parse ({reason})"


def encode_json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def parse_value_bytes(data: bytes) -> ParsedValue:
    """Raw bytes (stdin): JSON if they are valid UTF-8 JSON, else opaque bytes kept exactly."""
    try:
        parsed = parse_json(data)
    except NotJson as exc:
        text = _as_text(data)
        if text is None:
            return ParsedValue(data, BYTES)
        return ParsedValue(encode_json(text), JSON, _broken_json_warning(text, str(exc)))
    return ParsedValue(encode_json(parsed), JSON)


def _as_text(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text[:-1] if text.endswith("\n") else text


def decode_value(data: bytes | None, ctype: str) -> Any:
    """Stored bytes -> a JSON-able value (None for a tombstone)."""
    if data is None:
        return None
    if ctype == JSON:
        try:  # strictly: a value stored before the limits existed must not break a read
            return parse_json(data)
        except (NotJson, BadInput):
            pass
    return {"base64": base64.b64encode(data).decode("ascii")}


def raw_value(data: bytes | None, ctype: str) -> bytes:
    """The bare value for `-o raw`: a JSON string without quotes, other JSON as JSON, bytes as is."""
    if data is None:
        return b""
    if ctype == JSON:
        value = decode_value(data, ctype)
        if isinstance(value, str):
            return value.encode("utf-8")
        return data
    return data
