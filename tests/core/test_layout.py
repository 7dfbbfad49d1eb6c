"""The shape of the core: sans-I/O, one driver surface, roles that are objects (what each module of
it may import is tests/test_layout.py's layer table)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import bhandar_cli.core

CORE = Path(bhandar_cli.core.__file__).parent
MODULES = sorted(p for p in CORE.rglob("*.py") if p.name != "__init__.py")
# The core is handed `now` and a `random.Random`; it never reads a clock, a socket or a file.
IO_MODULES = {"trio", "socket", "time", "asyncio", "threading", "os", "io", "subprocess", "selectors"}


def tree_of(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def imported(module: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(module):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(CORE)))
def test_the_core_does_no_io(path: Path) -> None:
    roots = {name.split(".")[0] for name in imported(tree_of(path))}
    assert not roots & IO_MODULES, f"{path.name} imports {sorted(roots & IO_MODULES)}"


def test_only_the_node_module_wires_the_roles_together() -> None:
    """No role reaches another through the node: nothing in the core but core/node.py imports it."""
    importers = [str(p) for p in MODULES if "bhandar_cli.core.node" in imported(tree_of(p))]
    assert importers == []


def test_roles_are_plain_classes_not_mixins() -> None:
    """Every class in the core is a root class (or a Protocol, an exception, a TypedDict, an Enum,
    a dataclass of data only, or a value class: data only, its equality, hash and repr by its
    fields from `ValueClass`, what a dataclass would generate, core/protocol/value_fields.py)."""
    bases: dict[str, list[str]] = {}
    for path in MODULES:
        for node in ast.walk(tree_of(path)):
            if isinstance(node, ast.ClassDef) and node.bases:
                bases[f"{path.relative_to(CORE)}:{node.name}"] = [ast.unparse(b) for b in node.bases]
    allowed = {"Protocol", "Exception", "BhandarError", "BadInput", "TypedDict", "Enum", "ValueClass"}
    mixed = {name: b for name, b in bases.items() if not set(b) <= allowed}
    assert mixed == {}
