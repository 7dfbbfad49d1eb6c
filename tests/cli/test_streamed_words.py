"""Every narration of a stream counts records, which is what the stream counts: a key sent by its
three replicas is three records (issue 41, item 11: `cluster add` said "3 keys streamed")."""

from __future__ import annotations

import re
from pathlib import Path

import bhandar_cli
from bhandar_cli.cli.cluster_cmd import added_line


def test_cluster_add_counts_records_streamed() -> None:
    line = added_line({"node": "F", "zone": "z2", "keys_streamed": 3, "keys_held": 1, "seconds": 1.5})
    assert line == "added F (zone z2): holds 1 key, from 3 records streamed from their replicas in 1.5 s"


def test_no_user_text_calls_the_streamed_count_keys() -> None:
    package = Path(bhandar_cli.__file__).parent
    said = [
        f"{path.relative_to(package)}:{number}"
        for path in sorted(package.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"keys_streamed'?\]\}? keys|keys streamed", line)
    ]
    assert said == []
