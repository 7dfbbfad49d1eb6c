"""`bhandar bench security`: what TLS and tokens cost, measured against the same cluster without them.

Two process clusters of the same shape run side by side in a temporary directory: a secure one
(mutual TLS between nodes, TLS and a token for clients: what `cluster up` makes) and an
`--insecure` one (plain TCP, no tokens). The same load (bench's get/put mix through client/client.py)
runs against each in turn, alternating which goes first over the rounds, so a noisy machine
weighs on both alike; the report gives each side's best round and the secure/plain ratio. The
command (cli/bench_security_cmd.py) parses and renders.

`--floods` (`run_flood_bench`) measures instead what a legitimate client gets while others hold
the ports: a flood of silent connections to the HTTPS port, and a thousand connections held on the
node port with a read-only token (docs/security.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from bhandar_cli.bench.throughput import KEYSPACE, VALUE, Advance, Progress, no_progress, store_load

if TYPE_CHECKING:
    from bhandar_cli.fleet import ClusterFile

SECURITY_SIDES = ("secure", "plain")


async def run_security_bench(
    workdir: Path,
    nodes: int,
    ops: int,
    rounds: int,
    concurrency: int,
    level: str,
    weights: tuple[int, int],
    progress: Progress = no_progress,
) -> dict[str, Any]:
    from bhandar_cli.client import open_tcp_client
    from bhandar_cli.core.model import parse_value_text
    from bhandar_cli.fleet import down, up

    parsed = parse_value_text(VALUE)
    value, ctype = parsed.data, parsed.ctype
    zones = min(3, nodes)
    replicas = min(3, nodes)
    clusters: dict[str, ClusterFile] = {}
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SECURITY_SIDES}
    try:
        for side in SECURITY_SIDES:
            clusters[side] = await up(workdir / side, nodes, zones, 0, 8, replicas, (), tls=side == "secure")
        with progress(2 * rounds * ops) as advance:
            for r in range(rounds):
                for side in SECURITY_SIDES if r % 2 == 0 else SECURITY_SIDES[::-1]:
                    async with open_tcp_client(clusters[side].dir, level) as client:
                        runs[side].append(
                            await store_load(client, ops, concurrency, weights, value, ctype, advance)
                        )
    finally:
        for cluster in clusters.values():
            await down(cluster)
    best = {side: max(runs[side], key=lambda s: s["ops_per_s"]) for side in SECURITY_SIDES}
    secure, plain = best["secure"], best["plain"]
    ratio = round(secure["ops_per_s"] / plain["ops_per_s"], 3) if plain["ops_per_s"] else 0.0
    errors = sum(s["errors"] for side in SECURITY_SIDES for s in runs[side])
    sides: dict[str, Any] = {}
    for side in SECURITY_SIDES:
        cluster = clusters[side]
        sides[side] = {
            "tls": cluster.tls,
            "token": bool(cluster.token),
            "rounds_ops_per_s": [s["ops_per_s"] for s in runs[side]],
            **{k: best[side][k] for k in ("ops_per_s", "p50_ms", "p99_ms", "max_ms")},
        }
    return {
        "cmd": "bench security",
        "ok": errors == 0,
        "nodes": nodes,
        "keyspace": KEYSPACE,
        "consistency": level,
        "concurrency": concurrency,
        "ops_per_round": ops,
        "rounds": rounds,
        "errors": errors,
        **sides,
        "ratio": ratio,
        "cost_pct": round((1 - ratio) * 100, 1),
    }


# --- floods: what a legitimate client gets while someone else holds the ports -------------------

# New silent connections a second to the HTTPS port: each holds its place for the 5 s handshake
# deadline, so 60 a second keep about 300 open, past the port's 256 (50 a second stays just under).
FLOOD_RATE = 60
HELD = 1024  # connections held on the node port with a read-only token: as many as it takes in all
LEGIT = 30  # calls the legitimate client makes under each flood, each on a new connection
LEGIT_EVERY = 0.2  # seconds between them: the HTTPS flood goes on for about LEGIT * this


async def run_flood_bench(workdir: Path, progress: Progress = no_progress) -> dict[str, Any]:
    """One secure node; two floods in turn, and a legitimate client's 30 calls under each: (a)
    FLOOD_RATE new silent TCP connections a second to the HTTPS port (each would hold its place
    for the TLS handshake timeout), (b) HELD connections to the node port, each TLS with a hello
    showing a read-only token. Counts the legitimate calls answered, and what the node held."""
    from bhandar_cli.fleet import down, up

    cluster = await up(workdir / "floods", 1, 1, 0, 8, 1, (), tls=True)
    try:
        with progress(2 * LEGIT) as advance:
            https = await _https_flood(cluster, advance)
            node_port = await _held_flood(cluster, advance)
    finally:
        await down(cluster)
    return {
        "cmd": "bench security --floods",
        "ok": https["answered"] >= LEGIT - 1 and node_port["answered"] >= LEGIT - 1,
        "legit_calls": LEGIT,
        "https": https,
        "node_port": node_port,
    }


async def _https_flood(cluster: ClusterFile, advance: Advance) -> dict[str, Any]:
    import ssl

    import trio

    from bhandar_cli.fleet import client_access

    entry = cluster.nodes[0]
    access = client_access(cluster)
    assert access.ca_cert is not None and access.token
    ctx = ssl.create_default_context(cafile=str(access.ca_cert))
    flood: list[trio.SocketStream] = []
    refused = 0
    answered = 0

    async def flooder() -> None:
        nonlocal refused
        while True:
            try:
                flood.append(await trio.open_tcp_stream(entry.host, entry.http_port))
            except OSError:
                refused += 1
            await trio.sleep(1 / FLOOD_RATE)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(flooder)
        await trio.sleep(5.0)  # the flood at its full height: a handshake timeout's worth of it
        for _ in range(LEGIT):
            answered += await _https_status(entry.host, entry.http_port, ctx, access.token) == 200
            if advance:
                advance(1)
            await trio.sleep(LEGIT_EVERY)
        nursery.cancel_scope.cancel()
    opened = len(flood)
    for stream in flood:
        await trio.aclose_forcefully(stream)
    return {"flood_per_s": FLOOD_RATE, "flood_opened": opened, "answered": answered}


async def _https_status(host: str, port: int, ctx: Any, token: str) -> int:
    """The status of one GET /v1/status on a new HTTPS connection; 0 if none came in 10 s."""
    import ssl

    import trio

    with trio.move_on_after(10):
        try:
            tcp = await trio.open_tcp_stream(host, port)
        except OSError:
            return 0
        stream = trio.SSLStream(tcp, ctx, server_hostname=host, https_compatible=True)
        try:
            request = f"GET /v1/status HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
            await stream.send_all(f"{request}Connection: close\r\n\r\n".encode())
            answer = b""
            while b"\r\n" not in answer:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    return 0
                answer += chunk
            return int(answer.split()[1])
        except (trio.BrokenResourceError, ssl.SSLError, OSError, ValueError, IndexError):
            return 0
        finally:
            await trio.aclose_forcefully(stream)
    return 0


async def _held_flood(cluster: ClusterFile, advance: Advance) -> dict[str, Any]:
    import time

    import trio

    from bhandar_cli.core import to_wire
    from bhandar_cli.fleet import client_access
    from bhandar_cli.node.net import (
        MIN_COMPATIBLE_VERSION,
        HandshakeError,
        RpcError,
        client_ctx,
        encode_frame,
        open_stream,
        rpc_once,
    )
    from bhandar_cli.security import ClientAccess, mint

    entry = cluster.nodes[0]
    admin = client_access(cluster)
    assert admin.ca_cert is not None
    reader, record = mint({"*": "read"}, 100.0, 100, time.time())
    await rpc_once(entry.host, entry.port, "token_create", 5.0, entry.id, admin, record=to_wire(record))
    hello = encode_frame({"hello": "client", "token": reader}, version=MIN_COMPATIBLE_VERSION)
    ctx = client_ctx(admin.ca_cert)
    flood: list[trio.abc.Stream] = []
    refused = 0
    with trio.move_on_after(120):
        for _ in range(HELD):
            try:
                stream = await open_stream(entry.host, entry.port, 5.0, ctx, entry.id)
                await stream.send_all(hello)
                flood.append(stream)
            except (OSError, HandshakeError, trio.TooSlowError, trio.BrokenResourceError):
                refused += 1
    answered = 0
    for _ in range(LEGIT):
        try:
            info = await rpc_once(entry.host, entry.port, "info", 5.0, entry.id, admin, counts=False)
            answered += info.get("id") == entry.id
        except RpcError:
            pass
        if advance:
            advance(1)
    reader_access = ClientAccess(admin.ca_cert, reader)
    try:
        await rpc_once(entry.host, entry.port, "info", 5.0, entry.id, reader_access, counts=False)
        one_more = "admitted"
    except RpcError as exc:
        one_more = str(exc)
    try:  # what the node held, while the flood is still open
        info = await rpc_once(entry.host, entry.port, "info", 5.0, entry.id, admin, counts=False)
    except RpcError as exc:
        info = {"connections": {"unknown": str(exc)}}
    for stream in flood:
        await trio.aclose_forcefully(stream)
    return {
        "held": HELD,
        "flood_opened": len(flood),
        "flood_refused_at_connect": refused,
        "answered": answered,
        "one_more_with_the_token": one_more,
        "connections": info.get("connections", {}),
    }
