"""Where qemcmc chains start decides the bias of a few-move read: the fields start against the random
start on a problem like an attention problem (strong fields, weak couplings), with the error computation of
``experiments/quantum_training/burn_in.py`` and tolerances from the number of chains."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem, exact
from hybrid_attention.backends.mcmc.qemcmc import QEMCMCSampler
from hybrid_attention.circuits.proposal import ProposalParams

Z = 5.0


@pytest.fixture(scope="module")
def burn_in():
    """The burn-in script as a module (its top level imports numpy and torch only)."""
    return importlib.import_module("experiments.quantum_training.burn_in")


def test_deviations_match_a_direct_computation(burn_in):
    rng = np.random.default_rng(0)
    spins = rng.choice(np.array([-1, 1], dtype=np.int8), size=(3, 50, 4))
    m_ref, c_ref = rng.uniform(-1, 1, (3, 4)), rng.uniform(-0.2, 0.2, (3, 4, 4))
    dm, dc = burn_in.deviations(spins, m_ref, c_ref)
    s = spins.astype(float)
    for b in range(3):
        m = s[b].mean(0)
        c = np.cov(s[b].T, bias=True)
        np.testing.assert_allclose(dm[b], m - m_ref[b], atol=1e-12)
        i, j = np.triu_indices(4, 1)
        np.testing.assert_allclose(dc[b], (c - c_ref[b])[i, j], atol=1e-12)
    assert burn_in.rms([dm, dc]) == pytest.approx(math.sqrt((np.sum(dm**2) + np.sum(dc**2)) / (dm.size + dc.size)))
    assert burn_in.noise_floor([np.array([0.0, 0.6])], 100) == pytest.approx(math.sqrt((1 + 0.64) / 2 / 100))
    with pytest.raises(ValueError, match="expected m_exact"):
        burn_in.deviations(spins, m_ref[:, :3], c_ref)


def test_fields_start_has_a_lower_few_move_bias_than_the_random_start(burn_in):
    """n = 5, strong fields, weak couplings (like a trained attention layer), 2 moves of 2-step proposals: the fields
    start's rms marginal error is below the random start's by more than 5 shot-noise standard errors."""
    g = torch.Generator().manual_seed(12)
    n, chains = 5, 2000
    h = 2.5 * torch.randn(4, n, generator=g, dtype=torch.float64)
    J = 0.1 * torch.randn(n, n, generator=g, dtype=torch.float64).triu(1)
    p = IsingProblem(h, J + J.T)
    m = exact.marginals(p).numpy()
    c = exact.correlations(p).numpy() - m[..., :, None] * m[..., None, :]
    sampler = QEMCMCSampler(params=ProposalParams(steps=2))
    err = {}
    for start in ("random", "fields"):
        ss = sampler.sample(p, num_reads=chains, num_chains=chains, burn_in=2, start=start, seed=3)
        err[start] = burn_in.rms([burn_in.deviations(ss.spins, m, c)[0]])
    floor = burn_in.noise_floor([m], chains)  # standard error of one marginal (rms over the entries)
    assert err["fields"] + Z * floor < err["random"], (err, floor)
    # the fields start is within shot noise of exact up to the (weak) couplings' effect on the marginals
    m0 = np.tanh(h.numpy())
    assert err["fields"] < Z * floor + float(np.sqrt(np.mean((m - m0) ** 2))), (err, floor)
