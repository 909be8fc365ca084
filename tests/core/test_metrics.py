"""Tests for hybrid_attention.metrics: hand-computed values, invariants, batching, input validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_attention import exact
from hybrid_attention.ising import IsingProblem
from hybrid_attention.metrics import (
    attention_weight_error,
    bhattacharyya_coefficient,
    classical_fidelity,
    compare_distributions,
    correlation_error,
    fit_effective_beta,
    hellinger_distance,
    kl_divergence,
    marginal_error,
    total_variation,
    weights_from_marginals,
)


# ---------------------------------------------------------------------- hand-computed values
def test_hand_computed_two_state_values():
    p, q = np.array([0.5, 0.5]), np.array([0.25, 0.75])
    assert float(total_variation(p, q)) == pytest.approx(0.25)
    assert float(kl_divergence(p, q)) == pytest.approx(0.5 * math.log(2) + 0.5 * math.log(2 / 3))
    assert float(kl_divergence(q, p)) == pytest.approx(0.25 * math.log(0.5) + 0.75 * math.log(1.5))
    bc = math.sqrt(0.125) + math.sqrt(0.375)
    assert float(bhattacharyya_coefficient(p, q)) == pytest.approx(bc)
    assert float(classical_fidelity(p, q)) == pytest.approx(bc**2)
    assert float(hellinger_distance(p, q)) == pytest.approx(math.sqrt(1 - bc))


def test_disjoint_and_identical():
    p, q = np.array([1.0, 0, 0, 0]), np.array([0, 0.5, 0.5, 0])
    assert float(total_variation(p, q)) == 1.0
    assert float(classical_fidelity(p, q)) == 0.0
    assert float(hellinger_distance(p, q)) == 1.0
    r = np.array([0.1, 0.2, 0.3, 0.4])
    assert float(total_variation(r, r)) == 0.0
    assert float(kl_divergence(r, r)) == 0.0
    assert float(classical_fidelity(r, r)) == pytest.approx(1.0, abs=1e-15)
    assert float(hellinger_distance(r, r)) == pytest.approx(0.0, abs=1e-7)


def test_kl_zero_probability_treatment():
    p, q = np.array([0.5, 0.5, 0.0]), np.array([0.5, 0.25, 0.25])
    # p_c = 0 terms contribute 0
    assert float(kl_divergence(p, q)) == pytest.approx(0.5 * math.log(2))
    # q_c = 0 where p_c > 0: +inf without smoothing, finite with it
    assert math.isinf(float(kl_divergence(q, p)))
    eps = 1e-3
    ps, qs = (p + eps) / (1 + 3 * eps), (q + eps) / (1 + 3 * eps)
    expected = float(np.sum(qs * np.log(qs / ps)))
    assert float(kl_divergence(q, p, eps=eps)) == pytest.approx(expected)
    d = compare_distributions(q, p)
    assert set(d) == {"tv", "kl_pq", "kl_qp", "hellinger", "fidelity"}
    assert math.isinf(float(d["kl_pq"])) and math.isfinite(float(d["kl_qp"]))


# ---------------------------------------------------------------------- invariants
@st.composite
def _pair_of_distributions(draw):
    k = draw(st.integers(2, 16))
    floats = st.floats(0.0, 1.0, allow_nan=False)
    a = np.array(draw(st.lists(floats, min_size=k, max_size=k))) + 1e-12
    b = np.array(draw(st.lists(floats, min_size=k, max_size=k))) + 1e-12
    return a / a.sum(), b / b.sum()


@settings(max_examples=200, deadline=None)
@given(_pair_of_distributions())
def test_invariants(pq):
    p, q = pq
    tv = float(total_variation(p, q))
    kl = float(kl_divergence(p, q))
    hel = float(hellinger_distance(p, q))
    f = float(classical_fidelity(p, q))
    assert 0.0 <= tv <= 1.0
    assert kl >= 0.0 and float(kl_divergence(q, p)) >= 0.0
    assert 0.0 <= f <= 1.0 and 0.0 <= hel <= 1.0
    assert hel**2 <= tv + 1e-12 and tv <= math.sqrt(2) * hel + 1e-12  # Hellinger-TV inequalities
    assert tv <= math.sqrt(kl / 2) + 1e-9  # Pinsker
    assert tv == pytest.approx(float(total_variation(q, p)))  # symmetric
    assert f >= (1 - tv) ** 2 - 1e-12  # Fuchs-van de Graaf (classical): 1 - sqrt(F) <= TV


def test_batched_equals_loop_and_torch_input():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(8), size=(3, 4))
    q = rng.dirichlet(np.ones(8), size=(4,))  # broadcasts against (3, 4, 8)
    for fn in (total_variation, kl_divergence, hellinger_distance, classical_fidelity):
        out = fn(p, q)
        assert out.shape == (3, 4)
        for i in range(3):
            for j in range(4):
                assert out[i, j] == pytest.approx(float(fn(p[i, j], q[j])))
        np.testing.assert_allclose(fn(torch.from_numpy(p), torch.from_numpy(q).float()), out, rtol=1e-6)


@pytest.mark.parametrize(
    "p, q, exc",
    [
        (np.array([0.5, 0.6]), np.array([0.5, 0.5]), ValueError),  # not normalised
        (np.array([1.5, -0.5]), np.array([0.5, 0.5]), ValueError),  # negative
        (np.array([0.5, 0.5]), np.array([0.2, 0.3, 0.5]), ValueError),  # state counts differ
        (np.array([0.5, np.nan]), np.array([0.5, 0.5]), ValueError),
        ("0.5 0.5", np.array([0.5, 0.5]), TypeError),
        (np.array(["a", "b"]), np.array([0.5, 0.5]), TypeError),
    ],
)
def test_bad_distributions(p, q, exc):
    with pytest.raises(exc):
        total_variation(p, q)


def test_bad_eps():
    with pytest.raises(ValueError, match="eps"):
        kl_divergence([0.5, 0.5], [0.5, 0.5], eps=-1.0)


# ---------------------------------------------------------------------- statistics errors
def test_marginal_and_correlation_error_with_mask():
    m = np.array([[0.1, -0.2, 0.9], [0.0, 0.0, 0.0]])
    ref = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0]])
    mask = np.array([[True, True, False], [True, True, True]])
    e = marginal_error(m, ref, mask=mask)
    np.testing.assert_allclose(e.max, [0.2, 0.5])
    np.testing.assert_allclose(e.mean, [0.15, 0.5 / 3])
    np.testing.assert_array_equal(e.count, [2, 3])
    c = np.zeros((3, 3))
    cr = np.zeros((3, 3))
    cr[0, 1] = cr[1, 0] = 0.3
    cr[0, 2] = cr[2, 0] = 0.9  # involves the masked spin in row 0 of the mask
    ce = correlation_error(c, cr, mask=mask[0])
    assert float(ce.max) == pytest.approx(0.3) and int(ce.count) == 1
    ce_all = correlation_error(c, cr)
    assert float(ce_all.max) == pytest.approx(0.9) and float(ce_all.mean) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="agree"):
        marginal_error(np.zeros(3), np.zeros(4))
    with pytest.raises(TypeError, match="boolean"):
        marginal_error(np.zeros(3), np.zeros(3), mask=np.ones(3))


def test_attention_weights_match_sigmoid_attention_for_free_spins():
    # h-only mode: m = tanh(h), alpha = sigmoid(2h), a = alpha / sum over visible keys (docs/theory.md section 3)
    T = 5
    h = torch.randn(T, T, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    m = exact.marginals(IsingProblem(h, mask=causal))
    a = weights_from_marginals(m, causal)
    sig = torch.sigmoid(2 * h) * causal
    np.testing.assert_allclose(a, (sig / sig.sum(-1, keepdim=True)).numpy(), atol=1e-12)
    np.testing.assert_allclose(a.sum(-1), 1.0)
    assert np.all(a[~causal.numpy()] == 0)
    # all visible spins at -1: uniform over visible keys
    np.testing.assert_allclose(
        weights_from_marginals(np.array([-1.0, -1.0, 0.5]), np.array([True, True, False])), [0.5, 0.5, 0]
    )
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        weights_from_marginals(np.array([2.0, 0.0]))


def test_attention_weight_error_hand_computed():
    m, ref = np.array([1.0, -1.0]), np.array([0.0, 0.0])  # a = [1, 0], a_ref = [0.5, 0.5]
    e = attention_weight_error(m, ref)
    assert float(e["max"]) == pytest.approx(0.5)
    assert float(e["mean"]) == pytest.approx(0.5)
    assert float(e["tv"]) == pytest.approx(0.5)
    same = attention_weight_error(ref, ref)
    assert float(same["tv"]) == 0.0


# ---------------------------------------------------------------------- effective beta
def test_effective_beta_recovers_boltzmann_and_reports_fit_quality():
    g = torch.Generator().manual_seed(3)
    h = torch.randn(2, 4, dtype=torch.float64, generator=g)
    U = torch.triu(torch.randn(4, 4, dtype=torch.float64, generator=g), 1)
    J = U + U.T
    p = exact.probabilities(IsingProblem(h, J, beta=0.7))
    fit = fit_effective_beta(p, h, J)
    np.testing.assert_allclose(fit.beta_h, 0.7, atol=1e-9)
    np.testing.assert_allclose(fit.beta_J, 0.7, atol=1e-9)
    np.testing.assert_allclose(fit.r2, 1.0, atol=1e-12)
    np.testing.assert_allclose(fit.rmse, 0.0, atol=1e-9)
    # a non-Boltzmann distribution (mixture of two temperatures) fits worse
    q = 0.5 * exact.probabilities(IsingProblem(h, J, beta=0.1)) + 0.5 * exact.probabilities(
        IsingProblem(h, J, beta=3.0)
    )
    bad = fit_effective_beta(q, h, J)
    assert np.all(bad.r2 < 0.999) and np.all(bad.rmse > 1e-3)
    np.testing.assert_allclose(bad.r**2, bad.r2, atol=1e-9)


# ---------------------------------------------------------------------- expected_tv (the shot-noise floor)
def test_expected_tv_matches_binomial_sums() -> None:
    from math import comb

    from hybrid_attention.metrics import expected_tv

    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(6), size=2)
    for N in (1, 5, 17):
        brute = [
            0.5 * sum(sum(comb(N, x) * q**x * (1 - q) ** (N - x) * abs(x / N - q) for x in range(N + 1)) for q in row)
            for row in p
        ]
        # closed form against a float64 sum of N + 1 terms per state: agreement to ~1e-12 (log-space round-off)
        np.testing.assert_allclose(expected_tv(p, N), brute, rtol=1e-10, atol=1e-13)


def test_expected_tv_matches_sampled_histograms() -> None:
    from hybrid_attention.metrics import expected_tv, total_variation

    rng = np.random.default_rng(4)
    p = rng.dirichlet(np.full(256, 0.5))
    reps = 400
    tvs = np.array([total_variation(rng.multinomial(1024, p) / 1024, p) for _ in range(reps)])
    # the Monte Carlo mean of 400 histograms: within 5 of its standard errors (std / sqrt(reps))
    assert abs(tvs.mean() - float(expected_tv(p, 1024))) < 5 * tvs.std() / np.sqrt(reps)


def test_expected_tv_edges_and_errors() -> None:
    from hybrid_attention.metrics import expected_tv

    assert float(expected_tv([0.0, 1.0, 0.0], 10)) == 0.0  # a point mass is sampled exactly
    assert float(expected_tv([0.5, 0.5], 1)) == pytest.approx(0.5, abs=1e-12)
    with pytest.raises(ValueError, match="shots"):
        expected_tv([0.5, 0.5], 0)
    with pytest.raises(ValueError, match="sum to 1"):
        expected_tv([0.5, 0.6], 10)
