"""Every repository path the words cite exists: a docstring or comment in the code, the README, the
docs and the man page that name `bhandar_cli/...`, `tests/...`, `scripts/...`, `docs/...` or a
package-relative `core/model/config.py` name a file or folder that is there. A module moves, its
citations move with it, or this fails naming the file and the stale path."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "bhandar_cli"

# A path from the repository root, or a glob of them (`bhandar_cli/sim/seeds/seed_*.py`); it ends in
# a word character or `*`, so "tests/..." (a placeholder) is not a path.
ROOTED = re.compile(r"(?<![\w/.-])(?:bhandar_cli|tests|scripts|docs)/[\w./*-]*[\w*]")
# A module path without its root (`core/model/config.py`, `disk/real_disk.py`): at least one folder,
# ending in .py. It is ours when its first folder is one of the package's (Maelstrom's
# `demo/python/echo.py` is not).
RELATIVE = re.compile(r"(?<![\w/.-])(?:[a-z_][a-z0-9_]*/)+[a-z_][a-z0-9_*]*\.py\b")
# A module by its file name alone (`frames.py`): some file of the repository has that name.
BARE = re.compile(r"(?<![\w/.*-])[a-z_][a-z0-9_]*\.py\b")
# What the build writes into the tree (bhandar_cli/native.py's manifest): cited, never committed.
GENERATED = {"bhandar_cli/_native.json"}
# Files a comment names that are nobody's module here (a stray file in a user's directory).
NOT_OURS = {"attr.py"}
FOLDERS = {p.name for p in PACKAGE.rglob("*") if p.is_dir() and p.name != "__pycache__"}
FILE_NAMES = {
    p.name for folder in (PACKAGE, REPO / "tests", REPO / "scripts") for p in folder.rglob("*.py")
} | {p.name for p in REPO.glob("*.py")}


def code_words(path: Path) -> Iterator[tuple[int, str]]:
    """The docstrings and comments of a Python file, with their line numbers (not its strings: a
    test names a path that is gone on purpose)."""
    source = path.read_text(encoding="utf-8")
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                yield node.body[0].lineno, docstring


def doc_words(path: Path) -> Iterator[tuple[int, str]]:
    yield from enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)


def exists(cited: str) -> bool:
    """A rooted path from the repository root; a relative one from the repository or from any
    package folder (storage/'s `disk/real_disk.py`); a bare file name anywhere."""
    cited = cited.rstrip("/.")
    if cited in GENERATED:
        return True
    if ROOTED.fullmatch(cited):
        return any(REPO.glob(cited)) if "*" in cited else (REPO / cited).exists()
    if "/" not in cited:
        return cited in FILE_NAMES
    return any(REPO.glob(cited)) or any(PACKAGE.glob(f"**/{cited}"))


def stale_citations(path: Path, words: Iterator[tuple[int, str]]) -> Iterator[str]:
    # The docs name users' files (the node program a user checks) by bare name; the code names only its own.
    bare = path.suffix == ".py"
    for line, text in words:
        # The man page escapes its hyphens and dots.
        text = text.replace("\\-", "-").replace("\\&", "")
        cited = {m.group() for m in ROOTED.finditer(text)}
        cited |= {
            m.group()
            for m in RELATIVE.finditer(text)
            if not ROOTED.match(m.group()) and m.group().split("/")[0] in FOLDERS
        }
        if bare:
            cited |= {m.group() for m in BARE.finditer(text)} - NOT_OURS
        for c in sorted(cited):
            if not exists(c):
                yield f"{path.relative_to(REPO)}:{line} cites {c}, which does not exist"


def citing_files() -> Iterator[tuple[Path, Iterator[tuple[int, str]]]]:
    for folder in ("bhandar_cli", "tests", "scripts"):
        for path in sorted((REPO / folder).rglob("*.py")):
            yield path, code_words(path)
    yield REPO / "setup.py", code_words(REPO / "setup.py")
    for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "man" / "bhandar.1"]:
        yield path, doc_words(path)


def test_every_cited_path_exists() -> None:
    stale = [s for path, words in citing_files() for s in stale_citations(path, words)]
    assert not stale, "\n".join(stale)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("the engine (bhandar_cli/storage/gone_engine.py) writes", True),
        ("see core/model/no_such_module.py for why", True),
        ("# tests/cli/test_nothing_here.py covers it", True),
        ("the engine (bhandar_cli/storage/engine.py) writes", False),
        ("core/model/config.py says; storage/disk/ holds; see docs/architecture.md.", False),
        ("tests/... is a placeholder, docs/*.md a pattern that matches", False),
        ("the simulators are in bhandar_cli/sim/seed_*.py", True),
        ("inbound TLS streams cut without close_notify (tls_record.py)", True),
        ("the frames (frames.py) and Maelstrom's demo/python/echo.py", False),
    ],
)
def test_the_search_finds_a_stale_path_and_passes_a_true_one(text: str, found: bool) -> None:
    citing = PACKAGE / "storage" / "engine.py"
    assert bool(list(stale_citations(citing, iter([(1, text)])))) == found
