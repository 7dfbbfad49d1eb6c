"""docs/joining.md's "Trying it on one machine" runs as written: its commands are read from the
document, in a directory of the test's own, with only what the reader fills in put in (the
issuing node's port and the join token that `join-token create` printed, the client token that
`token create` printed) and the HTTP port made a free one. Then the curl that writes through the
joined node answers 204; the same without the token, 401."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bhandar_cli.fleet.placement import free_ports
from tests.e2e.conftest import REPO, kill_all, wait_for

DOC = REPO / "docs" / "joining.md"
SECTION = "Trying it on one machine"


def doc_commands() -> list[str]:
    """The command lines of the section, in order."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n\n## ")] if "\n\n## " in section else section
    return [line.strip() for line in section.splitlines() if line.strip().startswith(("bhandar ", "curl "))]


def run(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(line)
    if argv[0] == "bhandar":
        argv = [sys.executable, "-P", "-m", "bhandar_cli", *argv[1:]]
    env = {k: v for k, v in os.environ.items() if k not in ("BHANDAR_CLUSTER", "BHANDAR_TOKEN")}
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


def test_the_one_machine_classroom_of_the_joining_doc_runs_as_written(
    room: tuple[Path, list[subprocess.Popen[bytes]]],
) -> None:
    cwd, started = room
    up, mint, join, client_token, curl = doc_commands()
    assert up.startswith("bhandar cluster up") and "join-token create" in mint and "--join" in join
    assert "token create" in client_token and curl.startswith("curl ")
    (http_port,) = free_ports(1, "127.0.0.6")

    done = run(up, cwd)
    assert done.returncode == 0, done.stderr
    minted = run(mint, cwd)
    assert minted.returncode == 0, minted.stderr
    printed = re.search(r"--join (\S+) --token (\S+)", minted.stdout)
    assert printed, minted.stdout
    address, token = printed.groups()
    join = join.replace("127.0.0.2:PORT", address).replace("TOKEN", token).replace("8443", str(http_port))
    with open(cwd / "E.out", "wb") as out:
        started.append(
            subprocess.Popen(
                [sys.executable, "-P", "-m", "bhandar_cli", *shlex.split(join)[1:]],
                cwd=cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
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
    anonymous = [a for a in status if not a.startswith("Authorization:")]
    anonymous.remove("-H")
    assert subprocess.run(anonymous, cwd=cwd, capture_output=True, text=True, timeout=30).stdout == "401"
