"""User-facing text refers only to what ships: no design notes, course material or seed scripts
that a user of the tool does not have, and every docs/ link points to a page that exists."""

from __future__ import annotations

import re
from pathlib import Path

import bhandar_cli

ROOT = Path(bhandar_cli.__file__).parent.parent
# What a user reads: the package (help, narration, messages, docstrings shown by help), the README,
# the man page and docs/.
SHIPPED = [
    *sorted((ROOT / "bhandar_cli").rglob("*.py")),
    ROOT / "README.md",
    ROOT / "man" / "bhandar.1",
    *sorted((ROOT / "docs").glob("*.md")),
]
UNSHIPPED = re.compile(r"DESIGN\.md|course|seed/sims", re.IGNORECASE)
SCRIPT = re.compile(r"[\w./-]+\.js\b")
# JavaScript the source tree holds (nodes that `bhandar check` is tested with): a doc may name
# them, by path or by name; any other script is one a user of the tool does not have.
OWN_SCRIPTS = {p.name for p in (ROOT / "tests").rglob("*.js")}


def _unshipped(line: str) -> bool:
    if UNSHIPPED.search(line):
        return True
    return any(
        not (ROOT / name).exists() and name.rsplit("/", 1)[-1] not in OWN_SCRIPTS
        for name in SCRIPT.findall(line)
    )


def test_no_reference_to_material_that_does_not_ship() -> None:
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in SHIPPED
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _unshipped(line)
    ]
    assert not hits, "\n".join(hits)


def test_a_script_that_is_not_in_the_tree_is_still_caught() -> None:
    assert _unshipped("run sims/ring.js to see it")
    assert not _unshipped("bhandar check --bin 'node tests/check/fixtures/maelstrom/js/crdt_gset.js'")


def test_docs_links_resolve() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken
    guides = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    assert not [g for g in guides if f"({g})" not in index], "docs/README.md must list every page"
