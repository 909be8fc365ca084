"""The two Gibbs kernels (compiled numba loop, torch fallback) against exact enumeration, each on its own, plus their
seeds and the kernel option. The samplers' other tests (tests/backends/test_classical.py) run the default kernel."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention import exact
from hybrid_attention.backends.mcmc import gibbs_kernel
from hybrid_attention.backends.mcmc.gibbs import AnnealingSampler, GibbsSampler
from tests.backends.test_classical import sk_problem, within_shot_tolerance

pytestmark = pytest.mark.usefixtures("one_thread")

KERNELS = [
    "torch",
    pytest.param(
        "compiled", marks=pytest.mark.skipif(not gibbs_kernel.numba_available(), reason="numba not installed")
    ),
]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("cls", [GibbsSampler, AnnealingSampler])
@pytest.mark.parametrize("n,beta", [(4, 2.0), (16, 2.0)])
def test_kernel_marginals_match_exact(kernel, cls, n, beta):
    rng = np.random.default_rng(7 * n + int(beta))
    pr = sk_problem(rng, n, 3, beta)
    N = 2000
    ss = cls(kernel=kernel).sample(pr, num_reads=N, seed=5)
    assert ss.info["kernel"] == kernel and ss.spins.shape == (3, N, n) and ss.spins.dtype == np.int8
    assert cls(kernel=kernel).properties["kernel"] == kernel
    assert within_shot_tolerance(ss.marginals(), exact.marginals(pr).numpy(), N).all()


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_masked_prefixes_and_thinning(kernel):
    """Causal prefixes (the bridge's padded call) with thinned records: marginals and correlations against exact,
    masked spins reported as 0; the honest N for the tolerance is the number of chains."""
    rng = np.random.default_rng(9)
    n = 8
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    pr = sk_problem(rng, n, n, 1.5, mask=mask)
    chains, N = 400, 1600
    ss = GibbsSampler(kernel=kernel, num_chains=chains, thinning=3).sample(pr, num_reads=N, seed=2)
    assert ss.info["records_per_chain"] == 4 and ss.spins.shape == (n, N, n)
    assert set(np.unique(ss.spins)) == {-1, 1}  # masked spins are free (uniform) in the reads
    ms = ss.marginals()
    assert (ms[~mask.numpy()] == 0).all()
    assert within_shot_tolerance(ms, exact.marginals(pr).numpy(), chains).all()
    C = np.clip(exact.correlations(pr).numpy(), -1.0, 1.0)  # the diagonal is 1 up to rounding
    assert within_shot_tolerance(ss.correlations(), C, chains).all()


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_seeds_reproduce(kernel):
    pr = sk_problem(np.random.default_rng(1), 6, 3, 1.0)
    g = GibbsSampler(kernel=kernel, burn_in=8)
    a, b = g.sample(pr, num_reads=32, seed=3).spins, g.sample(pr, num_reads=32, seed=3).spins
    assert np.array_equal(a, b)
    assert not np.array_equal(a, g.sample(pr, num_reads=32, seed=4).spins)
    gen = np.random.default_rng(0)
    assert not np.array_equal(g.sample(pr, num_reads=32, seed=gen).spins, g.sample(pr, num_reads=32, seed=gen).spins)
    assert not np.array_equal(a[0], a[1])  # problems draw from different streams


def test_kernel_option_and_fallback(monkeypatch):
    with pytest.raises(ValueError, match="kernel must be 'auto', 'compiled' or 'torch', got 'cuda'"):
        GibbsSampler(kernel="cuda")
    monkeypatch.setattr(gibbs_kernel, "numba_available", lambda: False)
    monkeypatch.setattr("hybrid_attention.backends.mcmc.gibbs.numba_available", lambda: False)
    assert GibbsSampler().kernel == "torch"  # auto falls back to pure torch without numba
    with pytest.raises(ImportError, match="pip install numba"):
        AnnealingSampler(kernel="compiled")


def test_compiled_kernel_rejects_an_empty_schedule():
    if not gibbs_kernel.numba_available():
        pytest.skip("numba not installed")
    h = torch.zeros(1, 1, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="factors"):
        gibbs_kernel.run_chains_compiled(h, torch.zeros(1, 2, 2), None, torch.ones(1, 1), [], 4)
