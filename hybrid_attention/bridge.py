"""Sampler bridge: any sampler's output as attention marginals with gradients (docs/theory.md section 3).

:func:`attention_marginals` turns a layer's scores ``h (B, H, Tq, T)`` and couplings ``J (H, T', T')`` into Ising
problems (causally: one batched problem per prefix length, so every problem of one size goes to the sampler in
one call), runs the sampler and returns ``<s_j>`` shaped like ``h``.

What the bridge does with a sampler is decided by its declared
:class:`~hybrid_attention.sampler.SamplerCapabilities` (``sampler.capabilities``), never by probing attributes:
``differentiable``, ``dqa`` (effective beta of the surrogate gradients), ``pad_with_mask`` and ``per_call_overhead``
(how causal prefixes are batched into calls).

How to sample is one :class:`~hybrid_attention.sampling.Sampling` value (sampler, reads, readout, estimator,
persistent chains, seed), built and validated by the caller. The public functions validate their tensors once, on
entry; what runs below them (the sampler calls, :class:`SampledMarginals`) takes them as validated.

Gradients:

* ``readout="exact"`` (the default for samplers with ``capabilities.differentiable``: exact enumeration, fast
  statevector, mean field) keeps the autograd graph: the bridge calls the sampler's
  ``differentiable_marginals(problem)``;
* ``readout="shots"``: the bridge samples (:meth:`Sampler.sample`) and applies :class:`SampledMarginals`, whose backward
  uses the covariance identities over the same reads: for an upstream gradient ``g`` and ``u = g.s``,
  ``dL/dh_k = beta_h (E[u s_k] - E[u] E[s_k])``, ``dL/dJ_kl = beta_J (E[u s_k s_l] - E[u] E[s_k s_l]) / 2`` per
  matrix entry (``J_kl`` and ``J_lk`` each carry half of the pair's coupling ``sum_{k<l}``), and
  ``dL/dbeta = -(E[u e] - E[u] E[e])`` with ``e = (beta_h E_h + beta_J E_J) / beta``. For ``R`` reads drawn at
  random these covariances carry the finite-sample factor ``R / (R - 1)`` (the mean-centred sample covariance is
  ``(R - 1) / R`` of the truth on average); exact output probabilities (``SampleSet.exact``) need none.
  ``estimator="conditional"`` replaces the spin average by the average of the conditional means (lower variance).

  With the exact sampler (exact weights or exact samples) ``beta_h = beta_J = beta`` and these are the exact
  gradients (equal to autograd through enumeration). With DQA samples they are a **Boltzmann surrogate**: the
  gradient of a Boltzmann model at the sampler's effective inverse temperatures
  (``sampler.effective_beta(beta)`` of a ``capabilities.dqa`` sampler, leading order in the anneal time, see
  :mod:`hybrid_attention.circuits.temperature`), evaluated on the DQA reads; DQA output is only approximately
  Boltzmann, so this is not the exact gradient of the circuit's output. Measured against the true circuit gradient
  (``results/dqa_vs_exact/gradient_check.md``), the field part agrees in direction (cosine 0.7-1.0) while the coupling
  part is poor (couplings act on marginals at second order in beta, where DQA is not Boltzmann); with a simulator,
  prefer a differentiable sampler (``statevector``). The ``qemcmc`` sampler's reads are Boltzmann samples at the
  problem's beta (its capabilities are not ``dqa``), so these gradients are unbiased for them.

Persistent chains (``Sampling(..., chains=PersistentChains(...))``, :class:`~hybrid_attention.sampling.PersistentChains`):
each (layer, head, prefix) problem's chains start where the previous call's chains stopped (the layer's key is
``sampling.chain_key``), so a training step needs only a few moves. The chains' states are a value in and out of
each sampler call: :func:`attention_marginals` reads the start states from the store, every call (inside autograd)
takes its slice of them and returns where its chains stopped, and :func:`attention_marginals` stores the end states
after the last call has returned.

Example:
    >>> import torch
    >>> from hybrid_attention.backends import get_sampler
    >>> h = torch.randn(1, 1, 3, 3, dtype=torch.float64, requires_grad=True)
    >>> J = torch.zeros(1, 3, 3, dtype=torch.float64, requires_grad=True)
    >>> m = attention_marginals(h, J, 1.0, sampling=Sampling(get_sampler("exact")))
    >>> m.shape, bool(m[0, 0, 0, 1] == 0)
    (torch.Size([1, 1, 3, 3]), True)
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from . import checks
from .grouping import Grouped
from .ising import IsingProblem
from .kernels import plan_groups
from .sampling import Sampling, check_sampling

__all__ = ["attention_marginals", "differentiable_marginals", "SampledMarginals"]

logger = logging.getLogger(__name__)


def _effective(sampler: Any, beta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(beta_h, beta_J)`` of the sampler's output: its effective inverse temperatures for a DQA sampler, else
    ``beta`` itself (a Boltzmann sampler)."""
    if not sampler.capabilities.dqa:
        return beta, beta
    bh, bJ = sampler.effective_beta(beta)
    return torch.as_tensor(bh, dtype=beta.dtype), torch.as_tensor(bJ, dtype=beta.dtype)


class SampledMarginals(torch.autograd.Function):
    """Marginals from a sampler's reads; backward by the covariance identities (module docstring).

    Works on problems grouped by coupling matrix (:class:`~hybrid_attention.grouping.Grouped`): ``forward(h (G, R,
    n), J (G, n, n), beta (G, R), problem, grouping, sampling, seed, start)`` with ``problem`` the detached problem
    the sampler sees, ``grouping`` its :class:`~hybrid_attention.grouping.Grouped` layout (masked spins held at 0),
    and ``start`` the persistent chains' start states ``(*batch, chains, n)`` int8 (the reads start there) or
    ``None``. Returns ``(m (G, R, n), end)``: the marginals and, with ``start``, the chains' end states (int8, the
    shape of ``start``; not differentiable), else an empty tensor. Nothing is written anywhere: the caller stores
    ``end``.

    Every product with a shared ``J`` is one matrix product over all of its problems and reads, and no per-problem
    ``(n, n)`` covariance is formed: the field gradient is a covariance times a vector, computed as sums over reads,
    and the coupling gradient of a group is one ``(n, reads) x (reads, n)`` product.

    With ``sampling.estimator == "conditional"`` the forward averages the
    conditional means ``phi_j = tanh(beta_h h_j + beta_J sum_k J_jk s_k) = E[s_j | s_-j]`` over the reads instead of
    the spins, and the field gradient uses the matching covariance estimate ``Cov(s_i, s_j) = (Cov(s_i, phi_j) +
    Cov(phi_i, s_j)) / 2`` (``i != j``; sample covariances of the reads, exact at ``J = 0`` where ``phi`` does not vary
    between reads), ``Var(s_j) = 1 - m_j^2``; the coupling and beta gradients stay the spin-read estimates. Both
    estimators are unbiased for Boltzmann reads; the conditional one has lower variance, down to none at ``J = 0``.
    """

    @staticmethod
    def forward(
        ctx: Any,
        h: torch.Tensor,
        J: torch.Tensor,
        beta: torch.Tensor,
        problem: IsingProblem,
        grouping: Grouped,
        sampling: Sampling,
        seed: Any,
        start: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        ss, end = _draw(sampling, problem, seed, start)
        ctx.mark_non_differentiable(end)
        G, R, n = h.shape
        s = grouping.group(torch.from_numpy(ss.spins)).to(h.dtype)  # (G, R, reads, n)
        mask = grouping.mask
        if mask is not None:
            s = s * mask[:, :, None, :]
        w = grouping.group(torch.from_numpy(ss.weights)[..., None])[..., 0].to(h.dtype)  # (G, R, reads)
        # reads drawn at random: the mean-centred covariances get the finite-sample (Bessel) correction over the
        # number of reads K (frequency weights count K shots); exact output probabilities need none
        K = int(ss.info.get("num_reads") or s.shape[-2])
        ctx.reads = None if ss.exact or K < 2 else K
        ctx.betas = bh, bJ = _effective(sampling.sampler, beta)  # the reads' inverse temperatures (h, J): (G, R)
        ctx.conditional = sampling.estimator == "conditional"
        if ctx.conditional:  # phi_j = E[s_j | s_-j] at each read (J symmetric with a zero diagonal)
            local = torch.bmm(s.reshape(G, -1, n), J).reshape(s.shape)  # sum_k J_jk s_k, one product per group
            phi = torch.tanh(bh[..., None, None] * h[:, :, None, :] + bJ[..., None, None] * local)
            if mask is not None:
                phi = phi * mask[:, :, None, :]
            m = torch.einsum("grk,grkj->grj", w, phi)
            ctx.save_for_backward(s, w, m, h, J, beta, phi)
        else:
            m = torch.einsum("grk,grkj->grj", w, s)
            ctx.save_for_backward(s, w, m, h, J, beta)
        ctx.mask = mask
        return m, end

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor, _: Any) -> tuple[Any, ...]:
        s, w, m, h, J, beta = ctx.saved_tensors[:6]
        bh, bJ = ctx.betas
        G, R, K, n = s.shape
        bessel = 1.0 if ctx.reads is None else ctx.reads / (ctx.reads - 1.0)  # E[sample covariance] = (K-1)/K cov
        u = torch.einsum("grj,grkj->grk", g, s)  # (G, R, reads)
        wu = w * (u - (w * u).sum(-1, keepdim=True)) * bessel  # centred, weighted
        gh = gJ = gb = None
        if ctx.needs_input_grad[0] and ctx.conditional:
            gh = bh[..., None] * _conditional_field_gradient(s, w, m, ctx.saved_tensors[6], g, ctx.mask, ctx.reads)
        elif ctx.needs_input_grad[0]:
            gh = bh[..., None] * torch.einsum("grk,grkj->grj", wu, s)
        if ctx.needs_input_grad[1] and ctx.conditional:
            phi = ctx.saved_tensors[6]
            gm = g if ctx.mask is None else g * ctx.mask  # a dropped spin's marginal is 0: no gradient flows into it
            gJ = 0.5 * _conditional_coupling_gradient(s, w, m, phi, gm, bJ, ctx.reads)
        elif ctx.needs_input_grad[1]:  # sum over a group's problems and reads of beta_J wu s_k s_l / 2 (k != l)
            sw = (s * (bJ[..., None] * wu)[..., None]).reshape(G, -1, n)
            gJ = 0.5 * torch.bmm(sw.transpose(1, 2), s.reshape(G, -1, n))
        if gJ is not None:
            gJ = gJ - torch.diag_embed(torch.diagonal(gJ, dim1=-2, dim2=-1))
        if ctx.needs_input_grad[2]:
            # d<s>/dbeta with p ∝ exp(-beta e), e = (bh E_h + bJ E_J) / beta: -(Cov(u, e))
            cov_h = (torch.einsum("grk,grkj->grj", wu, s) * h).sum(-1)  # Cov(u, h.s) = -Cov(u, E_h)
            sJs = (torch.bmm(s.reshape(G, -1, n), J).reshape(s.shape) * s).sum(-1)  # 2 sum_{k<l} J_kl s_k s_l
            cov_J = 0.5 * (wu * sJs).sum(-1)  # Cov(u, sum_{k<l} J s s) = -Cov(u, E_J)
            gb = (bh * cov_h + bJ * cov_J) / beta
        return gh, gJ, gb, None, None, None, None, None


def _conditional_coupling_gradient(
    s: torch.Tensor, w: torch.Tensor, m: torch.Tensor, phi: torch.Tensor, g: torch.Tensor, bJ: torch.Tensor, reads: Any
) -> torch.Tensor:
    """``sum_j g_j beta_J Cov(s_j, s_k s_l)`` per group, ``(G, n, n)`` (off the diagonal), Rao-Blackwellised.

    For ``j`` not in ``{k, l}``, ``s_k s_l`` is a function of ``s_-j``, so ``Cov(s_j, s_k s_l) = Cov(phi_j, s_k s_l)``;
    for ``j = k``, ``Cov(s_k, s_k s_l) = m_l - m_k E[s_k s_l]`` with ``E[s_k s_l] = E[phi_k s_l]``. Hence, with
    ``v = g . phi`` per read and ``d = phi - m``::

        G_kl = Cov(v, s_k s_l) - g_k Cov(phi_k, s_k s_l) - g_l Cov(phi_l, s_k s_l)
               + g_k (m_l - m_k c_kl) + g_l (m_k - m_l c_lk),     c_kl = E[phi_k s_l]

    Covariances are the reads' Bessel-corrected sample covariances and the products ``m_k c_kl`` U-statistics
    (without the reads' own products), so the estimate is unbiased for Boltzmann reads; exact with exact weights.
    Every term is a sum over a group's problems and reads: one ``(n, reads) x (reads, n)`` product each.
    """
    G, R, K, n = s.shape
    bessel = 1.0 if reads is None else reads / (reads - 1.0)
    wb = (w * bJ[..., None])[..., None]  # (G, R, K, 1): read weights times the problem's beta_J
    gm = g[:, :, None, :]
    d = phi - m[:, :, None, :]
    v = (gm * phi).sum(-1, keepdim=True)  # (G, R, K, 1)
    vc = v - (w[..., None] * v).sum(2, keepdim=True)
    S = s.reshape(G, -1, n)

    def outer(a: torch.Tensor) -> torch.Tensor:  # sum over problems and reads of a_rk s_rl, (G, n, n)
        return torch.bmm(a.reshape(G, -1, n).transpose(1, 2), S)

    both = bessel * outer(wb * vc * s)  # Cov(v, s_k s_l): symmetric
    # the terms carrying g_k (their mirror carries g_l): -g_k Cov(phi_k, s_k s_l) + g_k m_l - g_k m_k c_kl, the
    # product m_k c_kl without the reads' own terms (a U-statistic: unbiased)
    gl = torch.bmm((g * bJ[..., None]).transpose(1, 2), m)  # sum over problems of beta_J g_k m_l
    prod = outer(wb * (gm * m[:, :, None, :]) * phi)
    if reads is not None:
        prod = bessel * (prod - outer(wb * w[..., None] * gm * phi * phi))
    one = gl - prod - bessel * outer(wb * gm * d * s)
    return both + one + one.transpose(1, 2)


def _conditional_field_gradient(
    s: torch.Tensor, w: torch.Tensor, m: torch.Tensor, phi: torch.Tensor, g: torch.Tensor, mask: Any, reads: Any
) -> torch.Tensor:
    """``C g`` per problem, ``(G, R, n)``, for the conditional estimator's covariance ``C`` (``SampledMarginals``):
    ``C_ij = (X_ij + X_ji) / 2`` off the diagonal with ``X_ij = Cov(s_i, phi_j)`` (the reads' sample covariance, each
    centred on its own mean: Bessel-corrected, unbiased), ``C_jj = 1 - m_j^2``. Computed as sums over reads,
    without forming ``C``: ``(X g)_i = sum_r w_r sc_ri (d_r . g)``, ``(X^T g)_i = sum_r w_r d_ri (sc_r . g)``.

    ``Cov(s_i, s_j) = Cov(s_i, phi_j)`` for ``i != j`` (``s_i`` is a function of ``s_-j``); centring ``phi_j`` on its
    mean instead of subtracting ``m_i m_j`` removes the noise of the spin average of ``s_i``: at ``J = 0`` ``phi_j``
    is the same at every read and the estimate is exactly 0, as is the true covariance.
    """
    bessel = 1.0 if reads is None else reads / (reads - 1.0)
    sc = s - torch.einsum("grk,grkj->grj", w, s)[:, :, None, :]  # reads centred on their mean
    d = phi - m[:, :, None, :]
    Xg = torch.einsum("grk,grki->gri", w * torch.einsum("grkj,grj->grk", d, g), sc)
    XTg = torch.einsum("grk,grki->gri", w * torch.einsum("grkj,grj->grk", sc, g), d)
    Xdiag = torch.einsum("grk,grki->gri", w, sc * d)
    mm2 = m * m
    if reads is not None:  # m_j^2 without the reads' own products (a U-statistic: unbiased)
        mm2 = (reads * mm2 - torch.einsum("grk,grkj->grj", w, phi * phi)) / (reads - 1.0)
    var = 1.0 - mm2  # Var(s_j) = 1 - m_j^2
    if mask is not None:
        var = var * mask
    return bessel * (0.5 * (Xg + XTg) - Xdiag * g) + var * g


def _draw(sampling: Sampling, problem: IsingProblem, seed: Any, start: torch.Tensor | None) -> tuple[Any, torch.Tensor]:
    """``sampling.sampler.sample`` on a validated problem, and the chains' end states: with ``start`` (persistent
    chains' start states) the reads start there and ``end`` is where they stopped (``start``'s shape), else ``end``
    is empty."""
    if start is None:
        return sampling.sampler.sample(problem, num_reads=sampling.num_reads, seed=seed), torch.empty(
            0, dtype=torch.int8
        )
    init = start.reshape(-1, *start.shape[-2:]) if problem.h.ndim == 2 else start
    ss = sampling.sampler.sample(problem, num_reads=sampling.num_reads, seed=seed, initial_state=init.numpy())
    end = torch.from_numpy(np.ascontiguousarray(ss.info["final_state"])).reshape(start.shape)
    return ss, end


def differentiable_marginals(problem: IsingProblem, sampling: Sampling | None = None, **removed: Any) -> torch.Tensor:
    """``<s_j>`` of a (batched) problem through a sampler, differentiable w.r.t. the problem's tensors.

    Args:
        problem: :class:`IsingProblem` whose ``h``, ``J`` (and tensor ``beta``) may carry autograd history.
        sampling: a :class:`~hybrid_attention.sampling.Sampling` value (``Sampling(sampler, num_reads=...,
            seed=...)``); its persistent chains, if any, are not used here (:func:`attention_marginals` uses them).

    Returns:
        ``(*batch, n)`` marginals (0 on masked spins) in the problem's dtype; an empty batch gives an empty result
        without calling the sampler.

    Raises:
        TypeError: no ``sampling``; a removed keyword (``sampler=``, ``num_reads=``, ``seed=``: the message names the
            :class:`~hybrid_attention.sampling.Sampling` field that replaces it).
    """
    sampling = check_sampling(sampling, "differentiable_marginals", removed)
    if not isinstance(problem, IsingProblem):
        raise TypeError(f"expected an IsingProblem, got {type(problem).__name__}")
    if sampling is None:
        raise TypeError("differentiable_marginals needs a sampler: pass sampling=Sampling(sampler, ...)")
    return _marginals(problem, sampling, sampling.seed, None)[0]


def _marginals(
    problem: IsingProblem, sampling: Sampling, seed: Any, start: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`differentiable_marginals` of a validated problem and value, and the persistent chains' end states
    (``start``, ``end``: as :class:`SampledMarginals`; ``None`` without ``start``)."""
    if problem.h.numel() == 0:  # an empty batch: no sampler call (samplers need not handle it)
        return _zeros_on_graph((*problem.batch_shape, problem.n), problem.h, problem.J, problem.beta), start
    if sampling.readout == "exact":
        return sampling.sampler.differentiable_marginals(problem).to(problem.dtype), start
    gp = Grouped(problem)  # differentiable views: h (G, R, n) with masked spins at 0, J (G, n, n), beta (G, R)
    m, end = SampledMarginals.apply(gp.h, gp.J, gp.beta, problem.detach(), gp, sampling, seed, start)
    return gp.ungroup(m), (None if start is None else end)


def _zeros_on_graph(shape: tuple[int, ...], *tensors: Any) -> torch.Tensor:
    """Zeros of ``shape`` that stay on the autograd graph of ``tensors`` (their gradients are then zero, not
    ``None``), for empty batches."""
    ts = [t for t in tensors if isinstance(t, torch.Tensor)]
    out = ts[0].new_zeros(shape)
    for t in ts:
        if t.requires_grad:
            out = out + 0.0 * t.sum()
    return out


def _finite_where_seen(h: torch.Tensor, seen: torch.Tensor | None) -> bool:
    """Whether ``h`` is finite where ``seen`` (``None``: everywhere). One reduction in the common case: a finite sum
    (accumulated in float64) means every entry is finite (an infinity or NaN anywhere makes it infinite or NaN);
    otherwise (also when a float64 sum of finite entries overflows) the entries are tested one by one, the unseen
    ones excluded."""
    if h.is_floating_point() and bool(torch.isfinite(h.sum(dtype=torch.float64))):
        return True
    return bool(torch.isfinite(h if seen is None else h.masked_fill(~seen, 0.0)).all())


def _scalar_if_single(beta: torch.Tensor) -> torch.Tensor:
    # IsingProblem.flatten keeps a one-element beta as given; a 0-d tensor broadcasts to any batch shape
    return beta.reshape(()) if beta.numel() == 1 else beta


def attention_marginals(
    h: torch.Tensor,
    J: torch.Tensor,
    beta: Any = 1.0,
    *,
    sampling: Sampling | None = None,
    causal: bool = True,
    pad_with_mask: bool | None = None,
    **removed: Any,
) -> torch.Tensor:
    """Attention marginals ``m[b, hd, i, j] = <s_j>`` of query ``i``'s Ising system, through a sampler.

    Args:
        h: scores ``(B, H, Tq, T)``; causal needs ``Tq == T`` (query ``i`` sees keys ``0..i``).
        J: couplings ``(H, T', T')``, ``T' >= T`` (leading block used), symmetric, zero diagonal.
        beta: scalar or ``(H,)`` (float or tensor; a tensor gets a gradient).
        sampling: how to sample (:class:`~hybrid_attention.sampling.Sampling`, required). Its ``seed`` spawns one
            child seed per call. With ``sampling.chains`` every problem's chains start from the stored states of
            its (head, query) under ``sampling.chain_key`` (``"attention"`` when unset); the end states are stored
            back once every sampler call has returned.
        causal: drop future keys (one sampler call per prefix length, or per group of lengths, all ``B * H`` rows
            at once).
        pad_with_mask: one call with ``n = T`` and a causal mask instead of one call per prefix length (default:
            ``sampler.capabilities.pad_with_mask``). Otherwise, a sampler whose capabilities give a
            ``per_call_overhead`` ``c`` (in units of one problem-configuration ``rows * 2**n``) gets consecutive
            prefix lengths grouped into padded, causally masked calls where that is cheaper
            (dynamic programming, :func:`hybrid_attention.kernels.plan_groups`).

    Returns:
        ``(B, H, Tq, T)`` marginals, differentiable w.r.t. ``h``, ``J`` (and ``beta``); zeros above the
        diagonal when causal. Exact gradients with the exact sampler; a Boltzmann surrogate at the sampler's
        effective beta for DQA samplers (module docstring).

    Raises:
        TypeError: no ``sampling``; a removed keyword (``sampler=``, ``num_reads=``, ``seed=``: the message names
            the :class:`~hybrid_attention.sampling.Sampling` field that replaces it).
        ValueError: bad shapes, a ``J`` that is not finite, symmetric and zero on the diagonal
            (:func:`hybrid_attention.checks.check_head_couplings`), a bad ``beta``, non-finite visible scores.
    """
    sampling = check_sampling(sampling, "attention_marginals", removed)
    if sampling is None:
        raise TypeError("attention_marginals needs a sampler: pass sampling=Sampling(sampler, ...)")
    if not isinstance(h, torch.Tensor) or h.ndim != 4:
        raise ValueError(f"h must be a tensor of shape (B, H, Tq, T), got {getattr(h, 'shape', type(h).__name__)}")
    B, H, Tq, T = h.shape
    if causal and Tq != T:
        raise ValueError(f"causal attention needs Tq == T, got Tq = {Tq}, T = {T}")
    # validated here, once (the attention layer hands its inputs to this function unchecked): J finite, symmetric,
    # zero diagonal; beta real and > 0; the visible scores finite. The problems below are views of these tensors.
    J = checks.check_head_couplings(J, H, T).to(h.dtype)
    b = checks.beta_per_head(beta, H, h)
    tril = torch.ones(T, T, dtype=torch.bool, device=h.device).tril()
    if not _finite_where_seen(h.detach(), tril if causal else None):
        raise ValueError("h (attention scores) must be finite on the keys each query sees")
    if B == 0:  # an empty batch: empty marginals, no sampler call
        return _zeros_on_graph((B, H, Tq, T), h, J, b)
    key = sampling.chain_key or "attention"
    start = None if sampling.chains is None else sampling.chains.start(key, B=B, H=H, Tq=Tq, T=T)
    m, end = _causal_marginals(h, J, b, sampling, causal, pad_with_mask, tril, start)
    if sampling.chains is not None:  # after every sampler call has returned, outside autograd
        sampling.chains.store(key, end)
    return m


def _causal_marginals(
    h: torch.Tensor,
    J: torch.Tensor,
    b: torch.Tensor,
    sampling: Sampling,
    causal: bool,
    pad_with_mask: bool | None,
    tril: torch.Tensor,
    start: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`attention_marginals` on validated inputs: the sampler calls, per prefix length or group of lengths.
    With persistent chains' start states ``start`` ``(B, H, Tq, chains, T)`` each call starts from its slice of them;
    returns the marginals and the end states (a new tensor; ``None`` without ``start``)."""
    B, H, Tq, T = h.shape
    caps = sampling.sampler.capabilities
    if pad_with_mask is None:
        pad_with_mask = caps.pad_with_mask
    end = None if start is None else start.clone()

    def run(prob: IsingProblem, seed: Any, index: tuple) -> torch.Tensor:  # one sampler call, from start[index]
        m, stop = _marginals(prob, sampling, seed, None if start is None else start[index])
        if end is not None:
            end[index] = stop
        return m

    every = slice(None)
    if not causal or pad_with_mask:
        mask = tril.expand(B, H, T, T) if causal else None
        # J broadcasts over the batch and the queries (not expanded: its gradient is never materialised per query)
        prob = IsingProblem.derived(h, J[None, :, None], _scalar_if_single(b[None, :, None].expand(B, H, Tq)), mask)
        return run(prob, checks.spawn_seeds(sampling.seed, 1, keep_none=True)[0], (every,)), end
    overhead = caps.per_call_overhead
    groups = [(n, n) for n in range(1, T + 1)] if overhead is None else plan_groups(T, B * H, float(overhead))
    seeds = checks.spawn_seeds(sampling.seed, len(groups), keep_none=True)
    parts = []
    for (lo, hi), sd in zip(groups, seeds):
        g = hi - lo + 1
        if g == 1:
            prob = IsingProblem.derived(
                h[:, :, hi - 1, :hi],
                J[None, :, :hi, :hi].expand(B, H, hi, hi),
                _scalar_if_single(b[None, :].expand(B, H)),
                None,
            )
            m = run(prob, sd, (every, every, hi - 1, every, slice(0, hi)))
            m = m[:, :, None]  # (B, H, 1, hi)
        else:  # queries lo-1..hi-1 padded to hi keys, future keys masked (free, decoupled spins)
            mask = tril[lo - 1 : hi, :hi].expand(B, H, g, hi)
            prob = IsingProblem.derived(
                h[:, :, lo - 1 : hi, :hi],
                J[None, :, None, :hi, :hi].expand(B, H, g, hi, hi),
                _scalar_if_single(b[None, :, None].expand(B, H, g)),
                mask,
            )
            index = (every, every, slice(lo - 1, hi), every, slice(0, hi))
            m = run(prob, sd, index)  # (B, H, g, hi), 0 on masked keys
        parts.append(torch.nn.functional.pad(m, (0, T - hi)))
    return torch.cat(parts, dim=2), end
