"""The four floors import one way: apps -> backends -> circuits -> core, and the lower floors stay light.

Every ``import`` statement in the package's sources is read (module level and inside functions alike), so a
lazy import that points upwards fails here too.
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
    "circuits": (ROOT / "circuits", 1),
    "backends": (ROOT / "backends", 2),
    "apps": (ROOT / "apps", 3),
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


def _imports(path: Path, package: str) -> list[tuple[str, int, bool]]:
    """``(absolute module, line, at module level)`` for every import in ``path`` (relative ones resolved)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top = set(map(id, tree.body))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, node.lineno, id(node) in top))
    return out


def _sources():
    for floor, (folder, rank) in FLOORS.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            prefix = ["hybrid_attention"] if floor == "core" else ["hybrid_attention", floor]
            package = ".".join(prefix + (parts if path.name == "__init__.py" else parts[:-1]))
            yield floor, rank, path, package


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
