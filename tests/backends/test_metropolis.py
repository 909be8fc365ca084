"""The ``mh-local`` and ``mh-uniform`` samplers: their chains against independently built transition matrices, the
proposal counter, persistent chains and validation (the registry-wide conformance suite covers the rest)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem, exact
from hybrid_attention.backends import get_sampler
from hybrid_attention.backends.mcmc.metropolis import MetropolisSampler

Z = 5.0


def problem(n=3, seed=0, beta=0.8):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(1, n, generator=g, dtype=torch.float64)
    J = torch.randn(n, n, generator=g, dtype=torch.float64).triu(1)
    return IsingProblem(h, J + J.T, beta=beta)


def brute_kernel(p: IsingProblem, proposal: str) -> np.ndarray:
    """The Metropolis kernel built state by state from the energy function (independent of backends.mcmc)."""
    n, beta = p.n, float(p.beta)
    h, J = p.h[0].numpy(), p.J.numpy()

    def energy(c):
        s = np.array([1 - 2 * ((c >> j) & 1) for j in range(n)], dtype=float)
        return -h @ s - sum(J[j, k] * s[j] * s[k] for j, k in itertools.combinations(range(n), 2))

    N = 1 << n
    P = np.zeros((N, N))
    for c in range(N):
        targets = [c ^ (1 << j) for j in range(n)] if proposal == "local" else list(range(N))
        for t in targets:
            P[c, t] += min(1.0, np.exp(-beta * (energy(t) - energy(c)))) / len(targets)
        P[c, c] += 1.0 - P[c].sum()
    return P


@pytest.mark.parametrize("name,proposal", [("mh-local", "local"), ("mh-uniform", "uniform")])
@pytest.mark.parametrize("moves", [1, 3])
def test_state_after_k_moves_follows_the_exact_kernel(name, proposal, moves):
    """Chains started in one configuration are distributed as ``e_c P^k`` after ``k`` moves (per configuration
    within Z standard errors of the number of chains)."""
    p = problem()
    chains = 20000
    start = np.tile(np.array([[1, -1, 1]], dtype=np.int8), (1, chains, 1))  # (1, chains, n)
    ss = get_sampler(name, burn_in=moves).sample(p, num_reads=chains, seed=3, initial_state=start)
    counts = np.bincount(_index(ss), minlength=8)
    c0 = int(((np.array([1, -1, 1]) == -1) * (1 << np.arange(3))).sum())
    want = np.linalg.matrix_power(brute_kernel(p, proposal), moves)[c0]
    got = counts / chains
    tol = Z * np.sqrt(want * (1 - want) / chains) + 1e-9
    assert (np.abs(got - want) <= tol).all(), (got, want)
    assert ss.info["proposals"] == chains * moves and ss.info["circuit_executions"] == 0


def _index(ss):
    from hybrid_attention.ising import spins_to_index

    return spins_to_index(np.asarray(ss.spins[0])).astype(np.int64)


@pytest.mark.parametrize("name", ["mh-local", "mh-uniform"])
def test_long_chains_reach_boltzmann_marginals(name):
    p = problem(n=4, seed=2)
    reads = 4000
    ss = get_sampler(name, burn_in=400).sample(p, num_reads=reads, seed=1)
    m_ref = exact.marginals(p).numpy()
    m = np.asarray(ss.marginals())
    assert (np.abs(m - m_ref) <= Z * np.sqrt((1 - m_ref**2) / reads) + 1e-9).all()


def test_proposal_counter_counts_chains_times_moves():
    p = problem(n=3)
    ss = get_sampler("mh-local", burn_in=5, thinning=2, num_chains=4).sample(p, num_reads=12, seed=0)
    # 3 records per chain: moves = burn_in + (records - 1) * thinning
    assert ss.info["moves"] == 5 + 2 * 2 and ss.info["proposals"] == 4 * 9


def test_validation():
    with pytest.raises(ValueError, match="proposal must be one of"):
        MetropolisSampler(proposal="quantum")
    with pytest.raises(TypeError):
        get_sampler("mh-uniform", params=None)  # no quantum proposal parameters here
    with pytest.raises(ValueError, match="start must be one of"):
        get_sampler("mh-local", start="hot")
