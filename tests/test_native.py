"""The compiled hot path (bhandar_cli/native.py): what the build compiles, and that a process runs
the compiled modules only while they match their sources, else every module as Python, loudly."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from bhandar_cli import native

REPO = Path(__file__).resolve().parent.parent

# What the check runs in a fresh process: the mode, the reason, and where a compiled module came from.
PROBE = (
    "import bhandar_cli.native as n, bhandar_cli.node.net.cbor_validation as c; "
    "print(n.MODE); print(n.WHY); print(c.__file__)"
)


def probe(env_extra: dict[str, str] | None = None) -> tuple[str, str, str, str]:
    env = {k: v for k, v in os.environ.items() if k != native.PURE_VARIABLE} | (env_extra or {})
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=REPO, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    mode, why, origin = proc.stdout.splitlines()
    return mode, why, origin, proc.stderr


def test_the_listed_modules_exist_and_exclude_packages_and_the_disk_protocols() -> None:
    paths = native.compiled_paths(str(REPO))
    assert "bhandar_cli/node/net/cbor_validation.py" in paths
    assert "bhandar_cli/storage/engine.py" in paths
    assert "bhandar_cli/storage/disk/interface.py" not in paths
    assert not [p for p in paths if p.endswith("__init__.py")]
    assert all((REPO / p).is_file() for p in paths)


def partial_typed_dicts(source: str) -> list[str]:
    """The TypedDicts in `source` whose keys are not all required: `total=False`, or a key
    marked `Required[...]` / `NotRequired[...]`."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        if not any(isinstance(b, ast.Name) and b.id == "TypedDict" for b in node.bases):
            continue
        partial = any(k.arg == "total" for k in node.keywords) or any(
            isinstance(n, ast.Name) and n.id in ("Required", "NotRequired") for n in ast.walk(node)
        )
        if partial:
            found.append(node.name)
    return found


def test_no_compiled_module_declares_a_typed_dict_with_optional_keys() -> None:
    """A compiled TypedDict says every key is required (mypyc drops `total=False` and
    `NotRequired`), and the views' shape check reads those keys at run time: so such a TypedDict
    lives in a module left Python. Checked on the sources, so a pure build fails on it too."""
    found = {
        path: names
        for path in native.compiled_paths(str(REPO))
        if (names := partial_typed_dicts((REPO / path).read_text(encoding="utf-8")))
    }
    assert found == {}
    assert partial_typed_dicts("class R(TypedDict, total=False):\n    a: int\n") == ["R"]
    assert partial_typed_dicts("class R(TypedDict):\n    a: NotRequired[int]\n") == ["R"]
    assert partial_typed_dicts("class R(TypedDict):\n    a: int\n") == []


def test_a_pattern_that_matches_nothing_fails_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "PATTERNS", (*native.PATTERNS, "bhandar_cli/moved/away.py"))
    with pytest.raises(ValueError, match=r"moved/away\.py, which matches no file"):
        native.compiled_paths(str(REPO))


def copy_tree(tmp_path: Path, paths: list[str]) -> str:
    for p in paths:
        (tmp_path / p).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / p, tmp_path / p)
    return str(tmp_path)


def test_a_manifest_finds_an_edited_a_moved_and_an_untouched_source(tmp_path: Path) -> None:
    paths = ["bhandar_cli/node/net/codec.py", "bhandar_cli/core/membership/ring.py"]
    root = copy_tree(tmp_path, paths)
    manifest = json.loads(json.dumps(native.manifest_for(root, paths)))  # as read back from the file
    assert native.stale_module(manifest, root) is None
    # Touched but the same bytes (a checkout): still fresh, by the hash.
    os.utime(tmp_path / paths[1], ns=(1, 1))
    assert native.stale_module(manifest, root) is None
    with open(tmp_path / paths[1], "a") as f:
        f.write("# edited\n")
    assert native.stale_module(manifest, root) == paths[1]
    (tmp_path / paths[1]).unlink()
    assert native.stale_module(manifest, root) == paths[1]
    assert native.stale_module({**manifest, "python": "cpython-10"}, root) == "built for cpython-10"


def test_bhandar_pure_runs_every_module_from_its_source() -> None:
    mode, why, origin, _ = probe({native.PURE_VARIABLE: "1"})
    assert (mode, why) == ("pure", "BHANDAR_PURE=1")
    assert origin.endswith("cbor_validation.py")


def test_a_process_runs_compiled_exactly_when_a_fresh_build_is_there() -> None:
    """Compiled after `pip install -e .` with a C compiler, pure otherwise; never a module
    compiled from other text than its source's."""
    mode, why, origin, stderr = probe()
    manifest_file = REPO / "bhandar_cli" / native.MANIFEST
    if not manifest_file.exists():
        assert mode == "pure" and why.startswith("not compiled") and origin.endswith(".py")
        return
    stale = native.stale_module(json.loads(manifest_file.read_text()), str(REPO))
    if stale is None:
        assert mode == "compiled" and origin.endswith(".so"), (why, origin)
    else:
        assert mode == "pure" and origin.endswith(".py")
        assert f"do not match their sources ({stale})" in stderr


def test_a_stale_build_runs_pure_and_says_so(tmp_path: Path) -> None:
    """A manifest that no longer matches (here: one naming a source that is not there) makes the
    whole package run as Python, with a warning."""
    fake = tmp_path / "bhandar_cli"
    shutil.copytree(REPO / "bhandar_cli", fake, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    (fake / native.MANIFEST).write_text(
        json.dumps(
            {
                "python": sys.implementation.cache_tag,
                "modules": {"bhandar_cli.gone": ["bhandar_cli/gone.py", "0" * 64, 1, 1]},
            }
        )
    )
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != native.PURE_VARIABLE}
        | {"PYTHONPATH": str(tmp_path)},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    mode, why, origin = proc.stdout.splitlines()
    assert mode == "pure" and why == "the compiled modules are stale: bhandar_cli/gone.py"
    assert origin == str(fake / "node" / "net" / "cbor_validation.py")
    assert "do not match their sources (bhandar_cli/gone.py)" in proc.stderr


def test_a_leftover_compiled_module_that_the_build_no_longer_lists_is_never_imported(tmp_path: Path) -> None:
    """A `.so` of a module taken off the list (here garbage, which importing would fail on) is
    passed over for the module's `.py`, while the build's own modules run compiled."""
    fake = tmp_path / "bhandar_cli"
    shutil.copytree(REPO / "bhandar_cli", fake, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    (fake / "node" / "net" / f"frames{suffix}").write_bytes(b"not a shared object")
    manifest = native.manifest_for(str(tmp_path), ["bhandar_cli/node/net/codec.py"])
    (fake / native.MANIFEST).write_text(json.dumps(manifest))
    (tmp_path / f"{native.COMPILED_LIBRARY}.py").write_text("")  # the build's library (a stand-in)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import bhandar_cli.native as n, bhandar_cli.node.net.frames as f; print(n.MODE, f.__file__)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != native.PURE_VARIABLE}
        | {"PYTHONPATH": str(tmp_path)},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["compiled", str(fake / "node" / "net" / "frames.py")]
