"""Every notebook in notebooks/ executes top to bottom (small configuration: HYBRID_ATTENTION_QUICK=1) and produces
its plots; the committed notebooks match notebooks/build.py and carry no outputs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NB_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(p.name for p in NB_DIR.glob("*.ipynb"))
# minimum number of PNG outputs each notebook must produce in the quick configuration
MIN_PLOTS = {"sampler_fidelity.ipynb": 3, "dqa_temperature.ipynb": 3, "ablation_results.ipynb": 1, "ibm_quantum.ipynb": 1}
# these two simulate noisy devices and take 25-40 s each even in the quick configuration: run with -m slow (.ci/run does)
SLOW = {"sampler_fidelity.ipynb", "ibm_quantum.ipynb"}


def test_notebooks_are_built_from_the_script_and_stripped():
    assert set(NOTEBOOKS) == set(MIN_PLOTS)
    r = subprocess.run([sys.executable, str(NB_DIR / "build.py"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for name in NOTEBOOKS:
        nb = nbformat.read(NB_DIR / name, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{name} has outputs committed"


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in NOTEBOOKS])
def test_notebook_executes(name, monkeypatch):
    monkeypatch.setenv("HYBRID_ATTENTION_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("TQDM_DISABLE", "1")
    nb = nbformat.read(NB_DIR / name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NB_DIR)}})
    client.execute()
    pngs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.get("output_type") == "error"]
    assert not errors
    assert len(pngs) >= MIN_PLOTS[name], f"{name} produced {len(pngs)} plots"
