"""Mean field, TAP, persistent Gibbs and qemcmc against the exact banded engine on one trained model at one length.

:func:`compare` measures, on ``rows`` held-out Tiny Shakespeare windows of length ``T`` (the attention layer's Ising
problems from :meth:`~hybrid_attention.model.Transformer.attention_problems`; the exact reference is the banded
transfer matrix in float64, :func:`hybrid_attention.banded.layer_log_alpha`):

* marginal error ``|m - m_exact|`` (max and mean over every visible (row, query, key));
* attention-weight error after the layer's row normalisation (``alpha = (1 + m) / 2`` over the visible keys,
  :func:`hybrid_attention.kernels.normalised_weights`): max ``|a - a_exact|`` and the mean total variation per row;
* validation perplexity of the model with each engine in its attention layer
  (:func:`hybrid_attention.apps.train.evaluate`);
* the cosine between each engine's gradient of the loss on one training batch and the exact engine's, per parameter
  group: ``c_attn`` (the query/key/value projection: the fields ``h``) and ``J_raw`` (the couplings);
* for the sampling engines, the noise floor: the same estimator (Rao-Blackwellised conditional means) applied to the
  same number of independent exact reads (:mod:`.exact_samples`), on a random subset of the problems.

The engines' settings are the long-context study's (:func:`experiments.long_context.validate_engines.engine_sampling`:
naive mean field, TAP, Gibbs with 8 persistent chains warmed for 64 sweeps, 2 sweeps and 8 reads per call, the
conditional estimator). qemcmc (statevector proposals, ``2**n`` amplitudes per problem) runs only the queries whose
prefix has at most :data:`QEMCMC_MAX_KEYS` keys, marginals only.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import torch

from experiments.banded_engines.exact_samples import sample_chains

log = logging.getLogger(__name__)

#: the engines compared with the exact one, in the table's order
ENGINES = ("meanfield", "tap", "gibbs-persistent", "qemcmc")
#: reads per call of the sampling engines (the training setting of gibbs and qemcmc)
READS = 8
#: qemcmc: the longest prefix it runs (statevector proposals: 2**n amplitudes per chain step)
QEMCMC_MAX_KEYS = 12
#: noise floor: problems per model and length (a random subset; memory ~ problems * T * 2**W * 8 bytes)
FLOOR_PROBLEMS = 256


def extend_model(model, T: int):
    """The model at block size ``T`` >= its own: the same weights, the position embeddings of positions beyond the
    trained ones set to the last trained one (a Toeplitz band's couplings load as they are). ``model`` itself when
    ``T`` is its block size.

    Raises:
        ValueError: ``T`` below the trained block size, or a free band (one coupling per position: no values beyond).
    """
    from hybrid_attention.model import Transformer

    cfg = model.config
    if T == cfg.block_size:
        return model
    if T < cfg.block_size:
        raise ValueError(f"T = {T} is below the trained block size {cfg.block_size}; evaluate at T >= it")
    if cfg.band and cfg.band_shape != "toeplitz":
        raise ValueError(f"a {cfg.band_shape!r} band has no couplings beyond block size {cfg.block_size}; use toeplitz")
    new = Transformer(dataclasses.replace(cfg, block_size=T))
    state = dict(model.state_dict())
    wpe = state["wpe.weight"]
    state["wpe.weight"] = torch.cat([wpe, wpe[-1:].expand(T - wpe.shape[0], -1)])
    new.load_state_dict(state)
    return new.eval()


def exact_log_alpha(h: torch.Tensor, J: torch.Tensor, beta: torch.Tensor, W: int) -> torch.Tensor:
    """``log P_i(s_j = +1)`` of the layer's problems by the banded engine in float64: ``(B, H, T, T)``."""
    from hybrid_attention import banded

    c = banded.diagonals(J.double(), W)
    return banded.layer_log_alpha(h.double(), c, beta.double())


def error_stats(m: torch.Tensor, m_ref: torch.Tensor, vis: torch.Tensor) -> dict[str, float]:
    """Marginal error (max, mean) and attention-weight error (max, mean total variation per row) of ``m`` against
    ``m_ref`` (both ``(B, H, Tq, T)``), over the visible keys ``vis (Tq, T)``."""
    from hybrid_attention.kernels import normalised_weights

    d = (m.double() - m_ref.double())[..., vis].abs()
    a, a_ref = normalised_weights(m.double(), vis), normalised_weights(m_ref.double(), vis)
    da = (a - a_ref).abs()
    return {"marginal_max": float(d.max()), "marginal_mean": float(d.mean()),
            "weight_max": float(da.max()), "weight_tv_mean": float(0.5 * da.sum(-1).mean())}  # fmt: skip


def noise_floor(
    h, J, beta: float, W: int, m_ref, reads: int, problems: int, seed: int, max_query: int | None = None
) -> dict[str, Any]:
    """The error of the Rao-Blackwellised estimator (and of the plain spin average) with ``reads`` independent exact
    reads per problem, on ``problems`` random (row, query) problems of the layer (head 0; queries below
    ``max_query`` only, when given): ``h (B, 1, T, T)``, ``J (1, T, T)``, ``m_ref (B, 1, T, T)`` the exact
    marginals."""
    from hybrid_attention import banded

    B, _, T, _ = h.shape
    Tq = T if max_query is None else max_query
    gen = torch.Generator().manual_seed(seed)
    pick = torch.randperm(B * Tq, generator=gen)[:problems]
    rows, queries = pick // Tq, pick % Tq
    keys = torch.arange(T)
    vis = keys[None, :] <= queries[:, None]  # (P, T)
    hp = torch.where(vis, h[rows, 0, queries].double(), 0.0)
    Jd = J[0].double()
    c = banded.diagonals(Jd, W).expand(len(pick), W, T) * vis[:, None, :]  # no couplings into dropped keys
    s = sample_chains(hp, c, beta, reads, gen).double()  # (P, N, T)
    Jp = Jd * (vis[:, :, None] & vis[:, None, :])  # (P, T, T)
    cond = torch.tanh(beta * (hp[:, None, :] + s @ Jp))  # (P, N, T): each spin's conditional mean
    ref = m_ref[rows, 0, queries].double()
    out = {"problems": len(pick), "reads": reads}
    for name, est in (("conditional", cond.mean(1)), ("reads", s.mean(1))):
        d = (est - ref)[vis].abs()
        out[name] = {"marginal_max": float(d.max()), "marginal_mean": float(d.mean())}
    return out


def _sampling(name: str, model, warm_on):
    from experiments.long_context.validate_engines import engine_sampling
    from hybrid_attention import Sampling
    from hybrid_attention.backends import get_sampler

    if name == "qemcmc":
        return Sampling(get_sampler("qemcmc"), READS, estimator="conditional")
    return engine_sampling(name, warm_on, model)


def _gradient(model, x, y, sampling) -> dict[str, torch.Tensor]:
    from experiments.long_context.validate_engines import gradient

    return gradient(model, x, y, sampling)


def _cosines(g: dict, ref: dict) -> dict[str, float]:
    return {k: float(g[k].double() @ ref[k].double() / (g[k].double().norm() * ref[k].double().norm() + 1e-300))
            for k in ("c_attn", "J_raw") if k in ref}  # fmt: skip


def compare(
    model,
    task,
    T: int,
    rows: int,
    *,
    seed: int = 0,
    engines: tuple[str, ...] = ENGINES,
    gibbs_full: bool = True,
    qemcmc_rows: int = 2,
) -> dict:
    """Every measure of the module docstring for ``model`` (a banded ``hj`` model, one layer, one head) at length
    ``T`` on ``rows`` validation windows (and ``rows`` training windows for the gradients). ``gibbs_full=False``:
    persistent Gibbs gives its marginals only (no perplexity, no gradient: too slow at long ``T``); qemcmc runs on
    the first ``qemcmc_rows`` rows (0: not at all)."""
    from hybrid_attention.apps.train import evaluate
    from hybrid_attention.bridge import attention_marginals

    W = model.config.band
    g = torch.Generator().manual_seed(1000 + T)
    xv, yv = task.get_batch("val", rows, T, generator=g)
    xg, yg = task.get_batch("train", rows, T, generator=g)
    with torch.no_grad():
        (p,) = model.attention_problems(xv, layers=[0])
    h, J, beta = p.h, p.J, p.beta
    vis = torch.ones(T, T, dtype=torch.bool).tril()
    t0 = time.perf_counter()
    m_ref = 2 * exact_log_alpha(h, J, beta, W).exp() - 1
    res: dict[str, Any] = {"T": T, "band": W, "rows": rows, "problems": rows * T, "beta_J_max_row_sum": float(
        (beta[0] * J[0]).abs().sum(-1).max()), "engines": {}}  # fmt: skip
    ex = {"seconds": 0.0}
    ex["val_perplexity"] = evaluate(model, xv, yv, "shakespeare")["val_perplexity"]
    g_ref = _gradient(model, xg, yg, None)
    ex["seconds"] = round(time.perf_counter() - t0, 1)
    res["exact"] = ex
    log.info("T = %d: exact done (%.1f s), perplexity %.4f", T, ex["seconds"], ex["val_perplexity"])
    for name in engines:
        t0 = time.perf_counter()
        if name == "qemcmc":
            if not qemcmc_rows:
                continue
            q, r = min(QEMCMC_MAX_KEYS, T), min(qemcmc_rows, rows)
            s = _sampling(name, model, xv)
            with torch.no_grad():
                m = attention_marginals(h[:r, :, :q, :q], J[:, :q, :q], beta, sampling=s.layer(0).with_seed(7))
            e = error_stats(m, m_ref[:r, :, :q, :q], vis[:q, :q])
            e["subset"] = f"queries 0..{q - 1} (prefixes of at most {q} keys) of rows 0..{r - 1}; marginals only"
            e["noise_floor"] = noise_floor(h[:r], J, float(beta[0]), W, m_ref[:r], READS, r * q, seed, max_query=q)
        elif name == "gibbs-persistent" and not gibbs_full:
            s = _sampling(name, model, xv)
            with torch.no_grad():
                m = attention_marginals(h, J, beta, sampling=s.layer(0).with_seed(7))
            e = error_stats(m, m_ref, vis)
            e["subset"] = "marginals only (no perplexity, no gradient: too slow at this T)"
        else:
            s = _sampling(name, model, xv)
            with torch.no_grad():
                m = attention_marginals(h, J, beta, sampling=s.layer(0).with_seed(7))
            e = error_stats(m, m_ref, vis)
            e["val_perplexity"] = evaluate(model, xv, yv, "shakespeare", sampling=s.with_seed(11))["val_perplexity"]
            e["gradient_cosine"] = _cosines(_gradient(model, xg, yg, _sampling(name, model, xg).with_seed(13)), g_ref)
        e["seconds"] = round(time.perf_counter() - t0, 1)
        res["engines"][name] = e
        log.info("T = %d: %s done (%.1f s): %s", T, name, e["seconds"], e)
    n_floor = min(FLOOR_PROBLEMS, rows * T, max(16, int(3e8 / (T * 2**W * 8))))
    res["noise_floor"] = noise_floor(h, J, float(beta[0]), W, m_ref, READS, n_floor, seed)
    return res
