"""The REPL's `web` command: the page of the session's own cluster, served in the background, and
the server's refusals (other sites, bad bodies, unknown pages)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
import trio

from bhandar_cli.client.openers import ClusterOptions
from bhandar_cli.repl.batch import open_session
from bhandar_cli.web.background import serve_in_background
from tests.web.conftest import page_key


def fetch(
    url: str, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            raw = response.read()
            status = response.status
    except urllib.error.HTTPError as err:
        raw, status = err.read(), err.code
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode()


def test_the_web_command_serves_the_sessions_cluster_and_runs_the_pages_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def main() -> None:
        options = ClusterOptions(nodes=3, memory=True)
        async with open_session(options, "json", serve_in_background) as session:
            (bad,) = await session.run_line("web port=99999")
            assert not bad.ok and bad.to_json()["code"] == "bad_input"
            (reply,) = await session.run_line("web port=0")
            answer = reply.to_json()
            assert reply.ok and answer["url"].startswith("http://127.0.0.1:") and not answer["already"]
            url = answer["url"]
            (again,) = await session.run_line("web")
            assert again.to_json()["already"] and again.to_json()["url"] == url

            def page() -> None:
                status, html = fetch(url)
                assert status == 200 and '<svg id="ring"' in html
                as_page = {"Content-Type": "application/json", "X-Bhandar-Key": page_key(url)}
                for name in ("app.js", "style.css"):
                    assert fetch(url + name)[0] == 200
                status, state = fetch(url + "api/state")
                assert status == 200 and [n["id"] for n in state["nodes"]] == ["A", "B", "C"]
                status, ran = fetch(url + "api/command", {"line": "kill C"}, as_page)
                assert status == 200 and ran["replies"] == [
                    {"cmd": "kill", "ok": True, "node": "C", "changed": True}
                ]
                status, ran = fetch(url + "api/command", {"line": "frobnicate"}, as_page)
                assert status == 200 and ran["replies"][0]["ok"] is False
                status, state = fetch(url + "api/state")
                assert {n["id"]: n["state"] for n in state["nodes"]}["C"] == "down"
                assert fetch(url + "api/focus", {"keyspace": "kv", "key": "x"}, as_page)[0] == 200
                assert fetch(url + "api/state")[1]["focus"]["key"] == "x"
                # Refusals: another site's page, a wrong key, a body that is not JSON, unknown pages.
                other = {**as_page, "Origin": "http://evil.example"}
                assert fetch(url + "api/command", {"line": "kill A"}, other)[0] == 403
                plain = {**as_page, "Content-Type": "text/plain"}
                assert fetch(url + "api/command", {"line": "kill A"}, plain)[0] == 415
                wrong_key = {**as_page, "X-Bhandar-Key": "x"}
                assert fetch(url + "api/command", {"line": "kill A"}, wrong_key)[0] == 403
                assert fetch(url + "api/command", {"nope": 1}, as_page)[0] == 400
                assert fetch(url + "api/focus", {"keyspace": "kv"}, as_page)[0] == 400
                assert fetch(url + "nothing-here")[0] == 404

            await trio.to_thread.run_sync(page)
            assert not session.client.backend.is_alive("C")  # the page's kill ran in this session
            assert session.client.backend.is_alive("A")  # the refused ones did not

    trio.run(main)
    out = capsys.readouterr().out
    assert "web> kill C" in out and "web> frobnicate" in out and "web> kill A" not in out


def test_a_session_opened_without_a_web_view_says_so_for_the_web_command() -> None:
    """The web view is a face above the REPL: a session serves it only when whoever opened the
    session handed it over (bhandar repl and bhandar web do); any other session refuses in one line."""

    async def main() -> None:
        async with open_session(ClusterOptions(nodes=1, memory=True), "json") as session:
            (reply,) = await session.run_line("web port=0")
        answer = reply.to_json()
        assert not reply.ok and answer["code"] == "bad_input"
        assert (
            answer["error"] == "this session has no web view to serve (bhandar repl and bhandar web have one)"
        )

    trio.run(main)
