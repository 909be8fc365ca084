"""``fidelity --readout exact|shots`` (exact-output samplers measured by their exact output or by shots) and
``fidelity --samplers ...,ibm --backend NAME`` (the IBM route on a fake backend, offline)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hybrid_attention.apps import cli
from hybrid_attention.apps.fidelity import FidelityConfig, sweep_points
from hybrid_attention.apps.fidelity.command import _default_samplers
from hybrid_attention.apps.fidelity.problems import random_problems
from hybrid_attention.apps.fidelity.sweep import SweepPoint, measure_point
from hybrid_attention.backends import registry

DQA = ["fidelity", "--n", "2", "--shots", "512", "--tau", "1", "--steps", "4", "--problems", "2", "--no-progress"]


def test_readout_shots_gives_exact_output_samplers_a_shots_axis():
    kw = dict(samplers=["statevector"], shots=[64, 256], tau=[1.0], steps=[4])
    assert {p.shots for p in sweep_points(FidelityConfig(**kw))} == {None}
    assert {p.shots for p in sweep_points(FidelityConfig(**kw, readout="shots"))} == {64, 256}
    with pytest.raises(ValueError, match="readout must be one of"):
        FidelityConfig(**kw, readout="both")


def test_statevector_shots_point_is_within_shot_noise_of_its_exact_output():
    probs = random_problems(3, 6, seed=1)
    shots = 4000
    res = measure_point(SweepPoint("statevector", 3, shots, 1.0, 4), probs, seed=2)
    exact = measure_point(SweepPoint("statevector", 3, None, 1.0, 4), probs, seed=2)
    assert exact["circuit"]["marginal_max"]["max"] < 1e-5  # exact output: no shot noise
    # marginal errors of the shots against the exact output: 6 standard errors of a +-1 mean
    assert 0 < res["circuit"]["marginal_max"]["max"] <= 6 / np.sqrt(shots)
    assert res["sampler_info"]["num_reads"] == shots


def test_ibm_sampler_is_opt_in_and_runs_on_a_named_fake_backend(tmp_path, capsys, monkeypatch):
    pytest.importorskip("qiskit_ibm_runtime")
    pytest.importorskip("qiskit_aer")
    from hybrid_attention.apps.fidelity import command

    monkeypatch.setattr(command, "available_samplers", lambda: dict.fromkeys(registry.SAMPLERS, True))
    assert "ibm" not in _default_samplers() and "statevector" in _default_samplers()
    monkeypatch.undo()
    out = tmp_path / "rep"
    args = [*DQA, "--samplers", "statevector,ibm", "--backend", "fake_manila", "--readout", "shots", "--no-plots"]
    assert cli.main([*args, "--out", str(out)]) == 0
    rep = json.loads((out / "report.json").read_text())
    key = "ibm|n=2|shots=512|tau=1.0|steps=4"
    assert set(rep["points"]) == {key, "statevector|n=2|shots=512|tau=1.0|steps=4"}
    info = rep["points"][key]["sampler_info"]
    assert info["backend_name"] == "fake_manila" and info["primitive"] == "executor" and info["local"]
    assert rep["config"]["backend"] == "fake_manila" and rep["config"]["readout"] == "shots"
    assert "--readout shots --backend fake_manila" in rep["commands"][0]
    # resuming with another backend is refused (the ibm points would mix two devices)
    assert cli.main([*args[:-5], "--backend", "fake_lima", "--no-plots", "--out", str(out)]) == 2
    assert "backend" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--samplers", "statevector,ibm", "--backend", "fake_torin"], "did you mean fake_torino"),
        (["--samplers", "statevector", "--backend", "fake_manila"], "applies to the ibm sampler"),
        (["--samplers", "ibm", "--backend", "ibm_torino"], "must name a fake backend"),
    ],
)
def test_bad_backends_exit_2_before_writing(tmp_path, capsys, extra, match):
    pytest.importorskip("qiskit_ibm_runtime")
    out = tmp_path / "rep"
    assert cli.main([*DQA, *extra, "--out", str(out)]) == 2
    assert match in capsys.readouterr().err and not (out / "report.json").exists()
