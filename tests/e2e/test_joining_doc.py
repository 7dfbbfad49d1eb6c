"""docs/joining.md's "Trying it on one machine" runs as written: its commands are read from the
document, in a directory of the test's own, with only what the reader fills in put in (the
issuing node's port and the join token that `join-token create` printed, the client token that
`token create` printed) and the HTTP port made a free one. Then the curl that writes through the
joined node answers 204; the same without the token, 401.

And the node that joined is in every view of the cluster, though it is in no cluster file:
`cluster status`, the REPL's `status`, `ring` and `prefs` (`repl --connect`), and the web page's
cards and ring (`bhandar web --connect`'s state), with the ring's ownership summing to 100% over
A-E. (They showed `4/4 running` without E, and A-D owning everything.)"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from bhandar_cli.fleet.placement import free_ports
from bhandar_cli.security.join_tokens import JOIN_TOKEN_ENV
from tests.e2e.conftest import REPO, kill_all, wait_for

DOC = REPO / "docs" / "joining.md"
SECTION = "Trying it on one machine"


def doc_commands() -> list[str]:
    """The command lines of the section, in order."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n\n## ")] if "\n\n## " in section else section
    starts = ("bhandar ", "curl ", f"{JOIN_TOKEN_ENV}=")
    return [line.strip() for line in section.splitlines() if line.strip().startswith(starts)]


def as_run(line: str) -> tuple[list[str], dict[str, str]]:
    """The argv and environment a shell gives `line` (its leading NAME=value words go into the
    environment, not the arguments); `bhandar` is this package's."""
    words = shlex.split(line)
    env = {
        k: v for k, v in os.environ.items() if k not in ("BHANDAR_CLUSTER", "BHANDAR_TOKEN", JOIN_TOKEN_ENV)
    }
    while "=" in words[0] and words[0].split("=")[0].isidentifier():
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if words[0] == "bhandar":
        words = [sys.executable, "-P", "-m", "bhandar_cli", *words[1:]]
    return words, env


def run(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv, env = as_run(line)
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def room(tmp_path: Path) -> Iterator[tuple[Path, list[subprocess.Popen[bytes]]]]:
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield tmp_path, started
    finally:
        for proc in started:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        kill_all(tmp_path / "class")


def join_as_the_doc_says(cwd: Path, started: list[subprocess.Popen[bytes]]) -> tuple[list[str], str]:
    """Run the section's commands up to the curl that writes through E, and wait until it answers
    204; the curl's command line as run (with `-w %{http_code}`), and E's as run."""
    up, mint, join, client_token, curl = doc_commands()
    assert up.startswith("bhandar cluster up") and "join-token create" in mint and "--join" in join
    assert "token create" in client_token and curl.startswith("curl ")
    (http_port,) = free_ports(1, "127.0.0.6")

    done = run(up, cwd)
    assert done.returncode == 0, done.stderr
    minted = run(mint, cwd)
    assert minted.returncode == 0, minted.stderr
    printed = re.search(rf"{JOIN_TOKEN_ENV}=(\S+) bhandar node run --join (\S+) ", minted.stdout)
    assert printed, minted.stdout
    token, address = printed.groups()
    join = (
        join.replace("127.0.0.2:PORT", address).replace("=TOKEN", f"={token}").replace("8443", str(http_port))
    )
    argv, env = as_run(join)
    assert env[JOIN_TOKEN_ENV] == token and not any(token in word for word in argv), argv
    with open(cwd / "E.out", "wb") as out:
        started.append(
            subprocess.Popen(
                argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        )
    made = run(client_token, cwd)
    assert made.returncode == 0, made.stderr
    bearer = re.search(r"bht_\w+_\S+", made.stdout)
    assert bearer, made.stdout
    curl = curl.replace("bht_...", bearer.group(0)).replace("8443", str(http_port))
    status = [*shlex.split(curl), "-s", "-o", "/dev/null", "-w", "%{http_code}"]

    def written() -> bool:
        assert started[0].poll() is None, (cwd / "E.out").read_text(errors="replace")
        answer = subprocess.run(status, cwd=cwd, capture_output=True, text=True, timeout=30)
        return answer.stdout == "204"  # 401 until E has the new token by gossip; 000 until it serves

    wait_for(written, 90.0, "the doc's curl through the joined node to answer 204")
    return status, join


def test_the_one_machine_classroom_of_the_joining_doc_runs_as_written(
    room: tuple[Path, list[subprocess.Popen[bytes]]],
) -> None:
    cwd, started = room
    status, _ = join_as_the_doc_says(cwd, started)
    anonymous = [a for a in status if not a.startswith("Authorization:")]
    anonymous.remove("-H")
    assert subprocess.run(anonymous, cwd=cwd, capture_output=True, text=True, timeout=30).stdout == "401"


EVERYONE = ["A", "B", "C", "D", "E"]


def test_the_node_that_joined_by_token_is_in_every_view_of_the_cluster(
    room: tuple[Path, list[subprocess.Popen[bytes]]],
) -> None:
    cwd, started = room
    _, join = join_as_the_doc_says(cwd, started)
    seen: list[dict[str, Any]] = []

    def status_shows_e() -> bool:
        done = run("bhandar cluster status --dir class -o json", cwd)
        assert done.returncode == 0, done.stderr
        seen[:] = [json.loads(done.stdout)]
        nodes = {n["id"]: n for n in seen[0]["nodes"]}
        return "E" in nodes and nodes["E"]["state"] == "up" and seen[0]["summary"]["line"] == "5/5 running"

    wait_for(status_shows_e, 90.0, "cluster status to show E up among 5 running")
    status = seen[0]
    nodes = {n["id"]: n for n in status["nodes"]}
    assert sorted(nodes) == EVERYONE
    assert (nodes["E"]["host"], nodes["E"]["joined"], nodes["E"]["pid"]) == ("127.0.0.6", "token", None)
    assert nodes["E"]["tokens"] > 0 and nodes["E"]["owns"] > 0
    assert abs(sum(n["owns"] for n in status["nodes"]) - 1.0) < 0.001, status["nodes"]
    assert status["summary"]["disagree"] == [], status["summary"]

    # The REPL on the same cluster: status, ring and preference lists with E in them.
    keys = [f"k{i}" for i in range(40)]
    repl_status, ring, *prefs = repl(cwd, ["status", "ring", *(f"prefs kv {k}" for k in keys)])
    assert sorted(n["id"] for n in repl_status["nodes"]) == EVERYONE
    assert repl_status["summary"]["line"] == "5/5 running", repl_status["summary"]
    assert sorted(ring["ownership"]) == EVERYONE and abs(sum(ring["ownership"].values()) - 1.0) < 0.001
    assert {r["owner"] for r in ring["ranges"]} == set(EVERYONE)
    assert any("E" in p["replicas"] for p in prefs), prefs  # E replicates its share of the keys
    assert all(set(p["replicas"]) <= set(EVERYONE) and len(p["replicas"]) == 3 for p in prefs)

    # The web page's data (what `bhandar web --connect class` serves at /api/state): cards, ring.
    from bhandar_cli.repl.batch import open_tcp_session
    from bhandar_cli.web.state import WebState

    async def page() -> dict[str, Any]:
        async with open_tcp_session(cwd / "class") as session:
            return await WebState(session).snapshot()

    state = trio.run(page)
    cards = {c["id"]: c for c in state["nodes"]}
    assert sorted(cards) == EVERYONE and cards["E"]["state"] == "up", cards.get("E")
    assert state["health"]["line"] == "5/5 running"
    assert sorted(state["ring"]["ownership"]) == EVERYONE
    assert {a["owner"] for a in state["ring"]["arcs"]} == set(EVERYONE)

    # E's process dies: E is still a member, down (though no pid of it is known here).
    os.killpg(started[0].pid, signal.SIGKILL)
    started[0].wait(timeout=10)

    def status_says(line: str) -> bool:
        done = run("bhandar cluster status --dir class -o json", cwd)
        assert done.returncode == 0, done.stderr
        seen[:] = [json.loads(done.stdout)]
        return bool(seen[0]["summary"]["line"] == line)

    wait_for(lambda: status_says("4/5 running · down E"), 30.0, "cluster status to show E down")
    assert {n["id"]: n["state"] for n in seen[0]["nodes"]}["E"] == "down"
    # Restarted as step 5 says (the same command), it is up again.
    with open(cwd / "E.out", "ab") as out:
        argv, env = as_run(join)
        started[0] = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    wait_for(lambda: status_says("5/5 running"), 60.0, "cluster status to show E running again")

    # E leaves the ring again: it streams its ranges away and no view shows it any more.
    left = repl(cwd, ["decommission E", "status", "ring"])
    assert left[0]["ok"] and left[0]["node"] == "E", left[0]
    assert sorted(n["id"] for n in left[1]["nodes"]) == EVERYONE[:4]
    assert left[1]["summary"]["line"] == "4/4 running", left[1]["summary"]
    assert sorted(left[2]["ownership"]) == EVERYONE[:4]


def repl(cwd: Path, lines: list[str]) -> list[dict[str, Any]]:
    """`bhandar repl --connect class -o json` with `lines` as its script: each reply."""
    done = subprocess.run(
        [sys.executable, "-P", "-m", "bhandar_cli", "repl", "--connect", "class", "-o", "json"],
        input="\n".join(lines) + "\n",
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        env={k: v for k, v in os.environ.items() if k not in ("BHANDAR_CLUSTER", "BHANDAR_TOKEN")},
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]
