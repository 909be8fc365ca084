"""Exact hj weights where alpha = (1 + m) / 2 underflows (the attention-weight pointer of the bracket task).

Oracle: a float64 enumeration of ``log p(s_j = +1)`` written here (independent of the kernels), and the plain formula
``normalised_weights(marginals)``, which rows that do not underflow must reproduce bit for bit.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from hybrid_attention import kernels
from hybrid_attention.attention import attention_weights, boltzmann_attention


def _couplings(H, T, scale, gen, dtype):
    J = torch.randn(H, T, T, generator=gen, dtype=torch.float64) * scale
    J = torch.triu(J, 1)
    return (J + J.transpose(-1, -2)).to(dtype)


def _plain_weights(h, J, beta, causal):
    """The plain formula: marginals, then alpha = (1 + m) / 2 normalised (exact wherever alpha does not underflow)."""
    b = torch.full((h.shape[1],), float(beta), dtype=h.dtype)
    m = kernels._causal_marginals(h, J, b) if causal else kernels._bidirectional_marginals(h, J, b)
    T = h.shape[-1]
    vis = torch.ones(h.shape[-2], T, dtype=torch.bool)
    return kernels.normalised_weights(m, vis.tril() if causal else vis)


def _oracle_weights(h, J, beta, causal):
    """Float64 brute force: ``a_ij = softmax_j log p_i(s_j = +1)`` over query i's visible keys, by enumeration."""
    B, H, Tq, T = h.shape
    rows = []
    for b in range(B):
        for hd in range(H):
            for i in range(Tq):
                n = i + 1 if causal else T
                S = torch.tensor(list(itertools.product([1.0, -1.0], repeat=n)), dtype=torch.float64)
                Jn = J[hd, :n, :n].double()
                L = beta * (S @ h[b, hd, i, :n].double() + 0.5 * ((S @ Jn) * S).sum(-1))
                up = torch.stack([torch.logsumexp(L[S[:, j] > 0], 0) for j in range(n)])
                rows.append(torch.nn.functional.pad(torch.softmax(up, 0), (0, T - n)))
    return torch.stack(rows).reshape(B, H, Tq, T)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("causal", [True, False])
def test_bitwise_identical_on_normal_scores(dtype, causal, one_thread):
    gen = torch.Generator().manual_seed(0)
    B, H, T = 3, 2, 7
    h0 = torch.randn(B, H, T, T, generator=gen, dtype=torch.float64).to(dtype) * 1.5
    J0 = _couplings(H, T, 0.5, gen, dtype)
    g = torch.randn(B, H, T, T, generator=gen, dtype=torch.float64).to(dtype)
    out = []
    for fn in (
        lambda h, J: attention_weights(h, J, mode="hj", causal=causal),
        lambda h, J: _plain_weights(h, J, 1.0, causal),
    ):
        h, J = h0.clone().requires_grad_(), J0.clone().requires_grad_()
        w = fn(h, J)
        (w * g).sum().backward()
        out.append((w.detach(), h.grad, J.grad))
    for new, old in zip(out[0], out[1]):
        assert torch.equal(new, old)


@pytest.mark.parametrize("causal", [True, False])
def test_mixed_batch_keeps_normal_rows_bitwise(causal, one_thread):
    """Saturated rows go to the log-space path; the other rows' weights and score gradients are unchanged."""
    gen = torch.Generator().manual_seed(1)
    B, H, T = 4, 1, 6
    h0 = torch.randn(B, H, T, T, generator=gen)
    h0[1] = h0[1] - 45.0  # batch element 1: every spin pinned to -1, alpha rounds to 0
    h0[3, 0, 3:] = h0[3, 0, 3:] - 20.0  # some rows of element 3 only
    J0 = _couplings(H, T, 0.5, gen, torch.float32)
    g = torch.randn(B, H, T, T, generator=gen)
    grads = []
    for fn in (
        lambda h: attention_weights(h, J0, mode="hj", causal=causal),
        lambda h: _plain_weights(h, J0, 1.0, causal),
    ):
        h = h0.clone().requires_grad_()
        w = fn(h)
        (w * g).sum().backward()
        grads.append((w.detach(), h.grad))
    (w_new, g_new), (w_old, g_old) = grads
    bad = kernels._underflow_rows(
        kernels._causal_marginals(h0, J0, torch.ones(1))
        if causal
        else kernels._bidirectional_marginals(h0, J0, torch.ones(1)),
        torch.ones(T, T, dtype=torch.bool).tril() if causal else torch.ones(T, T, dtype=torch.bool),
    )
    assert bool(bad[1].any()) and bool(bad[3].any()) and not bool(bad[0].any())
    good = ~bad
    assert torch.equal(w_new[good], w_old[good])
    assert torch.equal(g_new[good], g_old[good])
    ref = _oracle_weights(h0.double(), J0.double(), 1.0, causal)
    assert torch.allclose(w_new.double(), ref, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("causal", [True, False])
def test_saturated_scores_match_float64_oracle(causal, one_thread):
    """Scores of -30..-60 pin every spin: the old weights fall back to uniform with zero gradients; the fix gives
    the oracle's weights (float32 tolerance) and gradients that match a float64 autograd reference."""
    gen = torch.Generator().manual_seed(2)
    B, H, T = 2, 2, 7
    h64 = -30.0 - 30.0 * torch.rand(B, H, T, T, generator=gen, dtype=torch.float64)
    J64 = _couplings(H, T, 1.0, gen, torch.float64)
    g = torch.randn(B, H, T, T, generator=gen, dtype=torch.float64)
    ref = _oracle_weights(h64, J64, 1.0, causal)
    vis = torch.ones(T, T, dtype=torch.bool)
    vis = vis.tril() if causal else vis
    multi = vis.sum(-1) >= 2
    uniform = vis.double() / vis.sum(-1, keepdim=True)
    assert float((ref - uniform)[..., multi, :].abs().amax()) > 0.1  # the oracle is far from uniform

    old = _plain_weights(h64.float(), J64.float(), 1.0, causal)
    assert torch.allclose(old[..., multi, :].double(), uniform.expand_as(old)[..., multi, :])  # the bug

    h, J = h64.float().requires_grad_(), J64.float().requires_grad_()
    w = attention_weights(h, J, mode="hj", causal=causal)
    assert torch.allclose(w.double(), ref, rtol=1e-4, atol=1e-6)
    (w.double() * g).sum().backward()

    hr, Jr = h64.clone().requires_grad_(), J64.clone().requires_grad_()
    (_oracle_weights(hr, Jr, 1.0, causal) * g).sum().backward()
    # J enters symmetrically: compare J_jk + J_kj (the split between the two triangles is a convention)
    sym = lambda G: G + G.transpose(-1, -2)  # noqa: E731
    for got, want in ((h.grad, hr.grad), (sym(J.grad), sym(Jr.grad))):
        assert torch.isfinite(got).all()
        assert float(want.norm()) > 1e-3  # the reference gradient is not trivially zero
        scale = float(want.abs().amax())
        assert torch.allclose(got.double(), want, rtol=1e-3, atol=1e-4 * scale)


def test_j_field_saturated_matches_oracle(one_thread):
    """Mode ``j`` with a strongly negative symmetry-breaking field takes the same exact path."""
    gen = torch.Generator().manual_seed(3)
    T = 6
    J = _couplings(1, T, 2.0, gen, torch.float32)
    h = torch.zeros(1, 1, T, T)
    w = attention_weights(h, J, mode="j", j_field=-25.0)
    ref = _oracle_weights(torch.full((1, 1, T, T), -25.0, dtype=torch.float64), J.double(), 1.0, True)
    assert torch.allclose(w.double(), ref, rtol=1e-4, atol=1e-6)


def test_log_alpha_free_spins_closed_form():
    """Independent spins: ``log alpha_j = log sigmoid(2 beta h_j)`` exactly, for any field (the fields of -1e4 and
    -400 take the per-spin log-sum-exp fallback, beyond float64's exponent range)."""
    beta = torch.tensor(0.7, dtype=torch.float64)
    for h in ([[-80.0, -3.0, 0.0, 2.5, 40.0]], [[-1e4, -400.0, 0.5, 3.0, -2.0]]):
        h = torch.tensor(h, dtype=torch.float64)
        la = kernels._log_alpha(h, torch.zeros(5, 5, dtype=torch.float64), beta)
        assert torch.allclose(la, torch.nn.functional.logsigmoid(2 * 0.7 * h), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("causal", [True, False])
def test_extreme_scores_fallback_matches_oracle(causal, one_thread):
    """Scores of several hundred (past float64's exponent range in the factorised product) take the per-spin
    log-sum-exp: weights match the oracle, gradients are finite and match the float64 reference."""
    gen = torch.Generator().manual_seed(5)
    B, H, T = 1, 1, 5
    h64 = -200.0 - 400.0 * torch.rand(B, H, T, T, generator=gen, dtype=torch.float64)
    J64 = _couplings(H, T, 3.0, gen, torch.float64)
    g = torch.randn(B, H, T, T, generator=gen, dtype=torch.float64)
    h = h64.float().requires_grad_()
    w = attention_weights(h, J64.float(), mode="hj", causal=causal)
    assert torch.allclose(w.double(), _oracle_weights(h64, J64, 1.0, causal), rtol=1e-4, atol=1e-6)
    (w.double() * g).sum().backward()
    hr = h64.clone().requires_grad_()
    (_oracle_weights(hr, J64, 1.0, causal) * g).sum().backward()
    assert torch.isfinite(h.grad).all()
    assert torch.allclose(h.grad.double(), hr.grad, rtol=1e-3, atol=1e-4 * float(hr.grad.abs().amax()))


def test_saturated_attention_trains(one_thread):
    """From queries/keys whose scores are all about -50 (every spin pinned), the gradient w.r.t. q and k is
    non-zero and 50 Adam steps on a pointer loss (-log a_i,target) reduce it (the plain formula, whose alpha underflows to 0, gives no gradient there)."""
    gen = torch.Generator().manual_seed(4)
    B, H, T, d = 8, 1, 8, 8
    direction = torch.randn(d, generator=gen)
    direction = direction / direction.norm()
    q = (direction * math.sqrt(50.0 * math.sqrt(d)) + 0.1 * torch.randn(B, H, T, d, generator=gen)).requires_grad_()
    k = (-direction * math.sqrt(50.0 * math.sqrt(d)) + 0.1 * torch.randn(B, H, T, d, generator=gen)).requires_grad_()
    J = torch.zeros(H, T, T)
    target = torch.stack([torch.randint(0, i + 1, (B,), generator=gen) for i in range(T)], dim=1)  # (B, T)
    h = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    assert float(h.detach().amax()) < -40.0

    def loss_fn():
        a = attention_weights((q @ k.transpose(-1, -2)) / math.sqrt(d), J, mode="hj")
        return -torch.log(a[:, 0].gather(-1, target[..., None]).clamp_min(1e-30)).mean()

    v = torch.randn(B, H, T, d, generator=gen)
    boltzmann_attention(q, k, v, J, mode="hj").square().sum().backward()
    assert float(q.grad.abs().amax()) > 0 and float(k.grad.abs().amax()) > 0
    q.grad = k.grad = None

    opt = torch.optim.Adam([q, k], lr=0.05)
    first = float(loss_fn().detach())
    for _ in range(50):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
    assert float(loss_fn().detach()) < first - 0.2


@pytest.mark.parametrize("causal", [True, False])
def test_log_path_gradcheck(causal, one_thread):
    """torch.autograd.gradcheck (float64) of the log-space rows w.r.t. scores, couplings and a per-head beta."""
    gen = torch.Generator().manual_seed(6)
    B, H, T = 1, 2, 4
    h = (-40.0 + torch.randn(B, H, T, T, generator=gen, dtype=torch.float64)).requires_grad_()
    J = _couplings(H, T, 1.0, gen, torch.float64).requires_grad_()
    beta = torch.tensor([1.0, 0.6], dtype=torch.float64, requires_grad=True)
    w = attention_weights(h, J, mode="hj", causal=causal, beta=beta)
    m = kernels._causal_marginals(h, J, beta) if causal else kernels._bidirectional_marginals(h, J, beta)
    vis = torch.ones(T, T, dtype=torch.bool)
    assert bool(kernels._underflow_rows(m, vis.tril() if causal else vis)[..., 1:].all())  # the log path is tested
    assert torch.isfinite(w).all()

    def f(h, J, beta):
        return attention_weights(h, (J + J.transpose(-1, -2)) / 2, mode="hj", causal=causal, beta=beta)

    assert torch.autograd.gradcheck(f, (h, J, beta), eps=1e-6, atol=1e-7, rtol=1e-4)
