"""The notebooks: each jupytext source ``notebooks/<name>.py`` executes top to bottom in the small configuration
(HYBRID_ATTENTION_QUICK=1) and draws its plots; each committed ``.ipynb`` is that source rendered with its outputs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("jupytext")

NB_DIR = Path(__file__).resolve().parents[1] / "notebooks"
_spec = importlib.util.spec_from_file_location("notebooks_build", NB_DIR / "build.py")
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)

SOURCES = [p.name for p in build.sources()]
# minimum number of PNG outputs each notebook must produce in the quick configuration
MIN_PLOTS = {
    "sampler_fidelity.py": 3,
    "dqa_temperature.py": 3,
    "ablation_results.py": 1,
    "ibm_quantum.py": 1,
    "hardware_noise.py": 2,
    "sampler_frontier.py": 4,
}


def test_every_source_is_rendered_with_outputs():
    assert set(SOURCES) == set(MIN_PLOTS)
    r = subprocess.run([sys.executable, str(NB_DIR / "build.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for name in SOURCES:
        nb = nbformat.read(NB_DIR / name.replace(".py", ".ipynb"), as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and all(c.execution_count is not None for c in code), f"{name}: rendered notebook was not executed"
        assert not [o for c in code for o in c.outputs if o.get("output_type") == "error"]


def test_check_detects_a_stale_notebook(tmp_path, monkeypatch):
    """``--check`` fails when a source's cells differ from its rendered notebook."""
    src = tmp_path / "nb.py"
    src.write_text("# %% [markdown]\n# # Title\n\n# %%\nx = 1\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_code_cell("x = 2")])
    nbformat.write(nb, tmp_path / "nb.ipynb")
    monkeypatch.setattr(build, "HERE", tmp_path)
    monkeypatch.setattr(build, "__file__", str(tmp_path / "build.py"))
    assert build.main(["--check"]) == 1
    nb.cells[1].source = "x = 1"
    nbformat.write(nb, tmp_path / "nb.ipynb")
    assert build.main(["--check"]) == 0


@pytest.mark.parametrize("name", SOURCES)
def test_notebook_executes(name, monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    nb = build.execute(NB_DIR / name, quick=True, timeout=600)
    pngs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.get("output_type") == "error"]
    assert not errors
    assert len(pngs) >= MIN_PLOTS[name], f"{name} produced {len(pngs)} plots"
