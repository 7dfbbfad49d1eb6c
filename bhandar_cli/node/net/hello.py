"""The first frame of every connection to a node's port, checked field by field before anything
formats or uses it.

A hello comes from whoever can reach the port, before they have proved anything, and its fields
end up in log lines and in version arithmetic: a `protocol` of 5,000 digits made Python's
int-to-str limit raise inside a log call (an internal-error traceback per connection), and a
string or a nested map there reached `negotiate`. So a hello is a map of text keys whose known
fields have their types and bounds (`check_hello`); anything else is a ProtocolError whose message
names the field and the type it got, never the value. Unknown fields are dropped (a newer build's
hello still opens a connection).
"""

from __future__ import annotations

from typing import Any

from bhandar_cli.node.net.cbor_validation import ProtocolError

KINDS = ("peer", "client", "join")
MAX_PROTOCOL = 0xFFFF  # far above any version; what a hello may name
MAX_ID = 256  # characters of a node id in a peer's hello
MAX_TOKEN = 1024  # characters of a client's token (a real one is about 60)


def check_hello(body: Any) -> dict[str, Any]:
    """The hello's known fields, checked: `hello` (peer, client or join), `id` (a peer's node id),
    `protocol` (the newest version its writer reads) and `token` (a client's). Raises ProtocolError."""
    if not isinstance(body, dict) or not all(isinstance(k, str) for k in body):
        raise ProtocolError("the first frame must be a hello: a map such as {'hello': 'peer'|'client'}")
    kind = body.get("hello")
    if kind not in KINDS:
        raise ProtocolError(f"the first frame must be a hello: 'hello' must be one of {', '.join(KINDS)}")
    out: dict[str, Any] = {"hello": kind}
    peer_id = body.get("id")
    if kind == "peer":
        if not isinstance(peer_id, str) or not 0 < len(peer_id) <= MAX_ID or not peer_id.isprintable():
            raise ProtocolError(f"a peer hello's 'id' must be a node id (text of 1..{MAX_ID} characters)")
        out["id"] = peer_id
    if "protocol" in body:
        protocol = body["protocol"]
        if not isinstance(protocol, int) or isinstance(protocol, bool) or not 1 <= protocol <= MAX_PROTOCOL:
            in_range = isinstance(protocol, int) and not isinstance(protocol, bool)
            got = "an integer out of range" if in_range else f"a {type(protocol).__name__}"
            raise ProtocolError(f"a hello's 'protocol' must be an integer 1..{MAX_PROTOCOL}, not {got}")
        out["protocol"] = protocol
    if "token" in body and body["token"] is not None:
        token = body["token"]
        if not isinstance(token, str) or len(token) > MAX_TOKEN:
            raise ProtocolError(f"a hello's 'token' must be text of at most {MAX_TOKEN} characters")
        out["token"] = token
    return out
