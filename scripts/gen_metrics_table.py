"""Write the table of Prometheus series in docs/operations-and-metrics.md from the metrics table
(`METRICS`, bhandar_cli/core/model/metrics.py), between its two marker lines.

    python scripts/gen_metrics_table.py          rewrite the docs' table
    python scripts/gen_metrics_table.py --check  exit 1 if the committed table differs

tests/node/http/test_metrics_table.py fails while the committed table is stale.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bhandar_cli.node.http.prometheus import docs_table

DOC = Path(__file__).resolve().parent.parent / "docs" / "operations-and-metrics.md"
BEGIN = "<!-- the series table: scripts/gen_metrics_table.py writes it from METRICS -->"
END = "<!-- end of the series table -->"


def with_table(text: str, table: str) -> str:
    """`text` with the lines between the markers replaced by `table`."""
    head, rest = text.split(BEGIN + "\n", 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table}{END}{tail}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the docs' table is stale")
    args = parser.parse_args()
    text = DOC.read_text()
    fresh = with_table(text, docs_table())
    if args.check:
        if fresh != text:
            print(f"{DOC} is stale: run python scripts/gen_metrics_table.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
