"""`bhandar pipe`: data commands from standard input, one JSON result per command on standard output,
many in flight over the client's connections.

A line is parsed by the REPL's grammar and run by the REPL's own data commands (put, get, delete,
incr, keyspace), so the grammar and what each command means are declared once; `-i json` takes
one JSON object per line instead ({"op": "put", "ks": "kv", "key": "k", "value": V, ...}). Each
result is the JSON object `bhandar get|put|delete|incr -o json` prints, with the input's `line`
added. Results come in input order, or as they finish with `--unordered`.

Commands on one key run in input order (a put after a get writes with the context the get read,
as in the REPL); commands on different keys run concurrently, up to `--window` at a time.
`keyspace` waits for everything before it and holds back everything after it, so a line may
create a keyspace that the next line writes to.

Nothing ends the stream but its end: a line that does not parse, an unknown keyspace, a cluster
that cannot answer one request, a get of a key that is not there ("code": "not_found") are each a
result with "ok": false. Exit status: 0 every command succeeded, 1 any failed, 2 the command line
itself is wrong. Memory: the window, plus the context of each key read (for ctx=auto, as in the REPL).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Any, BinaryIO

import typer

from bhandar_cli.cli.data_cmd import LEVEL
from bhandar_cli.cli.output import CLUSTER_OPTION, fail
from bhandar_cli.client import EXIT_FAILED, EXIT_USAGE

if TYPE_CHECKING:
    from bhandar_cli.client import Backend, Client, Pipeline
    from bhandar_cli.repl import Command, Session

Result = dict[str, Any]
READ_CHUNK = 1 << 16
MAX_WINDOW = 4096


class InputFormat(StrEnum):
    text = "text"
    json = "json"


WINDOW = typer.Option(64, "--window", "-w", metavar="N", help="Requests in flight at most (1..4096).")


async def read_lines(stream: BinaryIO) -> AsyncIterator[bytes]:
    """Lines of a binary stream, read a chunk at a time in a worker thread so that trio keeps
    answering while the producer on the other end of the pipe is slow."""
    import trio

    pending = b""
    while True:
        chunk = await trio.to_thread.run_sync(_read_some, stream)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line
    if pending:
        yield pending


def _read_some(stream: BinaryIO) -> bytes:
    read1 = getattr(stream, "read1", None)  # what is there now, not a full chunk (a slow producer)
    return bytes(read1(READ_CHUNK) if read1 is not None else stream.read(READ_CHUNK))


class ResultWriter:
    """The pipe's sink: one JSON object per line on standard output; counts the failures. When the
    reader goes away (`bhandar pipe | head`) it is `closed` and the pipe stops reading input."""

    def __init__(self, out: Any) -> None:
        self._out = out
        self.failed = 0
        self.total = 0
        self.closed = False

    def take(self, result: Result) -> None:
        self.total += 1
        self.failed += not result.get("ok", False)
        line = json.dumps(result, ensure_ascii=False, separators=(",", ":")) + "\n"
        self._unless_closed(lambda: self._out.write(line))

    def flush(self) -> None:
        self._unless_closed(self._out.flush)

    def _unless_closed(self, action: Callable[[], object]) -> None:
        if self.closed:
            return
        try:
            action()
        except BrokenPipeError:
            self.closed = True


def answer(cmd: str, data: Any) -> Result:
    """An outcome or a failure as the result `bhandar CMD -o json` prints; a get of a key that is
    not there is a failure (code not_found) that keeps the get's fields (its context, tombstones)."""
    from bhandar_cli.client import GetOutcome
    from bhandar_cli.core.model import ClientError

    if isinstance(data, ClientError):
        return data.to_json(cmd)
    result: Result = data.to_json() if hasattr(data, "to_json") else dict(data)
    if isinstance(data, GetOutcome) and not data.found:
        result.update(ok=False, code="not_found", error=f"{data.keyspace}/{data.key} not found")
    return result


def failure(cmd: str, exc: Exception) -> Result:
    from bhandar_cli.core.model import BhandarError, ClientError

    if isinstance(exc, ClientError):
        return exc.to_json(cmd)
    if isinstance(exc, BhandarError):
        return ClientError(exc.code, str(exc)).to_json(cmd)
    return ClientError("internal", f"internal error ({type(exc).__name__}: {exc})").to_json(cmd)


def _numbered(lineno: int, result: Result) -> Result:
    result["line"] = lineno
    return result


class TextCommands:
    """`-i text`: REPL lines, run by the REPL's data command handlers in a session of their own."""

    def __init__(self, client: Client[Backend]) -> None:
        from bhandar_cli.repl import TABLE, CommandTable, Session

        self.session: Session = Session(client, CommandTable(TABLE), "json")

    async def feed(self, pipeline: Pipeline[Result], lineno: int, text: str) -> None:
        from bhandar_cli.core.model import BhandarError

        try:
            commands = self.session.parse(text)
        except BhandarError as exc:
            words = text.split()
            await pipeline.submit(_ready(_numbered(lineno, failure(words[0].lower() if words else "", exc))))
            return
        for command in commands:
            if command.name == "keyspace":  # a barrier: the lines after it may use what it creates
                await pipeline.drain()
                await pipeline.submit(self._job(lineno, command))
                await pipeline.drain()
            else:
                await pipeline.submit(self._job(lineno, command), (command.arg(0), command.arg(1)))

    def _job(self, lineno: int, command: Command) -> Callable[[], Awaitable[Result]]:
        async def job() -> Result:
            reply = await self.session.execute(command)
            return _numbered(lineno, answer(reply.cmd, reply.data))

        return job


class JsonCommands:
    """`-i json`: one object per line, {"op": "put|get|delete|incr", "ks", "key", ...} with the
    REPL's option names spelled out: "value" (JSON) or "base64" (+ "ctype"), "context", "c",
    "via", "delta", "id"."""

    OPS = ("put", "get", "delete", "incr")

    def __init__(self, client: Client[Backend]) -> None:
        self.client = client

    async def feed(self, pipeline: Pipeline[Result], lineno: int, text: str) -> None:
        from bhandar_cli.core.model import BadInput

        op = ""
        try:
            obj = json.loads(text)
            if not isinstance(obj, dict):
                raise BadInput("a line must be a JSON object")
            op = str(obj.get("op", ""))
            if op not in self.OPS:
                raise BadInput(f"op must be one of {', '.join(self.OPS)} (got {obj.get('op')!r})")
            ks, key = obj.get("ks"), obj.get("key")
            if not isinstance(ks, str) or not isinstance(key, str):
                raise BadInput('"ks" and "key" must be strings')
        except (ValueError, BadInput) as exc:  # json's errors are ValueErrors
            await pipeline.submit(_ready(_numbered(lineno, failure(op, BadInput(str(exc))))))
            return
        await pipeline.submit(self._job(lineno, op, obj), (ks, key))

    def _job(self, lineno: int, op: str, obj: dict[str, Any]) -> Callable[[], Awaitable[Result]]:
        async def job() -> Result:
            try:
                outcome = await self._run(op, obj)
            except Exception as exc:  # a refusal, an unavailable cluster, or a bug: a result each
                return _numbered(lineno, failure(op, exc))
            return _numbered(lineno, answer(op, outcome))

        return job

    async def _run(self, op: str, obj: dict[str, Any]) -> Any:
        from bhandar_cli.client import value_from_json
        from bhandar_cli.core.model import BadInput

        c, ks, key = self.client, obj["ks"], obj["key"]
        level, via, context = obj.get("c"), obj.get("via"), obj.get("context")
        for name, given in (("c", level), ("via", via), ("context", context), ("id", obj.get("id"))):
            if given is not None and not isinstance(given, str):
                raise BadInput(f'"{name}" must be a string')
        if op == "get":
            return await c.data.get(ks, key, level, via)
        if op == "delete":
            return await c.data.delete(ks, key, context, level, via)
        if op == "incr":
            return await c.data.incr(ks, key, obj.get("delta", 1), obj.get("id"), level, via)
        data, ctype = value_from_json(obj)
        return await c.data.put(ks, key, data, ctype, context, level, via)


def usage_checked(consistency: str | None, window: int) -> str:
    """The consistency level of `-c` (QUORUM if not given); exit 2 if it or `--window` is wrong."""
    from bhandar_cli.core.model import BadInput, parse_level

    if not 1 <= window <= MAX_WINDOW:
        fail(f"--window must be 1..{MAX_WINDOW} (got {window})", EXIT_USAGE)
    try:
        return parse_level(consistency or "QUORUM")
    except BadInput as exc:
        fail(str(exc), EXIT_USAGE)


def _ready(result: Result) -> Callable[[], Awaitable[Result]]:
    async def job() -> Result:
        return result

    return job


async def run_pipe(
    client: Client[Backend],
    source: BinaryIO,
    writer: ResultWriter,
    fmt: InputFormat,
    window: int,
    ordered: bool,
) -> None:
    """Feed every line of `source` through one pipeline of `window` requests to `writer`."""
    import trio

    from bhandar_cli.client import Pipeline
    from bhandar_cli.core.model import BadInput

    commands: TextCommands | JsonCommands = (
        TextCommands(client) if fmt is InputFormat.text else JsonCommands(client)
    )
    async with trio.open_nursery() as nursery:
        pipeline: Pipeline[Result] = Pipeline(nursery, window, writer, ordered)
        lineno = 0
        async for raw in read_lines(source):
            if writer.closed:
                break  # nobody reads the results any more: the commands in flight finish, no more
            lineno += 1
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                bad = failure("", BadInput(f"the line is not UTF-8 ({exc.reason} at byte {exc.start})"))
                await pipeline.submit(_ready(_numbered(lineno, bad)))
                continue
            if text and not text.startswith("#"):  # blank lines and comments have no result
                await commands.feed(pipeline, lineno, text)


def pipe(
    input_format: InputFormat = typer.Option(
        InputFormat.text, "--input", "-i", help="text (REPL commands) or json (one object per line)."
    ),
    unordered: bool = typer.Option(
        False, "--unordered", help="Results as they finish (each names its line), not in input order."
    ),
    consistency: str | None = LEVEL,
    window: int = WINDOW,
    cluster: str | None = CLUSTER_OPTION,
) -> None:
    """Run data commands from standard input, one per line, many in flight over one client: one JSON
    result per command on standard output (exit 1 if any failed)."""
    from bhandar_cli.cli.cluster_cmd import run_async
    from bhandar_cli.client import open_tcp_client

    level = usage_checked(consistency, window)
    writer = ResultWriter(sys.stdout)

    async def body() -> None:
        async with open_tcp_client(cluster, level) as client:
            await run_pipe(client, sys.stdin.buffer, writer, input_format, window, not unordered)

    run_async("pipe", "json", body)
    if writer.closed:
        # Python flushes stdout at exit: point it at /dev/null so that flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        fail(f"pipe: standard output was closed after {writer.total} results")
    if writer.failed:
        sys.stderr.write(f"bhandar: pipe: {writer.failed} of {writer.total} commands failed\n")
        raise typer.Exit(EXIT_FAILED)
