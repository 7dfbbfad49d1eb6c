"""`Version`: the set of live tables at one moment, replaced whole by every install.

Tables are kept in age order (oldest first). A flush appends at the newest end; a compaction
replaces a contiguous run in place; a quarantine removes one. Nothing ever inserts a table older
than one already listed, so a compaction that included the oldest table still does when it is
installed. A `Version` is never changed after it is made: the owner thread swaps in a new one,
and a scan that captured the old one keeps reading a consistent set of (immutable) tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bhandar_cli.storage.sstable import Table


@dataclass(frozen=True)
class Version:
    tables: tuple[Table, ...] = ()  # oldest first
    names: tuple[str, ...] = ()  # their file names, as the MANIFEST lists them
    newest_first: tuple[Table, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.tables) != len(self.names):
            raise ValueError(f"{len(self.tables)} tables but {len(self.names)} names (a bug)")
        object.__setattr__(self, "newest_first", self.tables[::-1])

    def sizes(self) -> list[int]:
        return [t.size for t in self.tables]

    def with_newest(self, table: Table, name: str) -> Version:
        return Version((*self.tables, table), (*self.names, name))

    def span_of(self, inputs: tuple[Table, ...]) -> range | None:
        """Where `inputs` still lie as one contiguous run (by identity), or None if they do not."""
        for i, table in enumerate(self.tables):
            if table is inputs[0]:
                span = range(i, i + len(inputs))
                live = self.tables[span.start : span.stop]
                same = len(live) == len(inputs) and all(a is b for a, b in zip(live, inputs, strict=True))
                return span if same else None
        return None

    def replaced(self, span: range, table: Table | None, name: str | None) -> Version:
        """`span` swapped for one table, or for nothing when the compaction left no record."""
        out, out_names = ((table,), (name,)) if table is not None and name is not None else ((), ())
        return Version(
            self.tables[: span.start] + out + self.tables[span.stop :],
            self.names[: span.start] + out_names + self.names[span.stop :],
        )

    def without(self, name: str) -> Version | None:
        """This version minus the named table; None if it is not live."""
        if name not in self.names:
            return None
        i = self.names.index(name)
        return Version(self.tables[:i] + self.tables[i + 1 :], self.names[:i] + self.names[i + 1 :])
