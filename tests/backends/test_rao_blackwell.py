"""The Rao-Blackwellised marginal estimator of the bridge (``Sampling(..., estimator="conditional")``): exact with exact weights (values and
every gradient equal autograd through enumeration), exact from one read at ``J = 0``, unbiased and of lower variance
than the spin average for sampled Boltzmann reads, and carried through persistent chains."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention import exact
from hybrid_attention.backends import get_sampler
from hybrid_attention.bridge import attention_marginals, differentiable_marginals
from hybrid_attention.ising import IsingProblem
from hybrid_attention.sampling import PersistentChains, Sampling

Z = 5.0


def RaoBlackwell(sampler, **kw):  # noqa: N802 - reads as the estimator's name in the tests below
    """The sampler's reads through the conditional (Rao-Blackwellised) estimator."""
    return Sampling(sampler, estimator="conditional", **kw)


def ReadsOnly(sampler, **kw):  # noqa: N802
    """The sampler's reads through the plain spin average."""
    return Sampling(sampler, readout="shots", **kw)


def problem(n, seed, *, batch=(4,), beta=0.9, scale=0.8, mask=None, grad=True):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(*batch, n, generator=g, dtype=torch.float64)
    J = torch.randn(n, n, generator=g, dtype=torch.float64).triu(1) * scale
    J = J + J.T
    beta_t = torch.tensor(beta, dtype=torch.float64)
    return IsingProblem(h.requires_grad_(grad), J.requires_grad_(grad), beta=beta_t.requires_grad_(grad), mask=mask)


def grads(m, p, g):
    """Gradients of ``(m * g).sum()`` w.r.t. h, J and beta; J's symmetrised (``J_kl`` and ``J_lk`` are one coupling,
    and enumeration and the bridge split its gradient between the two entries differently)."""
    gh, gJ, gb = torch.autograd.grad((m * g).sum(), (p.h, p.J, p.beta))
    return gh, gJ + gJ.transpose(-1, -2), gb


@pytest.mark.parametrize("masked", [False, True])
def test_with_exact_weights_values_and_gradients_equal_enumeration(masked):
    """All 2**n states with their exact weights: E_w[phi] = E[s] and E_w[s_i phi_j] = E[s_i s_j] exactly."""
    mask = torch.tensor([True, False, True, True, True]) if masked else None
    p = problem(5, 1, mask=mask)
    g = torch.randn(4, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    m_ref = exact.marginals(p)
    m_rb = differentiable_marginals(p, RaoBlackwell(get_sampler("exact")))
    torch.testing.assert_close(m_rb, m_ref, rtol=0, atol=1e-12)
    for a, b in zip(grads(m_rb, p, g), grads(m_ref, p, g)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_at_zero_couplings_one_read_is_exact():
    p = IsingProblem(torch.randn(3, 6, dtype=torch.float64), torch.zeros(6, 6, dtype=torch.float64), beta=1.3)
    for name in ("gibbs", "qemcmc"):
        m = differentiable_marginals(p, RaoBlackwell(get_sampler(name, burn_in=2), num_reads=1, seed=0))
        torch.testing.assert_close(m, torch.tanh(1.3 * p.h), rtol=0, atol=1e-12)


def test_at_zero_couplings_two_reads_give_the_exact_field_gradient():
    """At J = 0 the conditional means do not vary between reads, so the centred covariance estimate of the field
    gradient is exactly the true one (diagonal beta (1 - m^2)), from two reads of any sampler."""
    h = torch.randn(3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(4)).requires_grad_()
    J = torch.zeros(6, 6, dtype=torch.float64)
    g = torch.randn(3, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    want = 1.3 * (1 - torch.tanh(1.3 * h.detach()) ** 2) * g
    for name in ("gibbs", "qemcmc", "exact"):
        p = IsingProblem(h, J, beta=1.3)
        m = differentiable_marginals(p, RaoBlackwell(get_sampler(name), num_reads=2, seed=0))
        (gh,) = torch.autograd.grad((m * g).sum(), (h,))
        torch.testing.assert_close(gh, want, rtol=0, atol=1e-12)


def repeated(p, reps):
    """``reps`` independent copies of the single problem ``p`` as one batch (every copy gets its own reads)."""
    h = p.h.detach().expand(reps, -1).clone().requires_grad_()
    J = p.J.detach().expand(reps, -1, -1).clone().requires_grad_()
    beta = torch.full((reps,), float(p.beta.detach()), dtype=torch.float64, requires_grad=True)
    return IsingProblem(h, J, beta=beta)


def test_sampled_reads_are_unbiased_and_less_noisy_than_the_spin_average():
    """Exact Boltzmann reads, many independent repetitions of a small read count: the mean of the conditional
    estimate is the exact marginal (within Z standard errors of that mean) and its spread is below the spin
    average's, per spin."""
    p = repeated(problem(5, 3, batch=(), scale=0.4, grad=False), 2000)
    m_ref = exact.marginals(problem(5, 3, batch=(), scale=0.4, grad=False)).numpy()
    plain = differentiable_marginals(p, ReadsOnly(get_sampler("exact"), num_reads=8, seed=0)).detach().numpy()
    rb = differentiable_marginals(p, RaoBlackwell(get_sampler("exact"), num_reads=8, seed=0)).detach().numpy()
    se = rb.std(0, ddof=1) / np.sqrt(len(rb))
    assert np.all(np.abs(rb.mean(0) - m_ref) <= Z * se + 1e-12)
    # variance ratio: with 2000 repetitions an F-test margin at the 1e-6 level is about 1.25; weak couplings give
    # far more (the spin average's variance is (1 - m^2) / 8)
    assert np.all(rb.var(0, ddof=1) * 1.5 < plain.var(0, ddof=1))


@pytest.mark.parametrize("wrap", [RaoBlackwell, ReadsOnly])
def test_sampled_gradients_are_unbiased(wrap):
    """Gradients from a few exact reads, repeated independently, against autograd through enumeration: the mean
    over repetitions within Z standard errors (estimated from the repetitions). With 16 reads, a covariance without
    the finite-sample correction would be 15/16 of the truth, about 6 % low: far outside these errors."""
    one = problem(4, 5, batch=(), scale=0.6)
    g1 = torch.randn(4, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    ref = grads(exact.marginals(one), one, g1)
    reps = 2000
    p = repeated(one, reps)
    m = differentiable_marginals(p, wrap(get_sampler("exact"), num_reads=16, seed=1))
    gh, gJ, gb = torch.autograd.grad((m * g1).sum(), (p.h, p.J, p.beta))
    for x, r in ((gh, ref[0]), (gJ + gJ.transpose(-1, -2), ref[1]), (gb, ref[2])):
        x = x.numpy()
        se = x.std(0, ddof=1) / np.sqrt(reps)
        assert np.all(np.abs(x.mean(0) - r.numpy()) <= Z * se + 1e-9)


@pytest.mark.parametrize("param, factor", [("h", 4), ("J", 2)])
def test_gradients_are_less_noisy_than_the_spin_covariance(param, factor):
    """Weak couplings beside the fields (as in attention): the conditional estimator's field gradient (per entry)
    and coupling gradient (Cov(phi_j, s_k s_l) for j outside {k, l}; in total) spread far less over independent
    repetitions than the spin-read covariances (all unbiased: the tests above). With 2000 repetitions an F-test margin
    at the 1e-6 level is about 1.25; the factors asserted are 4 (h) and 2 (J)."""
    one = problem(6, 8, batch=(), scale=0.15)
    g1 = torch.randn(6, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    spread = {}
    for wrap in (RaoBlackwell, ReadsOnly):
        p = repeated(one, 2000)
        m = differentiable_marginals(p, wrap(get_sampler("exact"), num_reads=8, seed=2))
        (grad,) = torch.autograd.grad((m * g1).sum(), (p.h if param == "h" else p.J,))
        if param == "J":  # one coupling, two entries
            grad = (grad + grad.transpose(-1, -2)).flatten(1)
        var = grad.var(0, unbiased=True)
        spread[wrap] = var if param == "h" else var.sum()
    assert torch.all(spread[RaoBlackwell] * factor < spread[ReadsOnly]), spread


def test_persistent_chains_carry_the_estimator():
    chains = PersistentChains(num_chains=2, seed=0)
    bound = RaoBlackwell(get_sampler("qemcmc", burn_in=1), num_reads=2, chains=chains, seed=0).layer(0)
    assert bound.estimator == "conditional" and bound.readout == "shots"
    h = torch.randn(2, 1, 3, 3, dtype=torch.float64)
    m = attention_marginals(h, torch.zeros(1, 3, 3, dtype=torch.float64), sampling=bound)
    vis = torch.ones(3, 3, dtype=torch.bool).tril()
    torch.testing.assert_close(m[..., vis], torch.tanh(h)[..., vis], rtol=0, atol=1e-12)  # J = 0: exact
    assert chains.state("layer0").shape == (2, 1, 3, 2, 3)
    assert RaoBlackwell(get_sampler("statevector")).readout == "shots"  # reads, even from a differentiable sampler
    with pytest.raises(TypeError, match="Sampler declaring SamplerCapabilities"):
        RaoBlackwell(3)
    with pytest.raises(ValueError, match="unknown estimator"):
        Sampling(get_sampler("gibbs"), estimator="rb")
