"""The compiled hot path: which modules mypyc compiles, and whether this process runs them compiled.

`PATTERNS` (less `EXCLUDED`) is the one list of modules that setup.py hands to mypyc when a C
compiler is present (an editable install puts each compiled module, a `.so`, beside its `.py`).
The same code runs as Python when there is no compiler, when `BHANDAR_PURE=1` is set (at build
time: nothing is compiled; at run time: the `.py` files are imported), or when a compiled module
is older than its source.

Python imports a `.so` in preference to the `.py` beside it, so an edited source file would be
shadowed by the module compiled from its older text. The build therefore writes a manifest
(`_native.json`: each module's source hash when it was compiled), and `choose` checks it when
the package is imported: if any compiled module's source changed (or moved), every module runs as
Python and a warning says so on stderr (compiled modules call each other directly in C, so one
stale module cannot be swapped out alone). The same holds for a build made by another environment
over the same tree (another virtualenv, a container mounting the checkout): the modules beside the
`.py` files are there, but the library they all load (`COMPILED_LIBRARY`, installed with that
environment) is not importable here, so every module runs as Python, with one warning line.

Nothing here imports more than the standard library: setup.py reads this file before anything is
installed.
"""

from __future__ import annotations

import json
import os
import sys
from importlib.machinery import ModuleSpec, SourceFileLoader
from types import ModuleType

# The modules the profiles name hot (docs/performance.md, "The compiled hot path"), as glob
# patterns from the project root (`**` spans sub-packages). After a module moves, move its line:
# a pattern that matches nothing fails the build.
PATTERNS: tuple[str, ...] = (
    # the frame path: CBOR validation and the frame codec
    "bhandar_cli/node/net/cbor_validation.py",
    "bhandar_cli/node/net/codec.py",
    # the core's roles, records and repair; the storage engine; the one effect executor
    "bhandar_cli/core/**/*.py",
    "bhandar_cli/storage/**/*.py",
    "bhandar_cli/host/**/*.py",
    "bhandar_cli/store/record_format.py",  # the records' bytes, read and written on every op
    # the simulator's loop, stepper and checker (its disk is storage/disk/sim_disk.py)
    "bhandar_cli/sim/loop.py",
    "bhandar_cli/sim/stepper.py",
    "bhandar_cli/sim/history.py",
    "bhandar_cli/sim/checker/*.py",
)
# Not compiled, each for a reason: a compiled class cannot be subclassed by Python code, and
# compiled code checks declared types at run time where Python does not.
EXCLUDED: tuple[str, ...] = (
    "**/__init__.py",  # packages stay Python: nothing runs in them
    "bhandar_cli/storage/disk/interface.py",  # mypyc refuses its @runtime_checkable Protocols
    "bhandar_cli/storage/disk/real_disk.py",  # the real disk: system calls, not bytecode
    "bhandar_cli/core/model/errors.py",  # the error kinds: subclassed everywhere, never hot
    "bhandar_cli/core/model/store.py",  # MemoryStore: subclassed by tests; reached through a Protocol
    "bhandar_cli/storage/archive.py",  # saves its info's __dict__; runs once per snapshot
    "bhandar_cli/core/model/config.py",  # KeyspaceDef is built from peers' fields as sent (core/wire.py)
    # its argument classes are read by get_type_hints, which sees `list`, not `list[list[int]]`, on
    # a compiled dataclass; admin calls are not hot
    "bhandar_cli/core/protocol/node_operations.py",
    # the views' TypedDicts, whose required keys the shape check reads at run time: a compiled
    # TypedDict says every key is required (mypyc drops `total=False` and `NotRequired`)
    "bhandar_cli/core/node_views.py",
    "bhandar_cli/core/membership/member_row.py",
)


def compiled_paths(root: str) -> list[str]:
    """The files PATTERNS names less EXCLUDED, sorted; raises ValueError for a pattern that names
    nothing (a module moved and its line did not)."""
    import glob
    from fnmatch import fnmatch

    found: set[str] = set()
    for pattern in PATTERNS:
        matched = glob.glob(pattern, root_dir=root, recursive=True)
        if not matched:
            raise ValueError(f"bhandar_cli/native.py names {pattern}, which matches no file")
        found.update(m for m in matched if not any(fnmatch(m, x) for x in EXCLUDED))
    return sorted(found)


MANIFEST = "_native.json"
PURE_VARIABLE = "BHANDAR_PURE"
COMPILED_LIBRARY = "bhandar_native__mypyc"
"""The one shared library of a build (mypyc's group, named in setup.py): every compiled module
loads it on import, so without it none can run."""

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(_PACKAGE_DIR)

MODE = "pure"
"""How this process runs the compiled modules: "compiled" or "pure"."""
WHY = "not chosen yet"
"""Why, in a few words (shown by `bhandar --version`)."""


def module_name(path: str) -> str:
    """bhandar_cli/core/membership/ring.py -> bhandar_cli.core.membership.ring"""
    return path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def source_hash(path: str) -> str:
    import hashlib  # only when a file's size or time changed: a one-shot command never loads it

    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _stamp(path: str) -> list[int]:
    stat = os.stat(path)
    return [stat.st_size, stat.st_mtime_ns]


def manifest_for(root: str, paths: list[str]) -> dict[str, object]:
    """What the build records: each compiled module's path, source hash (and size and time,
    which spare the hashing while they are unchanged), and the interpreter's tag."""
    return {
        "python": sys.implementation.cache_tag,
        "modules": {
            module_name(p): [p, source_hash(os.path.join(root, p)), *_stamp(os.path.join(root, p))]
            for p in paths
        },
    }


def pure_requested() -> bool:
    return os.environ.get(PURE_VARIABLE, "") not in ("", "0")


def stale_module(manifest: dict[str, object], root: str = _ROOT) -> str | None:
    """The first module whose source differs from what was compiled (or a reason the manifest
    does not fit this tree); None when every compiled module matches its source."""
    if manifest.get("python") != sys.implementation.cache_tag:
        return f"built for {manifest.get('python')}"
    modules = manifest.get("modules")
    if not isinstance(modules, dict) or not modules:
        return "an unreadable build manifest"
    for built in modules.values():
        if not isinstance(built, list) or len(built) != 4 or not isinstance(built[0], str):
            return "a build manifest of another version"
        path = built[0]
        source = os.path.join(root, path)
        try:
            if _stamp(source) != built[2:] and source_hash(source) != built[1]:
                return path
        except OSError:  # moved or removed since the build
            return path
    return None


class _SourceFirst:
    """Imports every module of the package from its `.py` file, ahead of any `.so` beside it,
    except the compiled modules of a fresh build (a meta path finder). So a `.so` left by an older
    build of a module no longer compiled is never imported either."""

    def __init__(self, compiled: frozenset[str]) -> None:
        self.compiled = compiled

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not fullname.startswith("bhandar_cli.") or fullname in self.compiled:
            return None
        source = os.path.join(_ROOT, *fullname.split(".")) + ".py"
        if not os.path.isfile(source):
            return None  # a package, or not ours: the usual finders
        spec = ModuleSpec(fullname, SourceFileLoader(fullname, source), origin=source)
        spec.has_location = True
        return spec


def _library_importable() -> bool:
    """Whether this environment can import the build's shared library (found, not imported)."""
    from importlib.util import find_spec

    try:
        return find_spec(COMPILED_LIBRARY) is not None
    except (ImportError, ValueError):
        return False


def choose() -> None:
    """Decide, once per process and before any compiled module is imported, how they run."""
    global MODE, WHY
    if any(isinstance(f, _SourceFirst) for f in sys.meta_path):
        return
    try:
        with open(os.path.join(_PACKAGE_DIR, MANIFEST), encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        manifest = None
    compiled: frozenset[str] = frozenset()
    if pure_requested():
        MODE, WHY = "pure", f"{PURE_VARIABLE}={os.environ[PURE_VARIABLE]}"
    elif manifest is None:
        # Not built (no C compiler, or BHANDAR_PURE at build time), or a build that did not
        # finish: whatever `.so` it left is not imported.
        MODE, WHY = "pure", "not compiled: no C compiler at install, or built with BHANDAR_PURE=1"
    else:
        stale = stale_module(manifest) if isinstance(manifest, dict) else "an unreadable build manifest"
        if stale is None and not _library_importable():
            MODE, WHY = "pure", f"built by another environment: no {COMPILED_LIBRARY} here"
            print(
                f"bhandar: warning: the compiled modules were built by another environment "
                f"({COMPILED_LIBRARY} is not importable here); running every module as Python. "
                "`pip install -e .` in this environment compiles them for it.",
                file=sys.stderr,
            )
        elif stale is None:
            compiled = frozenset(manifest["modules"])
            MODE, WHY = "compiled", f"mypyc, {len(compiled)} modules"
        else:
            MODE, WHY = "pure", f"the compiled modules are stale: {stale}"
            print(
                f"bhandar: warning: the compiled modules do not match their sources ({stale}); "
                "running every module as Python. `pip install -e .` compiles them again.",
                file=sys.stderr,
            )
    sys.meta_path.insert(0, _SourceFirst(compiled))


def describe() -> str:
    """One line for `bhandar --version`."""
    return f"{MODE} ({WHY})"
