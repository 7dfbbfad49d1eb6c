"""A compiled build that this environment cannot run (made by another virtualenv or container over
the same tree) is passed over: every module runs as Python, with one warning line on stderr and
no traceback (bhandar_cli/native.py `choose`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from bhandar_cli import native

REPO = Path(__file__).resolve().parent.parent


def plant_foreign_build(tmp_path: Path) -> Path:
    """A copy of the package as another environment's build leaves it: a fresh manifest and a
    compiled module beside each listed `.py` (here bytes no loader accepts, so importing one
    fails as loudly as a real one does without its library), and no library this Python finds."""
    package = tmp_path / "bhandar_cli"
    shutil.copytree(
        REPO / "bhandar_cli", package, ignore=shutil.ignore_patterns("*.so", "__pycache__", native.MANIFEST)
    )
    paths = native.compiled_paths(str(tmp_path))
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for path in paths:
        (tmp_path / path).with_suffix("").with_name(Path(path).stem + suffix).write_bytes(b"built elsewhere")
    (package / native.MANIFEST).write_text(json.dumps(native.manifest_for(str(tmp_path), paths)))
    return package


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs Python on the planted copy as another environment would: `-S` skips the site hooks,
    so this environment's own install (an editable one maps the package and, when it was
    compiled, its library to the checkout) is not seen; the dependencies come by path."""
    paths = [str(tmp_path), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    env = {k: v for k, v in os.environ.items() if k != native.PURE_VARIABLE} | {
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))
    }
    return subprocess.run(
        [sys.executable, "-S", *args], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
    )


def test_a_foreign_build_runs_pure_with_one_warning_line(tmp_path: Path) -> None:
    package = plant_foreign_build(tmp_path)
    proc = run(tmp_path, "-m", "bhandar_cli", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage" in proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("bhandar: warning: the compiled modules were built by another environment")
    assert native.COMPILED_LIBRARY in lines[0]
    probe = run(
        tmp_path,
        "-c",
        "import bhandar_cli.native as n, bhandar_cli.core.model.config as c; "
        "print(n.MODE); print(c.__file__)",
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.splitlines() == ["pure", str(package / "core" / "model" / "config.py")]


def test_the_same_build_with_its_library_present_is_chosen(tmp_path: Path) -> None:
    """The warning is for a missing library only: with one importable (a stand-in here), the fresh
    manifest is believed, and the planted modules are what gets imported (and, not being real,
    fail: proof that the check above is what kept them out)."""
    plant_foreign_build(tmp_path)
    (tmp_path / f"{native.COMPILED_LIBRARY}.py").write_text("")
    proc = run(tmp_path, "-c", "import bhandar_cli.native as n; print(n.MODE)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["compiled"]
    assert proc.stderr == ""
    broken = run(tmp_path, "-c", "import bhandar_cli.node.net.codec")
    assert broken.returncode != 0
