"""The bench baselines: a bare trio CBOR echo server (for process clusters), an in-process memory
echo (for in-process clusters), and the load loop every measurement shares.

The echo server speaks the nodes' RPC exactly (hello, then `{"id", "op", "msg"}` frames through the
same FrameDecoder and frame encoding as the nodes) and answers each request with its own message, so
the baseline is the cost of the frames, the sockets and trio on this machine, with no store behind
it. It runs in a process of its own, as the nodes do: `python -m bhandar_cli.bench.echo_baselines
[TLS_DIR]` prints its port on the first line of standard output. Against a TLS cluster the echo
speaks TLS too, with one node's certificate (TLS_DIR), so the baseline pays for the same record
layer the nodes do.
"""

from __future__ import annotations

import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import trio

from bhandar_cli.core import from_wire, to_wire
from bhandar_cli.node.net import (
    FrameConn,
    Outbox,
    ProtocolError,
    TlsStream,
    negotiate,
    no_renegotiation,
    open_rpc,
    protocol,
)
from bhandar_cli.security import PLAIN, ClientAccess, NodeTls, server_context

START_TIMEOUT = 10.0


async def _echo(tls: ssl.SSLContext | None, raw: trio.SocketStream) -> None:
    # The nodes' own TLS stream (node/net/tls_stream.py), as a node's listener uses it.
    stream: trio.abc.Stream = raw if tls is None else TlsStream(raw, tls, server_side=True)
    conn, out = FrameConn(stream), Outbox(stream)
    try:
        if isinstance(stream, TlsStream):
            await stream.do_handshake()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(out.run)
            hello = await conn.receive()
            if hello is not None:
                # Answers in the version a node would write, batched as a node's are (frames.py).
                theirs = hello.get("protocol") if isinstance(hello, dict) else None
                out.version = negotiate(protocol(), theirs)
                while (body := await conn.receive()) is not None:
                    if isinstance(body, dict):
                        out.put_message({"id": body.get("id"), "ok": True, "body": body.get("msg")})
            nursery.cancel_scope.cancel()
    except* (
        ProtocolError,
        trio.BrokenResourceError,
        trio.ClosedResourceError,
        trio.TooSlowError,
        OSError,
        ssl.SSLError,
    ):
        pass  # a benchmark client went away: nothing to do
    finally:
        await trio.aclose_forcefully(stream)


async def serve_echo(
    host: str = "127.0.0.1",
    port: int = 0,
    tls_dir: str | None = None,
    task_status: Any = trio.TASK_STATUS_IGNORED,
) -> None:
    tls = no_renegotiation(server_context(NodeTls.in_dir(tls_dir))) if tls_dir else None
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, partial(_echo, tls), port, host=host))
        task_status.started(listeners[0].socket.getsockname()[1])


@asynccontextmanager
async def echo_server_process(tls_dir: str | None = None) -> AsyncIterator[int]:
    """An echo server in a child process for the duration of the block (over TLS with the
    identity in `tls_dir` when given); yields its port."""
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "bhandar_cli.bench.echo_baselines", *([tls_dir] if tls_dir else [])],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        with trio.fail_after(START_TIMEOUT):
            line = await trio.to_thread.run_sync(proc.stdout.readline)
        if not line.strip().isdigit():
            raise RuntimeError(f"the echo server did not start (said {line!r})")
        yield int(line)
    finally:
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


@dataclass
class RequestStats:
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0

    def summary(self, seconds: float) -> dict[str, Any]:
        lat = sorted(self.latencies_ms)

        def pct(p: float) -> float:
            return round(lat[min(len(lat) - 1, int(p / 100.0 * len(lat)))], 3) if lat else 0.0

        return {
            "count": len(lat) + self.errors,
            "ok": len(lat),
            "errors": self.errors,
            "ops_per_s": round(len(lat) / seconds, 1) if seconds > 0 else 0.0,
            "p50_ms": pct(50),
            "p99_ms": pct(99),
            "max_ms": round(lat[-1], 3) if lat else 0.0,
        }


@dataclass
class LoadResult:
    seconds: float
    ops: dict[str, RequestStats]
    first_error: str = ""

    def summary(self) -> dict[str, Any]:
        total = RequestStats(
            [x for s in self.ops.values() for x in s.latencies_ms], sum(s.errors for s in self.ops.values())
        )
        out = total.summary(self.seconds)
        out["seconds"] = round(self.seconds, 3)
        out["per_op"] = {name: s.summary(self.seconds) for name, s in sorted(self.ops.items())}
        return out


async def run_load(
    ops: int,
    concurrency: int,
    one: Callable[[int, int], Awaitable[str]],
    on_done: Callable[[int], None] | None = None,
) -> LoadResult:
    """`ops` calls of `one(worker, i)` (which returns the op's name) from `concurrency` workers."""
    stats: dict[str, RequestStats] = {}
    counter = iter(range(ops))
    first_error: list[str] = []

    async def worker(w: int) -> None:
        for i in counter:
            start = time.perf_counter()
            try:
                name = await one(w, i)
            except Exception as exc:  # a failed op is counted and the load goes on
                name = getattr(exc, "op", "error")
                stats.setdefault(name, RequestStats()).errors += 1
                if not first_error:
                    first_error.append(f"{type(exc).__name__}: {exc}")
            else:
                stats.setdefault(name, RequestStats()).latencies_ms.append(
                    (time.perf_counter() - start) * 1000.0
                )
            if on_done is not None:
                on_done(1)

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for w in range(concurrency):
            nursery.start_soon(worker, w)
    return LoadResult(time.perf_counter() - started, stats, first_error[0] if first_error else "")


@dataclass(frozen=True)
class EchoTls:
    """TLS for the echo as for the cluster benched: one node's identity for the server, and what
    a client of that node checks (the node id is the name its certificate shows)."""

    tls_dir: str
    node_id: str
    access: ClientAccess


async def echo_baseline(
    ops: int,
    concurrency: int,
    message: Any,
    on_done: Callable[[int], None] | None = None,
    tls: EchoTls | None = None,
) -> LoadResult:
    """Round trips of `message` (a client request) to an echo server process on 127.0.0.1."""
    label, access = ("echo", PLAIN) if tls is None else (tls.node_id, tls.access)
    async with (
        echo_server_process(None if tls is None else tls.tls_dir) as port,
        open_rpc("127.0.0.1", port, label, access) as rpc,
    ):

        async def one(worker: int, i: int) -> str:
            from_wire(await rpc.call("request", 5.0, msg=to_wire(message)))
            return "echo"

        await run_load(min(ops, 200), concurrency, one)  # warm up: connections, caches
        return await run_load(ops, concurrency, one, on_done)


async def memory_echo_baseline(
    ops: int, concurrency: int, message: Any, on_done: Callable[[int], None] | None = None
) -> LoadResult:
    """Round trips of `message` to one trio task in this process over a memory channel, each
    converted to and from its wire form as a node's inbox does: the baseline of an in-process
    cluster, whose nodes exchange messages the same way (no socket, no frames)."""
    send, receive = trio.open_memory_channel[tuple[Any, list[Any], trio.Event]](concurrency)

    async def server() -> None:
        async for wire, box, done in receive:
            box.append(to_wire(from_wire(wire)))
            done.set()

    async def one(worker: int, i: int) -> str:
        box: list[Any] = []
        done = trio.Event()
        await send.send((to_wire(message), box, done))
        await done.wait()
        from_wire(box[0])
        return "echo"

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        await run_load(min(ops, 200), concurrency, one)  # warm up, as the TCP echo does
        result = await run_load(ops, concurrency, one, on_done)
        nursery.cancel_scope.cancel()
    return result


async def _main(tls_dir: str | None) -> None:
    async with trio.open_nursery() as nursery:
        port = await nursery.start(partial(serve_echo, tls_dir=tls_dir))
        sys.stdout.write(f"{port}\n")
        sys.stdout.flush()
        # Standard input closes when the bench ends, even if it dies: never outlive it.
        await trio.to_thread.run_sync(sys.stdin.buffer.read, abandon_on_cancel=True)
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(_main, sys.argv[1] if len(sys.argv) > 1 else None)
