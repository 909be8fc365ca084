"""The banded transfer-matrix engine (SPEC 3b) against enumeration, an independent numpy oracle, closed forms and
gradcheck; its bad inputs."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem, banded, banded_block, checks, exact, kernels
from hybrid_attention.attention import BoltzmannAttention, attention_weights
from hybrid_attention.model import Transformer, TransformerConfig

F64 = torch.float64


@pytest.fixture(params=["block", "split", "scaled", "log"])
def engine(request, monkeypatch):
    """Run a test through each engine: the block engine (the default dispatch), the block engine with its transfer
    matrices factorised over half-windows at every band from 2 (by default only from ``SPLIT_MIN_W``), or with it
    switched off the per-position probability-domain sweep (forced, every 8 positions) or the log-space one."""
    if request.param == "split":
        monkeypatch.setattr(banded_block, "SPLIT_MIN_W", 2)
    elif request.param != "block":
        limit = {torch.float32: 1e9, torch.float64: 1e9} if request.param == "scaled" else {}
        monkeypatch.setattr(banded, "_SCALED_LIMIT", limit)
        monkeypatch.setattr(banded, "_USE_BLOCK", False)
    return request.param


@pytest.fixture
def block_paths(monkeypatch):
    """Count which path the block engine took: ``fast`` (every field in the posterior, explicit backward) or
    ``own-field`` (each spin's own field left out, autograd), ``fallback`` (handed to the per-position sweeps)."""
    seen = {"fast": 0, "own-field": 0, "fallback": 0}
    for fn in (banded._BlockSweepFn, banded._DenseBlockSweepFn):  # factorised and dense transfer matrices

        def spy(*args, apply=fn.apply):
            out, status = apply(*args)
            seen[("fast", "fallback", "own-field")[int(status)]] += 1
            return out, status

        monkeypatch.setattr(fn, "apply", spy)
    return seen


@pytest.fixture(params=["dense", "split"])
def split(request, monkeypatch):
    """The block engine with dense transfer matrices, or factorised over half-windows at every band from 2."""
    monkeypatch.setattr(banded_block, "SPLIT_MIN_W", 99 if request.param == "dense" else 2)
    return request.param


def band_J(n: int, W: int, gen: torch.Generator, *, batch: tuple[int, ...] = (), scale: float = 1.0) -> torch.Tensor:
    """A random symmetric ``J (*batch, n, n)``, zero diagonal, zero beyond key distance ``W``."""
    J = torch.randn(*batch, n, n, generator=gen, dtype=F64) * scale
    d = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
    J = torch.triu(J * ((d >= 1) & (d <= W)), 1)
    return J + J.transpose(-1, -2)


# ---------------------------------------------------------------------- oracles
@pytest.mark.parametrize("W", range(1, 9))
def test_equals_enumeration_float64(W, engine):
    gen = torch.Generator().manual_seed(W)
    n = 20
    h = torch.randn(3, n, generator=gen, dtype=F64) * 1.5
    p = IsingProblem(h, band_J(n, W, gen), beta=0.8)
    m_band = exact.marginals(p, method="banded")
    m_enum = exact.marginals(p, method="enumerate")
    assert (m_band - m_enum).abs().max() < 1e-12
    assert torch.equal(exact.marginals(p), m_band)  # auto: a band narrower than n - 1 takes the transfer matrix


@pytest.mark.parametrize("W", range(1, 7))
def test_causal_rows_equal_enumeration(W, engine):
    gen = torch.Generator().manual_seed(10 + W)
    B, H, T = 2, 2, 12
    h = torch.randn(B, H, T, T, generator=gen, dtype=F64) * 2
    J = band_J(T, W, gen, batch=(H,))
    beta = torch.tensor([1.0, 0.6], dtype=F64)
    la = banded.layer_log_alpha(h, banded.diagonals(J, W), beta)
    m = kernels.causal_marginals(h, J, beta)
    vis = torch.ones(T, T, dtype=torch.bool).tril()
    assert (la.exp() - (1 + m) / 2).abs()[..., vis].max() < 1e-12
    assert torch.isneginf(la[..., ~vis]).all()
    w_band = attention_weights(h, J, beta=beta, band=W)
    w_enum = attention_weights(h, J, beta=beta)
    assert (w_band - w_enum).abs().max() < 1e-12


def test_kernels_dispatch_on_structure():
    gen = torch.Generator().manual_seed(4)
    T, W = 10, 2
    h = torch.randn(2, 1, T, T, generator=gen, dtype=F64)
    J = band_J(T, W, gen, batch=(1,))
    m = kernels.causal_marginals(h, J)  # a band: the transfer matrix
    assert (m - kernels.causal_marginals_loop(h, J)).abs().max() < 1e-12  # one enumeration per query
    long = exact.MAX_SPINS + 16
    hl = torch.randn(1, 1, long, long, generator=gen, dtype=F64)
    ml = kernels.causal_marginals(hl, band_J(long, W, gen, batch=(1,)))  # past the enumeration limit
    assert torch.isfinite(ml).all() and (ml.triu(1) == 0).all()
    with pytest.raises(ValueError, match="above the limit"):
        kernels.causal_marginals(hl, band_J(long, long - 1, gen, batch=(1,)))  # a full J: refused


def test_bidirectional_rows_equal_enumeration():
    gen = torch.Generator().manual_seed(3)
    h = torch.randn(2, 1, 5, 9, generator=gen, dtype=F64)
    J = band_J(9, 2, gen, batch=(1,))
    w_band = attention_weights(h, J, causal=False, band=2)
    w_enum = attention_weights(h, J, causal=False)
    assert (w_band - w_enum).abs().max() < 1e-12


def numpy_chain_marginals(h: np.ndarray, J: np.ndarray, W: int, beta: float) -> np.ndarray:
    """Independent oracle: <s_j> of one chain by a plain probability-domain transfer matrix with per-step scaling.

    States are tuples (s_{j-W+1}, ..., s_j) of real spins only (no ghosts: the first W positions use shorter windows).
    """
    n = len(h)
    states = [list(itertools.product((1, -1), repeat=min(j + 1, W))) for j in range(n)]
    index = [{s: k for k, s in enumerate(st)} for st in states]

    def weight(j: int, s: tuple) -> float:  # s: window ending at j (last entry s_j), of length min(j + 1, W + 1)
        e = h[j] * s[-1] + sum(J[j - d, j] * s[-1] * s[-1 - d] for d in range(1, len(s)))
        return beta * e

    def steps(j: int):  # (previous state, new state, log weight) for position j >= 1
        for prev in states[j - 1]:
            for sj in (1, -1):
                full = prev + (sj,)
                yield index[j - 1][prev], index[j][full[-min(j + 1, W) :]], weight(j, full)

    trans = [None] + [list(steps(j)) for j in range(1, n)]
    fwd = [np.array([math.exp(weight(0, s)) for s in states[0]])]
    fwd[0] /= fwd[0].sum()
    for j in range(1, n):
        a = np.zeros(len(states[j]))
        for p, q, lw in trans[j]:
            a[q] += fwd[-1][p] * math.exp(lw)
        fwd.append(a / a.sum())
    bwd = [None] * n
    bwd[-1] = np.ones(len(states[-1]))
    for j in range(n - 1, 0, -1):
        b = np.zeros(len(states[j - 1]))
        for p, q, lw in trans[j]:
            b[p] += bwd[j][q] * math.exp(lw)
        bwd[j - 1] = b / b.sum()
    m = np.empty(n)
    for j in range(n):
        post = fwd[j] * bwd[j]
        sj = np.array([s[-1] for s in states[j]])
        m[j] = (post * sj).sum() / post.sum()
    return m


@pytest.mark.parametrize("W", [1, 3, 5])
def test_equals_numpy_oracle_at_n_1024(W, engine):
    n = 1024
    rng = np.random.default_rng(W)
    h = rng.normal(size=n)
    J = np.zeros((n, n))
    for d in range(1, W + 1):
        v = rng.normal(scale=0.7, size=n - d)
        J += np.diag(v, d) + np.diag(v, -d)
    m = exact.marginals(IsingProblem(torch.from_numpy(h[None]), torch.from_numpy(J), beta=0.9))[0].numpy()
    ref = numpy_chain_marginals(h, J, W, 0.9)
    assert np.abs(m - ref).max() < 1e-11


# ---------------------------------------------------------------------- closed forms, numerics, gradients
def test_closed_forms():
    h = torch.linspace(-3, 3, 300, dtype=F64)
    m = exact.marginals(IsingProblem(h[None], torch.zeros(300, 300, dtype=F64), beta=0.7), method="banded")
    assert (m[0] - torch.tanh(0.7 * h)).abs().max() < 1e-13
    chain = torch.diag(torch.linspace(-2, 2, 499, dtype=F64), 1)
    p = IsingProblem(torch.zeros(1, 500, dtype=F64), chain + chain.T)
    assert exact.marginals(p).abs().max() < 1e-13  # W = 1, h = 0: spin-flip symmetric, every m = 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_finite_for_huge_fields(dtype, engine):
    gen = torch.Generator().manual_seed(5)
    T, W = 40, 4
    h = (torch.randn(2, 2, T, T, generator=gen, dtype=F64) * 1e4).to(dtype)
    h[0, 0] = -1e4  # every key of a row pinned down: (1 + m) / 2 would be 0 for all of them
    J = band_J(T, W, gen, batch=(2,), scale=3.0).to(dtype)
    la = banded.layer_log_alpha(h, banded.diagonals(J, W), torch.ones(2, dtype=dtype))
    vis = torch.ones(T, T, dtype=torch.bool).tril()
    assert torch.isfinite(la[..., vis]).all()
    w = torch.softmax(la, -1)
    assert torch.isfinite(w).all()
    assert (w.sum(-1) - 1).abs().max() < 10 * torch.finfo(dtype).eps * T


def test_huge_fields_equal_the_log_space_enumeration(engine):
    gen = torch.Generator().manual_seed(15)
    T, W = 10, 3
    h = torch.randn(1, 1, T, T, generator=gen, dtype=F64) * 1e4
    h[0, 0, -1] = -1e4  # the last row: every key pinned down
    J = band_J(T, W, gen, scale=3.0)
    la = banded.layer_log_alpha(h, banded.diagonals(J[None], W), torch.ones(1, dtype=F64))[0, 0, -1]
    ref = kernels._log_alpha(h[0, 0, -1:], J, torch.tensor(1.0, dtype=F64))[0]  # enumeration in log space
    assert (la - ref).abs().max() < 1e-12 * 2e4 * T


def test_float32_matches_float64(engine):
    gen = torch.Generator().manual_seed(6)
    T, W = 96, 5
    h = torch.randn(2, 1, T, T, generator=gen, dtype=F64) * 3
    c = banded.diagonals(band_J(T, W, gen, batch=(1,)), W)
    la64 = banded.layer_log_alpha(h, c, torch.ones(1, dtype=F64))
    la32 = banded.layer_log_alpha(h.float(), c.float(), torch.ones(1))
    vis = torch.ones(T, T, dtype=torch.bool).tril()
    # each of the ~2 T log-add-exp steps rounds once, on values of size <= T log 2 + sum |beta h|
    tol = 4 * T * torch.finfo(torch.float32).eps * float(h.abs().max() * 2 + T)
    assert (la32.double() - la64)[..., vis].abs().max() < tol


def test_gradcheck(engine):
    gen = torch.Generator().manual_seed(7)
    h = torch.randn(1, 2, 6, 6, generator=gen, dtype=F64, requires_grad=True)
    c = torch.randn(2, 2, 6, generator=gen, dtype=F64, requires_grad=True)
    beta = torch.tensor([0.9, 1.3], dtype=F64, requires_grad=True)
    vis = torch.ones(6, 6, dtype=torch.bool).tril()
    assert torch.autograd.gradcheck(lambda h, c, b: banded.layer_log_alpha(h, c, b)[..., vis], (h, c, beta))
    hr = torch.randn(3, 7, generator=gen, dtype=F64, requires_grad=True)
    cr = torch.randn(3, 3, 7, generator=gen, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda h, c: banded.log_marginals(h, c, 0.8), (hr, cr))


@pytest.mark.parametrize("W", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("causal", [True, False])
def test_block_backward_gradcheck(W, causal, block_paths, split):
    gen = torch.Generator().manual_seed(20 + W)
    T = 2 * W + 3  # not a multiple of W: padded slots and ghost positions
    h = torch.randn(1, 2, T if causal else 3, T, generator=gen, dtype=F64, requires_grad=True)
    c = torch.randn(2, W, T, generator=gen, dtype=F64, requires_grad=True)
    beta = torch.tensor([0.9, 1.3], dtype=F64, requires_grad=True)
    vis = torch.ones(T, T, dtype=torch.bool).tril() if causal else torch.ones(3, T, dtype=torch.bool)
    f = lambda h, c, b: banded.layer_log_alpha(h, c, b, causal=causal)[..., vis]  # noqa: E731
    assert torch.autograd.gradcheck(f, (h, c, beta), fast_mode=W > 2)  # fast mode: random projections
    assert block_paths["fast"] > 0 and block_paths["own-field"] == block_paths["fallback"] == 0


@pytest.mark.parametrize("W", range(1, 9))
@pytest.mark.parametrize("path", ["fast", "own-field"])
def test_block_backward_equals_autograd_through_the_reference(W, path, block_paths, split, monkeypatch):
    gen = torch.Generator().manual_seed(30 + W)
    B, H, T = 2, 2, 3 * W + 2
    h = torch.randn(B, H, T, T, generator=gen, dtype=F64, requires_grad=True)
    c = (torch.randn(H, W, T, generator=gen, dtype=F64) * 0.7).requires_grad_(True)
    beta = torch.tensor([1.1, 0.7], dtype=F64, requires_grad=True)
    g = torch.randn(B, H, T, T, generator=gen, dtype=F64).tril()
    if path == "own-field":  # as if the fields were too large to read the marginals with every field included
        monkeypatch.setattr(banded, "_FAST_LIMIT", {F64: -1.0})

    def grads():
        la = banded.layer_log_alpha(h, c, beta)
        return la, torch.autograd.grad((la.masked_fill(g == 0, 0.0) * g).sum(), (h, c, beta))

    la, got = grads()
    assert block_paths[path] == 1 and block_paths["fallback"] == 0
    monkeypatch.setattr(banded, "_USE_BLOCK", False)  # autograd through the per-position sweep
    la_ref, ref = grads()
    vis = torch.ones(T, T, dtype=torch.bool).tril()
    assert (la - la_ref)[..., vis].abs().max() < 1e-12
    for a, b in zip(got, ref):
        assert (a - b).abs().max() < 1e-10 * max(1.0, float(b.abs().max()))


def test_block_engine_hands_strong_couplings_to_the_sweeps(block_paths):
    gen = torch.Generator().manual_seed(13)
    T, W = 24, 4
    h = torch.randn(1, 1, T, T, generator=gen)
    c = banded.diagonals(band_J(T, W, gen, batch=(1,), scale=6.0), W).float()  # a block span far above 40
    la = banded.layer_log_alpha(h, c, torch.ones(1))
    assert block_paths["fallback"] == 1
    la64 = banded.layer_log_alpha(h.double(), c.double(), torch.ones(1, dtype=F64))  # float64: the block engine
    assert block_paths["fast"] == 1
    vis = torch.ones(T, T, dtype=torch.bool).tril()
    assert (la.double() - la64)[..., vis].abs().max() < 1e-4 * float(la64[..., vis].abs().max())


def test_autograd_equals_enumeration_gradient():
    gen = torch.Generator().manual_seed(8)
    T, W = 9, 3
    h = torch.randn(2, 1, T, T, generator=gen, dtype=F64, requires_grad=True)
    J = band_J(T, W, gen, batch=(1,)).requires_grad_(True)
    g = torch.randn(2, 1, T, T, generator=gen, dtype=F64)
    grads = [torch.autograd.grad((attention_weights(h, J, band=b) * g).sum(), (h, J)) for b in (W, 0)]
    (gh_band, gJ_band), (gh_enum, gJ_enum) = grads
    assert (gh_band - gh_enum).abs().max() < 1e-11
    # the band reads J_{j-d, j} (upper triangle), enumeration both triangles: compare per coupling, J_jk + J_kj
    sym = lambda g: g + g.transpose(-1, -2)  # noqa: E731
    inside = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs() <= W  # out of the band: no parameter
    assert (sym(gJ_band) - sym(gJ_enum))[..., inside].abs().max() < 1e-11
    assert (gJ_band[..., ~inside] == 0).all()


def test_wide_couplings_fall_back_to_the_log_space_sweep():
    gen = torch.Generator().manual_seed(12)
    T, W = 30, 3
    h = torch.randn(1, 1, T, T, generator=gen, dtype=F64)
    c = banded.diagonals(band_J(T, W, gen, batch=(1,), scale=8.0), W)  # can underflow float32, not float64
    beta = torch.ones(1, dtype=F64)
    assert banded._scaled_period(c, beta, torch.float32) == 0 and banded._scaled_period(c, beta, F64) > 0
    la32 = banded.layer_log_alpha(h.float(), c.float(), beta.float())
    la64 = banded.layer_log_alpha(h, c, beta)
    vis = torch.ones(T, T, dtype=torch.bool).tril()
    assert torch.isfinite(la32[..., vis]).all()
    assert (la32.double() - la64)[..., vis].abs().max() < 1e-4 * float(la64[..., vis].abs().max())


# ---------------------------------------------------------------------- the model
def test_band_model_equals_full_model_with_the_same_couplings():
    torch.manual_seed(0)
    cfg = dict(vocab_size=11, block_size=10, n_embd=16, n_head=2)
    full, band = Transformer(TransformerConfig(**cfg)), Transformer(TransformerConfig(**cfg, band=3))
    band.load_state_dict({k: v for k, v in full.state_dict().items() if not k.endswith("J_raw")}, strict=False)
    with torch.no_grad():
        band.blocks[0].attn.J_raw.normal_()
        full.blocks[0].attn.J_raw.copy_(band.blocks[0].attn.J)
    full.double(), band.double()
    idx = torch.randint(0, 11, (3, 10))
    assert (full(idx)[0] - band(idx)[0]).abs().max() < 1e-12


def test_toeplitz_loads_at_a_longer_block():
    short = BoltzmannAttention(16, 2, block_size=128, band=4, band_shape="toeplitz")
    with torch.no_grad():
        short.J_raw.normal_()
    long = BoltzmannAttention(16, 2, block_size=512, band=4, band_shape="toeplitz")
    long.load_state_dict(short.state_dict())
    assert torch.equal(long.J[:, :128, :128], short.J)
    assert torch.equal(long.J[:, 300, 302], short.J[:, 0, 2])  # one value per distance
    y = long(torch.randn(1, 512, 16))
    assert torch.isfinite(y).all()


def test_long_block_trains_finite():
    torch.manual_seed(1)
    model = Transformer(TransformerConfig(vocab_size=7, block_size=64, n_embd=16, band=2, band_shape="toeplitz"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    idx = torch.randint(0, 7, (4, 64))
    for _ in range(3):
        _, loss = model(idx, idx)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert torch.isfinite(loss)
    assert model.blocks[0].attn.J_raw.abs().sum() > 0


# ---------------------------------------------------------------------- bad input
def test_band_above_the_memory_budget(monkeypatch):
    monkeypatch.setattr(checks, "MEMORY_BUDGET", 1 << 20)
    with pytest.raises(ValueError, match=r"banded engine .* band W = 12.*memory budget"):
        banded.layer_log_alpha(torch.zeros(1, 1, 40, 40), torch.zeros(1, 12, 40), torch.ones(1))
    model = Transformer(TransformerConfig(vocab_size=5, block_size=40, n_embd=8, band=12))
    with pytest.raises(ValueError, match="memory budget"):
        model(torch.zeros(1, 40, dtype=torch.long))


@pytest.mark.parametrize(
    ("kw", "err", "match"),
    [
        (dict(band=-1), ValueError, r"band must be >= 0.*got -1"),
        (dict(band=16), ValueError, r"band = 16 must be below block_size = 16"),
        (dict(band=20), ValueError, r"band = 20 must be below block_size = 16"),
        (dict(band=2.0), TypeError, r"band must be an int.*2\.0"),
        (dict(band=2, band_shape="diagonal"), ValueError, r"band_shape must be one of .*'diagonal'"),
    ],
)
def test_bad_band_settings(kw, err, match):
    with pytest.raises(err, match=match):
        TransformerConfig(vocab_size=5, block_size=16, **kw)
    with pytest.raises(err, match=match.replace("TransformerConfig.", "")):
        BoltzmannAttention(8, 1, block_size=16, **kw)


def test_negative_band_in_the_functional_form():
    with pytest.raises(ValueError, match=r"band must be >= 0.*got -2"):
        attention_weights(torch.zeros(1, 1, 4, 4), torch.zeros(1, 4, 4), band=-2)


def test_full_J_refused_by_the_banded_path():
    gen = torch.Generator().manual_seed(9)
    J = band_J(8, 7, gen, batch=(1,))  # couplings up to distance 7: a full J
    with pytest.raises(ValueError, match=r"couplings up to key distance 7, outside the band W = 2"):
        attention_weights(torch.zeros(1, 1, 8, 8, dtype=F64), J, band=2)
    with pytest.raises(ValueError, match=r"method='banded' needs .* got a full J"):
        exact.marginals(IsingProblem(torch.zeros(8, dtype=F64), J[0]), method="banded")
    big = band_J(30, 29, gen)
    with pytest.raises(ValueError, match=r"key distance 29 = n - 1 \(a full J\).*max_spins = 24"):
        exact.marginals(IsingProblem(torch.zeros(30, dtype=F64), big))
    with pytest.raises(ValueError, match="method must be one of"):
        exact.marginals(IsingProblem(torch.zeros(3)), method="chain")


def test_loading_another_band_is_refused():
    cfg = dict(vocab_size=5, block_size=16, n_embd=8)
    saved = Transformer(TransformerConfig(**cfg, band=2)).state_dict()
    for other, what in (
        (dict(band=3), "free band W = 3"),
        (dict(), r"full J"),
        (dict(band=2, band_shape="toeplitz"), "toeplitz"),
    ):
        with pytest.raises(ValueError, match=rf"free band W = 2 .* expects a {what}"):
            Transformer(TransformerConfig(**cfg, **other)).load_state_dict(saved)


@pytest.mark.parametrize("W", [2, 3])
def test_factorised_sweep_without_a_split_equals_the_dense_sweep(W, monkeypatch):
    """The factorised sweep with no newer half (``lo = 0``: ``K2`` folded into ``K1``, which the dispatch never
    picks, the dense class serving narrow bands) against the dense class on the same block tables."""
    gen = torch.Generator().manual_seed(40 + W)
    T = 3 * W + 1
    h = torch.randn(T, 1, T, 2, generator=gen, dtype=F64)  # (keys, P, queries, rows)
    c = torch.randn(1, W, T, generator=gen, dtype=F64) * 0.5
    beta = torch.ones(1, dtype=F64)
    ends, keys, queries, first = banded._block_plan(T, W, T, True, h.device)
    C = banded._block_couplings(c, beta, ends).requires_grad_(True)
    X = banded._block_fields(h, keys, queries, True).requires_grad_(True)
    monkeypatch.setattr(banded_block, "SPLIT_MIN_W", 99)  # lo = 0 in both
    outs = []
    for fn in (banded_block.BlockSweepFn, banded_block.DenseBlockSweepFn):
        out, status = fn.apply(C, X, tuple(first), 500.0, 700.0)
        assert int(status) == 0
        g = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=F64)
        outs.append((out.detach(), *torch.autograd.grad((out * g).sum(), (C, X))))
    for a, b in zip(*outs):
        assert (a - b).abs().max() < 1e-12 * max(1.0, float(b.abs().max()))


def test_a_band_nearly_as_wide_as_the_system_is_enumerated():
    """A full J whose farthest diagonals are zero (the MQAR T = 16 model of round 2's mean-field validation: W = 14)
    was sent to the transfer matrix, whose 2**14-state tables the memory check refused; enumeration is cheaper there
    and gives the same exact marginals (float64 rounding)."""
    gen = torch.Generator().manual_seed(11)
    T = 16
    J = band_J(T, T - 2, gen, batch=(1,))
    assert banded.bandwidth(J) == T - 2 and not banded.band_pays(T, T - 2, causal=True)
    h = torch.randn(2, 1, T, T, generator=gen, dtype=F64)
    m = kernels.causal_marginals(h, J)
    assert (m - kernels.causal_marginals_loop(h, J)).abs().max() < 1e-12  # one enumeration per query
    p = IsingProblem(h[:, 0, -1], J[0])
    assert not banded.band_pays(T, T - 2)
    # exact equality: "auto" took enumeration, the very computation "enumerate" repeats in this process (determinism)
    assert (exact.marginals(p) - exact.marginals(p, method="enumerate")).abs().max() == 0
    # where the band pays it is still taken, and agrees with enumeration
    T8, W = 12, 3
    assert banded.band_pays(T8, W, causal=True) and banded.band_pays(T8, W)
    J8 = band_J(T8, W, gen, batch=(1,))
    h8 = torch.randn(2, 1, T8, T8, generator=gen, dtype=F64)
    assert (kernels.causal_marginals(h8, J8) - kernels.causal_marginals_loop(h8, J8)).abs().max() < 1e-12


def _fields_by_indexing(x: torch.Tensor, keys: torch.Tensor, queries: torch.Tensor, causal: bool) -> torch.Tensor:
    """The block fields by advanced indexing (the engine's former gather): the reference of the strided view."""
    R = x.shape[-1]
    kk = keys[:, :, None, None, :]  # (nb, G, 1, 1, k)
    qq = queries[None, :, :, None, None]  # (1, G, Q', 1, 1)
    ok = (kk >= 0) & (qq >= 0)
    if causal:
        ok = ok & (kk <= qq)
    rr = torch.arange(R)[None, None, None, :, None]
    g = x[kk.clamp(min=0), :, qq.clamp(min=0), rr]  # (nb, G, Q', R, k, P)
    return torch.where(ok[..., None], g, 0.0).permute(0, 5, 1, 2, 3, 4)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(
    "n,Q,W", [(13, 13, 4), (37, 37, 5), (9, 9, 8), (20, 20, 1), (20, 7, 3), (20, 33, 4), (16, 1, 8)]
)
def test_block_fields_view_equals_indexing(n, Q, W, causal):
    """The fields gathered by one strided view, and their gradient scattered back through it, against advanced
    indexing, for causal plans (every query) and bidirectional ones (any number of queries). Exact equality: both
    only copy the same values (no arithmetic), and no two block entries read the same score, so the scatter adds
    nothing but zeros."""
    if causal:
        Q = n
    gen = torch.Generator().manual_seed(n + 100 * W)
    x = torch.randn(3, 2, Q, n, generator=gen, dtype=F64).permute(3, 1, 2, 0).requires_grad_(True)  # as the engine
    _, keys, queries, _ = banded._block_plan(n, W, Q, causal, x.device)
    got = banded._block_fields(x, keys, queries, causal)
    ref = _fields_by_indexing(x, keys, queries, causal)
    assert got.shape == ref.shape and torch.equal(got, ref)
    g = torch.randn(ref.shape, generator=gen, dtype=F64)
    assert torch.equal(*(torch.autograd.grad((y * g).sum(), x)[0] for y in (got, ref)))
