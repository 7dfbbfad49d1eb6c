"""The error of an RPC to a node, shared by the trio client (node/net/rpc.py) and the blocking one
(node/net/blocking_rpc.py), which must not import trio."""

from __future__ import annotations


class RpcError(Exception):
    """An RPC that got no answer (`kind` unreachable: never sent, the node not reached; busy: never
        sent, too many calls in flight to it; lost: sent, then the connection broke; timeout: no answer
        in time), a node's refusal of a request it did not run (draining: it is stopping or has just
    started; ask another) or an error answer
        (remote), with the error's `code` when the node gave one (unauthenticated, forbidden,
        rate_limited, bad_input)."""

    def __init__(self, message: str, kind: str = "remote", code: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.code = code


CLIENT_CODES = {
    "timeout": "timeout",
    "lost": "timeout",
    "unreachable": "unavailable",
    "busy": "unavailable",
    "draining": "unavailable",
    "remote": "internal",
}
"""The error code a client reports for an RPC of each kind that failed without a code of its own:
`unavailable` (in `NOT_APPLIED`, core/model/errors.py) for a request that was not run, `timeout`
(the outcome unknown) for one that was sent and not answered."""
