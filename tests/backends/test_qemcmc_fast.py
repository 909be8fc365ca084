"""The qemcmc sampler's per-call fast paths against the slow ones: the energy table of problems sharing their
couplings (one GEMM) against the doubling of ``configuration_energies``, and the numpy mean-field start against
``meanfield.mean_field`` (same iteration, same stopping rule)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention.backends.dqa.statevector import configuration_energies
from hybrid_attention.backends.mcmc.chain import _energy_table, _naive_mean_field
from hybrid_attention.backends.mcmc.meanfield import mean_field


def couplings(N, n, g, *, shared, scale=1.0):
    U = torch.randn(1 if shared else N, n, n, generator=g, dtype=torch.float64).triu(1) * scale
    J = U + U.transpose(-1, -2)
    return J.expand(N, n, n) if shared else J


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("n", [1, 2, 5, 11])
def test_energy_table_equals_the_doubling(n, shared):
    g = torch.Generator().manual_seed(n)
    h = torch.randn(7, n, generator=g, dtype=torch.float64)
    J = couplings(7, n, g, shared=shared)
    torch.testing.assert_close(_energy_table(h, J), configuration_energies(h, J), rtol=0, atol=1e-12)
    torch.testing.assert_close(_energy_table(h, J.contiguous()), configuration_energies(h, J), rtol=0, atol=1e-12)


@pytest.mark.parametrize("n", [1, 3, 7])
def test_energy_table_of_a_few_distinct_couplings_equals_the_doubling(n):
    """A merged run's problems: one shared J with a different set of spins decoupled per row (few distinct
    matrices)."""
    g = torch.Generator().manual_seed(20 + n)
    N = 12
    h = torch.randn(N, n, generator=g, dtype=torch.float64)
    J = couplings(N, n, g, shared=True)
    keep = (torch.arange(n)[None, :] <= (torch.arange(N) % n)[:, None]).double()  # row r sees spins 0..r mod n
    J = J * keep[:, :, None] * keep[:, None, :]
    torch.testing.assert_close(_energy_table(h, J), configuration_energies(h, J), rtol=0, atol=1e-12)


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("scale", [0.3, 3.0])  # converged, and stopped at max_iter (strong couplings)
@pytest.mark.parametrize("n", [1, 4, 10])
def test_numpy_mean_field_start_equals_mean_field(n, scale, shared, masked):
    g = torch.Generator().manual_seed(10 * n + masked)
    N = 9
    h = torch.randn(N, n, generator=g, dtype=torch.float64)
    J = couplings(N, n, g, shared=shared, scale=scale)
    beta = torch.rand(N, generator=g, dtype=torch.float64) + 0.5
    mask = torch.rand(N, n, generator=g) > 0.3 if masked else None
    if mask is not None:  # dropped spins: decoupled, no field (as the sampler hands them over)
        h, J = h * mask, J * mask[:, :, None] * mask[:, None, :]
    mk = None if mask is None else mask[:, None, :].double()
    want, _ = mean_field(h[:, None, :], J, beta[:, None], mk, method="naive", max_iter=200, tol=1e-6, warn=False)
    got = _naive_mean_field(
        h.numpy(),
        J.numpy(),
        beta.numpy()[:, None],
        None if mask is None else mask.double().numpy(),
        max_iter=200,
        tol=1e-6,
    )
    np.testing.assert_allclose(got, want[:, 0].numpy(), rtol=0, atol=1e-12)
