"""The statevector sampler's in-place path (rotating frame: real driver blocks, scratch buffers, the complex64 phase
recurrence) against its autograd path (complex driver blocks, one tensor per layer, the previous implementation)."""

from __future__ import annotations

import pytest
import torch

from hybrid_attention.backends import get_sampler
from hybrid_attention.backends.dqa.driver import rx_block
from hybrid_attention.backends.dqa.rotating_frame import apply_block, frame_phases, rotated_blocks
from hybrid_attention.backends.dqa.statevector import (
    _dqa_autograd,
    _energies_into,
    configuration_energies,
    dqa_statevector,
)
from hybrid_attention.circuits import DQASchedule

SCHEDULES = [
    DQASchedule(tau=1.0, steps=20),
    DQASchedule(tau=2.0, steps=7, order=2),
    DQASchedule(tau=0.7, steps=2),
    DQASchedule(tau=1.0, steps=1),
]


def problems(n, batch=5, seed=0, shared=False):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(batch, n, generator=g, dtype=torch.float64)
    U = torch.randn(n, n, generator=g, dtype=torch.float64).triu(1) if shared else None
    if U is None:
        U = torch.randn(batch, n, n, generator=g, dtype=torch.float64).triu(1)
    return h, U + U.transpose(-1, -2)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: f"K{s.steps}o{s.order}")
@pytest.mark.parametrize("n", [1, 2, 3, 5, 9])
def test_in_place_state_equals_the_autograd_path(n, schedule):
    h, J = problems(n, seed=n, shared=n == 5)
    want = _dqa_autograd(h, J, schedule, torch.complex128, 4)
    with torch.no_grad():
        got = dqa_statevector(h, J, schedule, dtype=torch.complex128)
        got64 = dqa_statevector(h, J, schedule, dtype=torch.complex64)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    # complex64: ~4e-7 as before the change (the recurrence cast every second slice)
    torch.testing.assert_close(got64.to(torch.complex128), want, rtol=0, atol=1e-6)


def test_sampler_probabilities_reuse_scratch_buffers_safely():
    """Two problem sets in a row through the scratch buffers: each result equals its own fresh computation."""
    sv = get_sampler("statevector", schedule=DQASchedule(tau=1.0, steps=6), dtype=torch.complex128)
    from hybrid_attention import IsingProblem

    a, b = (IsingProblem(*problems(6, batch=4, seed=s)) for s in (1, 2))
    pa, pb = sv.probabilities(a), sv.probabilities(b)
    for prob, p in ((a, pa), (b, pb)):
        want = _dqa_autograd(prob.h, prob.J, sv.schedule, torch.complex128, 4)
        torch.testing.assert_close(p, want.real**2 + want.imag**2, rtol=0, atol=1e-12)


@pytest.mark.parametrize("n", [1, 4, 7])
def test_energy_table_written_in_place_is_the_same(n):
    h, J = problems(n, seed=3)
    E = configuration_energies(h, J)
    assert torch.equal(_energies_into(h, J, torch.empty_like(E)), E)
    h1, J1 = problems(n, seed=4, shared=True)
    E1 = configuration_energies(h1, J1)
    assert torch.equal(_energies_into(h1, J1, torch.empty_like(E1)), E1)


@pytest.mark.parametrize("n", [3, 6, 9])
def test_rotated_layer_conjugated_by_the_frame_is_the_driver(n):
    """S R(x)^{(x) n} S^-1 psi = exp(i x sum X) psi, block by block, for a random complex state."""
    x = 0.61
    g = torch.Generator().manual_seed(n)
    psi = torch.randn(3, 1 << n, generator=g, dtype=torch.complex128)
    S = frame_phases(n, torch.complex128)
    z = psi * S.conj()
    for block in rotated_blocks(n, 4, x, torch.complex128):
        z = apply_block(z, torch.empty_like(z), block)
    full = torch.eye(1, dtype=torch.complex128)
    for _ in range(n):
        full = torch.kron(rx_block(1, x, torch.complex128, "cpu"), full)
    want = psi @ full.T
    torch.testing.assert_close(z * S, want, rtol=0, atol=1e-13)
