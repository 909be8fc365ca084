"""``hybrid-attention mixing``: the exact rows agree with ``mcmc.spectral_gaps`` and the exact autocorrelation time,
the exponent fit recovers a known scaling, the three problem sources (ensemble, dimod BQM, checkpoint-free), the
sampled path above 12 spins, and refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.apps.cli import main
from hybrid_attention.apps.fidelity.problems import ensemble_problems
from hybrid_attention.apps.mixing import exponent_ratio, fit_exponent, mixing_report
from hybrid_attention.backends.mcmc import analysis as mcmc
from hybrid_attention.circuits.proposal import ProposalParams


def test_fit_recovers_a_known_exponent():
    rng = np.random.default_rng(0)
    ns = [3, 4, 5, 6, 7]
    gaps = [2.0 ** (-0.5 * n) * np.exp(rng.normal(0, 0.05, 32)) for n in ns]
    fit = fit_exponent(ns, gaps)
    assert abs(fit["k"] - 0.5) < 5 * fit["k_err"] + 1e-3
    assert 0 < fit["k_err"] < 0.05
    with pytest.raises(ValueError, match="two sizes"):
        fit_exponent([3], [np.ones(3)])
    mean = fit_exponent(ns, gaps, stat="mean")  # log-normal noise of sd 0.05: mean and median scale alike
    assert abs(mean["k"] - 0.5) < 5 * mean["k_err"] + 1e-3
    with pytest.raises(ValueError, match="stat must be one of"):
        fit_exponent(ns, gaps, stat="mode")


def test_exponent_ratio_is_paired_over_instances():
    """Two chains on the same instances, gaps 2^(-0.3 n) and 2^(-0.9 n) times a per-instance hardness factor: the
    ratio is 3 within its error; a chain against itself gives exactly 1 with zero spread (the bootstrap resamples
    the same instances for both; an unpaired one would spread)."""
    rng = np.random.default_rng(1)
    ns = [3, 4, 5, 6, 7, 8]
    shared = [np.exp(rng.normal(0, 0.5, 16)) for _ in ns]  # instance hardness, common to both chains
    fast = [2.0 ** (-0.3 * n) * s * np.exp(rng.normal(0, 0.02, 16)) for n, s in zip(ns, shared)]
    slow = [2.0 ** (-0.9 * n) * s * np.exp(rng.normal(0, 0.02, 16)) for n, s in zip(ns, shared)]
    r = exponent_ratio(ns, slow, fast)
    assert r["k_num"] == pytest.approx(fit_exponent(ns, slow)["k"])
    assert r["k_den"] == pytest.approx(fit_exponent(ns, fast)["k"])
    assert abs(r["ratio"] - 3.0) < 5 * r["ratio_err"] + 0.05 and r["ratio_err"] > 0
    same = exponent_ratio(ns, fast, fast)
    assert same["ratio"] == pytest.approx(1.0) and same["ratio_err"] < 1e-12
    with pytest.raises(ValueError, match="same instances"):
        exponent_ratio(ns, slow, [g[:8] for g in fast])


def test_exact_rows_match_spectral_gaps_and_integrated_time():
    p = ensemble_problems("layden", 4, 3, seed=1)
    rep = mixing_report({4: p}, proposals=("local", "uniform", "heat-bath"), progress=False)
    gaps = mcmc.spectral_gaps(p, proposals=("local", "uniform", "heat-bath"))
    for b, row in enumerate(rep["rows"]["4"]):
        for name in ("local", "uniform", "heat-bath"):
            assert row[name]["gap"] == pytest.approx(gaps[name][b], abs=1e-10)
        Ps, E, pi = mcmc.kernel_matrices(p[b : b + 1], ("local",))
        # independent check of the exact time: 1 + 2 sum_t rho(t) summed directly over powers of P
        g = E - pi @ E
        Pt, acc = np.eye(len(pi)), 0.0
        for _ in range(4000):
            Pt = Pt @ Ps["local"]
            acc += (pi * g) @ (Pt @ g)
        assert row["local"]["iat_energy"] == pytest.approx(1 + 2 * acc / (pi @ g**2), rel=1e-6)


def test_qemcmc_rows_use_the_proposal_params():
    p = ensemble_problems("sk", 3, 2, seed=2)
    rep = mixing_report({3: p}, proposals=("qemcmc",), nodes=2, progress=False)
    gaps = mcmc.spectral_gaps(p, proposals=("qemcmc",), params=ProposalParams(), nodes=2)["qemcmc"]
    np.testing.assert_allclose([r["qemcmc"]["gap"] for r in rep["rows"]["3"]], gaps, atol=1e-10)


def test_sampled_rows_above_the_exact_limit():
    p = ensemble_problems("sk", 13, 1, seed=0)
    rep = mixing_report({13: p}, proposals=("local", "uniform"), chains=4, moves=64, progress=False)
    row = rep["rows"]["13"][0]
    assert row["method"] == "chains" and row["local"]["gap"] is None and row["local"]["iat_energy"] >= 1
    assert rep["fits"] == {}


def test_cli_with_a_dimod_bqm(tmp_path, capsys):
    dimod = pytest.importorskip("dimod")
    bqm = dimod.BinaryQuadraticModel({"a": 0.5, "b": -0.2, "c": 0.1}, {("a", "b"): -1.0, ("b", "c"): 0.7}, 0, "SPIN")
    f = tmp_path / "bqm.json"
    f.write_text(json.dumps(bqm.to_serializable()))
    out = tmp_path / "rep"
    assert main(["mixing", "--bqm", str(f), "--n", "3", "--proposals", "local,uniform", "--out", str(out),
                 "--no-progress"]) == 0  # fmt: skip
    rep = json.loads((out / "mixing.json").read_text())
    p = IsingProblem.from_bqm(bqm)
    want = mcmc.spectral_gaps(IsingProblem(p.h[None], p.J), proposals=("local",))["local"][0]
    assert rep["rows"]["3"][0]["local"]["gap"] == pytest.approx(want)
    assert "| 3 | local |" in capsys.readouterr().out
    capsys.readouterr()
    assert main(["mixing", "--bqm", str(f), "--n", "3", "--out", str(out), "--no-progress"]) == 2  # never overwritten
    assert "exists" in capsys.readouterr().err


def test_gaps_are_exact_for_a_free_spin():
    """One free spin at field h: the local chain's gap equals the gap of its 2 x 2 Metropolis matrix."""
    h = 0.4
    p = IsingProblem(torch.tensor([[h]], dtype=torch.float64))
    rep = mixing_report({1: p}, proposals=("local",), progress=False)
    a = np.exp(-2 * h)  # Metropolis from +1 (lower energy) to -1
    P = np.array([[1 - a, a], [1.0, 0.0]])
    assert rep["rows"]["1"][0]["local"]["gap"] == pytest.approx(1 - sorted(np.abs(np.linalg.eigvals(P)))[-2])


def test_noisy_rows_and_advantage(tmp_path, capsys):
    """``--noise``: a ``qemcmc-noisy`` row per problem with its gap, bias and errors, the advantage over uniform
    noiseless and noisy; refusals above the noisy limit and for an asymmetry without a backend."""
    pytest.importorskip("qiskit_aer")
    out = tmp_path / "noisy"
    args = ["mixing", "--ensemble", "layden", "--n", "3", "--problems", "2", "--nodes", "2,4", "--no-progress"]
    assert main(args + ["--noise", "fake_manila", "--noise-draws", "2", "--out", str(out)]) == 0
    rep = json.loads((out / "mixing.json").read_text())
    for row in rep["rows"]["3"]:
        v = row["qemcmc-noisy"]
        assert 0 < v["gap"] <= 1 and v["tv_bias"] >= 0 and v["gap_err"] >= 0 and v["acceptance"] == "symmetric"
    adv = rep["summary"]["3"]["advantage"]
    assert set(adv) == {"qemcmc", "qemcmc-noisy"} and adv["qemcmc"]["ci_low"] <= adv["qemcmc"]["ci_high"]
    bad = ["mixing", "--ensemble", "layden", "--n", "7", "--problems", "1", "--noise", "fake_manila", "--no-progress"]
    assert main(bad) == 2
    assert "n <= 6" in capsys.readouterr().err
    assert main(["mixing", "--n", "3", "--problems", "1", "--readout-asymmetry", "0.5", "--no-progress"]) == 2
    assert "needs --noise" in capsys.readouterr().err
