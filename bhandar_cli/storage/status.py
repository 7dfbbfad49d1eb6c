"""Whether an engine may still be used: closed by its caller, or poisoned by a failed I/O."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from bhandar_cli.storage.storage_errors import EngineClosedError, EngineFailedError


class EngineStatus:
    """Shared by the engine and its tree (owner thread only)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._closed = False
        self._failed: str | None = None  # what failed, once the engine is poisoned
        self.usable = True  # neither: a plain attribute, as every get reads it

    @property
    def closed(self) -> bool:
        return self._closed

    @closed.setter
    def closed(self, closed: bool) -> None:
        self._closed = closed
        self.usable = not closed and self._failed is None

    @property
    def failed(self) -> str | None:
        return self._failed

    @failed.setter
    def failed(self, failed: str | None) -> None:
        self._failed = failed
        self.usable = not self._closed and failed is None

    def poison(self, e: BaseException) -> None:
        # After a failed write or fsync the memory and the files may disagree (an fsync error may
        # even have dropped dirty pages: PostgreSQL's "fsyncgate"), so only a reopen is safe.
        if self.failed is None:
            self.failed = f"{type(e).__name__}: {e}"

    @contextlib.contextmanager
    def poison_on_error(self) -> Iterator[None]:
        """Disk steps that leave memory and files disagreeing if they fail part way."""
        try:
            yield
        except BaseException as e:
            self.poison(e)
            raise

    def check(self) -> None:
        """Raise unless the engine is usable: closed is the caller's bug, failed needs a reopen."""
        if self.closed:
            raise EngineClosedError(f"storage engine at {self.directory} is closed")
        if self.failed is not None:
            raise EngineFailedError(
                f"storage engine at {self.directory} failed ({self.failed}); "
                "reopen it to recover from its WAL"
            )
