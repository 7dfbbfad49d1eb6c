"""The documentation's examples run: every shell example of README.md and docs/ is executed, in a
fresh directory with a 5-node process cluster running in ./.bhandar (as `bhandar cluster up`
makes it), the way a reader would type them; and every REPL example parses and runs.

A document's ```sh fences run in order in one bash session (what one exports, the next uses), so
a page reads top to bottom as it runs. In a fence of `$ ` lines each such line is a command and
the lines under it are what it prints (`...` stands for any text); a command that fails stops
the page, unless the next one is `echo $?`, which shows its status. A fence without `$ ` is a
script run with `set -e -o pipefail`. Examples read /dev/null as standard input. An example that
cannot run here says so in its fence: ```` ```sh norun: it runs for ten minutes ````. A page
whose fences start the cluster of ./.bhandar themselves gets none from the test. Every cluster a
page started, and whatever it left running in the background, is stopped after it.
Shell examples outside a fence (indented blocks) are not allowed: they would escape all this.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import bhandar_cli

REPO = Path(bhandar_cli.__file__).parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PROMPT = "bhandar> "
MARK = "@@docs-run"
PAGE_S = 600  # one page's examples, a cluster started and stopped included, on a loaded machine


@dataclass(frozen=True)
class Fence:
    page: Path
    line: int  # of the opening ```
    info: str  # what follows the ``` (the language, then any `norun: reason`)
    body: list[str]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def fences(page: Path) -> list[Fence]:
    """The page's fenced blocks, those inside a list item (indented up to 3 spaces) included."""
    found: list[Fence] = []
    opened: tuple[int, str, int] | None = None
    body: list[str] = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        indent = len(line) - len(line.lstrip(" "))
        if indent <= 3 and line.lstrip(" ").startswith("```"):
            if opened is None:
                opened, body = (number, line.lstrip(" ")[3:].strip(), indent), []
            else:
                found.append(Fence(page, opened[0], opened[1], body))
                opened = None
        elif opened is not None:
            body.append(line[min(opened[2], indent) :])
    return found


def shell_fences(page: Path) -> list[Fence]:
    return [f for f in fences(page) if f.info.split(" ")[0] == "sh"]


def runnable(fence: Fence) -> bool:
    return "norun:" not in fence.info


def pages_with_shell() -> list[Path]:
    return [p for p in PAGES if any(runnable(f) for f in shell_fences(p))]


def test_every_shell_example_runs_or_says_why_not() -> None:
    for page in PAGES:
        for fence in shell_fences(page):
            if not runnable(fence):
                reason = fence.info.split("norun:", 1)[1].strip()
                assert len(reason) > 10, f"{fence.where}: a fence that does not run says why"
        # An indented shell command escapes the fences, so the test: keep every example fenced.
        inside = False
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            inside = inside != line.lstrip(" ").startswith("```")
            if not inside and re.match(r"^ {4,}(\$ |bhandar |curl |bhandar> )", line):
                raise AssertionError(f"{page.relative_to(REPO)}:{number}: a shell example outside a fence")
    assert len(pages_with_shell()) >= 6


def script_for(page_fences: list[Fence]) -> tuple[str, list[tuple[Fence, str, list[str]]]]:
    """The bash script of a page's fences, and each checked command with what it should print."""
    lines = ['cd "$DOCS_DIR"', "__rc=0"]
    checks: list[tuple[Fence, str, list[str]]] = []
    for fence in page_fences:
        # Every example reads /dev/null, as one typed in a terminal would read nothing more.
        if not any(line.startswith("$ ") for line in fence.body):
            body = ["{", *fence.body, "} </dev/null"]
            lines += [
                f"printf '\\n%s\\n' '{MARK} {len(checks)}'",
                "set -e -o pipefail",
                *body,
                "set +e +o pipefail",
            ]
            checks.append((fence, "(the fence as a script)", []))
            continue
        commands: list[tuple[str, list[str]]] = []
        for line in fence.body:
            if line.startswith("$ "):
                commands.append((line[2:], []))
            elif commands:
                commands[-1][1].append(line)
        for command, shown in commands:
            lines += [
                f"printf '\\n%s\\n' '{MARK} {len(checks)}'",
                "(exit $__rc)",  # so that `echo $?` sees the status of the command before it
                "{",
                command,
                "} </dev/null",
                "__rc=$?",
                f"printf '\\n%s %s\\n' '{MARK}-rc' $__rc",
            ]
            checks.append((fence, command, shown))
    lines.append(f"printf '\\n%s\\n' '{MARK} end'")
    return "\n".join(lines) + "\n", checks


def matches(shown: list[str], printed: list[str]) -> bool:
    """The lines the page shows against those printed; `...` in a shown line is any text, and a
    line of just `...` any number of lines."""
    pattern = "".join(
        r"(?:.*\n)*?" if line.strip() == "..." else ".*".join(re.escape(p) for p in line.split("...")) + r"\n"
        for line in shown
    )
    return re.fullmatch(pattern, "".join(p + "\n" for p in printed)) is not None


def stop_clusters(directory: Path) -> None:
    for found in directory.rglob("cluster.json"):
        subprocess.run(
            [sys.executable, "-P", "-m", "bhandar_cli", "cluster", "down", "--dir", str(found.parent)],
            capture_output=True,
            timeout=120,
            check=False,
        )


@pytest.mark.parametrize("page", pages_with_shell(), ids=lambda p: p.name)
def test_a_pages_shell_examples_run_as_written(page: Path, tmp_path: Path) -> None:
    for tool in ("bash", "jq", "curl", "openssl"):
        assert shutil.which(tool), f"the docs' examples need {tool}"
    page_fences = [f for f in shell_fences(page) if runnable(f)]
    script, checks = script_for(page_fences)
    work = tmp_path / "reader"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BHANDAR_")}
    env.update(DOCS_DIR=str(work), PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))
    try:
        if not any(starts_default_cluster(line) for f in page_fences for line in f.body):
            up = subprocess.run(
                [
                    sys.executable,
                    "-P",
                    "-m",
                    "bhandar_cli",
                    "cluster",
                    "up",
                    "--nodes",
                    "5",
                    "--dir",
                    ".bhandar",
                ],
                cwd=work,
                env=env,
                capture_output=True,
                timeout=120,
            )
            assert up.returncode == 0, up.stderr.decode()
        script_file, out_file = tmp_path / "page.sh", tmp_path / "page.out"
        script_file.write_text(script)
        # Output to a file, not a pipe: a process the page leaves in the background holds a pipe
        # open, and reading it to its end would wait for that process.
        with open(out_file, "wb") as out:
            proc = subprocess.Popen(
                ["bash", "--noprofile", "--norc", str(script_file)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=work,
                env=env,
                start_new_session=True,  # the page's background processes are stopped with it
            )
            try:
                proc.wait(timeout=PAGE_S)
            finally:
                if _group_alive(proc.pid):  # what the page left running in the background
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
    finally:
        stop_clusters(tmp_path)
    output = out_file.read_text(errors="replace")
    check_output(output, checks)


def starts_default_cluster(line: str) -> bool:
    """Whether a line of a page starts the cluster in ./.bhandar itself (then the test does not)."""
    if "cluster up" not in line:
        return False
    found = re.search(r"--dir\s+(\S+)", line)
    return found is None or found.group(1).strip("/").removeprefix("./") == ".bhandar"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def check_output(output: str, checks: list[tuple[Fence, str, list[str]]]) -> None:
    parts = re.split(rf"^{MARK} (\d+|end)\n", output, flags=re.MULTILINE)
    printed: dict[int, str] = {
        int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2) if parts[i] != "end"
    }
    for index, (fence, command, shown) in enumerate(checks):
        assert index in printed, f"{fence.where}: the page stopped before {command!r}:\n{output[-3000:]}"
        text, _, status = printed[index].rpartition(f"{MARK}-rc ")
        if command == "(the fence as a script)":
            continue  # set -e: a failing line stops the page (caught by the next check, or `end`)
        rc = int(status.split()[0]) if status.strip() else 0
        following = checks[index + 1][1] if index + 1 < len(checks) else ""
        assert rc == 0 or following == "echo $?", f"{fence.where}: {command!r} exited {rc}:\n{text}"
        lines = text.strip("\n").splitlines()  # the marks begin with a newline of their own
        assert matches(shown, lines), (
            f"{fence.where}: {command!r} printed\n{text}\nwhere the page shows\n" + "\n".join(shown)
        )
    assert re.search(rf"^{MARK} end$", output, flags=re.MULTILINE), f"the page stopped:\n{output[-3000:]}"


def repl_fences() -> list[Fence]:
    return [
        f
        for page in PAGES
        for f in fences(page)
        if f.info.split(" ")[0] in ("", "text")
        and any(line.startswith(PROMPT) for line in f.body)
        and runnable(f)
    ]


@pytest.mark.parametrize("fence", repl_fences(), ids=lambda f: f.where)
def test_a_repl_example_parses_and_runs(fence: Fence, tmp_path: Path) -> None:
    """Each `bhandar>` line of a REPL example runs in a fresh in-process session (virtual time):
    none is refused as bad input or fails as a bug; a failure the example shows is allowed."""
    commands = [
        line.removeprefix(PROMPT).split("  #")[0].strip()
        for line in fence.body
        if line.startswith(PROMPT) and line.removeprefix(PROMPT).strip() not in ("...", "")
    ]
    done = subprocess.run(
        [sys.executable, "-P", "-m", "bhandar_cli", "repl", "--virtual-time", "--keep-going", "-o", "json"],
        input="\n".join(commands) + "\n",
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode in (0, 1, 3), f"{fence.where}: exit {done.returncode}\n{done.stderr}"
    for line, reply in zip(commands, (json.loads(x) for x in done.stdout.splitlines()), strict=False):
        assert reply.get("code") not in ("bad_input", "internal"), f"{fence.where}: {line!r}: {reply}"


def test_the_http_api_page_states_the_limit_the_code_enforces() -> None:
    from bhandar_cli.core.model.keyspaces import MAX_KEYSPACES

    said = re.findall(r"maximum number of keyspaces \((\d+)\)", (REPO / "docs" / "http-api.md").read_text())
    assert said == [str(MAX_KEYSPACES)]


def test_the_dots_a_restart_skips_are_explained_with_the_numbers_the_repl_prints() -> None:
    from bhandar_cli.core.roles.dot_lease import LEASE

    done = subprocess.run(
        [sys.executable, "-P", "-m", "bhandar_cli", "repl", "--virtual-time", "-o", "json"],
        input="put kv k 1 via=C ctx=none\nkill C\nrevive C\nput kv k 2 via=C ctx=none\nget kv k\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    got = json.loads(done.stdout.splitlines()[-1])
    dots = sorted(f"{v['dot'][0]}:{v['dot'][1]}" for v in got["versions"])
    page = (REPO / "docs" / "versions-and-siblings.md").read_text()
    assert f"dots {dots[0]} and {dots[1]}" in page, dots
    assert f"{LEASE} at a time" in page
