"""Package faces: each package's `__init__.py` names, in `__all__`, what other packages import from
it (docs/architecture.md, "Package faces"); tests/faces.txt pins every face, so a change to one is
a reviewed line of a diff. Regenerate it after a reviewed change with `python tests/test_faces.py
--write`. That other packages import only faces is tests/test_layout.py's rule."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import bhandar_cli
from tests.test_layout import LAYERS

PACKAGE = Path(bhandar_cli.__file__).parent
SNAPSHOT = Path(__file__).with_name("faces.txt")
# Every folder that is a package of the layer table (tests/test_layout.py's LAYERS) has a face; a
# sub-folder that is not a row (client/procedures/, repl/commands/, ...) sits behind its parent's.
FACES = sorted(
    "bhandar_cli." + dotted
    for p in PACKAGE.rglob("__init__.py")
    if (dotted := str(p.parent.relative_to(PACKAGE)).replace("/", ".")) in LAYERS
)


def face_names() -> dict[str, list[str]]:
    return {face: list(importlib.import_module(face).__all__) for face in FACES}


def written() -> str:
    return "".join(f"{face}: {' '.join(names)}\n" for face, names in face_names().items())


def test_every_face_is_the_one_the_snapshot_pins() -> None:
    assert written() == SNAPSHOT.read_text(encoding="utf-8")


@pytest.mark.parametrize("face", FACES)
def test_every_name_of_a_face_resolves_to_what_it_names(face: str) -> None:
    module = importlib.import_module(face)
    for name in module.__all__:
        value = getattr(module, name)
        # A sub-module of the same name would shadow the name once imported.
        assert not isinstance(value, ModuleType), f"{face}.{name} is a module"
        assert not (PACKAGE / face.removeprefix("bhandar_cli.").replace(".", "/") / f"{name}.py").exists()
    with pytest.raises(AttributeError, match="has no attribute 'not_a_name'"):
        module.not_a_name  # noqa: B018


def test_importing_a_face_imports_none_of_its_modules() -> None:
    """Faces are lazy: a one-shot `get` imports through faces the modules it imported before."""
    code = (
        "import sys\n"
        f"for face in {FACES!r}: __import__(face)\n"
        "print(' '.join(m for m in sys.modules if m.startswith('bhandar_cli')))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, check=True, text=True
    ).stdout.split()
    assert set(loaded) - set(FACES) == {"bhandar_cli", "bhandar_cli.native"}


def test_what_a_face_loads_is_seen_by_importtime() -> None:
    """tests/e2e/test_oneshot.py reads a one-shot `get`'s imports from `python -X importtime`: a
    module a face loads must show there as any import does (importlib.import_module would hide it)."""
    code = "from bhandar_cli.client import Client"
    stderr = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, check=True, text=True
    ).stderr
    reported = {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if "|" in line}
    assert {"bhandar_cli.client", "bhandar_cli.client.client"} <= reported


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    SNAPSHOT.write_text(written(), encoding="utf-8")
