"""docs/architecture.md lists every module (written by docs/architecture.py from the sources)."""

from __future__ import annotations

import importlib.util

from tests.conftest import REPO


def _script():
    spec = importlib.util.spec_from_file_location("docs_architecture", REPO / "docs" / "architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_module_is_on_the_architecture_page():
    arch = _script()
    page = (REPO / "docs" / "architecture.md").read_text()
    paths = [*(REPO / "hybrid_attention").rglob("*.py"), *(REPO / "experiments").rglob("*.py")]
    paths += list((REPO / "bench").rglob("*.py"))
    missing = [arch.module_name(p) for p in sorted(paths) if f"| `{arch.module_name(p)}` |" not in page]
    assert not missing, f"missing from docs/architecture.md (run python docs/architecture.py): {missing}"


def test_the_page_lists_each_floor_and_wing():
    arch = _script()
    text = arch.render()
    for heading in (
        "## Floor 1: core",
        "## Floor 3: backends",
        "### Wing `dqa/`",
        "### Wing `ibm/`",
        "### Wing `mcmc/`",
    ):
        assert heading in text
    assert "| `hybrid_attention.backends.registry` |" in text
