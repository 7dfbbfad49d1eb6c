"""A node's HTTP gateway: the API, the Prometheus endpoint, the ASGI glue and the HTTP/1.1 server."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bhandar_cli import lazy_face

if TYPE_CHECKING:
    from bhandar_cli.node.http.api import serve_http
    from bhandar_cli.node.http.asgi import BodyRefused, Limits, RequestBody, serve
    from bhandar_cli.node.http.http1 import Receive, Scope, Send

# The face: what other packages import from this one (tests/faces.txt pins it). Loaded on first
# use (PEP 562), so importing any module of the package costs no more than before.
__all__ = [
    "BodyRefused",
    "Limits",
    "Receive",
    "RequestBody",
    "Scope",
    "Send",
    "serve",
    "serve_http",
]
if not TYPE_CHECKING:  # mypy reads the imports above: a misspelt name is an error
    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            "BodyRefused": "asgi",
            "Limits": "asgi",
            "Receive": "http1",
            "RequestBody": "asgi",
            "Scope": "http1",
            "Send": "http1",
            "serve": "asgi",
            "serve_http": "api",
        },
    )
