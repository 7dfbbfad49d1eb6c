"""Bhandar: a Dynamo-style replicated key-value store you can run, break and watch.

It also owns `lazy_face`, how each package's `__init__.py` shows its face (docs/architecture.md,
"Package faces"): it lives here because every package's `__init__.py` runs after this one and may
import it without an arrow in the layer table.
"""

from __future__ import annotations

__version__ = "0.1.0"

import sys
from collections.abc import Callable

from bhandar_cli import native as _native

_native.choose()  # before any compiled module is imported: compiled, or pure Python (native.py)


def lazy_face(package: str, where: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's face, loaded on first use (PEP 562): the module `__getattr__` and `__dir__` of
    `package`, where `where` maps each name of its `__all__` to the module of the package that
    defines it. A package's `__init__.py` runs whenever any of its modules is imported, so an eager
    face would import the whole package (the whole client, the whole core) into a one-shot `get`.
    """

    def load(name: str) -> object:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # __import__, not importlib.import_module: the C import path, which `python -X importtime`
        # (tests/e2e/test_oneshot.py) reports.
        module = f"{package}.{where[name]}"
        __import__(module)
        # Not cached on the face: the defining module stays the one place the name lives (a test
        # that patches it there is seen by every importer, as before the faces).
        return getattr(sys.modules[module], name)

    def names() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return load, names
