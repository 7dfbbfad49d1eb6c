"""`bhandar export KS` and `bhandar import KS`: a keyspace to JSON Lines and back (the line forms,
and what a round trip keeps, are client/procedures/bulk.py's).

Export writes a header and one line per key to standard output, key pages one ring range at a
time, up to `--window` reads in flight. Import reads such lines from standard input and writes
them through the normal write path, up to `--window` keys in flight, creating the keyspace from
the header if the target cluster has none of that name. Either shows a progress bar on standard
error when it is a terminal, and ends with a summary; a key that failed does not stop the others,
and makes the exit status 1. A command line that is wrong, or a keyspace that does not exist (or
has another policy than the export's), is exit 2.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

import typer

from bhandar_cli.cli.data_cmd import LEVEL
from bhandar_cli.cli.output import CLUSTER_OPTION, OUTPUT_OPTION, emit_json, fail
from bhandar_cli.cli.pipe_cmd import WINDOW, read_lines, usage_checked
from bhandar_cli.client import EXIT_FAILED, EXIT_USAGE, OutputFormat

if TYPE_CHECKING:
    from rich.progress import Progress

    from bhandar_cli.client import Backend, Client, ExportHeader, ImportedKey
    from bhandar_cli.core.model import KeyspaceDef

KS = typer.Argument(..., metavar="KS", help="Keyspace.")
FAILURES_KEPT = 20  # the summary names this many failed keys; the rest are counted by code


@dataclass
class Tally:
    """What a bulk command did, key by key: a sink of the pipeline, bounded in memory."""

    keys: int = 0
    siblings: int = 0
    counters: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)
    failed_by_code: Counter[str] = field(default_factory=Counter)

    @property
    def failed(self) -> int:
        return sum(self.failed_by_code.values())

    def fail(self, where: dict[str, Any], code: str, error: str) -> None:
        self.failed_by_code[code] += 1
        if len(self.failures) < FAILURES_KEPT:
            self.failures.append({**where, "code": code, "error": error})

    def summary(self, cmd: str, keyspace: str) -> dict[str, Any]:
        return {
            "cmd": cmd,
            "ok": not self.failed,
            "keyspace": keyspace,
            "keys": self.keys,
            "siblings": self.siblings,
            "counters": self.counters,
            "failed": self.failed,
            "failed_by_code": dict(self.failed_by_code),
            "failures": self.failures,
        }


class ExportWriter:
    """Export lines to standard output; failed keys to the tally."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.closed = False  # the reader went away (`bhandar export KS | head`)

    def take(self, result: tuple[str, dict[str, Any] | Exception | None]) -> None:
        key, line = result
        if isinstance(line, Exception):
            self.tally.fail({"key": key}, getattr(line, "code", "internal"), str(line))
        elif line is not None and not self.closed:
            self.tally.keys += 1
            self.tally.siblings += len(line.get("siblings", ()))
            self.tally.counters += "counter" in line
            try:
                sys.stdout.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
            except BrokenPipeError:
                self.closed = True

    def flush(self) -> None:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            self.closed = True


class ImportTally:
    """The import's sink: counts what each line wrote, and advances the progress bar by its bytes."""

    def __init__(self, tally: Tally, progress: Progress | None) -> None:
        self.tally = tally
        self.progress = progress

    def take(self, result: tuple[int, int, str, ImportedKey | Exception]) -> None:
        lineno, size, key, done = result
        if isinstance(done, Exception):
            self.tally.fail({"line": lineno, "key": key}, getattr(done, "code", "internal"), str(done))
        else:
            self.tally.keys += 1
            self.tally.siblings += done.siblings
            self.tally.counters += done.counter
        if self.progress is not None:
            self.progress.advance(self.progress.task_ids[0], size)

    def flush(self) -> None:
        pass


def _progress(what: str, total: float | None) -> AbstractContextManager[Progress | None]:
    """A rich progress bar on standard error when it is a terminal (never in a pipe or a log)."""
    if not sys.stderr.isatty():
        return nullcontext()
    from rich.console import Console
    from rich.progress import Progress

    progress = Progress(console=Console(stderr=True), transient=True)
    progress.add_task(what, total=total)
    return progress


def _finish(cmd: str, keyspace: str, tally: Tally, output: OutputFormat) -> None:
    report = tally.summary(cmd, keyspace)
    if output is OutputFormat.json:
        emit_json(report)
    else:
        parts = f"{tally.keys} keys ({tally.siblings} values, {tally.counters} counters)"
        done = "written" if cmd == "import" else "exported"
        sys.stderr.write(f"{cmd} {keyspace}: {parts} {done}, {tally.failed} failed\n")
        for f in tally.failures:
            where = [f"line {f['line']}"] if "line" in f else []
            where += [f"key {f['key']!r}"] if f["key"] is not None else []
            sys.stderr.write(f"  {' '.join(where)}: {f['code']}: {f['error']}\n")
        if tally.failed > len(tally.failures):
            sys.stderr.write(f"  ... and {tally.failed - len(tally.failures)} more\n")
    if tally.failed:
        raise typer.Exit(EXIT_FAILED)


def export(
    keyspace: str = KS,
    consistency: str | None = LEVEL,
    window: int = WINDOW,
    cluster: str | None = CLUSTER_OPTION,
) -> None:
    """Write every key of a keyspace to standard output as JSON Lines: its siblings and context, or
    its counter (tombstones left out). A summary goes to standard error."""
    from bhandar_cli.cli.cluster_cmd import run_async
    from bhandar_cli.client import ExportHeader, Pipeline, key_pages, open_tcp_client
    from bhandar_cli.core.model import BhandarError

    level = usage_checked(consistency, window)
    tally = Tally()
    writer = ExportWriter(tally)

    async def body() -> None:
        import trio

        async with open_tcp_client(cluster, level) as client:
            definition = await _existing(client, keyspace)
            emit_json(ExportHeader(definition).to_json())
            listing: list[BhandarError] = []  # raised bare once the reads in flight are done
            with _progress(f"export {keyspace}", len(client.backend.ring.ranges())) as progress:
                async with trio.open_nursery() as nursery:
                    pipeline: Pipeline[Any] = Pipeline(nursery, window, writer)
                    try:
                        async for page in key_pages(client.backend, definition):
                            if writer.closed:
                                break
                            for key in page:
                                await pipeline.submit(_export_job(client, keyspace, key, level))
                            if progress is not None:
                                progress.advance(progress.task_ids[0])
                    except BhandarError as exc:
                        listing.append(exc)
            if listing:
                raise listing[0]

    run_async("export", "table", body)
    if writer.closed:
        # Python flushes stdout at exit: point it at /dev/null so that flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        fail(f"export {keyspace}: standard output was closed after {tally.keys} keys")
    _finish("export", keyspace, tally, OutputFormat.table)


def _export_job(client: Client[Backend], keyspace: str, key: str, level: str) -> Any:
    from bhandar_cli.client import export_key

    async def job() -> tuple[str, dict[str, Any] | Exception | None]:
        try:
            return key, await export_key(client.data, keyspace, key, level)
        except Exception as exc:  # this key failed (or a bug): the others go on
            return key, exc

    return job


async def _existing(client: Client[Backend], keyspace: str) -> KeyspaceDef:
    from bhandar_cli.client import keyspace_def

    definition = await keyspace_def(client.backend, keyspace)
    if definition is None:
        fail(f"unknown keyspace {keyspace!r} (keyspace list shows them)", EXIT_USAGE)
    return definition


def import_(
    keyspace: str = KS,
    consistency: str | None = LEVEL,
    window: int = WINDOW,
    cluster: str | None = CLUSTER_OPTION,
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Write JSON Lines from `bhandar export` (on standard input) into a keyspace through the normal
    write path: siblings as siblings, counters as counters. Prints what it wrote and what failed."""
    from bhandar_cli.cli.cluster_cmd import run_async
    from bhandar_cli.client import open_tcp_client

    level = usage_checked(consistency, window)
    tally = Tally()

    async def body() -> None:
        async with open_tcp_client(cluster, level) as client:
            await _import_lines(client, keyspace, level, window, tally)

    run_async("import", output, body)
    _finish("import", keyspace, tally, output)


async def _import_lines(
    client: Client[Backend], keyspace: str, level: str, window: int, tally: Tally
) -> None:
    import trio

    from bhandar_cli.client import ExportHeader, Pipeline
    from bhandar_cli.core.model import BadInput

    lines = _objects(sys.stdin.buffer, tally)
    first = await anext(lines, None)
    try:
        header = ExportHeader.from_json(first[2]) if first and "bhandar_export" in first[2] else None
    except BadInput as exc:
        fail(str(exc), EXIT_USAGE)
    await _target(client, keyspace, header)  # before the first write
    with _progress(f"import {keyspace}", _size(sys.stdin.buffer)) as progress:
        sink = ImportTally(tally, progress)
        async with trio.open_nursery() as nursery:
            pipeline: Pipeline[Any] = Pipeline(nursery, window, sink, ordered=False)
            if first is not None and header is None:
                await pipeline.submit(_import_job(client, keyspace, level, *first))
            async for item in lines:
                await pipeline.submit(_import_job(client, keyspace, level, *item))


async def _objects(stream: BinaryIO, tally: Tally) -> AsyncIterator[tuple[int, int, dict[str, Any]]]:
    """(line number, bytes, object) of each JSON object line; a line that is not one is a failure
    in the tally, blank lines are skipped."""
    lineno = 0
    async for raw in read_lines(stream):
        lineno += 1
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            obj = exc
        if isinstance(obj, dict):
            yield lineno, len(raw) + 1, obj
        else:
            why = str(obj) if isinstance(obj, Exception) else "a line must be a JSON object"
            tally.fail({"line": lineno, "key": None}, "bad_input", why)


def _size(stream: BinaryIO) -> int | None:
    """The bytes to read when standard input is a file (the progress bar's total), else None."""
    info = os.fstat(stream.fileno())
    return info.st_size if stat.S_ISREG(info.st_mode) else None


async def _target(client: Client[Backend], keyspace: str, header: ExportHeader | None) -> None:
    """Check the target keyspace: created from the header if missing; a policy other than the
    export's is refused (a counter cannot become siblings)."""
    from bhandar_cli.client import keyspace_def

    definition = await keyspace_def(client.backend, keyspace)
    if header is None:
        if definition is None:
            fail(f"unknown keyspace {keyspace!r}, and no export header to create it from", EXIT_USAGE)
        return
    source = header.keyspace
    if definition is None:
        await client.admin.keyspace_create(
            keyspace, source.policy, min(source.n, len(client.backend.names)), source.quorum, source.ttl
        )
    elif definition.policy != source.policy:
        fail(
            f"keyspace {keyspace!r} is {definition.policy}, the export is of a {source.policy} "
            f"keyspace ({source.name}): import into a {source.policy} keyspace",
            EXIT_USAGE,
        )


def _import_job(
    client: Client[Backend], keyspace: str, level: str, lineno: int, size: int, obj: dict[str, Any]
) -> Any:
    from bhandar_cli.client import import_line

    async def job() -> tuple[int, int, str, Any]:
        key = str(obj.get("key"))
        try:
            return lineno, size, key, await import_line(client.data, keyspace, obj, level)
        except Exception as exc:  # this line failed (or a bug): the others go on
            return lineno, size, key, exc

    return job
