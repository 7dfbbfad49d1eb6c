"""Joining a cluster from another machine: a join token buys a node certificate.

The exchange, over TLS on the issuing node's port (the joiner has no CA yet, so it checks nothing
in the handshake and everything after it):

    joiner -> {"hello": "join"}
    node   -> {"ca": CA_PEM}
    joiner    checks sha256(CA) against the token's pin and that the node's own certificate was
              issued by that CA; otherwise it stops here (a man in the middle, or another
              cluster), before the secret has left the machine
    joiner -> {"token": T, "id": F, "csr": CSR_PEM, "hosts": [H]}
    node   -> {"cert": CERT_PEM} | {"error": "one line"}

The joiner's private key never travels: it sends a certificate signing request (`pki.make_csr`)
and the node signs the id it checked, not the CSR's subject. The node grants a join only with an
unused, unexpired token of its own (join_token.JoinTokens) for an id that is well formed and that
no member, past (decommissioned) or present, and no earlier join already has, in any case (`b`
is refused beside `B`: TLS names ignore case); the token is checked before anything else is, so
a joiner without one learns nothing about ids. The certificate names the id and the one host H
the request gives, an IP address or a host name that is no node's id (`pki.certificate_names`):
never a list of the joiner's choosing, so it cannot pass as another node.

`JoinDesk` is the issuing node's side (the transport hands it connections that open with a join
hello); `redeem` is the joiner's (`bhandar node run --join`).
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import trio

from bhandar_cli.core.model import NODE_ID, NODE_ID_RULE
from bhandar_cli.node.net import (
    CONNECT_TIMEOUT,
    MIN_COMPATIBLE_VERSION,
    STREAM_ERRORS,
    FrameConn,
    ProtocolError,
    encode_frame,
)
from bhandar_cli.security import (
    CA_CERT,
    TLS_DIR,
    JoinRefused,
    JoinToken,
    JoinTokens,
    NodeTls,
    PkiError,
    issued_by,
    make_csr,
    private_dir,
    sign_node_csr,
    write_private,
)
from bhandar_cli.security import fingerprint as pki_fingerprint

log = logging.getLogger("bhandar.join")

JOIN_TIMEOUT = 10.0
MAX_PEM = 16384


class JoinUnreachable(Exception):
    """The issuing node could not be reached or broke off the exchange (the network, not the token)."""


class JoinDesk:
    """Where a node mints join tokens and grants joins (its collaborators: the token book, the CA
    directory if this node holds the CA key, its own address, and the ids its membership knows)."""

    def __init__(
        self,
        tokens: JoinTokens,
        ca_dir: Path | None,
        address: Callable[[], str],
        known_ids: Callable[[], set[str]],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.tokens = tokens
        self.ca_dir = ca_dir
        self.address = address
        self.known_ids = known_ids
        self.clock = clock

    def _ca_pem(self) -> bytes:
        if self.ca_dir is None:
            raise JoinRefused(
                "this node holds no CA key, so it cannot admit new nodes; use a node started with --ca-key"
            )
        return (self.ca_dir / CA_CERT).read_bytes()

    def mint(self, ttl: float) -> JoinToken:
        """A new single-use token naming this node; JoinRefused if this node cannot sign."""
        fingerprint = pki_fingerprint(self._ca_pem())
        return self.tokens.mint(self.address(), fingerprint, self.clock(), ttl)

    def grant(self, request: Any) -> bytes:
        """The certificate for a well-formed join request with a good token; JoinRefused otherwise.

        The token is checked first: without a good one the joiner learns nothing (whether an id is
        taken, whether its request would be signed). It is spent only once the certificate is
        made, so a refused id or a broken CSR does not cost the operator a token. Synchronous from
        the first check to the token book's file, so two joins cannot both use one token or id."""
        assert self.ca_dir is not None, "grant is only reached after _ca_pem"
        if not isinstance(request, dict):
            raise JoinRefused("a join request is a map of token, id, csr and hosts")
        token, node_id, csr, hosts = (request.get(k) for k in ("token", "id", "csr", "hosts"))
        if not isinstance(token, str):
            raise JoinRefused("the join request carries no token")
        secret = JoinToken.parse(token).secret
        self.tokens.check(secret, self.clock())
        if not isinstance(node_id, str) or not NODE_ID.fullmatch(node_id):
            raise JoinRefused(f"bad node id {node_id!r}: use {NODE_ID_RULE}")
        members = self.known_ids()
        # Ids are told apart without regard to case, as TLS names are: `b` beside `B` is taken.
        if taken := _same_id(node_id, members):
            whose = "it is" if taken == node_id else f"{taken}, the same in another case, is"
            raise JoinRefused(
                f"node id {node_id} is taken ({whose} a member now or before); pick another --id"
            )
        if taken := _same_id(node_id, self.tokens.issued):
            spelt = "" if taken == node_id else f" as {taken} (ids ignore case)"
            raise JoinRefused(f"node id {node_id} was given to an earlier join{spelt}; pick another --id")
        if not isinstance(csr, str) or len(csr) > MAX_PEM:
            raise JoinRefused("the join request has no certificate signing request")
        if not isinstance(hosts, list) or len(hosts) != 1 or not isinstance(hosts[0], str):
            raise JoinRefused("the join request must name one host: the address the new node listens on")
        known = {*members, *self.tokens.issued}
        try:
            cert = sign_node_csr(self.ca_dir, csr.encode(), node_id, hosts, known)
        except PkiError as exc:
            raise JoinRefused(str(exc)) from None
        self.tokens.redeem(secret, self.clock())
        self.tokens.record_issued(node_id)
        return cert

    async def serve(self, conn: FrameConn) -> None:
        """One join exchange on `conn` (its hello already read); every refusal is logged and told."""
        stream, peer = conn.stream, conn.peer
        try:
            await stream.send_all(_frame({"ca": self._ca_pem().decode()}))
            request = await conn.receive()
            if request is None:
                return  # the joiner did not like our CA (or gave up): nothing was asked
            cert = self.grant(request)
        except JoinRefused as exc:
            log.warning("refused a join from %s: %s", peer, exc)
            await stream.send_all(_frame({"error": str(exc)}))
            return
        log.info("admitted node %s from %s: certificate issued", _field(request, "id"), peer)
        await stream.send_all(_frame({"cert": cert.decode()}))


def _same_id(node_id: str, ids: set[str]) -> str | None:
    """The id of `ids` that is `node_id` in some case, if any."""
    folded = node_id.casefold()
    return next((i for i in sorted(ids) if i.casefold() == folded), None)


def _frame(body: Mapping[str, object]) -> bytes:
    # The join exchange is the same in every protocol version: written in the oldest, which
    # a node of any version reads.
    return encode_frame(body, version=MIN_COMPATIBLE_VERSION)


def _joiner_context() -> ssl.SSLContext:
    # No CA to check against yet: the check is the pin, after the handshake (see the docstring).
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def _field(body: Any, name: str) -> Any:
    return body.get(name) if isinstance(body, dict) else None


async def _ask(conn: FrameConn, what: str) -> str:
    """The text field `what` of the node's next frame; its refusal raised as JoinRefused."""
    body = await conn.receive()
    if body is None:
        raise JoinUnreachable(f"the node closed the connection before sending its {what}")
    error, value = _field(body, "error"), _field(body, what)
    if isinstance(error, str):
        raise JoinRefused(f"the cluster refused the join: {error}")
    if not isinstance(value, str):
        raise JoinUnreachable(f"the node answered without its {what}")
    return value


async def redeem(
    token: JoinToken, address: tuple[str, int], node_id: str, hosts: list[str], tls_dir: Path
) -> NodeTls:
    """Join through the node at `address` with `token`; the node identity written in `tls_dir`.

    Raises JoinRefused (the token, the id or the CA is not right) or JoinUnreachable."""
    if token.expires <= time.time():
        raise JoinRefused("join token expired; mint a new one with `bhandar cluster join-token create`")
    host, port = address
    try:
        with trio.fail_after(JOIN_TIMEOUT):
            with trio.fail_after(CONNECT_TIMEOUT):
                tcp = await trio.open_tcp_stream(host, port)
            stream = trio.SSLStream(tcp, _joiner_context(), server_hostname=None)
            try:
                return await _exchange(stream, token, f"{host}:{port}", node_id, hosts, tls_dir)
            finally:
                await trio.aclose_forcefully(stream)
    except trio.TooSlowError:
        raise JoinUnreachable(f"the node at {host}:{port} did not complete the join in time") from None
    except ProtocolError as exc:
        raise JoinUnreachable(f"the node at {host}:{port} sent bad frames ({exc})") from None
    except STREAM_ERRORS as exc:
        raise JoinUnreachable(f"cannot join through {host}:{port}: {exc}") from None


async def _exchange(
    stream: trio.SSLStream[trio.SocketStream],
    token: JoinToken,
    where: str,
    node_id: str,
    hosts: list[str],
    tls_dir: Path,
) -> NodeTls:
    await stream.do_handshake()
    conn = FrameConn(stream)
    await stream.send_all(_frame({"hello": "join"}))
    ca_pem = (await _ask(conn, "ca")).encode()
    if pki_fingerprint(ca_pem) != token.ca_fingerprint:
        raise JoinRefused(
            f"the node at {where} shows a cluster CA that is not the one the token pins "
            "(a man in the middle, or a token of another cluster); not joining"
        )
    server_der = stream.getpeercert(binary_form=True)
    if not server_der or not issued_by(ssl.DER_cert_to_PEM_cert(server_der).encode(), ca_pem):
        raise JoinRefused(
            f"the node at {where} holds no certificate of the pinned CA (a man in the middle?); not joining"
        )
    key_pem, csr_pem = make_csr(node_id)
    request = {"token": str(token), "id": node_id, "csr": csr_pem.decode(), "hosts": hosts}
    await stream.send_all(_frame(request))
    cert_pem = (await _ask(conn, "cert")).encode()
    if not issued_by(cert_pem, ca_pem):
        raise JoinRefused(f"the node at {where} sent a certificate its CA did not sign; not joining")
    private_dir(tls_dir)
    files = NodeTls.in_dir(tls_dir)
    write_private(files.key, key_pem)
    write_private(files.cert, cert_pem)
    write_private(files.ca_cert, ca_pem)  # last: its presence says the join is complete
    return files


def join_once(
    address: tuple[str, int], token_text: Callable[[], str], node_id: str, host: str, data_dir: str
) -> Path:
    """The TLS directory of a node started with a join token: DATA_DIR/tls, made by redeeming
    the token (`token_text()` reads it) on the first run; a rerun finds it complete and does not
    join again, nor read the token."""
    tls_dir = Path(data_dir) / TLS_DIR
    if NodeTls.in_dir(tls_dir).exists():
        log.info("node %s has its certificate in %s already: not joining again", node_id, tls_dir)
        return tls_dir
    token = JoinToken.parse(token_text())
    private_dir(Path(data_dir))
    trio.run(redeem, token, address, node_id, [host], tls_dir)
    log.info("node %s joined through %s:%d; certificate in %s", node_id, *address, tls_dir)
    return tls_dir
