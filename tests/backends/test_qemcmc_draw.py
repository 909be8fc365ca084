"""The fused columns-mode proposal draw (``hybrid_attention/backends/mcmc/qemcmc_draw.py``, both kernels: its torch
GEMMs and the compiled loops of ``qemcmc_kernel.py``) against the slow path: simulate every chain's state
(``evolve_basis_states``, itself checked against one-hot simulation of every layer) and invert the CDF of its squared
amplitudes with the same uniforms."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention.backends.dqa.driver import rx_block
from hybrid_attention.backends.dqa.rotating_frame import rotation_block
from hybrid_attention.backends.mcmc import qemcmc_kernel
from hybrid_attention.backends.mcmc.qemcmc_draw import draw_basis_proposals
from hybrid_attention.backends.mcmc.qemcmc_engines import evolve_basis_states
from hybrid_attention.circuits.proposal import ProposalParams, proposal_layers

needs_numba = pytest.mark.skipif(not qemcmc_kernel.available(), reason="the compiled kernel needs numba")
KERNELS = ["torch", pytest.param("compiled", marks=needs_numba)]


@pytest.mark.parametrize("g", [1, 2, 3, 4])
def test_rotation_block_is_the_driver_in_the_rotating_frame(g):
    """exp(i x sum X) = S R(x) S^-1 on g qubits, S = diag(1, i)^(x) g."""
    x = 0.37
    bits = (np.arange(1 << g)[:, None] >> np.arange(g)) & 1
    S = np.diag(1j ** bits.sum(-1))
    want = rx_block(g, x, torch.complex128, "cpu").numpy()
    np.testing.assert_allclose(S @ rotation_block(g, x) @ S.conj().T, want, atol=1e-14)


def _slow_cdf(idx, E, a, b, steps, u):
    """The slow path's cumulative distributions ``(N C, 2**n)`` and each uniform's target ``u * total``."""
    psi = evolve_basis_states(idx, E, a, b, steps, dtype=torch.complex128)
    cdf = torch.cumsum(psi.real**2 + psi.imag**2, dim=-1)
    return cdf, torch.from_numpy(u) * cdf[:, -1]


def slow_draw(idx, E, a, b, steps, u):
    cdf, target = _slow_cdf(idx, E, a, b, steps, u)
    return torch.searchsorted(cdf, target[:, None]).clamp_(max=E.shape[-1] - 1).reshape(idx.shape).numpy()


def assert_draws_match(got, idx, E, a, b, steps, u, rtol=1e-9):
    """``got`` equals the slow path's inverse-CDF draws, except where rounding may move a draw: to a neighbouring
    bin, and only when the uniform's target lies within ``rtol`` (relative to the total) of the edge between the two
    bins. Two float64 computations (numba's and torch's kernels differ between CPUs) agree to ~1e-15, so ``1e-9``
    still fails every real error in the draw."""
    cdf, target = _slow_cdf(idx, E, a, b, steps, u)
    want = torch.searchsorted(cdf, target[:, None]).clamp_(max=E.shape[-1] - 1)[:, 0].numpy()
    got = np.asarray(got).reshape(-1)
    for r in np.flatnonzero(got != want):
        assert abs(int(got[r]) - int(want[r])) == 1, f"draw {r}: {got[r]} against {want[r]}, not a neighbouring bin"
        edge = float(cdf[r, min(got[r], want[r])])
        assert abs(float(target[r]) - edge) <= rtol * float(cdf[r, -1]), f"draw {r}: {got[r]} against {want[r]}"


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("shape", ["constant", "reverse"])
@pytest.mark.parametrize("steps", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 2, 4, 5, 9, 11])
def test_draws_equal_the_inverse_cdf_of_the_simulated_states(shape, steps, n, kernel):
    """complex128: the same proposal for every chain as the full simulation with the same uniform (torch: sub-chunked
    through several macro-chunks with a tiny cache limit, and in one piece), up to rounding at the bin edges
    (:func:`assert_draws_match`)."""
    g = torch.Generator().manual_seed(100 * n + steps)
    problems, chains = 7, 5
    E = torch.randn(problems, 1 << n, generator=g, dtype=torch.float64)
    idx = torch.randint(0, 1 << n, (problems, chains), generator=g)
    a, b = ProposalParams(gamma=0.45, time=7.0, steps=steps, shape=shape).slices(0.45, 7.0)
    u = np.random.default_rng(n).random(problems * chains)
    for limit in (1 << 10, 2 << 20):
        got = draw_basis_proposals(idx, E, a, b, steps, u, dtype=torch.complex128, cache_limit=limit, kernel=kernel)
        assert_draws_match(got, idx, E, a, b, steps, u)


@needs_numba
@pytest.mark.parametrize("top", [1, 2, 3, 4, 6])
@pytest.mark.parametrize("n", [1, 3, 7, 10])
def test_compiled_draws_equal_the_inverse_cdf_at_any_split_of_the_last_layer(n, top):
    """The compiled kernel rotates the last layer's ``top`` qubits on all chains, then each chain draws the rest bit
    by bit: every split (including ``top >= n``, the whole layer at once) gives the slow path's draws (complex128, up
    to rounding at the bin edges as in the test above)."""
    g = torch.Generator().manual_seed(7 * n + top)
    problems, chains = 4, 9
    E = torch.randn(problems, 1 << n, generator=g, dtype=torch.float64)
    idx = torch.randint(0, 1 << n, (problems, chains), generator=g)
    a, b = ProposalParams(steps=2).slices(0.3, 9.0)
    u = np.random.default_rng(top).random(problems * chains)
    got = qemcmc_kernel.draw(idx.numpy(), E.numpy(), proposal_layers(a, b, 2), u, np.float64, top=top)
    assert_draws_match(got, idx, E, a, b, 2, u)


@pytest.mark.parametrize("kernel", KERNELS)
def test_complex64_draws_differ_only_at_bin_edges(kernel):
    """complex64 (the default): amplitudes to float32 rounding, so a draw can differ only where its uniform lies that
    close to a bin edge of the inverse CDF: fewer than 4 of 4,000 draws at n = 12, as in a training step."""
    n, problems, chains = 12, 50, 80
    g = torch.Generator().manual_seed(0)
    E = torch.randn(problems, 1 << n, generator=g, dtype=torch.float64)
    idx = torch.randint(0, 1 << n, (problems, chains), generator=g)
    a, b = ProposalParams(steps=2).slices(0.4, 11.0)
    u = np.random.default_rng(0).random(problems * chains)
    got = draw_basis_proposals(idx, E.float(), a, b, 2, u, kernel=kernel)
    assert (got != slow_draw(idx, E, a, b, 2, u)).mean() < 1e-3


@pytest.mark.parametrize("kernel", KERNELS)
def test_draws_follow_the_proposal_distribution(kernel):
    """Many chains from one state: the empirical distribution of the proposals against |<s'|U|s>|^2 (a z-test per
    outcome with the tolerance from the number of draws)."""
    n, draws = 5, 40_000
    E = torch.randn(1, 1 << n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    idx = torch.full((1, draws), 11)
    a, b = ProposalParams(steps=3).slices(0.5, 4.0)
    u = np.random.default_rng(2).random(draws)
    got = draw_basis_proposals(idx, E, a, b, 3, u, dtype=torch.complex128, kernel=kernel)
    psi = evolve_basis_states(idx[:, :1], E, a, b, 3, dtype=torch.complex128)[0]
    q = (psi.real**2 + psi.imag**2).numpy()
    freq = np.bincount(got[0], minlength=1 << n) / draws
    assert np.all(np.abs(freq - q) <= 5 * np.sqrt(q * (1 - q) / draws) + 1e-12)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize(("problems", "chains", "n"), [(0, 8, 5), (3, 1, 5), (2, 3, 0), (1, 8, 1)])
def test_edge_shapes(problems, chains, n, kernel):
    """No problem, one chain, no spin (one state: every draw is 0, exactly, whatever the arithmetic), one spin: the
    shapes come back and the draws match the slow path's (complex128; which has no n = 0 case)."""
    E = torch.randn(problems, 1 << n, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
    idx = torch.randint(0, 1 << n, (problems, chains), generator=torch.Generator().manual_seed(1))
    u = np.random.default_rng(3).random(problems * chains)
    a, b = ProposalParams(steps=2).slices(0.4, 5.0)
    got = draw_basis_proposals(idx, E, a, b, 2, u, dtype=torch.complex128, kernel=kernel)
    assert got.shape == (problems, chains)
    if n == 0:
        np.testing.assert_array_equal(got, 0)
    elif problems:
        assert_draws_match(got, idx, E, a, b, 2, u)


def test_kernel_is_checked_before_any_work(monkeypatch):
    """An unknown kernel is refused by name; ``"compiled"`` without numba says how to get it, and ``"auto"`` then runs
    the torch kernel (the same draws as asking for it)."""
    E = torch.randn(2, 8, dtype=torch.float64)
    idx, u = torch.zeros(2, 3, dtype=torch.int64), np.linspace(0.05, 0.95, 6)
    a, b = ProposalParams(steps=1).slices(0.4, 5.0)
    with pytest.raises(ValueError, match="kernel must be one of .*got 'gpu'"):
        draw_basis_proposals(idx, E, a, b, 1, u, kernel="gpu")
    monkeypatch.setattr(qemcmc_kernel, "available", lambda: False)
    with pytest.raises(ImportError, match="needs numba"):
        draw_basis_proposals(idx, E, a, b, 1, u, kernel="compiled")
    auto = draw_basis_proposals(idx, E, a, b, 1, u, dtype=torch.complex128)
    # the same torch path twice on the same inputs in one process: a determinism check, not a float comparison
    np.testing.assert_array_equal(
        auto, draw_basis_proposals(idx, E, a, b, 1, u, dtype=torch.complex128, kernel="torch")
    )
