"""Exact engine against a float64 brute force, closed forms, autograd and hypothesis properties."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_attention import IsingProblem, exact, kernels
from tests.conftest import brute_force, random_couplings, to_t


def _problem(rng, n, batch, shared, masked, beta=0.8, scale=1.0):
    h = rng.normal(scale=1.5, size=(*batch, n))
    J = random_couplings(rng, n, scale, () if shared else batch)
    mask = None
    if masked:
        mask = rng.random((*batch, n)) > 0.35
        mask[..., 0] = True
    return h, J, mask, IsingProblem(to_t(h), to_t(J), beta=beta, mask=None if mask is None else torch.from_numpy(mask))


@pytest.mark.parametrize("n", range(1, 11))
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_against_brute_force(rng, n, shared, masked):
    batch = (2, 3)
    h, J, mask, p = _problem(rng, n, batch, shared, masked)
    lz, m, C = exact.log_partition(p), exact.marginals(p), exact.correlations(p)
    assert lz.shape == batch and m.shape == (*batch, n) and C.shape == (*batch, n, n)
    for idx in np.ndindex(*batch):
        Jb = J if shared else J[idx]
        l2, m2, C2 = brute_force(h[idx], Jb, 0.8, None if mask is None else mask[idx])
        np.testing.assert_allclose(lz[idx].item(), l2, rtol=1e-12, atol=1e-10)
        np.testing.assert_allclose(m[idx].numpy(), m2, atol=1e-12)
        np.testing.assert_allclose(C[idx].numpy(), C2, atol=1e-12)


@pytest.mark.parametrize("n", [3, 7])
def test_probabilities_match_brute_force_and_index_order(rng, n):
    h, J, _, p = _problem(rng, n, (4,), True, False)
    P = exact.probabilities(p)
    S = exact.enumerate_states(n, dtype=torch.float64)
    # index c has s_j = 1 - 2 * bit_j(c): spin 0 is the least significant bit (qiskit little-endian)
    assert S[1, 0] == -1 and S[1, 1:].eq(1).all() if n > 1 else S[1, 0] == -1
    E = p.energy(S.expand(4, *S.shape))
    ref = torch.softmax(-0.8 * E, dim=-1)
    torch.testing.assert_close(P, ref, atol=1e-13, rtol=0)
    torch.testing.assert_close(P.sum(-1), torch.ones(4, dtype=torch.float64))


def test_one_spin_closed_form():
    h = torch.linspace(-3, 3, 13, dtype=torch.float64)[:, None]
    for beta in (0.3, 1.0, 2.5):
        m = exact.marginals(IsingProblem(h, beta=beta))[:, 0]
        torch.testing.assert_close(m, torch.tanh(beta * h[:, 0]), atol=1e-14, rtol=0)


def test_zero_couplings_factorise(rng):
    h = to_t(rng.normal(size=(5, 6)))
    p = IsingProblem(h, beta=0.7)
    torch.testing.assert_close(exact.marginals(p), torch.tanh(0.7 * h), atol=1e-13, rtol=0)
    C = exact.correlations(p)
    t = torch.tanh(0.7 * h)
    ref = t[:, :, None] * t[:, None, :]
    ref.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    torch.testing.assert_close(C, ref, atol=1e-13, rtol=0)
    torch.testing.assert_close(exact.log_partition(p), torch.log(2 * torch.cosh(0.7 * h)).sum(-1))


def test_pair_closed_form():
    J = torch.tensor([[0.0, 1.3], [1.3, 0.0]], dtype=torch.float64)
    C = exact.correlations(IsingProblem(torch.zeros(2, dtype=torch.float64), J, beta=0.9))
    assert abs(C[0, 1].item() - np.tanh(0.9 * 1.3)) < 1e-14


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_saturating_fields_stay_finite(dtype):
    h = torch.tensor([[1e4, -1e4, 3.0, 0.0], [-1e4, -1e4, -1e4, -1e4]], dtype=dtype)
    J = torch.tensor([[0, 2.0, 0, 0], [2.0, 0, -1.0, 0], [0, -1.0, 0, 0.5], [0, 0, 0.5, 0]], dtype=dtype)
    p = IsingProblem(h, J)
    m, lz = exact.marginals(p), exact.log_partition(p)
    assert torch.isfinite(m).all() and torch.isfinite(lz).all()
    assert m[0, 0] == 1 and m[0, 1] == -1 and (m[1] == -1).all()
    lz.sum().backward() if lz.requires_grad else None


def test_strong_couplings_take_the_log_space_path_and_match(rng):
    h, J, _, _ = _problem(rng, 8, (3,), True, False)
    J = J * 40.0  # beta * coupling-energy range far above the factorised path's limit
    for dtype in (torch.float32, torch.float64):
        p = IsingProblem(to_t(h, dtype), to_t(J, dtype))
        m = exact.marginals(p)
        assert torch.isfinite(m).all()
        for b in range(3):
            _, m2, _ = brute_force(h[b], J, 1.0)
            # float32 rounding of energies of size ~|J| n^2 ~ 1e3 shifts logits by ~1e-4
            np.testing.assert_allclose(m[b].double().numpy(), m2, atol=3e-4 if dtype == torch.float32 else 1e-12)


@pytest.mark.parametrize("scale, path", [(0.5, "factorised"), (8.0, "upcast"), (200.0, "logspace")])
def test_each_numerical_path_matches_brute_force(rng, monkeypatch, scale, path):
    calls = {"logspace": 0, "upcast": 0}
    real_log, real_up = exact.logspace_stats, exact.upcast_ok
    monkeypatch.setattr(
        exact, "logspace_stats", lambda *a: calls.__setitem__("logspace", calls["logspace"] + 1) or real_log(*a)
    )
    monkeypatch.setattr(
        exact, "upcast_ok", lambda *a: real_up(*a) and not calls.__setitem__("upcast", calls["upcast"] + 1)
    )
    T = 8
    h = rng.normal(size=(2, 1, T, T))
    J = random_couplings(rng, T, scale, (1,))
    m = kernels.causal_marginals(to_t(h, torch.float32), to_t(J, torch.float32))
    ref = _causal_reference(h, J, [1.0])
    np.testing.assert_allclose(m.double().numpy(), ref, atol=2e-3)
    assert (calls["logspace"] > 0) == (path == "logspace")
    assert (calls["upcast"] > 0) == (path == "upcast")


def test_float32_matches_float64(rng):
    h, J, _, p64 = _problem(rng, 10, (8,), True, False)
    p32 = p64.to(torch.float32)
    torch.testing.assert_close(exact.marginals(p32).double(), exact.marginals(p64), atol=2e-5, rtol=0)


@pytest.mark.parametrize("shared", [True, False])
def test_gradients_match_covariance_identities(rng, shared):
    n, beta = 5, 0.6
    h = to_t(rng.normal(size=(2, n))).requires_grad_(True)
    Jn = random_couplings(rng, n, 0.7, () if shared else (2,))
    Ju = torch.triu(to_t(Jn), 1).requires_grad_(True)
    p = IsingProblem.from_couplings(h, Ju, beta=beta)
    m = exact.marginals(p)
    g = to_t(rng.normal(size=(2, n)))
    gh, gJ = torch.autograd.grad((m * g).sum(), (h, Ju))
    # dL/dh = beta (E[u s] - E[u] E[s]), dL/dJ_kl = beta (E[u s_k s_l] - E[u] E[s_k s_l]), u = g . s
    S = exact.enumerate_states(n, dtype=torch.float64)
    P = exact.probabilities(p.detach())
    u = g @ S.T  # (2, 2^n)
    Eu = (P * u).sum(-1, keepdim=True)
    ref_h = beta * ((P * u) @ S - Eu * (P @ S))
    torch.testing.assert_close(gh, ref_h, atol=1e-12, rtol=0)
    ss = S[:, :, None] * S[:, None, :]
    ref_J = beta * (torch.einsum("bc,cjk->bjk", P * u, ss) - Eu[:, :, None] * torch.einsum("bc,cjk->bjk", P, ss))
    ref_J = torch.triu(ref_J, 1)
    ref_J = ref_J.sum(0) if shared else ref_J
    torch.testing.assert_close(gJ, ref_J, atol=1e-12, rtol=0)


@pytest.mark.parametrize("masked", [False, True])
def test_gradcheck_log_partition_marginals_correlations(rng, masked):
    n = 4
    h = to_t(rng.normal(size=(3, n))).requires_grad_(True)
    J = to_t(np.triu(rng.normal(size=(n, n)), 1)).requires_grad_(True)
    beta = torch.tensor(0.9, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[True, True, False, True]] * 3) if masked else None

    def f(h, J, beta):
        p = IsingProblem.from_couplings(h, J, beta=beta, mask=mask)
        return exact.log_partition(p), exact.marginals(p), exact.correlations(p)

    assert torch.autograd.gradcheck(f, (h, J, beta))


def test_gradients_float32_match_float64(rng):
    n = 9
    h64 = to_t(rng.normal(size=(4, n))).requires_grad_(True)
    J64 = to_t(np.triu(rng.normal(scale=0.4, size=(n, n)), 1)).requires_grad_(True)
    h32 = h64.detach().float().requires_grad_(True)
    J32 = J64.detach().float().requires_grad_(True)
    g = to_t(rng.normal(size=(4, n)))
    grads = []
    for h, J in ((h64, J64), (h32, J32)):
        m = exact.marginals(IsingProblem.from_couplings(h, J))
        grads.append(torch.autograd.grad((m * g.to(m.dtype)).sum(), (h, J)))
    for a, b in zip(*grads):
        torch.testing.assert_close(b.double(), a, atol=1e-4, rtol=1e-4)


def test_size_limit_raises_before_allocating():
    p = IsingProblem(torch.zeros(30), torch.ones(30, 30) - torch.eye(30))  # a full J: no band to use
    with pytest.raises(ValueError, match=r"n = 30 .*max_spins = 24.*gibbs.*meanfield"):
        exact.marginals(p)
    with pytest.raises(ValueError, match="max_spins = 3"):
        exact.log_partition(IsingProblem(torch.zeros(4)), max_spins=3)
    with pytest.raises(ValueError, match="above the limit"):
        kernels.causal_marginals(torch.zeros(1, 1, 30, 30), torch.zeros(1, 30, 30))


def test_n20_works_with_bounded_memory():
    g = torch.Generator().manual_seed(0)
    h = torch.randn(2, 20, generator=g, dtype=torch.float64)
    J = torch.triu(0.2 * torch.randn(20, 20, generator=g, dtype=torch.float64), 1)
    p = IsingProblem.from_couplings(h, J)
    m = exact.marginals(p)
    # check against the explicit softmax over all 2^20 states for one row (float64)
    S = exact.enumerate_states(20, dtype=torch.float64)
    Js = J + J.T
    L = S @ h[0] + 0.5 * ((S @ Js) * S).sum(-1)
    ref = torch.softmax(L, 0) @ S
    torch.testing.assert_close(m[0], ref, atol=1e-12, rtol=0)


def test_sample_matches_probabilities_within_shot_noise(rng):
    h, J, mask, p = _problem(rng, 4, (3,), True, True)
    N = 20000
    s = exact.sample(p, N, seed=7)
    assert s.shape == (3, N, 4) and s.dtype == torch.int8
    assert set(np.unique(s.numpy())) <= {-1, 1}
    m = exact.marginals(p).numpy()
    emp = s.double().mean(-2).numpy() * (mask if mask is not None else 1)
    tol = 5 * np.sqrt((1 - m**2) / N) + 1e-12
    assert (np.abs(emp - m) <= tol).all()
    # reproducible with the same seed, different with another
    assert torch.equal(s, exact.sample(p, N, seed=7))
    assert not torch.equal(s, exact.sample(p, N, seed=8))


def test_sample_rejects_bad_reads():
    with pytest.raises(ValueError, match="num_reads"):
        exact.sample(IsingProblem(torch.zeros(2)), 0)


# ---------------------------------------------------------------------- causal kernel
def _causal_reference(h, J, beta):
    B, H, T, _ = h.shape
    out = np.zeros((B, H, T, T))
    for b in range(B):
        for hd in range(H):
            for i in range(T):
                _, m, _ = brute_force(h[b, hd, i, : i + 1], J[hd, : i + 1, : i + 1], beta[hd])
                out[b, hd, i, : i + 1] = m
    return out


@pytest.mark.parametrize("T", [1, 2, 5, 9, 11])
def test_causal_kernel_against_brute_force(rng, T):
    B, H = 2, 2
    h = rng.normal(scale=2.0, size=(B, H, T, T))
    J = random_couplings(rng, T, 0.5, (H,))
    beta = np.array([0.7, 1.3])
    m = kernels.causal_marginals(to_t(h), to_t(J), to_t(beta))
    np.testing.assert_allclose(m.numpy(), _causal_reference(h, J, beta), atol=1e-12)
    assert (m.triu(1) == 0).all()


def test_causal_kernel_ignores_future_entries(rng):
    T = 7
    h = to_t(rng.normal(size=(1, 1, T, T)))
    J = to_t(random_couplings(rng, T, 0.5, (1,)))
    h2 = h + torch.triu(torch.full((T, T), 5.0, dtype=torch.float64), 1)
    torch.testing.assert_close(kernels.causal_marginals(h, J), kernels.causal_marginals(h2, J), atol=0, rtol=0)


def test_causal_kernel_uses_leading_block_of_J(rng):
    T = 6
    h = to_t(rng.normal(size=(2, 1, T, T)))
    J = to_t(random_couplings(rng, 10, 0.5, (1,)))
    torch.testing.assert_close(kernels.causal_marginals(h, J), kernels.causal_marginals(h, J[:, :T, :T].contiguous()))


def test_causal_kernel_gradcheck(rng):
    T = 5
    h = to_t(rng.normal(size=(2, 2, T, T))).requires_grad_(True)
    Ju = to_t(np.triu(rng.normal(scale=0.5, size=(2, T, T)), 1)).requires_grad_(True)
    beta = torch.tensor([0.8, 1.1], dtype=torch.float64, requires_grad=True)

    def f(h, Ju, beta):  # the strict upper triangle: finite differences keep J symmetric with a zero diagonal
        U = torch.triu(Ju, 1)
        return kernels.causal_marginals(h, U + U.transpose(-1, -2), beta)

    assert torch.autograd.gradcheck(f, (h, Ju, beta))


def test_causal_kernel_strong_couplings_and_saturation(rng):
    T = 8
    h = rng.normal(size=(2, 1, T, T))
    h[0, 0, :, 0] = 1e4
    J = random_couplings(rng, T, 30.0, (1,))
    for dtype in (torch.float32, torch.float64):
        m = kernels.causal_marginals(to_t(h, dtype), to_t(J, dtype))
        assert torch.isfinite(m).all()
        ref = _causal_reference(h, J, [1.0])
        np.testing.assert_allclose(m.double().numpy(), ref, atol=1e-4 if dtype == torch.float32 else 1e-10)


def test_bidirectional_kernel(rng):
    B, H, Tq, T = 2, 2, 3, 6
    h = rng.normal(size=(B, H, Tq, T))
    J = random_couplings(rng, T, 0.6, (H,))
    m = kernels.bidirectional_marginals(to_t(h), to_t(J), 0.9).numpy()
    for idx in np.ndindex(B, H, Tq):
        _, ref, _ = brute_force(h[idx], J[idx[1]], 0.9)
        np.testing.assert_allclose(m[idx], ref, atol=1e-12)


def test_kernel_shape_errors():
    with pytest.raises(ValueError, match=r"\(B, H, T, T\)"):
        kernels.causal_marginals(torch.zeros(2, 3, 4), torch.zeros(1, 4, 4))
    with pytest.raises(ValueError, match="T' >= T"):
        kernels.causal_marginals(torch.zeros(1, 1, 4, 4), torch.zeros(1, 3, 3))
    with pytest.raises(ValueError, match="beta"):
        kernels.causal_marginals(torch.zeros(1, 2, 4, 4), torch.zeros(2, 4, 4), beta=torch.ones(3))


# ---------------------------------------------------------------------- hypothesis properties
small = st.integers(min_value=1, max_value=6)


@st.composite
def problems(draw):
    n = draw(small)
    seed = draw(st.integers(0, 2**31 - 1))
    r = np.random.default_rng(seed)
    scale = draw(st.sampled_from([0.1, 1.0, 3.0]))
    h = r.normal(scale=scale, size=(2, n))
    J = random_couplings(r, n, scale)
    beta = draw(st.floats(0.1, 3.0))
    return h, J, beta


@settings(max_examples=40, deadline=None)
@given(problems())
def test_property_normalised_and_bounded(prob):
    h, J, beta = prob
    p = IsingProblem(to_t(h), to_t(J), beta=beta)
    P = exact.probabilities(p)
    torch.testing.assert_close(P.sum(-1), torch.ones(2, dtype=torch.float64))
    assert (P >= 0).all()
    m = exact.marginals(p)
    assert (m.abs() <= 1 + 1e-12).all()


@settings(max_examples=40, deadline=None)
@given(problems())
def test_property_flipping_h_flips_m(prob):
    h, J, beta = prob
    m = exact.marginals(IsingProblem(to_t(h), to_t(J), beta=beta))
    m_flip = exact.marginals(IsingProblem(to_t(-h), to_t(J), beta=beta))
    torch.testing.assert_close(m_flip, -m, atol=1e-12, rtol=0)


@settings(max_examples=40, deadline=None)
@given(problems(), st.integers(0, 1000))
def test_property_permuting_spins_permutes_marginals(prob, pseed):
    h, J, beta = prob
    perm = np.random.default_rng(pseed).permutation(h.shape[-1])
    m = exact.marginals(IsingProblem(to_t(h), to_t(J), beta=beta))
    mp = exact.marginals(IsingProblem(to_t(h[:, perm]), to_t(J[np.ix_(perm, perm)]), beta=beta))
    torch.testing.assert_close(mp, m[:, perm], atol=1e-12, rtol=0)


@settings(max_examples=30, deadline=None)
@given(problems(), st.floats(-50, 50))
def test_property_constant_offset_changes_nothing(prob, c):
    # a constant energy offset rescales Z only: marginals unchanged, log Z shifts by beta * c
    h, J, beta = prob
    p = IsingProblem(to_t(h), to_t(J), beta=beta)
    P = exact.probabilities(p)
    S = exact.enumerate_states(h.shape[-1], dtype=torch.float64)
    E = p.energy(S.expand(2, *S.shape)) + c
    ref = torch.softmax(-beta * E, -1)
    torch.testing.assert_close(P, ref, atol=1e-12, rtol=0)
    lz = torch.logsumexp(-beta * E, -1)
    torch.testing.assert_close(exact.log_partition(p) - beta * c, lz, atol=1e-9, rtol=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 6), st.integers(0, 10_000))
def test_property_causal_outputs_ignore_future_tokens(T, seed):
    r = np.random.default_rng(seed)
    h = to_t(r.normal(size=(1, 1, T, T)))
    J = to_t(random_couplings(r, T, 0.5, (1,)))
    t = int(r.integers(0, T - 1))
    h2 = h.clone()
    h2[..., t + 1 :, :] = to_t(r.normal(size=(1, 1, T - t - 1, T)))  # change queries after t
    a, b = kernels.causal_marginals(h, J), kernels.causal_marginals(h2, J)
    torch.testing.assert_close(a[..., : t + 1, :], b[..., : t + 1, :], atol=0, rtol=0)


# ---------------------------------------------------------------------- hostile input
def test_empty_batch_gives_empty_results():
    J = torch.tensor([[0.0, 0.4], [0.4, 0.0]], dtype=torch.float64)
    p = IsingProblem(torch.zeros(0, 2, dtype=torch.float64), J)
    assert exact.marginals(p).shape == (0, 2)
    assert exact.log_partition(p).shape == (0,)
    assert exact.correlations(p).shape == (0, 2, 2)
    assert exact.probabilities(p).shape == (0, 4)
    assert exact.sample(p, 5, seed=0).shape == (0, 5, 2)
    assert exact.marginals(IsingProblem(torch.zeros(3, 0, 2))).shape == (3, 0, 2)
    h = torch.zeros(0, 2, 4, 4, dtype=torch.float64, requires_grad=True)
    Jh = torch.zeros(2, 4, 4, dtype=torch.float64)
    m = kernels.causal_marginals(h, Jh)
    assert m.shape == (0, 2, 4, 4)
    m.sum().backward()
    assert h.grad.shape == h.shape
    assert kernels.bidirectional_marginals(torch.zeros(0, 2, 3, 4), Jh.float()).shape == (0, 2, 3, 4)
    assert kernels.shared_marginals(torch.zeros(0, 2, 4), Jh.float()).shape == (0, 2, 4)


def _kernels():
    return {
        "causal": lambda h, J, beta=1.0: kernels.causal_marginals(h, J, beta),
        "bidirectional": lambda h, J, beta=1.0: kernels.bidirectional_marginals(h, J, beta),
        "shared": lambda h, J, beta=1.0: kernels.shared_marginals(h[:, :, 0], J, beta),
    }


@pytest.mark.parametrize("kernel", ["causal", "bidirectional", "shared"])
def test_public_kernels_validate_raw_tensors(rng, kernel):
    f = _kernels()[kernel]
    T = 4
    h = to_t(rng.normal(size=(2, 1, T, T)))
    J = to_t(random_couplings(rng, T, 0.5, (1,)))
    f(h, J)  # valid input passes
    bad_h = h.clone()
    bad_h[0, 0, 0, 0] = float("nan")  # key 0 of query 0: visible to every kernel
    with pytest.raises(ValueError, match="h .*must be finite"):
        f(bad_h, J)
    for beta in (0.0, -1.0, float("inf"), float("nan"), torch.tensor([-0.5])):
        with pytest.raises(ValueError, match="beta must be finite and > 0"):
            f(h, J, beta)
    with pytest.raises(TypeError, match="beta"):
        f(h, J, True)
    upper = torch.triu(J, 1)  # only the upper triangle filled in: refused, not read as half the couplings
    with pytest.raises(ValueError, match="J must be symmetric"):
        f(h, upper)
    badJ = J.clone()
    badJ[0, 1, 2] = badJ[0, 2, 1] = float("inf")
    with pytest.raises(ValueError, match="J must be finite"):
        f(h, badJ)


@pytest.mark.parametrize("kernel", ["causal", "bidirectional", "shared", "loop"])
def test_kernels_refuse_a_nonzero_diagonal_of_J_before_any_work(kernel, rng, monkeypatch):
    """J has no self-couplings (docs/theory.md section 2): a nonzero diagonal is refused, naming it, not dropped."""
    T = 5
    h = to_t(rng.normal(size=(2, 2, T, T)))
    J = to_t(random_couplings(rng, T, 0.5, (2,)))
    Jd = J + torch.diag_embed(to_t(rng.normal(size=(2, T))))
    run = {
        "causal": lambda J: kernels.causal_marginals(h, J),
        "bidirectional": lambda J: kernels.bidirectional_marginals(h, J),
        "shared": lambda J: kernels.shared_marginals(h[:, :, 0], J),
        "loop": lambda J: kernels.causal_marginals_loop(h, J),
    }[kernel]

    def work(*a, **k):
        raise AssertionError("the enumeration started before J was refused")

    with monkeypatch.context() as mp:
        for name in ("_causal_marginals", "_bidirectional_marginals", "_shared_marginals"):
            mp.setattr(kernels, name, work)
        mp.setattr(exact, "enumerate_states", work)
        with pytest.raises(ValueError, match=r"J must have a zero diagonal \(no self-couplings\), got max \|J_jj\| ="):
            run(Jd)
    assert run(J).shape[-1] == T  # the same couplings with a zero diagonal are fine


def test_causal_marginals_loop_validates(rng):
    T = 3
    h = to_t(rng.normal(size=(1, 1, T, T)))
    with pytest.raises(ValueError, match="symmetric"):
        kernels.causal_marginals_loop(h, torch.triu(to_t(random_couplings(rng, T, 0.5, (1,))), 1))


def test_sample_validates_reads_seed_and_size():
    p = IsingProblem(torch.zeros(4, 3))
    with pytest.raises(TypeError, match="num_reads"):
        exact.sample(p, True)
    with pytest.raises(TypeError, match="num_reads"):
        exact.sample(p, 10.0)
    with pytest.raises(TypeError, match=r"seed must be .*got float 1.9"):
        exact.sample(p, 10, seed=1.9)
    with pytest.raises(TypeError, match=r"seed must be .*got bool True"):
        exact.sample(p, 10, seed=True)
    with pytest.raises(ValueError, match=r"needs an estimated .* above the memory budget"):
        exact.sample(p, 10**12, seed=0)
    a = exact.sample(p, 10, seed=np.random.SeedSequence(3))
    b = exact.sample(p, 10, seed=np.random.SeedSequence(3))
    assert torch.equal(a, b)


def test_enumerate_states_rejects_non_integer_sizes():
    with pytest.raises(TypeError, match="n must be an integer"):
        exact.enumerate_states(2.5)


def test_table_marginals_and_correlations_of_the_exact_table(rng):
    """Read out of a probability table over configurations, they give the oracle's marginals and correlations."""
    p = IsingProblem(to_t(rng.normal(size=(2, 3, 5))), to_t(random_couplings(rng, 5, 0.7, (2, 3))), beta=0.9)
    P = exact.probabilities(p)
    torch.testing.assert_close(exact.table_marginals(P), exact.marginals(p), atol=1e-12, rtol=0)
    torch.testing.assert_close(exact.table_correlations(P), exact.correlations(p), atol=1e-12, rtol=0)
    np.testing.assert_allclose(exact.table_marginals(P.numpy()).numpy(), exact.marginals(p).numpy(), atol=1e-12)
    one = torch.zeros(8, dtype=torch.float64)
    one[6] = 1.0  # the configuration of index 6 = bits 011: s = (+1, -1, -1)
    assert exact.table_marginals(one).tolist() == [1.0, -1.0, -1.0]
    with pytest.raises(ValueError, match=r"2\*\*n configurations, got shape \(2, 6\)"):
        exact.table_marginals(torch.ones(2, 6))
