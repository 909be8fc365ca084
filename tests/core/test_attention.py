"""Boltzmann attention against a float64 brute force (itertools over configurations), closed forms and gradcheck."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention import exact, kernels
from hybrid_attention.attention import (
    MODES,
    BoltzmannAttention,
    attention_weights,
    boltzmann_attention,
    symmetric_couplings,
)
from hybrid_attention.backends import get_sampler
from hybrid_attention.sampling import Sampling
from tests.conftest import brute_force, random_couplings

pytestmark = pytest.mark.usefixtures("one_thread")


def reference_output(q, k, v, J, mode, causal, beta):
    """Brute-force float64 attention output for every (batch, head, query), docs/theory.md section 3 literally."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    B, H, T, d = q.shape
    out = np.zeros_like(v)
    for b in range(B):
        for hd in range(H):
            scores = q[b, hd] @ k[b, hd].T / np.sqrt(d)
            for i in range(T):
                vis = list(range(i + 1)) if causal else list(range(T))
                hs = scores[i, vis]
                if mode == "softmax":
                    w = np.exp(hs - hs.max())
                else:
                    fields = np.zeros_like(hs) if mode == "j" else hs
                    Jv = np.zeros((len(vis), len(vis))) if mode == "h" else np.asarray(J[hd])[np.ix_(vis, vis)]
                    _, m, _ = brute_force(fields, Jv, beta)  # only the visible keys are spins: dropped, not pinned
                    w = (1 + m) / 2
                out[b, hd, i] = (w / w.sum()) @ v[b, hd, vis]
    return out


@pytest.fixture
def qkvJ(rng):
    B, H, T, d = 2, 2, 6, 3
    q, k, v = (rng.normal(size=(B, H, T, d)) * 1.5 for _ in range(3))
    J = random_couplings(rng, T + 2, scale=0.7, batch=(H,))  # T' = T + 2: the leading block is used
    return q, k, v, J


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("mode", MODES)
def test_matches_brute_force(qkvJ, mode, causal):
    q, k, v, J = qkvJ
    beta = 0.8
    ref = reference_output(q, k, v, J[:, :6, :6], mode, causal, beta)
    t = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    got = boltzmann_attention(t(q), t(k), t(v), t(J), mode=mode, causal=causal, beta=beta)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10, atol=1e-12)
    got32 = boltzmann_attention(*(t(x).float() for x in (q, k, v, J)), mode=mode, causal=causal, beta=beta)
    assert got32.dtype == torch.float32
    np.testing.assert_allclose(got32.double().numpy(), ref, rtol=1e-4, atol=1e-5)


def test_couplings_matter_in_hj(qkvJ):
    q, k, v, J = (torch.tensor(x) for x in qkvJ)
    a = attention_weights(q @ k.transpose(-1, -2), J, mode="hj")
    b = attention_weights(q @ k.transpose(-1, -2), torch.zeros_like(J), mode="hj")
    assert (a - b).abs().max() > 1e-2


@pytest.mark.parametrize("causal", [True, False])
def test_j_mode_is_exactly_uniform(qkvJ, causal):
    q, k, v, J = (torch.tensor(x) for x in qkvJ)
    w = attention_weights(q @ k.transpose(-1, -2), J, mode="j", causal=causal)
    T = q.shape[2]
    vis = torch.ones(T, T, dtype=torch.float64).tril() if causal else torch.ones(T, T, dtype=torch.float64)
    assert torch.equal(w, (vis / vis.sum(-1, keepdim=True)).expand_as(w))
    # and the exact enumeration agrees (spin-flip symmetry: every marginal is 0 at h = 0)
    m = (
        kernels.causal_marginals(torch.zeros_like(w), J)
        if causal
        else kernels.bidirectional_marginals(torch.zeros_like(w), J)
    )
    assert m.abs().max() < 1e-12


@pytest.mark.parametrize("beta", [0.3, 1.0, 2.5])
def test_h_mode_is_normalised_sigmoid(rng, beta):
    h = torch.tensor(rng.normal(scale=3, size=(3, 2, 5, 5)))
    w = attention_weights(h, mode="h", beta=beta)
    s = torch.sigmoid(2 * beta * h) * torch.ones(5, 5, dtype=torch.float64).tril()
    torch.testing.assert_close(w, s / s.sum(-1, keepdim=True), rtol=1e-12, atol=1e-14)
    # h mode is hj with J = 0
    torch.testing.assert_close(w, attention_weights(h, torch.zeros(2, 5, 5, dtype=torch.float64), mode="hj", beta=beta))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_finite_for_huge_fields(rng, mode, dtype):
    T = 6
    h = torch.tensor(rng.choice([-1e4, 1e4, -3e3, 5.0], size=(2, 1, T, T)), dtype=dtype, requires_grad=True)
    hneg = torch.full((1, 1, T, T), -1e4, dtype=dtype, requires_grad=True)  # every visible key saturated negative
    J = torch.tensor(random_couplings(rng, T, batch=(1,)), dtype=dtype, requires_grad=True)
    for hh in (h, hneg):
        for causal in (True, False):
            w = attention_weights(hh, J, mode=mode, causal=causal)
            assert torch.isfinite(w).all()
            torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))
            if mode == "j":  # uniform: depends on nothing
                continue
            (w * torch.arange(T, dtype=dtype)).sum().backward()
            assert torch.isfinite(hh.grad).all() and (J.grad is None or torch.isfinite(J.grad).all())
            hh.grad = None
            J.grad = None


@pytest.mark.parametrize("mode", MODES)
def test_causal_outputs_ignore_the_future(rng, mode):
    q, k, v = (torch.tensor(rng.normal(size=(2, 1, 7, 4))) for _ in range(3))
    J = torch.tensor(random_couplings(rng, 7, batch=(1,)))
    out = boltzmann_attention(q, k, v, J, mode=mode)
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    for t in (q2, k2, v2):
        t[:, :, 4:] = torch.tensor(rng.normal(size=(2, 1, 3, 4)))
    out2 = boltzmann_attention(q2, k2, v2, J, mode=mode)
    torch.testing.assert_close(out[:, :, :4], out2[:, :, :4], rtol=0, atol=1e-13)
    assert (out[:, :, 4:] - out2[:, :, 4:]).abs().max() > 1e-3


def test_gradcheck_hj(rng):
    T = 3  # two heads with their own beta; small so the finite differences stay quick
    q, k, v = (torch.tensor(rng.normal(size=(1, 2, T, 2)), requires_grad=True) for _ in range(3))
    raw = torch.tensor(rng.normal(scale=0.5, size=(2, T, T)), requires_grad=True)
    beta = torch.tensor([0.7, 1.3], dtype=torch.float64, requires_grad=True)
    for causal in (True, False):

        def f(q, k, v, raw, beta, causal=causal):
            return boltzmann_attention(q, k, v, symmetric_couplings(raw), mode="hj", causal=causal, beta=beta)

        assert torch.autograd.gradcheck(f, (q, k, v, raw, beta))


@pytest.mark.parametrize(
    "kwargs, exc, words",
    [
        (dict(mode="nope"), ValueError, ["unknown attention mode", "softmax"]),
        (dict(mode=3), TypeError, ["mode must be a string"]),
        (dict(mode="hj", J=None), ValueError, ["needs couplings J"]),
        (dict(mode="hj", J=torch.zeros(2, 3, 3, dtype=torch.float64)), ValueError, ["T' >= T"]),
        (dict(mode="hj", J=torch.ones(1, 5, 5, dtype=torch.float64)), ValueError, ["zero diagonal"]),
        (dict(mode="hj", J=torch.triu(torch.ones(1, 5, 5, dtype=torch.float64), 1)), ValueError, ["symmetric"]),
        (dict(mode="hj", beta=0.0), ValueError, ["beta must be finite and > 0"]),
        (dict(mode="hj", beta=torch.ones(3)), ValueError, ["shape (H,)"]),
        (dict(mode="softmax", sampling=Sampling(get_sampler("exact"))), ValueError, ["does not use a sampler"]),
        (dict(mode="hj", sampling=object()), TypeError, ["sampling must be a Sampling"]),
        (dict(mode="hj", sampler=get_sampler("exact")), TypeError, ["sampler= was removed", "sampling=Sampling("]),
    ],
)
def test_bad_arguments(kwargs, exc, words):
    q = torch.zeros(1, 1, 5, 2, dtype=torch.float64)
    kw = dict(J=torch.zeros(1, 5, 5, dtype=torch.float64))
    kw.update(kwargs)
    with pytest.raises(exc) as info:
        boltzmann_attention(q, q, q, **kw)
    for w in words:
        assert w in str(info.value)


def test_too_many_spins_rejected_before_work():
    T = exact.MAX_SPINS + 1
    q = torch.zeros(1, 1, T, 1)
    with pytest.raises(ValueError, match="exact enumeration"):
        boltzmann_attention(q, q, q, torch.zeros(1, T, T), mode="hj")
    assert boltzmann_attention(q, q, q, mode="h").shape == q.shape  # closed forms have no limit


def test_module_couplings_stay_symmetric_after_optimiser_steps(rng):
    torch.manual_seed(0)
    att = BoltzmannAttention(8, 2, block_size=6, mode="hj", learn_beta=True)
    assert torch.equal(att.J, torch.zeros(2, 6, 6))
    opt = torch.optim.Adam(att.parameters(), lr=0.1)
    x = torch.randn(4, 6, 8)
    for _ in range(3):
        y = att(x)
        loss = (y**2).sum() + y[:, :, 0].sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    J = att.J
    assert J.abs().max() > 1e-3  # it learned something
    torch.testing.assert_close(J, J.transpose(1, 2), rtol=0, atol=0)
    assert torch.equal(torch.diagonal(J, dim1=1, dim2=2), torch.zeros(2, 6))
    assert att.log_beta.grad is not None and not torch.equal(att.beta, torch.ones(2))


def test_module_modes_and_shorter_sequences():
    x = torch.randn(2, 5, 8)
    for mode in MODES:
        att = BoltzmannAttention(8, 2, block_size=7, mode=mode)
        assert (att.J_raw is not None) == (mode in ("hj", "j"))
        assert att(x).shape == x.shape  # T = 5 < block_size: the leading 5 x 5 block of J is used
    with pytest.raises(ValueError, match="exceeds block_size"):
        BoltzmannAttention(8, 2, block_size=4)(x)
    with pytest.raises(ValueError, match="divisible"):
        BoltzmannAttention(8, 3, block_size=4)


def test_sampler_path_matches_exact(rng):
    bridge = pytest.importorskip("hybrid_attention.bridge")
    from hybrid_attention.backends import get_sampler

    q, k, v = (torch.tensor(rng.normal(size=(1, 1, 4, 3))) for _ in range(3))
    J = torch.tensor(random_couplings(rng, 4, scale=0.5, batch=(1,)))
    ref = boltzmann_attention(q, k, v, J, mode="hj")
    got = boltzmann_attention(q, k, v, J, mode="hj", sampling=Sampling(get_sampler("exact")))
    torch.testing.assert_close(got, ref, rtol=1e-8, atol=1e-10)
    assert bridge is not None


# ---------------------------------------------------------------------- hostile input
@pytest.mark.parametrize("mode", MODES)
def test_empty_batch(mode):
    q = torch.zeros(0, 2, 5, 3, dtype=torch.float64, requires_grad=True)
    J = torch.zeros(2, 5, 5, dtype=torch.float64)
    out = boltzmann_attention(q, q, q, J, mode=mode)
    assert out.shape == (0, 2, 5, 3)
    att = BoltzmannAttention(8, 2, block_size=6, mode=mode)
    assert att(torch.zeros(0, 6, 8)).shape == (0, 6, 8)


@pytest.mark.parametrize("mode", ["hj", "h", "j"])
def test_empty_batch_with_sampler(mode):
    from hybrid_attention.backends import get_sampler

    q = torch.zeros(0, 1, 4, 2, requires_grad=True)
    J = torch.zeros(1, 4, 4, requires_grad=True)
    for name in ("exact", "gibbs"):
        out = boltzmann_attention(q, q, q, J, mode=mode, sampling=Sampling(get_sampler(name), num_reads=8, seed=0))
        assert out.shape == (0, 1, 4, 2)


@pytest.mark.parametrize(
    "beta", [np.float32(2.0), np.float64(2.0), np.int32(2), torch.tensor(2.0), torch.tensor([2.0]), 2]
)
def test_module_accepts_any_real_scalar_beta(beta):
    att = BoltzmannAttention(4, 2, block_size=3, beta=beta)
    torch.testing.assert_close(att.beta, torch.full((2,), 2.0))


@pytest.mark.parametrize(
    "beta, exc, words",
    [
        (True, TypeError, "beta must be a real number"),
        ("2", TypeError, "beta must be a real number"),
        (float("nan"), ValueError, "beta must be finite and > 0"),
        (float("inf"), ValueError, "beta must be finite and > 0"),
        (0.0, ValueError, "beta must be finite and > 0"),
        (np.float32(-1.0), ValueError, "beta must be finite and > 0"),
        (torch.ones(2), TypeError, "real scalar"),
    ],
)
def test_module_rejects_bad_beta(beta, exc, words):
    with pytest.raises(exc, match=words):
        BoltzmannAttention(4, 2, block_size=3, beta=beta)


@pytest.mark.parametrize("seed", [1.9, True, 2.0])
def test_seed_must_be_int_generator_seedsequence_or_none(seed):
    from hybrid_attention.backends import get_sampler

    q = torch.randn(1, 1, 3, 2)
    J = torch.zeros(1, 3, 3)
    with pytest.raises(
        TypeError,
        match=r"seed must be an int, a numpy.random.Generator, a numpy.random.SeedSequence "
        r"or None, got",
    ):
        boltzmann_attention(q, q, q, J, sampling=Sampling(get_sampler("gibbs"), num_reads=4, seed=seed))
    out = boltzmann_attention(
        q, q, q, J, sampling=Sampling(get_sampler("gibbs"), num_reads=4, seed=np.random.SeedSequence(1))
    )
    assert out.shape == (1, 1, 3, 2)


@pytest.mark.parametrize("num_reads, exc", [(True, TypeError), (1.5, TypeError), (0, ValueError)])
def test_num_reads_validated(num_reads, exc):
    with pytest.raises(exc, match="num_reads must be an integer >= 1"):
        Sampling(get_sampler("gibbs"), num_reads=num_reads)


def test_forward_uses_the_unvalidated_kernel(monkeypatch):
    """The layer validates J and beta once per forward and calls kernels._causal_marginals directly (hot path)."""

    def public(*a, **k):
        raise AssertionError("the public (validating) kernel was called on the hot path")

    monkeypatch.setattr(kernels, "causal_marginals", public)
    monkeypatch.setattr(kernels, "bidirectional_marginals", public)
    att = BoltzmannAttention(8, 2, block_size=6, mode="hj")
    assert att(torch.randn(2, 6, 8)).shape == (2, 6, 8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sampled_weights_map_is_the_layers_rule_bit_for_bit_with_its_gradient(dtype):
    """The sampler route's marginals -> weights map (``attention._NormalisedWeights``, fewer passes) against the rule
    ``kernels.normalised_weights``: the weights bit for bit (its ``alpha`` and sums are exactly twice the rule's),
    including a saturated key (``m = -1``, clamped) and a row saturated everywhere (uniform), and the gradient bit for
    bit autograd's through the rule (the same operations in the same order in this process, on values that are each
    exactly twice or half the rule's: halving is exact in binary floating point); in float64 also by gradcheck."""
    from hybrid_attention import kernels
    from hybrid_attention.attention import _NormalisedWeights

    gen = torch.Generator().manual_seed(3)
    vis = torch.ones(12, 12, dtype=torch.bool).tril()
    m = ((torch.rand(2, 3, 12, 12, generator=gen, dtype=dtype) * 2 - 1) * vis).clamp(-1, 1)
    m[0, 0, 5, :3] = -1.0
    m[1, 2, 7, :8] = -1.0
    assert torch.equal(_NormalisedWeights.apply(m, vis), kernels.normalised_weights(m, vis))
    g = torch.randn(m.shape, generator=gen, dtype=dtype)
    grads = []
    for rule in (_NormalisedWeights.apply, kernels.normalised_weights):
        x = m.clone().requires_grad_()
        (rule(x, vis) * g).sum().backward()
        grads.append(x.grad)
    assert torch.equal(grads[0], grads[1])
    assert float(grads[0][1, 2, 7, :8].abs().max()) == 0.0  # clamped keys: no gradient, as the rule's clamp
    if dtype == torch.float64:
        inner = (m * 0.9).requires_grad_()  # away from the clamp's kink
        assert torch.autograd.gradcheck(lambda x: _NormalisedWeights.apply(x, vis), (inner,))
