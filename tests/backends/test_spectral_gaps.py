"""``mcmc.spectral_gaps`` against transition matrices built independently, state by state (and, for the quantum
proposal, from the numpy oracle of the proposal circuit), with eigenvalues of the non-symmetric matrix."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends.mcmc.analysis import KERNELS, kernel_matrices, spectral_gaps
from hybrid_attention.circuits.proposal import ProposalParams, proposal_matrix

FIXED = ProposalParams(gamma=0.45, time=6.0, steps=8)


def problems(n, batch, seed, scale=1.0, beta=1.0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(batch, n, generator=g, dtype=torch.float64) * scale
    J = torch.randn(n, n, generator=g, dtype=torch.float64).triu(1) * scale
    return IsingProblem(h, J + J.T, beta=beta)


def brute(h, J, beta, proposal):
    """Independent kernel: energies by the formula, proposals by definition, Metropolis / heat-bath by loops."""
    n = len(h)

    def energy(c):
        s = np.array([1 - 2 * ((c >> j) & 1) for j in range(n)], dtype=float)
        return -h @ s - sum(J[j, k] * s[j] * s[k] for j, k in itertools.combinations(range(n), 2))

    N = 1 << n
    E = np.array([energy(c) for c in range(N)])
    if proposal == "qemcmc":
        Q = proposal_matrix(h, J, FIXED)  # numpy unitary of the proposal circuit
    P = np.zeros((N, N))
    for c in range(N):
        for t in range(N):
            if t == c:
                continue
            d = E[t] - E[c]
            if proposal == "local":
                q = 1.0 / n if bin(c ^ t).count("1") == 1 else 0.0
                P[c, t] = q * min(1.0, np.exp(-beta * d))
            elif proposal == "uniform":
                P[c, t] = min(1.0, np.exp(-beta * d)) / N
            elif proposal == "heat-bath":
                P[c, t] = (1.0 / n) / (1.0 + np.exp(beta * d)) if bin(c ^ t).count("1") == 1 else 0.0
            else:
                P[c, t] = Q[c, t] * min(1.0, np.exp(-beta * d))
        P[c, c] = 1.0 - P[c].sum()
    lam = np.sort(np.abs(np.linalg.eigvals(P)))
    return 1.0 - lam[-2]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_gaps_match_independent_matrices(n):
    p = problems(n, batch=3, seed=n, beta=0.9)
    gaps = spectral_gaps(p, params=FIXED)
    assert set(gaps) == set(KERNELS)
    for name, g in gaps.items():
        assert g.shape == (3,)
        for b in range(3):
            want = brute(p.h[b].numpy(), p.J.numpy(), 0.9, name)
            assert abs(g[b] - want) < 1e-8, (name, b, g[b], want)


def test_batch_shape_is_kept_and_proposals_selected():
    g = torch.Generator().manual_seed(0)
    p = IsingProblem(torch.randn(2, 3, 3, generator=g, dtype=torch.float64), torch.zeros(3, 3, dtype=torch.float64))
    gaps = spectral_gaps(p, proposals=("uniform",))
    assert list(gaps) == ["uniform"] and gaps["uniform"].shape == (2, 3)


def test_kernel_matrices_are_stochastic_with_boltzmann_stationary():
    p = problems(3, batch=1, seed=9)
    Ps, E, pi = kernel_matrices(p, params=FIXED)
    for P in Ps.values():
        np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-12)
        np.testing.assert_allclose(pi @ P, pi, atol=1e-12)


def test_rejects_bad_input_before_work():
    with pytest.raises(ValueError, match="n <= 12"):
        spectral_gaps(IsingProblem(torch.zeros(1, 13)))
    with pytest.raises(ValueError, match="proposals must be"):
        spectral_gaps(IsingProblem(torch.zeros(1, 3)), proposals=("gibbs",))
    with pytest.raises(TypeError, match="IsingProblem"):
        spectral_gaps(np.zeros(3))
