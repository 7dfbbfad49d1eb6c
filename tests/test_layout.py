"""The shape of the whole package, written down: each module says what it owns; each package imports
only the packages its row of LAYERS names (docs/architecture.md draws the same table); no module
imports itself back through others; the drivers never depend on the test harness.

Every import counts: at the top of a module, under `if TYPE_CHECKING:` and inside a function
alike. An import that only a type needs is still an arrow between two packages, and a cycle hidden
in a function is still a cycle: a shared type or function moves down a layer instead.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import TypeGuard

import pytest

import bhandar_cli

PACKAGE = Path(bhandar_cli.__file__).parent
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py")

# Sub-packages that are packages of their own in the table; any other sub-package (client/procedures/,
# client/backends/, repl/commands/) belongs to its parent.
UNITS = {
    "core": ("model", "protocol", "membership", "repair", "roles", "session"),
    "storage": ("disk",),
    "node": ("net", "http"),
    "sim": ("checker", "chaos", "seeds"),
}
CORE = {"core", "core.model", "core.protocol", "core.membership", "core.repair", "core.roles", "core.session"}
STORAGE = {"storage", "storage.disk"}
NODE = {"node", "node.net", "node.http"}
SIM = {"sim", "sim.checker", "sim.chaos", "sim.seeds"}

# What each package may import besides itself, bottom up. "core" as a package is node.py,
# node_views.py and wire.py, which see the whole core; the others are its concepts, in order.
LAYERS: dict[str, set[str]] = {
    "core.model": set(),
    "core.protocol": {"core.model"},
    "core.membership": {"core.model", "core.protocol"},
    "core.repair": {"core.model", "core.protocol", "core.membership"},
    "core.roles": {"core.model", "core.protocol", "core.membership", "core.repair"},
    # The client session (what a client sends where): the data client, the gateway and the swarms.
    "core.session": {"core.model", "core.protocol", "core.membership"},
    "core": CORE,
    "storage.disk": set(),
    "storage": {"storage.disk"},
    "security": CORE | STORAGE,
    "store": CORE | STORAGE | {"security"},
    "host": CORE,
    "node.net": CORE | {"host", "security"},
    "node.http": CORE | {"node.net", "security"},  # node.net: the TLS stream its HTTPS port speaks
    "node": CORE | STORAGE | NODE | {"store", "host", "security"},
    "fleet": CORE | STORAGE | NODE | {"store", "host", "security"},
    "sim": CORE | {"host"},
    "sim.seeds": CORE,
    "sim.checker": CORE | {"sim"},
    "sim.chaos": CORE | STORAGE | {"store", "host", "sim", "sim.checker"},
    # Other people's stores checked by the Maelstrom protocol: the checker, no client.
    "check": CORE | NODE | {"host", "sim", "sim.checker"},
    "client": CORE | NODE | {"store", "host", "security", "fleet"},
    # native.py: which modules the build compiles and whether this process runs them compiled;
    # the package imports it first, and it imports nothing of ours.
    "native": set(),
    "bench": CORE | STORAGE | NODE | {"store", "host", "security", "fleet", "client", "native"},
    "soak": CORE | NODE | {"security", "fleet", "client", "sim", "sim.checker"},
    # The faces: they parse, call the client and render.
    "repl": CORE | {"client"},
    "teach": CORE | {"client", "repl"},
    "web": CORE | {"client", "repl", "teach", "node.http"},  # node.http: the ASGI glue it shares
    "cli": CORE
    | STORAGE
    | NODE
    | SIM
    | {
        "store",
        "host",
        "security",
        "fleet",
        "client",
        "bench",
        "soak",
        "check",
        "repl",
        "teach",
        "web",
        "native",
    },
    # __main__.py: `python -m bhandar_cli` is the command line; __init__.py chooses how to run first
    "bhandar_cli": {"cli", "native"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit_of(module: str) -> str:
    """The package of the table a module belongs to."""
    parts = module.split(".")[1:]
    if not parts or (len(parts) == 1 and not (PACKAGE / parts[0]).is_dir()):
        return parts[0] if parts and parts[0] in LAYERS else "bhandar_cli"
    if len(parts) >= 2 and parts[1] in UNITS.get(parts[0], ()):
        return f"{parts[0]}.{parts[1]}"
    return parts[0]


ALL = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(module: str, path: Path) -> Iterator[tuple[int, str]]:
    """(line, module of the package) for every import in `path`, wherever it is written: an
    imported name that is not a module counts as its module; the package root (`__version__`) is
    left out."""
    is_package = path.name == "__init__.py"
    seen: set[tuple[int, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            targets = [target] + [f"{target}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target not in ALL and "." in target:
                target = target.rsplit(".", 1)[0]
            inside = target == module or module.startswith(target + ".")  # itself, or its own package
            if target in ALL and target != "bhandar_cli" and not inside and (node.lineno, target) not in seen:
                seen.add((node.lineno, target))
                yield node.lineno, target


GRAPH = {m: {t for _, t in imports(m, p)} for m, p in ALL.items()}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_says_what_it_owns_and_stays_under_600_lines(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert ast.get_docstring(ast.parse(text)), f"{path.name} has no module docstring"
    # An alarm, not a rule: a module ends where its concept ends (a long cohesive module beats two
    # halves cut at a line count); past 600 lines, look for the second concept inside it.
    assert len(text.splitlines()) <= 600, f"{path.name} has {len(text.splitlines())} lines"


def test_every_package_has_a_row_of_the_layer_table() -> None:
    assert {unit_of(m) for m in ALL} - set(LAYERS) == set()
    named = {u for allowed in LAYERS.values() for u in allowed}
    assert named <= set(LAYERS), named - set(LAYERS)


def test_each_package_imports_only_what_its_row_allows() -> None:
    wrong = []
    for module, path in sorted(ALL.items()):
        unit = unit_of(module)
        for line, target in imports(module, path):
            if unit_of(target) != unit and unit_of(target) not in LAYERS[unit]:
                where = f"{path.relative_to(PACKAGE.parent)}:{line}"
                wrong.append(f"{where}: {unit} imports {unit_of(target)} ({target})")
    assert wrong == [], "imports the layer table does not allow:\n" + "\n".join(wrong)


def face_of(unit: str) -> str:
    """The one module other packages import a package through: its `__init__.py`, which names what
    it offers in `__all__` (tests/test_faces.py pins each); a one-module row (native.py) is its own."""
    return f"bhandar_cli.{unit}"


def test_another_package_is_imported_only_through_its_face() -> None:
    """A row of the table grants a package's face, `bhandar_cli.P`, never `bhandar_cli.P.module`:
    a package's modules are its own to move. tests/ and scripts/ may import any module."""
    by_path = []
    for module, path in sorted(ALL.items()):
        unit = unit_of(module)
        for line, target in imports(module, path):
            if unit_of(target) != unit and target != face_of(unit_of(target)):
                by_path.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {target}")
    assert by_path == [], f"{len(by_path)} imports of another package's module:\n" + "\n".join(by_path)


def test_inside_a_package_modules_import_each_other_not_their_face() -> None:
    """A module's own face imports it back (lazily, but mypy reads the cycle): siblings import by
    module path."""
    through_face = []
    for module, path in sorted(ALL.items()):
        face = face_of(unit_of(module))
        if module == face or path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == face:
                names = [a.name for a in node.names if f"{face}.{a.name}" not in ALL]
                if names:
                    through_face.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {names}")
    assert through_face == []


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node (or a node that reaches itself)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_layer_table_is_layered() -> None:
    """No row allows, through others, an import back into itself: the table is a stack."""
    assert strongly_connected({unit: allowed - {unit} for unit, allowed in LAYERS.items()}) == []


def test_no_module_imports_itself_back_through_others() -> None:
    cycles = strongly_connected(GRAPH)
    shown = "\n".join(", ".join(m.removeprefix("bhandar_cli.") for m in c) for c in cycles)
    assert cycles == [], "modules that import each other, through others or not:\n" + shown


def test_the_cycle_search_finds_a_cycle() -> None:
    """The search above can fail: on a made-up graph with a cycle hidden three modules deep."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert strongly_connected(graph) == [["a", "b", "c"], ["e"]]


def is_probe(node: ast.AST) -> TypeGuard[ast.Call]:
    """A call of getattr or hasattr with an object to look into."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return False
    return node.func.id in ("getattr", "hasattr") and bool(node.args)


def test_no_backend_or_client_is_probed_for_what_it_has() -> None:
    """A backend declares what its cluster cannot do (client/backend.py `Capabilities`); a client's
    parts hold what they need. Neither is asked with getattr or hasattr, nor stubbed."""
    probes = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if is_probe(node):
                probed = ast.unparse(node.args[0])
                if "backend" in probed or "client" in probed:
                    probes.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(node, ast.Raise) and node.exc is not None:
                raised = ast.unparse(node.exc)
                if raised.startswith("NotImplementedError") and path.is_relative_to(PACKAGE / "client"):
                    probes.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: raise {raised}")
    assert probes == []


def in_package(part: str) -> list[Path]:
    return [p for p in MODULES if p.relative_to(PACKAGE).parts[0] == part]


def top_level_names(path: Path) -> set[str]:
    """The first part of every module `path` imports, from anywhere (`trio`, `bhandar_cli`, ...)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_executor_and_the_network_model_are_plain_code_both_environments_share() -> None:
    """host/ runs under trio and under the simulator's event loop alike: it awaits nothing."""
    modules = in_package("host")
    assert {p.name for p in modules} >= {"executor.py", "network.py", "topology.py"}
    for path in modules:
        assert not top_level_names(path) & {"trio", "asyncio", "socket", "time"}, path
    for path in in_package("node") + in_package("sim"):
        text = path.read_text(encoding="utf-8")
        # Partitions are decided by one model: no driver keeps its own set of blocked links.
        assert "blocked: set" not in text and ".blocked.add(" not in text, path
