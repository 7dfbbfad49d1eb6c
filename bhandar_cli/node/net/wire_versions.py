"""The wire protocol versions this build speaks, declared once, with nothing to import: the CLI
names them in its options without loading the codec (node/net/codec.py says what each means)."""

from __future__ import annotations

from typing import Final

PROTOCOL_VERSION: Final = 6
"""The newest version this build reads and writes."""

BATCH_VERSION: Final = 3
"""From this version on a frame's body is an array of messages (a batch)."""

SEALS_VERSION: Final = 5
"""From this version on a node seals what it says in gossip and checks what it hears
(core/membership/authorship.py)."""

MIN_COMPATIBLE_VERSION: Final = 1
"""The oldest version this node can still read."""

PROTOCOLS: Final = "|".join(str(v) for v in range(MIN_COMPATIBLE_VERSION, PROTOCOL_VERSION + 1))
"""`1|2|3|4`, as an option's metavar."""
