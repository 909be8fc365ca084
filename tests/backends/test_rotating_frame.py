"""The statevector sampler's in-place path (rotating frame: real driver blocks, scratch buffers, the complex64 phase
recurrence) against its autograd path (complex driver blocks, one tensor per layer, the previous implementation)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention.backends import get_sampler
from hybrid_attention.backends.dqa.driver import rx_block
from hybrid_attention.backends.dqa.inplace import PAIR_MAX_SPINS, _energies_into, _recurrence_phases, energies64_into
from hybrid_attention.backends.dqa.rotating_frame import (
    apply_block,
    apply_block_to,
    block_operand,
    block_operators,
    frame_phases,
    rotated_blocks,
)
from hybrid_attention.backends.dqa.statevector import _dqa_autograd, configuration_energies, dqa_statevector
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


@pytest.mark.parametrize("shared", [False, True], ids=["per-problem-J", "shared-J"])
@pytest.mark.parametrize("n", [0, 1, 4, 10, PAIR_MAX_SPINS, PAIR_MAX_SPINS + 1])
def test_float64_energy_table_is_the_doubling(n, shared):
    """The in-place engine's float64 energies (one GEMM with the spin-product table up to PAIR_MAX_SPINS spins, the
    doubling beyond) against configuration_energies in float64, with the schedule's field and coupling scales. Both
    sum the same n + n (n - 1) / 2 terms in different orders: each differs from the exact sum by at most
    (n + n (n - 1) / 2) eps times the sum of the terms' magnitudes, so the two by at most twice that."""
    h, J = problems(n, batch=3, seed=n, shared=shared)
    schedule = DQASchedule(tau=1.0, steps=4, field_scale=2.0, coupling_scale=0.5)
    want = configuration_energies(2.0 * h, 0.5 * J)
    got = energies64_into(h, J, schedule, torch.empty_like(want))
    terms = 2.0 * h.abs().sum(-1) + 0.5 * J.abs().sum((-1, -2)) / 2  # (B,) or broadcast: sum_j |h_j| + sum_{j<k} |J_jk|
    tol = 2 * (n + n * (n - 1) // 2 + 1) * torch.finfo(torch.float64).eps * float(terms.max())
    torch.testing.assert_close(got, want, rtol=0, atol=tol)


@pytest.mark.parametrize("n", [3, 10])
def test_cached_block_operators_are_the_blocks(n):
    """block_operators: the lowest block's complex transpose and the other blocks broadcast over the view's batch
    (views of the cached blocks, no copies) give bit for bit apply_block_to's products (the same kernels on the same
    operands, in one process)."""
    z = torch.randn(6, 1 << n, generator=torch.Generator().manual_seed(n), dtype=torch.complex64)
    ops = block_operators(n, 4, 0.3, torch.complex64, 6)
    blocks = rotated_blocks(n, 4, 0.3, torch.complex64)
    assert block_operators(n, 4, 0.3, torch.complex64, 6) is ops  # cached per angle and row count
    for (lo, g, A), blk in zip(ops, blocks):
        assert (lo, g) == blk[:2]
        assert A.untyped_storage().data_ptr() == (blk[3] if lo == 0 else blk[2]).untyped_storage().data_ptr()
        want, got = torch.empty_like(z), torch.empty_like(z)
        apply_block_to(block_operand(z, blk), block_operand(want, blk), blk)
        view, out = block_operand(z, blk), block_operand(got, blk)
        torch.mm(view, A, out=out) if lo == 0 else torch.bmm(A, view, out=out)
        assert torch.equal(got, want)


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


@pytest.mark.parametrize("n", [3, 9, 10])
def test_operand_views_made_once_apply_every_layer(n):
    """The in-place loop makes each block's operand views of its two buffers once and reuses them for every layer's
    angles: views (no copies) whose products equal :func:`apply_block`'s on fresh buffers. The blocks are orthogonal,
    so every amplitude stays below its row's norm; each of the 3 x blocks applications adds at most 2**g roundings of
    float32 size to an element (BLAS may sum in another order on other buffers)."""
    g = torch.Generator().manual_seed(n)
    z0 = torch.randn(4, 1 << n, generator=g, dtype=torch.complex64)
    bufs = (z0.clone(), torch.empty_like(z0))
    views = [[block_operand(b, blk) for blk in rotated_blocks(n, 4, 0.3, torch.complex64)] for b in bufs]
    assert all(
        v.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() for b, vs in zip(bufs, views) for v in vs
    )
    want, cur = z0.clone(), 0
    for x in (0.3, -0.7, 1.1):
        for i, blk in enumerate(rotated_blocks(n, 4, x, torch.complex64)):
            want = apply_block(want, torch.empty_like(want), blk)
            apply_block_to(views[cur][i], views[1 - cur][i], blk)
            cur = 1 - cur
    blocks = rotated_blocks(n, 4, 0.3, torch.complex64)
    tol = 3 * len(blocks) * 16 * torch.finfo(torch.float32).eps * float(torch.linalg.vector_norm(z0, dim=-1).max())
    torch.testing.assert_close(bufs[cur], want, rtol=0, atol=tol)


@pytest.mark.parametrize("half", [True, False], ids=["first-slice-half-a-step", "other-first-slice"])
@pytest.mark.parametrize("stride", [1, 2, 3])
def test_recurrence_phases_equal_their_exponentials(half, stride):
    """ph = exp(-i b0 E), far = exp(-i stride step E) and near = exp(-i step E), however they are built (one cos/sin pass
    and complex128 powers when b0 is half a step). Each of the at most ``stride + 1`` roundings (angle, cos/sin, each
    product) is <= 2 eps relative, so the error is <= 2 (stride + 2) eps (1 + |angle|) against numpy's exponential."""
    E = torch.from_numpy(np.random.default_rng(0).normal(scale=8.0, size=(3, 64)))
    step = 0.0137
    b0 = step / 2 if half else 0.4 * step
    ph, far = torch.empty(3, 64, dtype=torch.complex128), torch.empty(3, 64, dtype=torch.complex128)
    near = torch.empty(3, 64, dtype=torch.complex64)
    _recurrence_phases(E, b0, step, stride, ph, far, near, torch.empty_like(E))
    En = E.numpy()
    tol = 2 * (stride + 2) * np.finfo(np.float64).eps * (1 + stride * step * np.abs(En).max())
    np.testing.assert_allclose(ph.numpy(), np.exp(-1j * b0 * En), rtol=0, atol=tol)
    np.testing.assert_allclose(far.numpy(), np.exp(-1j * stride * step * En), rtol=0, atol=tol)
    # near is the complex64 rounding of a value within 1e-15 of exp(-i step E): at most one float32 ulp (< eps32) away
    c64 = np.exp(-1j * step * En).astype(np.complex64)
    np.testing.assert_allclose(near.numpy(), c64, rtol=0, atol=np.finfo(np.float32).eps)
