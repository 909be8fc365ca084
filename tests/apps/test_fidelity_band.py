"""Tests for the banded (device-scale) fidelity sweep: the exact reference against enumeration, the banded
ensemble, skip reasons, bad input refused before any work, the shot-noise floor, and a fast CLI run with resume."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from hybrid_attention import banded, exact
from hybrid_attention.apps import cli
from hybrid_attention.apps.fidelity import FidelityConfig, run_sweep
from hybrid_attention.apps.fidelity.band import OutOfReach, measure_band_point, shot_noise_floor
from hybrid_attention.apps.fidelity.problems import banded_problems
from hybrid_attention.apps.fidelity.sweep import SweepPoint


@pytest.mark.parametrize("W", [1, 2, 4])
def test_banded_problems_and_exact_reference_match_enumeration(W):
    p = banded_problems(9, W, 3, seed=1, scale=1.0, beta=0.7)
    assert p.h.shape == (3, 9) and p.J.shape == (3, 9, 9)
    assert banded.bandwidth(p.J) == W
    assert torch.equal(p.J, p.J.transpose(-1, -2)) and not p.J.diagonal(dim1=-2, dim2=-1).any()
    assert torch.equal(banded_problems(9, W, 3, seed=1, beta=0.7).J, p.J)  # deterministic
    m_band = exact.marginals(p, method="banded")
    m_enum = exact.marginals(p, method="enumerate")
    assert torch.allclose(m_band, m_enum, atol=1e-12, rtol=0)


def test_banded_problems_refuse_bad_band():
    with pytest.raises(ValueError, match="below the number of keys"):
        banded_problems(4, 4, 1)
    with pytest.raises(ValueError, match=">= 1"):
        banded_problems(4, 0, 1)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"band": -1, "n": [16]}, "band must be >= 0"),
        ({"band": 16, "n": [16, 32]}, "below every n"),
        ({"band": 1, "n": [64, 101]}, "max_qubits = 100"),
        ({"band": 1, "n": [16], "calibration": "fitted"}, "fitted"),
        ({"band": 1, "n": [16], "ensemble": "sk"}, "ensemble"),
        ({"band": 0, "n": [16]}, "--band"),
    ],
)
def test_config_refuses_bad_band_input(kw, match):
    pytest.importorskip("qiskit_aer")
    with pytest.raises(ValueError, match=match):
        FidelityConfig(samplers=["aer-mps", "gibbs"], **kw)


def test_n_beyond_mps_limit_is_fine_without_mps():
    assert FidelityConfig(samplers=["gibbs"], band=1, n=[200]).n == [200]


def test_cli_refuses_bad_band_before_work(tmp_path, capsys):
    for args in (["--band", "8", "--n", "8"], ["--band", "1", "--n", "101", "--samplers", "aer-mps"]):
        out = tmp_path / "never"
        assert cli.main(["fidelity", *args, "--out", str(out), "--no-progress"]) != 0
        assert not out.exists()
    assert "error" in capsys.readouterr().err


def test_skip_reasons_for_samplers_that_cannot_reach_n(tmp_path):
    cfg = FidelityConfig(samplers=["statevector", "exact", "gibbs"], band=1, n=[26], shots=[64], problems=2)
    rep = run_sweep(cfg, tmp_path / "r", plots=False, progress=False)
    assert list(rep["points"]) == ["gibbs|n=26|shots=64|tau=None|steps=None"]
    why = rep["skipped"]
    assert "limit of 20" in why["statevector|n=26|shots=None|tau=1.0|steps=20"]
    assert "exact cannot reach n = 26" in why["exact|n=26|shots=64|tau=None|steps=None"]


def test_measure_band_point_out_of_reach():
    p = banded_problems(30, 1, 1)
    with pytest.raises(OutOfReach, match="statevector cannot reach n = 30"):
        measure_band_point(SweepPoint("statevector", 30, None, 1.0, 4), p)


def test_exact_samples_sit_on_the_shot_noise_floor():
    shots, n = 2000, 12
    p = banded_problems(n, 2, 6, seed=3)
    res = measure_band_point(SweepPoint("exact", n, shots, None, None), p, seed=5)
    floor = res["shot_noise"]
    assert floor["bound"] == pytest.approx(np.sqrt(1 / shots))
    assert floor["mean"] <= floor["max"] <= 5 * floor["bound"]
    assert res["within_tolerance"] == 1.0
    assert 0.5 * floor["mean"] < res["target"]["marginal_mean"]["mean"] < 2 * floor["mean"]


def test_shot_noise_floor_of_frozen_spins_is_zero():
    f = shot_noise_floor(np.ones((2, 5)), 100)
    assert f["mean"] == 0 and f["max"] == 0 and f["bound"] == 0.1


def test_cli_band_run_resumes_and_refuses_another_band(tmp_path, capsys, caplog):
    pytest.importorskip("qiskit_aer")
    out = tmp_path / "rep"
    args = ["fidelity", "--band", "1", "--n", "6,40", "--samplers", "meanfield,aer-mps,statevector"]
    args += ["--shots", "128", "--tau", "1", "--steps", "4", "--problems", "2", "--no-progress", "--out", str(out)]
    with caplog.at_level(logging.INFO, logger="hybrid_attention.apps.fidelity.projection"):
        assert cli.main(args) == 0
    assert "projected" in caplog.text
    printed = capsys.readouterr().out
    assert "max abs(m - m_exact) (floor)" in printed and "skipped statevector|n=40" in printed
    rep = json.loads((out / "report.json").read_text())
    assert rep["config"]["band"] == 1 and "--band 1" in rep["commands"][0]
    assert sorted(rep["points"]) == sorted(
        [
            "meanfield|n=6|shots=128|tau=None|steps=None",
            "meanfield|n=40|shots=128|tau=None|steps=None",
            "aer-mps|n=6|shots=128|tau=1.0|steps=4",
            "aer-mps|n=40|shots=128|tau=1.0|steps=4",
            "statevector|n=6|shots=None|tau=1.0|steps=4",
        ]
    )
    assert rep["plots"] == ["fidelity_vs_n.png"] and (out / "fidelity_vs_n.png").stat().st_size > 0
    fit = rep["points"]["aer-mps|n=40|shots=128|tau=1.0|steps=4"]["fit"]
    assert 0 < fit["beta_h"] < 1  # the default anneal samples hot
    seconds = {k: v["seconds"] for k, v in rep["points"].items()}
    assert cli.main(args) == 0  # resumed: nothing measured again
    rep2 = json.loads((out / "report.json").read_text())
    assert {k: v["seconds"] for k, v in rep2["points"].items()} == seconds
    assert cli.main([*args[:2], "2", *args[3:]]) != 0  # another band: refused
    assert "band" in capsys.readouterr().err
