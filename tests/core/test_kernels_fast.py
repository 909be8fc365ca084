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
