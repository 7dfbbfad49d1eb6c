"""`bhandar bench etcd`: the HTTP load's own client (requests, responses), and a short real run
beside etcd that stops every process it started (or, where etcd is not installed, a clear error)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing
from typer.testing import CliRunner

from bhandar_cli.bench import etcd_side_by_side as bench_etcd
from bhandar_cli.bench.http_load import Response, Spec, request
from bhandar_cli.cli import bench_etcd_cmd
from bhandar_cli.cli.app import app

REPO = Path(__file__).resolve().parents[2]


def spec(api: str, op: str, prefix: str = "") -> Spec:
    return Spec(api, op, [("127.0.0.1", 1)], [], 10, 1, ["g0", "g1"], prefix, "v" * 3, token="T")


def test_requests_of_each_api() -> None:
    put = request(spec("bhandar", "put", "p:"), "h:1", 7).decode()
    assert put.startswith("PUT /v1/kv/bench/p:7 HTTP/1.1\r\nHost: h:1\r\nAuthorization: Bearer T\r\n")
    assert put.endswith('\r\n\r\n{"value": "vvv"}') and "Content-Length: 16\r\n" in put
    get = request(spec("bhandar", "get"), "h:1", 3).decode()
    assert get.startswith("GET /v1/kv/bench/g1 HTTP/1.1\r\n") and get.endswith("\r\n\r\n")
    etcd_put = request(spec("etcd", "put", "p:"), "h:1", 7).decode()
    head, _, body = etcd_put.partition("\r\n\r\n")
    assert head.startswith("POST /v3/kv/put HTTP/1.1")
    assert json.loads(body) == {
        "key": base64.b64encode(b"p:7").decode(),
        "value": base64.b64encode(b"vvv").decode(),
    }
    etcd_get = request(spec("etcd", "get"), "h:1", 0).decode()
    assert etcd_get.startswith("POST /v3/kv/range") and json.loads(etcd_get.partition("\r\n\r\n")[2]) == {
        "key": base64.b64encode(b"g0").decode()
    }


def test_responses_by_length_chunked_and_closing_in_any_pieces() -> None:
    answers = (
        b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n"
        b"HTTP/1.1 404 Not Found\r\ncontent-length: 5\r\nConnection: close\r\n\r\nnope!"
    )

    async def main() -> list[tuple[int, bytes, bool]]:
        left, right = trio.testing.memory_stream_pair()
        reader = Response(right)
        for i in range(0, len(answers), 7):  # in pieces that cut lines and bodies
            await left.send_all(answers[i : i + 7])
        return [await reader.read() for _ in range(3)]

    assert trio.run(main) == [(204, b"", True), (200, b"abcde", True), (404, b"nope!", False)]


def test_without_etcd_the_command_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # Where the command looks it up: it imported the function by name (patching the function's own
    # module passed only on machines without etcd).
    monkeypatch.setattr(bench_etcd_cmd, "etcd_binary", lambda: None)
    result = CliRunner().invoke(app, ["bench", "etcd", "--ops", "100", "--rounds", "1"])
    assert result.exit_code == 1
    assert "needs etcd installed (Debian: apt-get install etcd-server)" in result.output


def _processes_under(path: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(path).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_short_run_beside_etcd_reports_both_and_stops_every_process(tmp_path: Path) -> None:
    """With an HTTP front per node (`--http-workers 1`): their CPU counted, and they stop too."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    command = ["bench", "etcd", "--ops", "200", "--rounds", "1", "--http-workers", "1", "-o", "json"]
    done = subprocess.run(
        [sys.executable, "-m", "bhandar_cli", *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=300,
    )
    if bench_etcd.etcd_binary() is None:
        assert done.returncode == 1 and "needs etcd installed" in done.stdout + done.stderr
        return
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["ok"] and report["errors"] == 0 and report["rounds"] == 1
    for side in ("etcd", "bhandar"):
        for op in ("put", "get"):
            row = report[side][op]
            assert row["ops_per_s"] > 0 and row["p99_ms"] > 0 and row["cpu_us_per_op"] > 0, (side, op, row)
            # A node's own process spent part of its CPU per operation, its front the rest.
            if side == "bhandar":
                assert 0 < row["own_cpu_us_per_op"] < row["cpu_us_per_op"], row
    assert set(report["ratio"]) == {"put", "get"}
    assert report["ratio"]["put"]["ops"] == round(
        report["bhandar"]["put"]["ops_per_s"] / report["etcd"]["put"]["ops_per_s"], 3
    )
    assert report["http_workers"] == 1
    assert _processes_under(tmp_path) == []  # every etcd member, node and front stopped
    assert list(tmp_path.iterdir()) == []  # and the temporary directory removed
