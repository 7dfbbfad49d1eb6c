"""The wire between nodes and clients on trio: CBOR frames, TLS streams, the transport, RPC."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

# mypyc's build (setup.py) type-checks the compiled modules and every package above them, and sets
# COMPILING (mypy's --always-true): this face, a parent of the compiled codec, then leaves its trio
# modules out of a build environment that has no trio.
COMPILING = False
if TYPE_CHECKING and not COMPILING:
    from bhandar_cli.node.net.blocking_rpc import CLIENT_CODES, BlockingRpc, RpcError
    from bhandar_cli.node.net.cbor_validation import ProtocolError, validate_cbor
    from bhandar_cli.node.net.codec import (
        DEFAULT_MAX_DEPTH,
        DEFAULT_MAX_ITEMS,
        encode_frame,
        limit_protocol,
        negotiate,
        protocol,
    )
    from bhandar_cli.node.net.frames import (
        CONNECT_TIMEOUT,
        FRAME_TIMEOUT,
        STREAM_ERRORS,
        FrameConn,
        Outbox,
        wire_frame,
    )
    from bhandar_cli.node.net.rpc import RpcClient, open_rpc, rpc_once
    from bhandar_cli.node.net.tls_connect import HandshakeError, client_ctx, open_stream
    from bhandar_cli.node.net.tls_stream import TlsStream, Truncated, no_renegotiation
    from bhandar_cli.node.net.transport import TcpTransport
    from bhandar_cli.node.net.wire_versions import (
        MIN_COMPATIBLE_VERSION,
        PROTOCOL_VERSION,
        PROTOCOLS,
        SEALS_VERSION,
    )

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "CLIENT_CODES",
    "CONNECT_TIMEOUT",
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_ITEMS",
    "FRAME_TIMEOUT",
    "MIN_COMPATIBLE_VERSION",
    "PROTOCOLS",
    "PROTOCOL_VERSION",
    "SEALS_VERSION",
    "STREAM_ERRORS",
    "BlockingRpc",
    "FrameConn",
    "HandshakeError",
    "Outbox",
    "ProtocolError",
    "RpcClient",
    "RpcError",
    "TcpTransport",
    "TlsStream",
    "Truncated",
    "client_ctx",
    "encode_frame",
    "limit_protocol",
    "negotiate",
    "no_renegotiation",
    "open_rpc",
    "open_stream",
    "protocol",
    "rpc_once",
    "validate_cbor",
    "wire_frame",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "BlockingRpc": "blocking_rpc",
            "CLIENT_CODES": "blocking_rpc",
            "CONNECT_TIMEOUT": "frames",
            "DEFAULT_MAX_DEPTH": "codec",
            "DEFAULT_MAX_ITEMS": "codec",
            "FRAME_TIMEOUT": "frames",
            "FrameConn": "frames",
            "HandshakeError": "tls_connect",
            "MIN_COMPATIBLE_VERSION": "wire_versions",
            "Outbox": "frames",
            "PROTOCOLS": "wire_versions",
            "PROTOCOL_VERSION": "wire_versions",
            "ProtocolError": "cbor_validation",
            "RpcClient": "rpc",
            "RpcError": "blocking_rpc",
            "SEALS_VERSION": "wire_versions",
            "STREAM_ERRORS": "frames",
            "TcpTransport": "transport",
            "TlsStream": "tls_stream",
            "Truncated": "tls_stream",
            "client_ctx": "tls_connect",
            "encode_frame": "codec",
            "limit_protocol": "codec",
            "negotiate": "codec",
            "no_renegotiation": "tls_stream",
            "open_rpc": "rpc",
            "open_stream": "tls_connect",
            "protocol": "codec",
            "rpc_once": "rpc",
            "validate_cbor": "cbor_validation",
            "wire_frame": "frames",
        },
    )
