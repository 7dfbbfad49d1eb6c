"""client_bulk: a keyspace exported from one in-process cluster and imported into a fresh one gives
every key, its sibling values and its counter value back; the value form is reversible."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from bhandar_cli.client.backend import Backend
from bhandar_cli.client.client import Client
from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.client.procedures.bulk import (
    RETRIES,
    ExportHeader,
    export_key,
    import_line,
    key_pages,
    keyspace_def,
    value_from_json,
    value_json,
)
from bhandar_cli.core.model.config import KeyspaceDef
from bhandar_cli.core.model.errors import BadInput, ClientError
from bhandar_cli.core.model.versions import BYTES, JSON
from bhandar_cli.repl.batch import open_session


def run(main: Any) -> Any:
    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def export_all(client: Client[Backend], keyspace: str) -> list[dict[str, Any]]:
    definition = await keyspace_def(client.backend, keyspace)
    assert definition is not None
    lines: list[dict[str, Any]] = [ExportHeader(definition).to_json()]
    async for page in key_pages(client.backend, definition):
        for key in page:
            line = await export_key(client.data, keyspace, key, "ALL")
            if line is not None:
                lines.append(line)
    return lines


async def state(client: Client[Backend], keyspace: str, keys: list[str]) -> dict[str, Any]:
    """key -> sorted live values (or the counter's value), as a get at ALL reads it."""
    out: dict[str, Any] = {}
    for key in keys:
        got = await client.data.get(keyspace, key, "ALL")
        out[key] = got.counter if got.counter is not None else sorted(map(repr, got.values))
    return out


def test_siblings_counters_and_bytes_come_back_equal() -> None:
    async def main() -> None:
        async with (
            open_session(ClusterOptions(memory=True, seed=1), "json") as source,
            open_session(ClusterOptions(memory=True, seed=2), "json") as target,
        ):
            src = source.client
            for via, value in (("A", b'"rice"'), ("B", b'"oil"'), ("C", b'{"n":1}')):
                await src.data.put("kv", "cart", value, JSON, "none", "QUORUM", via)  # concurrent siblings
            await src.data.put("kv", "blob", b"\x00\xff\x10", BYTES, "none")
            await src.data.put("kv", "gone", b"1", JSON, "none")
            await src.data.delete("kv", "gone")
            for i in range(30):
                await src.data.put("kv", f"k{i}", str(i).encode(), JSON, "none")
            await src.data.incr("counters", "hits", 7, None, None, "A")
            await src.data.incr("counters", "hits", -2, None, None, "B")
            await src.data.incr("counters", "misses", 4)

            kv = await export_all(src, "kv")
            counters = await export_all(src, "counters")
            assert kv[0] == {
                "bhandar_export": 1,
                "keyspace": "kv",
                "policy": "siblings",
                "n": 3,
                "quorum": "sloppy",
            }
            exported = {line["key"]: line for line in kv[1:]}
            assert "gone" not in exported  # only a tombstone: nothing to export
            assert len(exported["cart"]["siblings"]) == 3
            assert exported["blob"]["siblings"] == [{"base64": "AP8Q", "ctype": BYTES}]
            assert {line["key"]: line["counter"] for line in counters[1:]} == {"hits": 5, "misses": 4}

            dst = target.client
            for line in kv[1:]:
                await import_line(dst.data, "kv", line, "QUORUM")
            for line in counters[1:]:
                await import_line(dst.data, "counters", line, "QUORUM")
            assert not any(dst.data.keys_seen.values())  # import forgets each key once written

            keys = sorted(exported)
            assert await state(dst, "kv", keys) == await state(src, "kv", keys)
            assert await state(dst, "counters", ["hits", "misses"]) == {"hits": 5, "misses": 4}
            assert (await dst.data.get("kv", "cart", "ALL")).siblings.__len__() == 3
            assert (await dst.data.get("kv", "gone", "ALL")).found is False

    run(main)


def test_a_cluster_that_cannot_answer_is_an_error_not_a_gap() -> None:
    async def main() -> None:
        async with open_session(ClusterOptions(memory=True, nodes=3), "json") as session:
            client = session.client
            for name in ("A", "B", "C"):
                await client.admin.kill(name)
            with pytest.raises(ClientError, match="no replica"):
                async for _ in key_pages(client.backend, KeyspaceDef("kv", "siblings", 3, "sloppy")):
                    pass
            with pytest.raises(ClientError, match="no node answered") as raised:
                await keyspace_def(client.backend, "kv")  # not "unknown keyspace": nobody could say
            assert raised.value.code == "unavailable"

    run(main)


@pytest.mark.parametrize(
    ("raw", "ctype"),
    [
        (b'{"a":[1,2]}', JSON),
        (b'"text"', JSON),
        (b"\x00\x01", BYTES),
        (b"plain", "text/plain"),
        (b"{bad", JSON),
    ],
)
def test_the_value_form_is_reversible(raw: bytes, ctype: str) -> None:
    form = value_json(raw, ctype)
    assert value_from_json(form) == (raw, ctype)
    assert ("value" in form) == (ctype == JSON and raw != b"{bad")  # JSON stays readable


@pytest.mark.parametrize("form", [{}, {"base64": "!!"}, {"base64": 3}, {"base64": "AA==", "ctype": 1}])
def test_a_bad_value_form_is_bad_input(form: dict[str, Any]) -> None:
    with pytest.raises(BadInput):
        value_from_json(form)


def test_import_line_refuses_malformed_lines_before_writing() -> None:
    async def main() -> None:
        async with open_session(ClusterOptions(memory=True), "json") as session:
            client = session.client
            for line in (
                {"siblings": [{"value": 1}]},
                {"key": "k", "siblings": []},
                {"key": "k", "siblings": [{"value": 1}, {"base64": "!"}]},
                {"key": "k", "counter": "3"},
            ):
                with pytest.raises(BadInput):
                    await import_line(client.data, "kv", line, None)
            assert (await client.data.get("kv", "k")).found is False

    run(main)


def test_the_header_round_trips_and_checks_its_format() -> None:
    header = ExportHeader(KeyspaceDef("prices", "lww", 2, "strict"))
    assert ExportHeader.from_json(header.to_json()) == header
    with pytest.raises(BadInput):
        ExportHeader.from_json({**header.to_json(), "bhandar_export": 99})
    with pytest.raises(BadInput):
        ExportHeader.from_json({"bhandar_export": 1, "keyspace": "x"})


class LostAnswers:
    """The client API, but the first write of each key times out: stored all the same (`stored`)
    or not, or fails with another `code`, which is not retried."""

    def __init__(self, client: Client[Backend], stored: bool, code: str = "timeout") -> None:
        self.client = client
        self.stored = stored
        self.code = code
        self.failed: set[str] = set()
        self.writes = 0

    def forget(self, keyspace: str, key: str) -> None:
        self.client.data.forget(keyspace, key)

    async def get(self, *args: Any) -> Any:
        return await self.client.data.get(*args)

    async def put(self, keyspace: str, key: str, *rest: Any) -> Any:
        return await self._write(self.client.data.put, keyspace, key, *rest)

    async def incr(self, keyspace: str, key: str, *rest: Any) -> Any:
        return await self._write(self.client.data.incr, keyspace, key, *rest)

    async def _write(self, write: Any, keyspace: str, key: str, *rest: Any) -> Any:
        self.writes += 1
        if key in self.failed:
            return await write(keyspace, key, *rest)
        self.failed.add(key)
        if self.stored:
            await write(keyspace, key, *rest)
        raise ClientError(self.code, "node A did not answer 'request' within 5 s")


@pytest.mark.parametrize("stored", [True, False])
def test_a_timed_out_write_is_retried_without_storing_it_twice(stored: bool) -> None:
    async def main() -> None:
        async with open_session(ClusterOptions(memory=True), "json") as session:
            flaky = LostAnswers(session.client, stored)
            line = {"key": "cart", "siblings": [{"value": "rice"}, {"value": "oil"}]}
            assert (await import_line(flaky, "kv", line, None)).siblings == 2  # type: ignore[arg-type]
            got = await session.client.data.get("kv", "cart", "ALL")
            assert sorted(got.values) == ["oil", "rice"]  # two siblings, neither twice
            await import_line(flaky, "counters", {"key": "n", "counter": 5}, None)  # type: ignore[arg-type]
            assert (await session.client.data.get("counters", "n", "ALL")).counter == 5  # counted once

    run(main)


def test_a_write_refused_for_another_reason_is_not_retried() -> None:
    async def main() -> None:
        async with open_session(ClusterOptions(memory=True), "json") as session:
            flaky = LostAnswers(session.client, stored=False, code="unavailable")
            with pytest.raises(ClientError, match="within 5 s"):
                await import_line(flaky, "kv", {"key": "k", "siblings": [{"value": 1}]}, None)  # type: ignore[arg-type]
            assert flaky.writes == 1

    run(main)


def test_a_read_that_times_out_is_tried_again() -> None:
    async def main() -> None:
        async with open_session(ClusterOptions(memory=True), "json") as session:
            await session.client.data.put("kv", "k", b"1", JSON, "none")
            slow = Flaky(session.client, failures=2)
            assert await export_key(slow, "kv", "k", None) == {  # type: ignore[arg-type]
                "key": "k",
                "siblings": [{"value": 1}],
                "context": (await session.client.data.get("kv", "k")).context,
            }
            assert slow.reads == 3
            slower = Flaky(session.client, failures=RETRIES + 1)
            with pytest.raises(ClientError, match="timed out"):
                await export_key(slower, "kv", "k", None)  # type: ignore[arg-type]

    run(main)


class Flaky:
    """The client API, but the first `failures` reads time out."""

    def __init__(self, client: Client[Backend], failures: int) -> None:
        self.client = client
        self.failures = failures
        self.reads = 0

    def forget(self, keyspace: str, key: str) -> None:
        self.client.data.forget(keyspace, key)

    async def get(self, *args: Any) -> Any:
        self.reads += 1
        if self.reads <= self.failures:
            raise ClientError("timeout", "timed out after 1022 ms: 1 of 3 replicas answered")
        return await self.client.data.get(*args)
