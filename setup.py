"""The build: pyproject.toml says everything but the compiled hot path, which is built here.

When a C compiler is present (and `BHANDAR_PURE` is not set), mypyc compiles the modules listed in
bhandar_cli/native.py into C extensions. Its C sources go to build/ (outside the package); an
editable install copies each extension beside its `.py`, and the build writes the manifest that
lets a process tell a compiled module from a stale one (native.py `choose`). Without a compiler
nothing is compiled and the same code runs as Python.
"""

from __future__ import annotations

import concurrent.futures
import functools
import importlib.util
import json
import os
import shlex
import shutil
import sys
import sysconfig
import time
from types import ModuleType
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


def _load_native() -> ModuleType:
    path = os.path.join(ROOT, "bhandar_cli", "native.py")
    spec = importlib.util.spec_from_file_location("_bhandar_native", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


native = _load_native()


def _compiler() -> str | None:
    """The C compiler this Python builds extensions with, if it is installed."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    words = shlex.split(cc)
    return shutil.which(words[0]) if words else None


def _say(text: str) -> None:
    print(f"bhandar build: {text}", file=sys.stderr, flush=True)


def _compile_wanted() -> bool:
    if native.pure_requested():
        _say(f"{native.PURE_VARIABLE} is set: nothing compiled, the code runs as Python")
        return False
    if _compiler() is None:
        _say("no C compiler found: nothing compiled, the code runs as Python")
        return False
    return True


@functools.cache  # setuptools finalizes this command more than once in one build
def _mypyc_extensions() -> list[Extension]:
    from mypyc.build import mypycify

    try:
        paths = native.compiled_paths(ROOT)
    except ValueError as exc:
        raise SystemExit(f"bhandar build: {exc}") from None
    started = time.monotonic()
    _say(f"compiling {len(paths)} modules with mypyc (BHANDAR_PURE=1 skips this)")
    extensions: list[Extension] = mypycify(
        ["--no-warn-unused-configs", "--always-true=COMPILING", *paths],  # node/__init__.py says why
        opt_level="3",
        multi_file=True,  # a C file per module, compiled in parallel (below)
        target_dir=os.path.join("build", "mypyc"),
        group_name=native.COMPILED_LIBRARY.removesuffix("__mypyc"),  # mypyc adds the suffix
    )
    _say(f"mypyc wrote C in {time.monotonic() - started:.0f} s; compiling it")
    return extensions


class BuildExt(build_ext):
    """build_ext that runs mypyc only when it builds (setuptools runs setup.py several times per
    install: for requirements, metadata, the build) and records the manifest of what it compiled
    (bhandar_cli/native.py). A compile that fails leaves nothing compiled, loudly."""

    def finalize_options(self) -> None:
        # pip runs setup.py for the requirements (egg_info) and the metadata (dist_info) before
        # the build, and both finalize this command: mypyc runs only for the build itself.
        if _PLACEHOLDER and not {"egg_info", "dist_info"} & set(sys.argv):
            self.distribution.ext_modules = _mypyc_extensions()
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        if not self.extensions:
            return
        started = time.monotonic()
        for target in self._manifests():  # no manifest of an earlier build while this one runs
            if os.path.exists(target):
                os.remove(target)
        if self.inplace or getattr(self, "editable_mode", False):
            _remove_stale_extensions({e.name for e in self.extensions})
        super().run()
        built = native.manifest_for(ROOT, native.compiled_paths(ROOT))
        manifest = json.dumps(built, indent=1, sort_keys=True)
        for target in self._manifests():
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as f:
                f.write(manifest)
        _say(f"compiled in {time.monotonic() - started:.0f} s")

    def build_extension(self, ext: Extension) -> None:
        # mypyc makes one extension of ~200 C files, and setuptools compiles one extension's
        # sources one after another (its `parallel` spreads whole extensions): compile them on
        # every core instead, each gcc a process of its own, then link as before.
        compile_one = self.compiler.compile
        asked = self.parallel  # a number, or True for every core (`build_ext -j`)
        workers = asked if type(asked) is int and asked > 0 else (os.cpu_count() or 1)

        def compile_all(sources: list[str], *args: Any, **kwargs: Any) -> list[str]:
            with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                parts = pool.map(lambda source: compile_one([source], *args, **kwargs), sources)
                return [obj for objects in parts for obj in objects]

        self.compiler.compile = compile_all  # type: ignore[method-assign]
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = compile_one  # type: ignore[method-assign]

    def _manifests(self) -> list[str]:
        targets = [os.path.join(self.build_lib, "bhandar_cli", native.MANIFEST)]
        if self.inplace or getattr(self, "editable_mode", False):
            targets.append(os.path.join(ROOT, "bhandar_cli", native.MANIFEST))
        return targets

    def get_outputs(self) -> list[str]:
        outputs: list[str] = super().get_outputs()
        if self.extensions:
            outputs.append(os.path.join(self.build_lib, "bhandar_cli", native.MANIFEST))
        return outputs


def _remove_stale_extensions(names: set[str]) -> None:
    """Remove the compiled modules an earlier build left in the tree that this one does not make
    (a module taken off the list): native.py would not import them, but they need not linger."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    for folder, _dirs, files in os.walk(os.path.join(ROOT, "bhandar_cli")):
        for name in files:
            if name.endswith(suffix):
                path = os.path.join(folder, name)
                module = os.path.relpath(path, ROOT).removesuffix(suffix).replace(os.sep, ".")
                if module not in names:
                    os.remove(path)


# A stand-in, so that setuptools knows the build has extensions: BuildExt puts mypyc's in its place.
_PLACEHOLDER = [Extension(native.COMPILED_LIBRARY, sources=[])] if _compile_wanted() else []

setup(ext_modules=_PLACEHOLDER, cmdclass={"build_ext": BuildExt})
