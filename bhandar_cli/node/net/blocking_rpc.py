"""RPC to one node over a blocking socket, for a one-shot command that makes a call or two.

The trio client (node/net/rpc.py) pipelines many calls over a connection it keeps; a command that
makes one call and exits pays more for starting trio than for the call. This one speaks the same
protocol with the standard library alone: a TCP connection, TLS checked against the cluster CA
with the node id as the server name, the hello with the token, then frames of the sans-I/O codec
(node/net/codec.py). Errors are the trio client's, word for word: `RpcError` of kind unreachable,
lost or timeout, or remote with the node's code. `RpcError` is declared here, where nothing imports
trio, and the trio client raises it too; `CLIENT_CODES`, the code a client reports for each kind.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from typing import Any

from bhandar_cli.node.net import codec
from bhandar_cli.node.net.cbor_validation import ProtocolError
from bhandar_cli.node.net.codec import CLOSED, NEED_DATA, FrameDecoder, encode_frame
from bhandar_cli.security import PLAIN, ClientAccess

CONNECT_TIMEOUT = 1.0  # as the trio client's (node/net/frames.py)
RECV_SIZE = 65536


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


class BlockingRpc:
    """One connection to a node, opened by `connect`, used by one thread; `label` names the node
    in messages and, over TLS, is the node id its certificate must show."""

    def __init__(self, host: str, port: int, label: str = "", access: ClientAccess = PLAIN) -> None:
        self.host, self.port = host, port
        self.label = label or f"{host}:{port}"
        self.access = access
        self._sock: socket.socket | None = None
        self._decoder = FrameDecoder()
        self._hello = b""
        self._next_id = 0

    def connect(self) -> None:
        """Open the connection (TLS included); raises RpcError (unreachable)."""
        try:
            address: Any = (_ascii(self.host), self.port)  # getaddrinfo takes bytes too
            sock = socket.create_connection(address, timeout=CONNECT_TIMEOUT)
        except OSError as exc:
            raise self._unreachable(exc) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ca = self.access.ca_cert
        if ca is not None:
            from bhandar_cli.security import client_context

            try:
                # suppress_ragged_eofs off: an end without close_notify (a cut) is an error, not
                # the node's goodbye.
                sock = client_context(ca).wrap_socket(
                    sock, server_hostname=_ascii(self.label), suppress_ragged_eofs=False
                )
            except ssl.SSLCertVerificationError as exc:
                sock.close()
                raise self._tls_failed(exc.verify_message or str(exc)) from None
            except ssl.SSLError as exc:
                sock.close()
                raise self._tls_failed(exc.reason or str(exc)) from None
            except OSError as exc:  # the CA file unreadable, the peer gone mid-handshake
                sock.close()
                raise self._unreachable(exc) from None
        self._sock = sock
        hello: dict[str, Any] = {"hello": "client", "protocol": codec.protocol()}
        if self.access.token:
            hello["token"] = self.access.token
        # Sent with the first call: one write, one TLS record. The oldest version until the node's
        # first answer says which it reads (rpc.py does the same).
        self._hello = encode_frame(hello, version=codec.MIN_COMPATIBLE_VERSION)

    def call(self, op: str, timeout: float = 5.0, **args: Any) -> Any:
        """Send one request and wait for its answer's body. Raises RpcError."""
        if self._sock is None:
            raise RpcError(f"connection to node {self.label} lost (not connected)", "unreachable")
        self._next_id += 1
        rid = self._next_id
        known = self._decoder.peer_version
        version = codec.MIN_COMPATIBLE_VERSION if known is None else min(codec.protocol(), known)
        frame, self._hello = self._hello + encode_frame({"id": rid, "op": op, **args}, version=version), b""
        deadline = time.monotonic() + timeout
        try:
            self._sock.settimeout(timeout)
            self._sock.sendall(frame)
            body = self._answer(rid, deadline)
        except TimeoutError:
            raise RpcError(
                f"node {self.label} did not answer {op!r} within {timeout:g} s", "timeout"
            ) from None
        except ssl.SSLEOFError:
            raise self._lost("the TLS stream was cut without close_notify (truncated)") from None
        except (OSError, ProtocolError) as exc:
            why = f"the node sent bad frames ({exc})" if isinstance(exc, ProtocolError) else str(exc)
            raise self._lost(why) from None
        if not body.get("ok"):
            code = str(body.get("code", ""))
            kind = "draining" if body.get("draining") else "remote"  # draining: refused, not run
            raise RpcError(f"node {self.label}: {body.get('error', 'failed')}", kind, code)
        return body.get("body")

    def close(self) -> None:
        if self._sock is not None:
            if isinstance(self._sock, ssl.SSLSocket):
                # Say goodbye (close_notify) rather than cut: the node tells a cut stream apart.
                with contextlib.suppress(OSError, ValueError):
                    self._sock.settimeout(0.2)
                    self._sock.unwrap()
            self._sock.close()
            self._sock = None

    def _answer(self, rid: int, deadline: float) -> dict[Any, Any]:
        assert self._sock is not None
        while True:
            body = self._decoder.next_frame()
            if body is NEED_DATA:
                self._sock.settimeout(max(deadline - time.monotonic(), 1e-3))
                self._decoder.receive_data(self._sock.recv(RECV_SIZE))
            elif body is CLOSED:
                raise self._lost("the node closed the connection")
            elif isinstance(body, dict) and body.get("id") == rid:
                return body

    def _lost(self, why: str) -> RpcError:
        # Sent, then the connection broke: the node may have acted on it, unlike a request that
        # never left ("unreachable").
        return RpcError(
            f"connection to node {self.label} lost before it answered ({why}); "
            "the request may have taken effect",
            "lost",
        )

    def _unreachable(self, exc: OSError) -> RpcError:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        return RpcError(
            f"node {self.label} is not answering at {self.host}:{self.port} ({why})", "unreachable"
        )

    def _tls_failed(self, reason: str) -> RpcError:
        return RpcError(
            f"node {self.label} at {self.host}:{self.port} failed the TLS check ({reason})", "unreachable"
        )


def _ascii(name: str) -> str | bytes:
    """A host name or address (to look up), or a node id (to check the certificate for), as the
    socket and ssl modules take it without the idna codec: an ASCII name as bytes. Given a str,
    they encode it with that codec, whose import (with stringprep and unicodedata) costs a one-shot
    command a millisecond; IDNA leaves an ASCII name unchanged anyway."""
    try:
        return name.encode("ascii")
    except UnicodeEncodeError:
        return name
