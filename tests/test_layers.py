"""The four floors import one way: apps -> backends -> circuits -> core, and the lower floors stay light.

Every ``import`` statement in the package's sources is read (module level and inside functions alike), so a
lazy import that points upwards fails here too. ``experiments/`` and ``bench/`` sit over the package: the package
never imports them, and they, like the package, use no other module's private names (``from x import _y`` or
``x._y``).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: floor -> (source folder, rank); a module may import ``hybrid_attention.<floor>`` only at its own rank or below
FLOORS = {
    "core": (ROOT / "hybrid_attention", 0),
    "circuits": (ROOT / "hybrid_attention" / "circuits", 1),
    "backends": (ROOT / "hybrid_attention" / "backends", 2),
    "apps": (ROOT / "hybrid_attention" / "apps", 3),
}
#: third-party packages a floor may import at module level (heavier ones only inside functions, on use)
LIGHT = {"numpy", "torch", "scipy", "tqdm"}
HEAVY = {
    "qiskit",
    "qiskit_aer",
    "qiskit_ibm_runtime",
    "pennylane",
    "matplotlib",
    "nbformat",
    "nbclient",
    "jupytext",
    "dask",
    "distributed",
    "dimod",
    "dwave",
    "numba",
}


def _floor_of(module: str) -> str | None:
    """The floor a ``hybrid_attention...`` module name belongs to, or None for other packages."""
    parts = module.split(".")
    if parts[0] != "hybrid_attention":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in ("circuits", "backends", "apps") else "core"


def _imports_of(node: ast.ImportFrom, package: str) -> str:
    """The absolute module of a ``from ... import`` statement in ``package`` (relative imports resolved)."""
    if node.level:
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module or ""


def _imports(path: Path, package: str) -> list[tuple[str, int, bool]]:
    """``(absolute module, line, at module level)`` for every import in ``path`` (relative ones resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top = set(map(id, tree.body))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((_imports_of(node, package), node.lineno, id(node) in top))
    return out


def _floor_folder(path: Path) -> str:
    """The floor whose folder holds ``path`` (the deepest one: the core's folder holds the other floors')."""
    return max(
        (f for f, (folder, _) in FLOORS.items() if path.is_relative_to(folder)), key=lambda f: len(FLOORS[f][0].parts)
    )


def _sources():
    for floor, (folder, rank) in FLOORS.items():
        for path in sorted(folder.rglob("*.py")):
            if _floor_folder(path) != floor:
                continue
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            prefix = ["hybrid_attention"] if floor == "core" else ["hybrid_attention", floor]
            package = ".".join(prefix + (parts if path.name == "__init__.py" else parts[:-1]))
            yield floor, rank, path, package


#: folders over the package: importable packages that use it and that it never imports
OVER = {"experiments": ROOT / "experiments", "bench": ROOT / "bench"}


def _over_sources():
    """``(path, package)`` of every module of ``experiments/`` and ``bench/``."""
    for folder in OVER.values():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            package = ".".join(parts if path.name == "__init__.py" else parts[:-1])
            yield path, package


def _all_sources():
    """``(path, package)`` of the package's modules and of those over it."""
    yield from ((path, package) for _, _, path, package in _sources())
    yield from _over_sources()


def test_every_floor_exists():
    for floor, (folder, _) in FLOORS.items():
        assert (folder / "__init__.py").exists(), f"floor {floor} has no package at {folder}"


@pytest.mark.parametrize("floor", list(FLOORS))
def test_imports_point_down(floor):
    bad = []
    for f, rank, path, package in _sources():
        if f != floor:
            continue
        for mod, line, _ in _imports(path, package):
            target = _floor_of(mod)
            if target is not None and FLOORS[target][1] > rank:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod} ({target} is above {floor})")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("floor", ["core", "circuits"])
def test_heavy_dependencies_are_imported_on_use(floor):
    """Core and circuits import qiskit/pennylane/matplotlib only inside the functions that need them; a backend
    module built on one (aer, ibm, pennylane) may import it at the top, since the registry imports it on use."""
    bad = []
    for f, _, path, package in _sources():
        if f != floor:
            continue
        for mod, line, top in _imports(path, package):
            if top and mod.split(".")[0] in HEAVY:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod} at module level")
    assert not bad, "\n".join(bad)


def test_core_depends_on_numpy_and_torch_only():
    import importlib.util

    stdlib = set(sys.stdlib_module_names)
    bad = []
    for f, _, path, package in _sources():
        if f != "core":
            continue
        for mod, line, _ in _imports(path, package):
            root = mod.split(".")[0]
            if root and root not in stdlib and root != "hybrid_attention" and root not in LIGHT:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod}")
    assert importlib.util.find_spec("hybrid_attention") is not None
    assert not bad, "\n".join(bad)


def test_importing_the_lower_floors_loads_no_quantum_or_plotting_package():
    code = (
        "import sys, hybrid_attention, hybrid_attention.circuits, hybrid_attention.backends; "
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {sorted(HEAVY)!r}); print(bad); assert not bad"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_checker_sees_an_upward_import(tmp_path):
    """The AST reader resolves relative imports and sees imports inside functions."""
    src = tmp_path / "mod.py"
    src.write_text("def f():\n    from ..apps import cli\n    import qiskit\n")
    found = _imports(src, "hybrid_attention.backends")
    assert ("hybrid_attention.apps", 2, False) in found and ("qiskit", 3, False) in found
    assert _floor_of("hybrid_attention.apps.cli") == "apps" and _floor_of("hybrid_attention.exact") == "core"


# ---------------------------------------------------------------------- private names and cycles
def _module_name(path: Path, package: str) -> str:
    """The dotted name of the module in ``path`` (a package's ``__init__`` is the package)."""
    return package if path.name == "__init__.py" else f"{package}.{path.stem}"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_imports(path: Path, package: str) -> list[tuple[int, str]]:
    """``(line, statement)`` for every import in ``path`` of a private name (or private module) from another module of
    the package: ``from .x import _y``, ``from . import _y``, ``import hybrid_attention.x._y``. A private alias of a
    public name (``from . import checks as _checks``) is not one."""
    tree = ast.parse(path.read_text(), filename=str(path))
    own = _module_name(path, package)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = _imports_of(node, package)
            if mod.split(".")[0] != "hybrid_attention" or mod == own:
                continue
            if any(_is_private(p) for p in mod.split(".")):
                out.append((node.lineno, f"from {mod} import ..."))
                continue
            out += [(node.lineno, f"from {mod} import {a.name}") for a in node.names if _is_private(a.name)]
        elif isinstance(node, ast.Import):
            out += [
                (node.lineno, f"import {a.name}")
                for a in node.names
                if a.name.split(".")[0] == "hybrid_attention" and any(_is_private(p) for p in a.name.split("."))
            ]
    return sorted(out)


#: ``path:statement`` of private imports inside files another engineer is rewriting (empty: none left)
PRIVATE_IMPORT_EXCEPTIONS: set[str] = set()


def test_no_private_names_are_imported_across_modules():
    """A name starting with ``_`` belongs to its own file: another module that needs it needs a public owner."""
    bad = []
    for _, _, path, package in _sources():
        rel = str(path.relative_to(ROOT))
        bad += [f"{rel}:{line} {stmt}" for line, stmt in _private_imports(path, package)]
    bad = [b for b in bad if f"{b.split(':')[0]}:{b.split(' ', 1)[1]}" not in PRIVATE_IMPORT_EXCEPTIONS]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_a_private_import(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text(
        "from . import checks as _checks\n"  # a private alias of a public module: fine
        "from .exact import _rows\n"
        "def f():\n    from hybrid_attention.ising import IsingProblem, _check_mask\n"
        "import hybrid_attention._hidden\n"
        "from ._impl import thing\n"
        "from .mod import _own\n"  # this very file (hybrid_attention.mod): fine
    )
    found = _private_imports(src, "hybrid_attention")
    assert found == [
        (2, "from hybrid_attention.exact import _rows"),
        (4, "from hybrid_attention.ising import _check_mask"),
        (5, "import hybrid_attention._hidden"),
        (6, "from hybrid_attention._impl import ..."),
    ], found


def _module_graph() -> dict[str, set[str]]:
    """module -> the modules of the package it imports (anywhere in the file; ``from pkg import mod`` points at
    ``pkg.mod``, ``from pkg import name`` at ``pkg``)."""
    files = {_module_name(path, package): (path, package) for _, _, path, package in _sources()}
    graph = {}
    for name, (path, package) in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                mod = _imports_of(node, package)
                for a in node.names:
                    target = f"{mod}.{a.name}" if f"{mod}.{a.name}" in files else mod
                    if target in files:
                        edges.add(target)
            elif isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in files}
        graph[name] = edges - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles_within_the_package():
    """Imports between the package's modules form no cycle (lazy imports inside functions count too)."""
    cycles = _cycles(_module_graph())
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_sees_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_package_never_imports_experiments_or_bench():
    bad = []
    for _, _, path, package in _sources():
        for mod, line, _ in _imports(path, package):
            if mod.split(".")[0] in OVER:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {mod}")
    assert not bad, "\n".join(bad)


def test_experiments_and_bench_are_packages_without_path_edits():
    """Studies and benchmarks are importable packages (``python -m experiments.<study>.<script>``), no sys.path."""
    missing = [
        str(d.relative_to(ROOT))
        for folder in OVER.values()
        for d in [folder, *(p.parent for p in folder.rglob("*.py"))]
        if not (d / "__init__.py").exists()
    ]
    assert not missing, f"folders without __init__.py: {sorted(set(missing))}"
    edits = [
        f"{path.relative_to(ROOT)}:{n}"
        for path, _ in _over_sources()
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "sys.path" in line and not line.lstrip().startswith("#")
    ]
    assert not edits, "sys.path edits:\n" + "\n".join(edits)


def _project_module(mod: str) -> bool:
    return mod.split(".")[0] in ("hybrid_attention", *OVER)


def _private_reaches(path: Path, package: str) -> list[tuple[int, str]]:
    """``(line, reach)`` for every ``name._private`` in ``path`` where ``name`` is bound by an import to another
    module of the project (``from . import exact``; ``import hybrid_attention.kernels as k``) or to a name imported
    from one (``from .ising import IsingProblem`` then ``IsingProblem._derived``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    own = _module_name(path, package)
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _project_module(a.name):
                    bound[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            mod = _imports_of(node, package)
            if _project_module(mod):
                for a in node.names:
                    bound[a.asname or a.name] = f"{mod}.{a.name}"
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
            continue
        chain, value = [], node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in bound:
            target = ".".join([bound[value.id], *reversed(chain)])
            if target != own and not own.startswith(target + "."):
                out.append((node.lineno, f"{target}.{node.attr}"))
    return sorted(out)


def test_no_private_names_are_reached_across_modules():
    """``other_module._name`` (or ``ImportedClass._name``) is the same reach as importing ``_name``: the name needs a
    public owner. Checked in the package, ``experiments/`` and ``bench/``."""
    bad = []
    for path, package in _all_sources():
        rel = str(path.relative_to(ROOT))
        bad += [f"{rel}:{line} {reach}" for line, reach in _private_reaches(path, package)]
        if not path.is_relative_to(ROOT / "hybrid_attention"):
            bad += [f"{rel}:{line} {stmt}" for line, stmt in _private_imports(path, package)]
    assert not bad, "\n".join(bad)


def test_the_checker_sees_a_private_reach(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text(
        "from . import exact, kernels as k\n"
        "from .ising import IsingProblem\n"
        "import hybrid_attention.checks\n"
        "import numpy as np\n"
        "exact._rows(1)\n"
        "k._exact_weights\n"
        "IsingProblem._derived(1)\n"
        "hybrid_attention.checks._hidden\n"
        "np._private, exact.public, exact.__name__\n"
        "def f(self):\n    return self._own\n"
    )
    found = _private_reaches(src, "hybrid_attention")
    assert found == [
        (5, "hybrid_attention.exact._rows"),
        (6, "hybrid_attention.kernels._exact_weights"),
        (7, "hybrid_attention.ising.IsingProblem._derived"),
        (8, "hybrid_attention.checks._hidden"),
    ], found
