"""Effective temperature of DQA output: table of docs/theory.md section 4, leading-order relation, compensation, calibration, all
checked against the exact circuit output (reference statevector) and exact Boltzmann enumeration."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem, exact
from hybrid_attention.circuits import DQASchedule, calibrate, dqa_probabilities, fit_temperature, leading_order_beta
from hybrid_attention.circuits.temperature import compensate, random_problems
from hybrid_attention.metrics import fit_effective_beta


def spec_instance():
    """The docs/theory.md section 4 instance: 4 spins, default_rng(0), h then the upper triangle of a normal matrix."""
    rng = np.random.default_rng(0)
    h = rng.normal(size=(1, 4))
    U = np.triu(rng.normal(size=(1, 4, 4)), 1)
    return h, U + np.swapaxes(U, -1, -2)


@pytest.mark.parametrize(
    "row", ["0.2 0.0066 0.0133 0.99998", "0.5 0.038 0.082 0.9995", "1.0 0.128 0.319 0.996", "2.0 0.72 1.14 0.906"]
)
def test_reproduces_spec_table(row):
    """Every printed digit of the table of docs/theory.md section 4: |fit - table| <= half a unit in the table's last place."""
    tau, *table = row.split()
    h, J = spec_instance()
    f = fit_effective_beta(dqa_probabilities(h, J, DQASchedule(tau=float(tau), steps=400)), h, J)
    for got, txt in zip((f.beta_h[0], f.beta_J[0], f.r[0]), table):
        half_ulp = 0.5 * 10.0 ** -len(txt.split(".")[1])
        assert abs(got - float(txt)) <= half_ulp + 1e-12, (txt, got)


def test_leading_order_closed_form_for_linear_schedule():
    for tau, gamma, lam in [(0.3, 1.0, 1.0), (0.7, 0.5, 2.0)]:
        s = DQASchedule(tau=tau, steps=4000, gamma=gamma, energy_scale=lam)
        bh, bJ = leading_order_beta(s)
        assert bh == pytest.approx(gamma * lam * tau**2 / 6, rel=1e-3)
        assert bJ == pytest.approx(2 * bh, rel=1e-12)
    s = DQASchedule(tau=0.5, steps=10, field_scale=2.0, coupling_scale=0.5)
    bh0, bJ0 = leading_order_beta(DQASchedule(tau=0.5, steps=10))
    assert leading_order_beta(s, beta=3.0) == pytest.approx((3 * 2 * bh0, 3 * 0.5 * bJ0))
    with pytest.raises(TypeError):
        leading_order_beta("schedule")


@pytest.mark.parametrize("shape,order", [("linear", 1), ("linear", 2), ("sin2", 1)])
def test_leading_order_matches_fit_with_error_of_order_tau_squared(shape, order):
    h, J = random_problems(n=4, batch=12, seed=5)
    errs = []
    for tau in (0.1, 0.05):
        s = DQASchedule(tau=tau, steps=30, shape=shape, order=order)
        f = fit_temperature(h, J, s)
        bh, bJ = leading_order_beta(s)
        errs.append(max(np.max(np.abs(f.beta_h / bh - 1)), np.max(np.abs(f.beta_J / bJ - 1))))
        assert np.all(f.r > 0.9999)
    assert errs[0] < 0.02
    assert errs[1] < errs[0] / 3  # relative error falls like tau^2 (factor 4 when tau halves)


def test_short_anneal_is_boltzmann_at_effective_beta():
    """Against exact enumeration: the circuit output is exp(-beta_h E_h - beta_J E_J)/Z at the leading-order betas
    up to a relative error O(tau^2) of its distance from uniform (absolute O(tau^4))."""
    h, J = random_problems(n=5, batch=4, seed=9)
    ratios = []
    for tau in (0.2, 0.1):
        s = DQASchedule(tau=tau, steps=50)
        bh, bJ = leading_order_beta(s)
        p_dqa = dqa_probabilities(h, J, s)
        p_bz = exact.probabilities(IsingProblem(torch.from_numpy(bh * h), torch.from_numpy(bJ * J))).numpy()
        tv = 0.5 * np.abs(p_dqa - p_bz).sum(-1)
        from_uniform = 0.5 * np.abs(p_bz - 1 / 32).sum(-1)
        ratios.append(np.max(tv / from_uniform))
    assert ratios[0] < 0.05
    assert ratios[1] < ratios[0] / 3


def test_compensation_balances_field_and_coupling_temperatures():
    h, J = random_problems(n=4, batch=8, seed=2)
    s = DQASchedule(tau=0.2, steps=40)
    plain = fit_temperature(h, J, s)
    assert np.allclose(plain.beta_J / plain.beta_h, 2.0, rtol=0.03)
    comp = compensate(s)
    assert comp.field_scale == 2.0
    f = fit_temperature(h, J, comp)
    assert np.allclose(f.beta_J / f.beta_h, 1.0, rtol=0.03)
    bh, bJ = leading_order_beta(comp)
    assert bh == pytest.approx(bJ)


def test_problem_beta_scales_the_circuit():
    h, J = random_problems(n=3, batch=4, seed=4)
    s = DQASchedule(tau=0.1, steps=20)
    f1, f2 = fit_temperature(h, J, s), fit_temperature(h, J, s, beta=2.0)
    assert np.allclose(f2.beta_h / f1.beta_h, 2.0, rtol=0.03)  # exact at leading order; O((beta tau)^2) corrections


def test_calibrate_leading_and_fit():
    s0 = DQASchedule(tau=0.5, steps=30)
    for vary in ("tau", "energy_scale"):
        s = calibrate(0.02, s0, vary=vary)
        assert leading_order_beta(s)[0] == pytest.approx(0.02, rel=1e-10)
        assert s.steps == s0.steps
    sJ = calibrate(0.05, s0, which="J")
    assert leading_order_beta(sJ)[1] == pytest.approx(0.05, rel=1e-10)
    probs = random_problems(n=4, batch=8, seed=1)
    s = calibrate(0.3, s0, method="fit", problems=probs, tol=1e-3)
    assert float(np.mean(fit_temperature(*probs, s).beta_h)) == pytest.approx(0.3, rel=2e-3)
    # higher orders: the fitted value is below the leading-order one, so the fit calibration anneals longer
    assert s.tau > calibrate(0.3, s0).tau


def test_calibrate_errors():
    s0 = DQASchedule(tau=0.5, steps=30)
    with pytest.raises(ValueError, match="peaks"):
        calibrate(0.1, s0, vary="energy_scale", method="fit", problems=random_problems(n=4, batch=4))
    with pytest.raises(ValueError, match="target_beta"):
        calibrate(-1.0, s0)
    with pytest.raises(ValueError, match="vary"):
        calibrate(0.1, s0, vary="steps")
    with pytest.raises(ValueError, match="method"):
        calibrate(0.1, s0, method="magic")
    # the fit's settings with the closed form: refused, not dropped
    with pytest.raises(ValueError, match="problems only apply to method='fit'"):
        calibrate(0.1, s0, problems=random_problems(n=2, batch=2))
    with pytest.raises(ValueError, match="tol, max_iter only apply to method='fit'"):
        calibrate(0.1, s0, tol=1e-2, max_iter=5)


def test_schedule_scales_validated():
    with pytest.raises(ValueError, match="field_scale"):
        DQASchedule(tau=1.0, steps=2, field_scale=float("nan"))
    s = dataclasses.replace(DQASchedule(tau=1.0, steps=2), coupling_scale=3.0)
    assert compensate(s).field_scale == 6.0
