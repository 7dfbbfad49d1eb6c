"""One word per idea, held by the tree: no top-level class name is defined in two modules of
bhandar_cli, and no two modules share a file name unless the list below says why (docs/glossary.md
names each class and module these tests keep apart).

A name defined twice makes every reader, grep and traceback ask "which one?"; the fix is a name
that says which (`MaelstromHistory` beside the chaos run's `History`), never an exemption.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import bhandar_cli

PACKAGE = Path(bhandar_cli.__file__).parent
GLOSSARY = PACKAGE.parent / "docs" / "glossary.md"

# File names that may repeat, each with its reason. Keep it short: a repeat is right only when the
# name is the package's own word and the folder already says whose it is.
REPEATS_ALLOWED: dict[str, str] = {}


def class_definitions(root: Path) -> dict[str, list[str]]:
    """Each top-level class name (private ones too) -> the modules that define it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body:
            if isinstance(node, ast.ClassDef):
                found[node.name].append(path.relative_to(root).as_posix())
    return found


def module_names(root: Path) -> dict[str, list[str]]:
    """Each module file name (package `__init__.py` aside) -> the modules of that name."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        if path.name != "__init__.py":
            found[path.name].append(path.relative_to(root).as_posix())
    return found


def test_no_class_name_is_defined_twice() -> None:
    twice = {name: where for name, where in class_definitions(PACKAGE).items() if len(where) > 1}
    assert not twice, "top-level class names defined in more than one module: " + "; ".join(
        f"{name} in {', '.join(where)}" for name, where in sorted(twice.items())
    )


def test_no_module_name_repeats_without_a_reason() -> None:
    repeats = {
        name: where
        for name, where in module_names(PACKAGE).items()
        if len(where) > 1 and name not in REPEATS_ALLOWED
    }
    assert not repeats, "module names used twice: " + "; ".join(
        f"{name}: {', '.join(where)}" for name, where in sorted(repeats.items())
    )


def test_the_allowed_repeats_still_repeat() -> None:
    """An allowance outlives its reason when the repeat is gone: the list must shrink with it."""
    names = module_names(PACKAGE)
    stale = [name for name in REPEATS_ALLOWED if len(names.get(name, [])) < 2]
    assert not stale, f"allowed repeats that no longer repeat (take them off the list): {stale}"


def test_the_checks_see_a_repeat(tmp_path: Path) -> None:
    """The two counters find what they look for: a class and a file name used twice in a tree."""
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
        (tmp_path / folder / "report.py").write_text(
            "class Report:\n    pass\n\n\nclass _Private:\n    pass\n"
        )
    assert class_definitions(tmp_path)["Report"] == ["a/report.py", "b/report.py"]
    assert class_definitions(tmp_path)["_Private"] == ["a/report.py", "b/report.py"]
    assert module_names(tmp_path) == {"report.py": ["a/report.py", "b/report.py"]}


def top_level_names(root: Path) -> set[str]:
    """Every class, function and module-level name defined in the package."""
    names: set[str] = set()
    for path in root.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body:
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(target.id for target in node.targets if isinstance(target, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names


def test_the_glossary_names_what_exists() -> None:
    """Each module, package and class docs/glossary.md quotes is in the tree: a rename that forgets
    the glossary fails here."""
    text = GLOSSARY.read_text(encoding="utf-8")
    paths = set(re.findall(r"`([\w/]+(?:\.py|/))`", text))
    missing_paths = sorted(p for p in paths if not (PACKAGE / p).exists())
    assert not missing_paths, f"docs/glossary.md cites paths that do not exist: {missing_paths}"
    defined = top_level_names(PACKAGE)
    quoted = set(re.findall(r"`([A-Z][a-z]\w*)`", text))
    assert quoted, "the glossary quotes no class at all: the pattern is broken"
    missing_names = sorted(name for name in quoted if name not in defined)
    assert not missing_names, f"docs/glossary.md quotes names defined nowhere: {missing_names}"
