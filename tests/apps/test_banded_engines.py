"""The engine-table study (experiments/banded_engines): exact chain samples against enumeration, the error measures,
the model extension and the comparison on small planted models where the approximate engines are exact."""

from __future__ import annotations

import math

import pytest
import torch

from experiments.banded_engines import engines, plan, report
from experiments.banded_engines.exact_samples import sample_chains
from hybrid_attention import IsingProblem, banded, exact
from hybrid_attention.model import Transformer, TransformerConfig

F64 = torch.float64


def band_J(n: int, W: int, gen: torch.Generator, scale: float = 0.8) -> torch.Tensor:
    J = torch.randn(n, n, generator=gen, dtype=F64) * scale
    d = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs()
    J = torch.triu(J * ((d >= 1) & (d <= W)), 1)
    return J + J.T


@pytest.mark.parametrize("W", [1, 3])
def test_exact_samples_match_enumeration(W):
    gen = torch.Generator().manual_seed(W)
    n, N, beta = 9, 20000, 0.9
    h = torch.randn(2, n, generator=gen, dtype=F64)
    J = band_J(n, W, gen)
    m = exact.marginals(IsingProblem(h, J, beta=beta), method="enumerate")
    s = sample_chains(h, banded.diagonals(J, W).expand(2, W, n), beta, N, gen).double()
    assert s.shape == (2, N, n) and set(s.unique().tolist()) == {-1.0, 1.0}
    # 5 standard errors of a mean of N independent +-1 reads, over 2 n = 18 marginals
    assert ((s.mean(1) - m).abs() <= 5 * ((1 - m**2) / N).sqrt() + 1e-12).all()
    # nearest-neighbour correlations against enumeration (standard error <= 1 / sqrt(N))
    S = 1 - 2 * ((torch.arange(2**n)[:, None] >> torch.arange(n)) & 1).double()
    logp = beta * (S @ h[0] + 0.5 * ((S @ J) * S).sum(1))
    C = (S.T * torch.softmax(logp, 0)) @ S
    Cs = s[0].T @ s[0] / N
    assert (torch.diagonal(Cs - C, 1).abs() < 5 / math.sqrt(N)).all()


def test_noise_floor_of_the_conditional_estimator_is_zero_without_couplings():
    gen = torch.Generator().manual_seed(3)
    B, T, W = 2, 10, 2
    h = torch.randn(B, 1, T, T, generator=gen, dtype=F64)
    J = torch.zeros(1, T, T, dtype=F64)
    m_ref = torch.tanh(0.7 * h).tril()
    out = engines.noise_floor(h, J, 0.7, W, m_ref, reads=4, problems=B * T, seed=0)
    # J = 0: every conditional mean is tanh(beta h) itself, exact up to rounding
    assert out["conditional"]["marginal_max"] < 1e-14
    assert out["reads"]["marginal_max"] > 0.0  # four spin reads are not exact
    sub = engines.noise_floor(h, J, 0.7, W, m_ref, reads=4, problems=5, seed=0, max_query=3)
    assert sub["problems"] == 5


def test_error_stats():
    T = 4
    vis = torch.ones(T, T, dtype=torch.bool).tril()
    m = torch.zeros(1, 1, T, T)
    assert engines.error_stats(m, m, vis) == {"marginal_max": 0.0, "marginal_mean": 0.0, "weight_max": 0.0,
                                              "weight_tv_mean": 0.0}  # fmt: skip
    m2 = m.clone()
    m2[0, 0, 1, 0] = 1.0  # query 1: alpha (1, 0.5) instead of (0.5, 0.5): weights (2/3, 1/3) against (1/2, 1/2)
    e = engines.error_stats(m2, m, vis)
    assert e["marginal_max"] == 1.0 and abs(e["marginal_mean"] - 1 / vis.sum().item()) < 1e-12
    assert abs(e["weight_max"] - 1 / 6) < 1e-12 and abs(e["weight_tv_mean"] - (1 / 6) / T) < 1e-12


def tiny(T: int = 8, band: int = 2, shape: str = "toeplitz") -> Transformer:
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=11, block_size=T, n_embd=16, band=band, band_shape=shape)
    return Transformer(cfg).eval()


def test_extend_model_keeps_the_trained_positions():
    model = tiny()
    with torch.no_grad():
        model.blocks[0].attn.J_raw.normal_(0, 0.5)
    long = engines.extend_model(model, 16)
    assert long.config.block_size == 16 and torch.equal(long.blocks[0].attn.J_raw, model.blocks[0].attn.J_raw)
    assert torch.equal(long.wpe.weight[8:], model.wpe.weight[-1:].expand(8, -1))
    x = torch.randint(0, 11, (3, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():  # causal: the first 8 positions see the same inputs and weights
        assert torch.allclose(long(x)[0][:, :8], model(x[:, :8])[0], atol=1e-5)
    assert engines.extend_model(model, 8) is model
    with pytest.raises(ValueError, match="below the trained block size"):
        engines.extend_model(model, 4)
    with pytest.raises(ValueError, match="toeplitz"):
        engines.extend_model(tiny(shape="free"), 16)


class _Task:
    """Random token windows (the comparison only needs ``get_batch``)."""

    def get_batch(self, split, rows, T, generator=None):
        x = torch.randint(0, 11, (rows, T + 1), generator=generator)
        return x[:, :-1], x[:, 1:]


@pytest.mark.parametrize(
    "names", [("meanfield", "tap"), pytest.param(("gibbs-persistent",), marks=pytest.mark.slow)], ids=["mf", "gibbs"]
)
def test_compare_without_couplings_every_engine_is_exact(names):
    model = tiny()  # J initialised to zero: naive mean field, TAP and the conditional estimator are exact
    res = engines.compare(model, _Task(), 8, 3, engines=names, qemcmc_rows=0)
    assert res["problems"] == 24 and res["band"] == 2
    # float32 model against the float64 reference: a few float32 roundings of values of size ~1
    tol = 1e-5
    for name, e in res["engines"].items():
        assert e["marginal_max"] < tol and e["weight_max"] < tol, name
        assert abs(e["val_perplexity"] - res["exact"]["val_perplexity"]) < tol * res["exact"]["val_perplexity"]
        if name != "gibbs-persistent":  # its gradient is a covariance over 8 reads: noisy even at J = 0
            assert e["gradient_cosine"]["c_attn"] > 1 - 1e-5, name
            assert e["gradient_cosine"]["J_raw"] > 1 - 1e-4, name  # first-order response to J: the same at J = 0
    assert res["noise_floor"]["conditional"]["marginal_max"] < tol


def test_compare_with_couplings_and_the_report(tmp_path, monkeypatch):
    model = tiny()
    with torch.no_grad():
        model.blocks[0].attn.J_raw.copy_(torch.tensor([[1.5, -1.0]]))
    monkeypatch.setattr(engines, "QEMCMC_MAX_KEYS", 3)
    res = engines.compare(model, _Task(), 8, 2, engines=("meanfield", "qemcmc"), qemcmc_rows=1)
    mf = res["engines"]["meanfield"]
    assert mf["marginal_max"] > 1e-3  # strong couplings: mean field is biased
    q = res["engines"]["qemcmc"]
    assert "queries 0..2" in q["subset"] and q["noise_floor"]["problems"] == 3
    res.update(model="tiny", trained_T=8, band_shape="toeplitz", train_steps=0, seconds=1.0)
    monkeypatch.setattr(plan, "OUT", tmp_path)
    (tmp_path / "tiny_T8.json").write_text(__import__("json").dumps(res))
    text = report.report(report.load())
    assert "| tiny (band 2 toeplitz, trained at T = 8, 0 steps) | 8 | 2 | meanfield |" in text
    assert "| tap | not run |" in text
