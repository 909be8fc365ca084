"""The attention kernels' path without autograd (coupling table scaled by beta into a reused buffer, exponentiated in
place; field factors in place; the normalisation applied to the marginals) against the autograd path (the functional
form, the previous implementation), and the one-GEMM coupling table against a direct evaluation."""

from __future__ import annotations

import pytest
import torch

from hybrid_attention import exact, kernels


def inputs(B, H, T, dtype, scale, seed):
    g = torch.Generator().manual_seed(seed)
    h = scale * torch.randn(B, H, T, T, generator=g, dtype=torch.float64)
    U = scale * torch.randn(H, T, T, generator=g, dtype=torch.float64).triu(1)
    beta = 0.5 + torch.rand(H, generator=g, dtype=torch.float64)
    return h.to(dtype), (U + U.transpose(-1, -2)).to(dtype), beta.to(dtype)


@pytest.mark.parametrize("scale", [0.3, 2.0, 40.0])  # factorised; upcast to float64 (float32); log space
@pytest.mark.parametrize("T", [1, 5, 11, 14])
def test_causal_forward_without_autograd_equals_the_autograd_path(T, scale):
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 2e-6)):
        h, J, beta = inputs(3, 2, T, dtype, scale, seed=T)
        with torch.no_grad():
            fast = kernels.causal_marginals(h, J, beta)
            fast_bi = kernels.bidirectional_marginals(h, J, beta)
        slow = kernels.causal_marginals(h.clone().requires_grad_(True), J, beta).detach()
        slow_bi = kernels.bidirectional_marginals(h.clone().requires_grad_(True), J, beta).detach()
        torch.testing.assert_close(fast, slow, rtol=0, atol=tol)
        torch.testing.assert_close(fast_bi, slow_bi, rtol=0, atol=tol)


def test_reused_table_buffer_gives_independent_results():
    """Two calls of different sizes and heads through the reused buffer: each equals its own autograd-path result."""
    a, b = inputs(4, 3, 9, torch.float64, 0.5, seed=1), inputs(2, 1, 13, torch.float64, 0.5, seed=2)
    with torch.no_grad():
        fa, fb = kernels.causal_marginals(*a), kernels.causal_marginals(*b)
    for (h, J, beta), f in ((a, fa), (b, fb)):
        want = kernels.causal_marginals(h.clone().requires_grad_(True), J, beta).detach()
        torch.testing.assert_close(f, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 7, 12])
def test_coupling_table_is_the_coupling_energy(n):
    g = torch.Generator().manual_seed(n)
    U = torch.randn(3, n, n, generator=g, dtype=torch.float64).triu(1)
    J = U + U.transpose(-1, -2)
    S = exact.enumerate_states(n, dtype=torch.float64)
    want = 0.5 * ((S @ J) * S).sum(-1)  # (3, 2^n), index c = cA + 2^a cB
    got = exact.coupling_table(J, n // 2)
    torch.testing.assert_close(got.reshape(3, -1), want, rtol=0, atol=1e-12)
    scale = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    out = torch.empty_like(got)
    scaled = exact.coupling_table(J, n // 2, scale=scale, out=out)
    assert scaled.data_ptr() == out.data_ptr()
    torch.testing.assert_close(scaled.reshape(3, -1), scale[:, None] * want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("heads", [1, 2])  # one head: plain matrix products; several: batched
@pytest.mark.parametrize("T", [1, 2, 9, 16])
@pytest.mark.parametrize("field", [1.0, 1e4])  # usual scores; fields that saturate every spin (finite, exact)
def test_factored_path_equals_the_float64_autograd_path(T, field, heads):
    """The no-autograd path that builds the coupling factor from two small exponential tables (``_factored_marginals``:
    no exp over the 2^n table) is taken for weak couplings, and in float32 agrees with the float64 functional path to
    2e-6 (float32 rounding, 6e-8, over the products of up to 2^8 terms and the final division, as the table path)
    plus the rounding of the field exponents: ``beta sum_j |h_j|`` in float32 is off by up to its eps times itself,
    which shifts each weight by as much relative (7e-4 at fields of 1e4: the table path's error too)."""
    h, J, beta = inputs(4, heads, T, torch.float64, 0.3, seed=10 + T)
    h = h * field
    a = T // 2
    hh = h[:, :, -1, :].transpose(0, 1).float()  # the longest prefix's rows, (H, R, T)
    with torch.no_grad():
        assert kernels._factored_marginals(hh, J.float(), beta.float(), a) is not None  # the factored path runs
        fast = kernels.causal_marginals(h.float(), J.float(), beta.float())
    want = kernels.causal_marginals(h.clone().requires_grad_(True), J, beta).detach()
    assert torch.isfinite(fast).all()
    exponent = float((beta[None, :, None] * h.abs().sum(-1)).max())  # the largest field exponent
    torch.testing.assert_close(fast.double(), want, rtol=0, atol=2e-6 + torch.finfo(torch.float32).eps * exponent)


def test_factored_path_declines_strong_cross_couplings():
    """Couplings between the halves beyond the dtype's range limit: the factored path returns None (the caller takes
    the table path, with its float64 upcast or log space), and the result still matches float64."""
    h, J, beta = inputs(2, 1, 10, torch.float32, 6.0, seed=3)
    S = exact.enumerate_states(5)
    w = beta[0] * (S @ J[0, 5:, :5])
    assert 2 * float(w.abs().sum(-1).max()) > exact.RANGE_LIMIT[torch.float32]
    with torch.no_grad():
        assert kernels._factored_marginals(h[:, :, -1].transpose(0, 1), J, beta, 5) is None
        got = kernels.causal_marginals(h, J, beta)
    want = kernels.causal_marginals(h.double().requires_grad_(True), J.double(), beta.double()).detach()
    torch.testing.assert_close(got.double(), want, rtol=0, atol=2e-6)
