"""The HTTP load of `bench etcd`, run in a process of its own: keep-alive clients, one request each
in flight, against Bhandar's HTTP API or etcd's JSON gateway, and the CPU the servers spent.

    python -m bhandar_cli.bench.http_load < SPEC.json      # prints one JSON object

The spec names the servers (host, port, and the pids whose CPU time to count), the API
("bhandar": PUT/GET /v1/kv/KS/KEY with a bearer token over HTTPS; "etcd": POST /v3/kv/put and
/v3/kv/range), the operation, how many, how many clients, the keys and the value. Each client holds
one connection to one server (clients are dealt round the servers) and sends its next request when
the last is answered. The same code drives both stores, so the comparison is of the servers.
A minimal HTTP/1.1 client (Content-Length and chunked bodies): the load must cost as little as it
can on a machine the servers share.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import sys
import time
from dataclasses import dataclass
from typing import Any

import trio

from bhandar_cli.node.net import no_renegotiation, open_stream

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int], children: bool = True) -> float:
    """User and system CPU time so far of these processes (those still running) and, with
    `children`, of the children they run (a node's HTTP fronts, node/http/fronts.py)."""
    total = 0
    for pid in _with_children(pids) if children else pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / _TICK


def _with_children(pids: list[int]) -> list[int]:
    """`pids` and their children, from /proc/PID/task/TID/children (Linux)."""
    out: list[int] = []
    for pid in pids:
        out.append(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children", "rb") as f:
                    out += [int(child) for child in f.read().split()]
            except OSError:
                continue
    return out


@dataclass(frozen=True)
class Spec:
    api: str  # "bhandar" or "etcd"
    op: str  # "put" or "get"
    servers: list[tuple[str, int]]
    pids: list[int]
    ops: int
    clients: int
    keys: list[str]  # put: key i is keys[i % len]; fresh keys come from a prefix instead
    prefix: str  # put: key i is PREFIX + i when set
    value: str
    keyspace: str = "bench"
    token: str = ""
    ca: str = ""  # HTTPS with this CA when set


def request(spec: Spec, host: str, i: int) -> bytes:
    key = f"{spec.prefix}{i}" if spec.prefix else spec.keys[i % len(spec.keys)]
    if spec.api == "etcd":
        k = base64.b64encode(key.encode()).decode()
        if spec.op == "put":
            body = json.dumps({"key": k, "value": base64.b64encode(spec.value.encode()).decode()})
            path = "/v3/kv/put"
        else:
            body, path = json.dumps({"key": k}), "/v3/kv/range"
        method = "POST"
    else:
        path = f"/v1/kv/{spec.keyspace}/{key}"
        method, body = ("PUT", json.dumps({"value": spec.value})) if spec.op == "put" else ("GET", "")
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n"
    if spec.token:
        head += f"Authorization: Bearer {spec.token}\r\n"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return (head + "\r\n" + body).encode()


class Response:
    """Reads HTTP/1.1 responses off a stream, one at a time."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def _more(self) -> None:
        data = await self.stream.receive_some(65536)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.buffer += data

    async def _line(self) -> bytes:
        while (end := self.buffer.find(b"\r\n")) < 0:
            await self._more()
        line = bytes(self.buffer[:end])
        del self.buffer[: end + 2]
        return line

    async def _take(self, n: int) -> bytes:
        while len(self.buffer) < n:
            await self._more()
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        return data

    async def read(self) -> tuple[int, bytes, bool]:
        """(status, body, whether the server keeps the connection open)."""
        status = int((await self._line()).split(b" ", 2)[1])
        length, chunked, keep = 0, False, True
        while line := await self._line():
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value
            elif name == b"connection":
                keep = value != b"close"
        if not chunked:
            return status, await self._take(length), keep
        parts = []
        while size := int((await self._line()).split(b";")[0], 16):
            parts.append(await self._take(size))
            await self._line()
        while await self._line():  # trailers
            pass
        return status, b"".join(parts), keep


async def _open(spec: Spec, host: str, port: int, ctx: ssl.SSLContext | None) -> trio.abc.Stream:
    # The nodes' own TLS stream (node/net/tls_stream.py): the load's share of the shared CPU is less.
    return await open_stream(host, port, 10.0, ctx, host)


async def run(spec: Spec) -> dict[str, Any]:
    ctx = None
    if spec.ca:
        ctx = no_renegotiation(ssl.create_default_context(cafile=spec.ca))
    latencies: list[float] = []
    errors: list[str] = []
    next_op = 0
    streams: list[tuple[trio.abc.Stream, Response, str]] = []
    for c in range(spec.clients):
        host, port = spec.servers[c % len(spec.servers)]
        stream = await _open(spec, host, port, ctx)
        streams.append((stream, Response(stream), f"{host}:{port}"))

    async def client(c: int) -> None:
        nonlocal next_op
        stream, response, where = streams[c]
        host, port = spec.servers[c % len(spec.servers)]
        while next_op < spec.ops:
            i = next_op
            next_op += 1
            started = time.perf_counter()
            await stream.send_all(request(spec, where, i))
            status, body, keep = await response.read()
            latencies.append(time.perf_counter() - started)
            if status >= 300:
                errors.append(f"{status} {body[:200]!r}")
            if not keep:
                await stream.aclose()
                stream = await _open(spec, host, port, ctx)
                response = Response(stream)

    cpu_before, own_before = cpu_seconds(spec.pids), cpu_seconds(spec.pids, children=False)
    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for c in range(spec.clients):
            nursery.start_soon(client, c)
    seconds = time.perf_counter() - started
    cpu = cpu_seconds(spec.pids) - cpu_before
    own = cpu_seconds(spec.pids, children=False) - own_before
    for stream, _, _ in streams:
        await trio.aclose_forcefully(stream)
    latencies.sort()
    n = len(latencies)
    return {
        "ops": n,
        "seconds": round(seconds, 3),
        "ops_per_s": round(n / seconds, 1) if seconds else 0.0,
        "p50_ms": round(latencies[n // 2] * 1000, 2) if n else 0.0,
        "p99_ms": round(latencies[min(n - 1, int(n * 0.99))] * 1000, 2) if n else 0.0,
        "server_cpu_s": round(cpu, 3),
        "cpu_us_per_op": round(cpu / n * 1e6, 1) if n else 0.0,
        # of it, the servers' own processes (without children: a node's HTTP fronts)
        "own_cpu_us_per_op": round(own / n * 1e6, 1) if n else 0.0,
        "errors": len(errors),
        "first_error": errors[0] if errors else "",
    }


def main() -> None:
    raw = json.load(sys.stdin)
    raw["servers"] = [tuple(s) for s in raw["servers"]]
    spec = Spec(**raw)
    print(json.dumps(trio.run(run, spec)))


if __name__ == "__main__":
    main()
