"""docs/security.md's threat model table names, for each attack, the tests that show it is
stopped: every file and test it names exists, so the table cannot drift from the tests."""

from __future__ import annotations

import re
from pathlib import Path

import bhandar_cli

REPO = Path(bhandar_cli.__file__).parent.parent
DOC = REPO / "docs" / "security.md"


def table_rows() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    head = text.index("| who | what they can try | what stops it | the test that shows it |")
    rows = []
    for line in text[head:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_the_threat_table_covers_every_suspect_and_names_real_tests() -> None:
    rows = table_rows()
    suspects = {row.split("|")[1].strip() for row in rows} - {""}
    assert suspects == {
        "an outsider on the network",
        "another student with a join token",
        "another user of the same machine",
        "a web page in the teacher's browser",
        "someone with the data directory (a copy, a lost disk, or write access while the node is down)",
    }
    named = 0
    for row in rows:
        cell = row.split("|")[4]
        files = re.findall(r"`(tests/[\w/]+\.py)`", cell)
        assert files, f"a row names no test: {row}"
        for file, names in re.findall(r"`(tests/[\w/]+\.py)`((?::? ?`test_\w+`,? ?)*)", cell):
            source = (REPO / file).read_text(encoding="utf-8")
            for name in re.findall(r"`(test_\w+)`", names):
                assert f"def {name}(" in source, f"{file} has no {name}"
                named += 1
    assert named >= 15
