"""Sampler bridge: any sampler's output as attention marginals with gradients (docs/theory.md section 3).

:func:`attention_marginals` turns a layer's scores ``h (B, H, Tq, T)`` and couplings ``J (H, T', T')`` into Ising
problems (causally: one batched problem per prefix length, so every problem of one size goes to the sampler in
one call), runs the sampler and returns ``<s_j>`` shaped like ``h``.

What the bridge does with a sampler is decided by its declared
:class:`~hybrid_attention.sampler.SamplerCapabilities` (``sampler.capabilities``), never by probing attributes:
``differentiable``, ``dqa`` (effective beta of the surrogate gradients), ``pad_with_mask`` and ``per_call_overhead``
(how causal prefixes are batched into calls).

Gradients:

* samplers with ``capabilities.differentiable`` (exact enumeration, fast statevector, mean field) keep the autograd
  graph: the bridge calls their ``differentiable_marginals(problem)``;
* otherwise the bridge samples (:meth:`Sampler.sample`) and applies :class:`SampledMarginals`, whose backward
  uses the covariance identities over the same reads: for an upstream gradient ``g`` and ``u = g.s``,
  ``dL/dh_k = beta_h (E[u s_k] - E[u] E[s_k])``, ``dL/dJ_kl = beta_J (E[u s_k s_l] - E[u] E[s_k s_l]) / 2`` per
  matrix entry (``J_kl`` and ``J_lk`` each carry half of the pair's coupling ``sum_{k<l}``), and
  ``dL/dbeta = -(E[u e] - E[u] E[e])`` with ``e = (beta_h E_h + beta_J E_J) / beta``.

  With the exact sampler (exact weights or exact samples) ``beta_h = beta_J = beta`` and these are the exact
  gradients (equal to autograd through enumeration). With DQA samples they are a **Boltzmann surrogate**: the
  gradient of a Boltzmann model at the sampler's effective inverse temperatures
  (``sampler.effective_beta(beta)`` of a ``capabilities.dqa`` sampler, leading order in the anneal time, see
  :mod:`hybrid_attention.circuits.temperature`), evaluated on the DQA reads; DQA output is only approximately
  Boltzmann, so this is not the exact gradient of the circuit's output. Measured against the true circuit gradient
  (``results/dqa_vs_exact/gradient_check.md``), the field part agrees in direction (cosine 0.7-1.0) while the coupling
  part is poor (couplings act on marginals at second order in beta, where DQA is not Boltzmann); with a simulator,
  prefer a differentiable sampler (``statevector``).

Example:
    >>> import torch
    >>> from hybrid_attention.backends import get_sampler
    >>> h = torch.randn(1, 1, 3, 3, dtype=torch.float64, requires_grad=True)
    >>> J = torch.zeros(1, 3, 3, dtype=torch.float64, requires_grad=True)
    >>> m = attention_marginals(h, J, 1.0, sampler=get_sampler("exact"))
    >>> m.shape, bool(m[0, 0, 0, 1] == 0)
    (torch.Size([1, 1, 3, 3]), True)
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np
import torch

from . import checks
from .ising import IsingProblem
from .kernels import plan_groups
from .sampler import SamplerCapabilities, capabilities_of

__all__ = ["attention_marginals", "differentiable_marginals", "SampledMarginals", "ReadsOnly"]

logger = logging.getLogger(__name__)


def _effective(sampler: Any, beta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(beta_h, beta_J)`` of the sampler's output: its effective inverse temperatures for a DQA sampler, else
    ``beta`` itself (a Boltzmann sampler)."""
    if not capabilities_of(sampler).dqa:
        return beta, beta
    bh, bJ = sampler.effective_beta(beta)
    return torch.as_tensor(bh, dtype=beta.dtype), torch.as_tensor(bJ, dtype=beta.dtype)


class SampledMarginals(torch.autograd.Function):
    """Marginals from a sampler's reads; backward by the covariance identities (module docstring).

    ``forward(h (N, n), J (N, n, n), beta (N,), mask (N, n) bool or None, sampler, num_reads, seed)``.
    """

    @staticmethod
    def forward(
        ctx: Any,
        h: torch.Tensor,
        J: torch.Tensor,
        beta: torch.Tensor,
        mask: Any,
        sampler: Any,
        num_reads: Any,
        seed: Any,
    ) -> torch.Tensor:
        problem = IsingProblem._derived(h.detach(), J.detach(), beta.detach(), mask)  # parts of a validated problem
        ss = sampler.sample(problem, num_reads=num_reads, seed=seed)
        s = torch.from_numpy(ss.spins.astype(np.float64)).to(h.dtype)  # (N, R, n)
        if mask is not None:
            s = s * mask[:, None, :].to(h.dtype)
        w = torch.from_numpy(ss.weights).to(h.dtype)  # (N, R)
        m = torch.einsum("nr,nrj->nj", w, s)
        ctx.save_for_backward(s, w, m, h, J, beta)
        ctx.sampler = sampler
        return m

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        s, w, m, h, J, beta = ctx.saved_tensors
        bh, bJ = _effective(ctx.sampler, beta)
        u = torch.einsum("nj,nrj->nr", g, s)  # (N, R)
        Eu = (w * u).sum(-1)  # (N,)
        wu = w * (u - Eu[:, None])  # centred, weighted
        gh = gJ = gb = None
        if ctx.needs_input_grad[0]:
            gh = bh[:, None] * torch.einsum("nr,nrj->nj", wu, s)
        cov_ss = None
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            cov_ss = torch.einsum("nr,nrk,nrl->nkl", wu, s, s)
            cov_ss = cov_ss - torch.diag_embed(torch.diagonal(cov_ss, dim1=-2, dim2=-1))
        if ctx.needs_input_grad[1]:
            gJ = 0.5 * bJ[:, None, None] * cov_ss
        if ctx.needs_input_grad[2]:
            # d<s>/dbeta with p ∝ exp(-beta e), e = (bh E_h + bJ E_J) / beta: -(Cov(u, e))
            cov_h = (torch.einsum("nr,nrj->nj", wu, s) * h).sum(-1)  # Cov(u, h.s) = -Cov(u, E_h)
            cov_J = 0.5 * (cov_ss * J).sum((-2, -1))  # Cov(u, sum_{k<l} J s s) = -Cov(u, E_J)
            gb = (bh * cov_h + bJ * cov_J) / beta
        return gh, gJ, gb, None, None, None, None


class ReadsOnly:
    """Wrap a sampler so the bridge uses its *reads* (finite shots) and the covariance backward, even when the
    sampler is differentiable (e.g. train on 256 DQA shots per problem drawn by the fast ``statevector`` simulator
    instead of its exact output marginals): its capabilities say ``differentiable=False`` and it has no
    ``differentiable_marginals``. Everything else is delegated.

    Example:
        >>> from hybrid_attention.backends import get_sampler
        >>> s = ReadsOnly(get_sampler("exact"))
        >>> s.capabilities.differentiable, hasattr(s, "differentiable_marginals"), s.name
        (False, False, 'exact+reads')
    """

    def __init__(self, sampler: Any) -> None:
        if not hasattr(sampler, "sample"):
            raise TypeError(f"ReadsOnly needs a sampler object, got {type(sampler).__name__}")
        self.sampler = sampler
        self.name = f"{getattr(sampler, 'name', 'sampler')}+reads"

    @property
    def capabilities(self) -> SamplerCapabilities:
        return dataclasses.replace(capabilities_of(self.sampler), differentiable=False)

    def __getattr__(self, item: str) -> Any:
        if item == "differentiable_marginals":
            raise AttributeError(item)
        return getattr(self.__dict__["sampler"], item)

    def __repr__(self) -> str:
        return f"ReadsOnly({self.sampler!r})"


def _as_problem_parts(problem: IsingProblem) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Any]:
    flat = problem.flatten()
    N, n = flat.h.shape
    h, J = flat.dropped()
    J = J.expand(N, n, n)
    beta = (
        flat.beta_tensor()
        if isinstance(flat.beta, torch.Tensor)
        else torch.full((N,), float(flat.beta), dtype=flat.dtype)
    )
    return h, J, beta, flat.mask


def differentiable_marginals(
    problem: IsingProblem, *, sampler: Any, num_reads: int | None = None, seed: Any = None, backward: str = "auto"
) -> torch.Tensor:
    """``<s_j>`` of a (batched) problem through ``sampler``, differentiable w.r.t. the problem's tensors.

    Args:
        problem: :class:`IsingProblem` whose ``h``, ``J`` (and tensor ``beta``) may carry autograd history.
        sampler: any :class:`~hybrid_attention.backends.Sampler`.
        num_reads, seed: forwarded to ``sampler.sample`` (checked here: a positive int or ``None``; an
            ``int | numpy.random.Generator | numpy.random.SeedSequence | None``).
        backward: ``"auto"`` (the sampler's own ``differentiable_marginals`` when ``capabilities.differentiable``, else
            covariance)
            or ``"covariance"`` (always sample and use :class:`SampledMarginals`).

    Returns:
        ``(*batch, n)`` marginals (0 on masked spins) in the problem's dtype; an empty batch gives an empty result
        without calling the sampler.
    """
    if not isinstance(problem, IsingProblem):
        raise TypeError(f"expected an IsingProblem, got {type(problem).__name__}")
    if backward not in ("auto", "covariance"):
        raise ValueError(f"backward must be 'auto' or 'covariance', got {backward!r}")
    checks.check_num_reads(num_reads)
    checks.check_seed(seed)
    caps = capabilities_of(sampler)
    if problem.h.numel() == 0:  # an empty batch: no sampler call (samplers need not handle it)
        return _zeros_on_graph((*problem.batch_shape, problem.n), problem.h, problem.J, problem.beta)
    if backward == "auto" and caps.differentiable:
        return sampler.differentiable_marginals(problem).to(problem.dtype)
    h, J, beta, mask = _as_problem_parts(problem)
    m = SampledMarginals.apply(h, J, beta.to(h.dtype), mask, sampler, num_reads, seed)
    return m.reshape(*problem.batch_shape, problem.n)


def _zeros_on_graph(shape: tuple[int, ...], *tensors: Any) -> torch.Tensor:
    """Zeros of ``shape`` that stay on the autograd graph of ``tensors`` (their gradients are then zero, not
    ``None``), for empty batches."""
    ts = [t for t in tensors if isinstance(t, torch.Tensor)]
    out = ts[0].new_zeros(shape)
    for t in ts:
        if t.requires_grad:
            out = out + 0.0 * t.sum()
    return out


def _scalar_if_single(beta: torch.Tensor) -> torch.Tensor:
    # IsingProblem.flatten keeps a one-element beta as given; a 0-d tensor broadcasts to any batch shape
    return beta.reshape(()) if beta.numel() == 1 else beta


def attention_marginals(
    h: torch.Tensor,
    J: torch.Tensor,
    beta: Any = 1.0,
    *,
    sampler: Any,
    causal: bool = True,
    num_reads: int | None = None,
    seed: Any = None,
    pad_with_mask: bool | None = None,
    backward: str = "auto",
) -> torch.Tensor:
    """Attention marginals ``m[b, hd, i, j] = <s_j>`` of query ``i``'s Ising system, through ``sampler``.

    Args:
        h: scores ``(B, H, Tq, T)``; causal needs ``Tq == T`` (query ``i`` sees keys ``0..i``).
        J: couplings ``(H, T', T')``, ``T' >= T`` (leading block used), symmetric, zero diagonal.
        beta: scalar or ``(H,)`` (float or tensor; a tensor gets a gradient).
        sampler: a sampler object (``get_sampler(name, ...)``).
        causal: drop future keys (one sampler call per prefix length, or per group of lengths, all ``B * H`` rows
            at once).
        num_reads, seed: reads per problem (a positive int or ``None``) and seed
            (``int | numpy.random.Generator | numpy.random.SeedSequence | None``; child seeds are spawned per call).
        pad_with_mask: one call with ``n = T`` and a causal mask instead of one call per prefix length (default:
            ``sampler.capabilities.pad_with_mask``). Otherwise, a sampler whose capabilities give a
            ``per_call_overhead`` ``c`` (in units of one problem-configuration ``rows * 2**n``) gets consecutive
            prefix lengths grouped into padded, causally masked calls where that is cheaper
            (dynamic programming, :func:`hybrid_attention.kernels.plan_groups`).
        backward: ``"auto"`` or ``"covariance"`` (see :func:`differentiable_marginals`).

    Returns:
        ``(B, H, Tq, T)`` marginals, differentiable w.r.t. ``h``, ``J`` (and ``beta``); zeros above the
        diagonal when causal. Exact gradients with the exact sampler; a Boltzmann surrogate at the sampler's
        effective beta for DQA samplers (module docstring).
    """
    if not isinstance(h, torch.Tensor) or h.ndim != 4:
        raise ValueError(f"h must be a tensor of shape (B, H, Tq, T), got {getattr(h, 'shape', type(h).__name__)}")
    B, H, Tq, T = h.shape
    if not isinstance(J, torch.Tensor) or J.ndim != 3 or J.shape[0] != H or J.shape[1] < T or J.shape[1] != J.shape[2]:
        raise ValueError(
            f"J must be a tensor of shape (H, T', T') with H = {H}, T' >= T = {T}, got {getattr(J, 'shape', None)}"
        )
    if causal and Tq != T:
        raise ValueError(f"causal attention needs Tq == T, got Tq = {Tq}, T = {T}")
    if sampler is None or not hasattr(sampler, "sample"):
        raise TypeError(f"sampler must be a Sampler object, got {type(sampler).__name__}")
    caps = capabilities_of(sampler)
    checks.check_num_reads(num_reads)
    checks.check_seed(seed)
    J = J[:, :T, :T].to(h.dtype)
    b = checks.beta_per_head(beta, H, h)
    if pad_with_mask is None:
        pad_with_mask = caps.pad_with_mask
    # validate once (J symmetric with zero diagonal and finite, beta valid, visible h finite); the problems below
    # are views of these tensors
    IsingProblem(torch.zeros(H, T, dtype=h.dtype, device=h.device), J.detach(), beta=b.detach())
    tril = torch.ones(T, T, dtype=torch.bool, device=h.device).tril()
    if not bool(torch.isfinite(h.detach().masked_fill(~tril, 0.0) if causal else h.detach()).all()):
        raise ValueError("h (attention scores) must be finite on the keys each query sees")
    if B == 0:  # an empty batch: empty marginals, no sampler call
        return _zeros_on_graph((B, H, Tq, T), h, J, b)
    kw = {"sampler": sampler, "num_reads": num_reads, "backward": backward}
    if not causal or pad_with_mask:
        mask = tril.expand(B, H, T, T) if causal else None
        prob = IsingProblem._derived(
            h, J[None, :, None].expand(B, H, Tq, T, T), _scalar_if_single(b[None, :, None].expand(B, H, Tq)), mask
        )
        return differentiable_marginals(prob, seed=checks.spawn_seeds(seed, 1, keep_none=True)[0], **kw)
    overhead = caps.per_call_overhead
    groups = [(n, n) for n in range(1, T + 1)] if overhead is None else plan_groups(T, B * H, float(overhead))
    seeds = checks.spawn_seeds(seed, len(groups), keep_none=True)
    parts = []
    for (lo, hi), sd in zip(groups, seeds):
        g = hi - lo + 1
        if g == 1:
            prob = IsingProblem._derived(
                h[:, :, hi - 1, :hi],
                J[None, :, :hi, :hi].expand(B, H, hi, hi),
                _scalar_if_single(b[None, :].expand(B, H)),
                None,
            )
            m = differentiable_marginals(prob, seed=sd, **kw)[:, :, None]  # (B, H, 1, hi)
        else:  # queries lo-1..hi-1 padded to hi keys, future keys masked (free, decoupled spins)
            mask = tril[lo - 1 : hi, :hi].expand(B, H, g, hi)
            prob = IsingProblem._derived(
                h[:, :, lo - 1 : hi, :hi],
                J[None, :, None, :hi, :hi].expand(B, H, g, hi, hi),
                _scalar_if_single(b[None, :, None].expand(B, H, g)),
                mask,
            )
            m = differentiable_marginals(prob, seed=sd, **kw)  # (B, H, g, hi), 0 on masked keys
        parts.append(torch.nn.functional.pad(m, (0, T - hi)))
    return torch.cat(parts, dim=2)
