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
  ``dL/dbeta = -(E[u e] - E[u] E[e])`` with ``e = (beta_h E_h + beta_J E_J) / beta``. For ``R`` reads drawn at
  random these covariances carry the finite-sample factor ``R / (R - 1)`` (the mean-centred sample covariance is
  ``(R - 1) / R`` of the truth on average); exact output probabilities (``SampleSet.exact``) need none.
  :class:`RaoBlackwell` replaces the spin average by the average of the conditional means (lower variance).

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

Persistent chains (:class:`PersistentChains`): a Markov-chain sampler bound to a key
(``chains.bind(sampler, key="layer0")``, a :class:`ChainBoundSampler`) starts each (layer, head, prefix) problem's
chains where the previous call's chains stopped, so a training step needs only a few moves; the states are exported
and restored as tensors (``state_dict`` / ``load_state_dict``) with a checkpoint.

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
import zlib
from typing import Any

import numpy as np
import torch

from . import checks
from .ising import IsingProblem
from .kernels import plan_groups
from .sampler import SamplerCapabilities, capabilities_of

__all__ = [
    "attention_marginals",
    "differentiable_marginals",
    "SampledMarginals",
    "ReadsOnly",
    "RaoBlackwell",
    "PersistentChains",
    "ChainBoundSampler",
]

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

    With a :class:`RaoBlackwell` sampler (``marginal_estimator == "conditional"``) the forward averages the
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
        # reads drawn at random: the mean-centred covariances get the finite-sample (Bessel) correction over the
        # number of reads R (frequency weights count R shots); exact output probabilities need none
        R = int(ss.info.get("num_reads") or s.shape[-2])
        ctx.reads = None if ss.exact or R < 2 else R
        ctx.sampler = sampler
        ctx.conditional = getattr(sampler, "marginal_estimator", "reads") == "conditional"
        if ctx.conditional:  # phi_j = E[s_j | s_-j] at each read (J has a zero diagonal)
            bh, bJ = _effective(sampler, beta)
            field = bh.reshape(-1, 1, 1) * h[:, None, :] + bJ.reshape(-1, 1, 1) * torch.einsum("nrk,njk->nrj", s, J)
            phi = torch.tanh(field)
            if mask is not None:
                phi = phi * mask[:, None, :].to(h.dtype)
            m = torch.einsum("nr,nrj->nj", w, phi)
            ctx.save_for_backward(s, w, m, h, J, beta, phi, None if mask is None else mask.to(h.dtype))
        else:
            m = torch.einsum("nr,nrj->nj", w, s)
            ctx.save_for_backward(s, w, m, h, J, beta)
        return m

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        s, w, m, h, J, beta = ctx.saved_tensors[:6]
        bh, bJ = _effective(ctx.sampler, beta)
        u = torch.einsum("nj,nrj->nr", g, s)  # (N, R)
        Eu = (w * u).sum(-1)  # (N,)
        wu = w * (u - Eu[:, None])  # centred, weighted
        gh = gJ = gb = None
        R = ctx.reads
        if R is not None:  # E[sample covariance] = (R - 1) / R covariance
            wu = wu * (R / (R - 1.0))
        if ctx.needs_input_grad[0] and ctx.conditional:
            phi, mk = ctx.saved_tensors[6:]
            # Cov(s_i, s_j) = Cov(s_i, phi_j) for i != j (s_i is a function of s_-j), estimated as the sample
            # covariance of the reads' s_i and phi_j, each centred on its own mean (Bessel-corrected: unbiased).
            # Centring phi_j on its mean instead of subtracting m_i m_j removes the noise of the spin average of s_i:
            # at J = 0 phi_j is the same at every read and the estimate is exactly 0, as is the true covariance.
            s_c = s - torch.einsum("nr,nrj->nj", w, s)[:, None, :]
            X = torch.einsum("nr,nri,nrj->nij", w, s_c, phi - m[:, None, :])  # Cov(s_i, phi_j)
            if R is not None:
                X = X * (R / (R - 1.0))
            mm2 = m * m
            if R is not None:  # m_j^2 without the reads' own products (a U-statistic: unbiased)
                mm2 = (R * mm2 - torch.einsum("nr,nrj->nj", w, phi * phi)) / (R - 1.0)
            var = 1.0 - mm2  # Var(s_j) = 1 - m_j^2
            if mk is not None:
                var = var * mk
            C = 0.5 * (X + X.transpose(-1, -2))
            C = C - torch.diag_embed(torch.diagonal(C, dim1=-2, dim2=-1)) + torch.diag_embed(var)
            gh = bh.reshape(-1, 1) * torch.einsum("nij,nj->ni", C, g)
        elif ctx.needs_input_grad[0]:
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


class RaoBlackwell(ReadsOnly):
    """A sampler whose reads the bridge turns into marginals by Rao-Blackwellisation: each read contributes the
    conditional means ``E[s_j | s_-j] = tanh(beta (h_j + sum_k J_jk s_k))`` instead of its spins
    (:class:`SampledMarginals`). For Boltzmann reads (``qemcmc``, ``gibbs``, exact samples) the estimate stays unbiased
    and its variance drops, most where the couplings are weak beside the fields, as in attention (at ``J = 0`` it is
    exact from a single read). Reads only (``differentiable=False``); everything else is the wrapped sampler's.

    Example:
        >>> from hybrid_attention.backends import get_sampler
        >>> from hybrid_attention.ising import IsingProblem
        >>> p = IsingProblem(torch.tensor([[0.5, -1.0]], dtype=torch.float64))  # J = 0
        >>> m = differentiable_marginals(p, sampler=RaoBlackwell(get_sampler("gibbs")), num_reads=1, seed=0)
        >>> torch.allclose(m, torch.tanh(p.h))
        True
    """

    marginal_estimator = "conditional"

    def __init__(self, sampler: Any) -> None:
        super().__init__(sampler)
        self.name = f"{getattr(sampler, 'name', 'sampler')}+rb"

    def __repr__(self) -> str:
        return f"RaoBlackwell({self.sampler!r})"


class PersistentChains:
    """Markov-chain states kept between calls of the bridge, per (layer, head, prefix): persistent chains (as in
    persistent contrastive divergence) for samplers that accept ``initial_state`` (``qemcmc``).

    A training step's problems differ from the previous step's only by a small parameter update, so chains that
    start where the last step's chains stopped need only a few moves instead of a full burn-in. Bind a sampler to a
    key (one per attention layer) with :meth:`bind` and hand the bound sampler to the layer / the bridge:
    :func:`attention_marginals` then starts every problem's chains from the stored states and stores where they
    stopped.

    Storage, per key: an int8 ±1 tensor ``(B, H, Tq, num_chains, T)``: for batch row ``b``, head ``hd``, query
    ``i`` (causal: the prefix of ``i + 1`` keys) the states of its chains over the keys (columns beyond the prefix
    are masked, free spins). New keys start uniformly at random from ``seed``. A call with a smaller batch ``B' < B``
    continues the first ``B'`` rows and leaves the others as they are; a larger one grows the store by reusing the
    stored rows cyclically (new row ``b`` starts from stored row ``b % B``); a call with another ``H``, ``Tq``, ``T``
    under the same key raises ``ValueError``.

    :meth:`state_dict` / :meth:`load_state_dict` export and restore every key as tensors (for checkpoints).

    Args:
        num_chains: chains per problem (``num_reads`` of each call must be at least this; reads per chain are
            ``ceil(num_reads / num_chains)``).
        seed: seed of the random initial states (a non-negative int).

    Example:
        >>> from hybrid_attention.backends import get_sampler
        >>> chains = PersistentChains(num_chains=4, seed=0)
        >>> qs = chains.bind(get_sampler("qemcmc", burn_in=2), key="layer0")
        >>> h = torch.randn(2, 1, 3, 3, dtype=torch.float64)
        >>> m = attention_marginals(h, torch.zeros(1, 3, 3, dtype=torch.float64), sampler=qs, num_reads=8, seed=0)
        >>> sorted(chains.state_dict()), tuple(chains.state("layer0").shape)
        (['layer0'], (2, 1, 3, 4, 3))
    """

    def __init__(self, num_chains: int = 8, *, seed: int = 0) -> None:
        self.num_chains = checks.check_positive_int(num_chains, "num_chains")
        self.seed = checks.check_positive_int(seed, "seed", minimum=0)
        self._states: dict[str, torch.Tensor] = {}

    def bind(self, sampler: Any, key: str) -> ChainBoundSampler:
        """``sampler`` bound to the chains stored under ``key`` (a string; one key per attention layer)."""
        return ChainBoundSampler(sampler, self, key)

    def keys(self) -> list[str]:
        return sorted(self._states)

    def state(self, key: str) -> torch.Tensor:
        """The stored states of ``key``, ``(B, H, Tq, num_chains, T)`` int8 (a ``KeyError`` for an unknown key)."""
        return self._states[key]

    def _states_for(self, key: str, B: int, H: int, Tq: int, T: int) -> torch.Tensor:
        """The states of ``key`` for a call of shape ``(B, H, Tq, T)``: created, or resized along the batch."""
        C = self.num_chains
        st = self._states.get(key)
        if st is None:
            rng = np.random.default_rng([self.seed, zlib.crc32(key.encode())])
            st = torch.from_numpy(rng.choice(np.array([-1, 1], dtype=np.int8), size=(B, H, Tq, C, T)))
        elif tuple(st.shape[1:]) != (H, Tq, C, T):
            raise ValueError(
                f"persistent chains {key!r} hold states of shape (B, H, Tq, chains, T) = {tuple(st.shape)}, "
                f"a call needs (B, {H}, {Tq}, {C}, {T}); use another key for another layer"
            )
        elif st.shape[0] > B:  # a smaller batch continues the first B rows; the others are kept as they are
            return st[:B]
        elif st.shape[0] < B:
            st = st[torch.arange(B) % st.shape[0]].clone()
        self._states[key] = st
        return st

    def state_dict(self) -> dict[str, torch.Tensor]:
        """``{key: states}`` (copies, int8 ``(B, H, Tq, num_chains, T)``), for a checkpoint."""
        return {k: v.clone() for k, v in self._states.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (checked: int8 ±1 tensors with 5 dimensions and ``num_chains``)."""
        if not isinstance(state, dict):
            raise TypeError(f"load_state_dict expects a dict of tensors, got {type(state).__name__}")
        loaded = {}
        for k, v in state.items():
            if not isinstance(k, str) or not isinstance(v, torch.Tensor):
                raise TypeError(
                    f"persistent chains: expected str -> tensor, got {type(k).__name__} -> {type(v).__name__}"
                )
            if v.dtype != torch.int8 or v.ndim != 5 or v.shape[3] != self.num_chains or not bool((v.abs() == 1).all()):
                raise ValueError(
                    f"persistent chains {k!r}: expected int8 ±1 states (B, H, Tq, {self.num_chains}, T), got "
                    f"{v.dtype} {tuple(v.shape)}"
                )
            loaded[k] = v.clone().cpu()
        self._states = loaded

    def __repr__(self) -> str:
        return f"PersistentChains(num_chains={self.num_chains}, keys={self.keys()})"


class ChainBoundSampler(ReadsOnly):
    """A sampler bound to :class:`PersistentChains` under a key (:meth:`PersistentChains.bind`).

    Given to :func:`attention_marginals` (directly or as an attention layer's ``sampler``), every problem's chains
    start from the stored states and the final states are stored back. Used anywhere else it is the wrapped
    sampler. Its capabilities are the sampler's with ``differentiable=False`` (chains are sampled, gradients come
    from the covariance backward over the reads). The sampler must accept the per-call option ``initial_state``.
    """

    def __init__(self, sampler: Any, chains: PersistentChains, key: str) -> None:
        if not hasattr(sampler, "sample"):
            raise TypeError(f"bind needs a sampler object, got {type(sampler).__name__}")
        if "initial_state" not in getattr(sampler, "parameters", {}):
            raise TypeError(
                f"sampler {getattr(sampler, 'name', type(sampler).__name__)!r} does not take initial_state; "
                "persistent chains need a Markov-chain sampler such as 'qemcmc'"
            )
        if not isinstance(key, str):
            raise TypeError(f"key must be a string, got {type(key).__name__}")
        self.sampler, self.chains, self.key = sampler, chains, key
        self.name = f"{getattr(sampler, 'name', 'sampler')}+chains"

    # capabilities (differentiable=False) and attribute delegation come from ReadsOnly

    def __repr__(self) -> str:
        return f"ChainBoundSampler({self.sampler!r}, key={self.key!r})"


class _ChainCall:
    """One bridge call of a bound sampler: ``sample`` starts from ``states[index]`` and writes the final states back.
    ``index`` selects ``(*batch, chains, n)`` from the key's ``(B, H, Tq, chains, T)`` states."""

    def __init__(self, bound: ChainBoundSampler, states: torch.Tensor, index: tuple) -> None:
        self.bound, self.states, self.index = bound, states, index
        self.capabilities = bound.capabilities

    def sample(self, problem: IsingProblem, *, num_reads: Any = None, seed: Any = None) -> Any:
        view = self.states[self.index]
        init = view.reshape(-1, *view.shape[-2:]) if problem.h.ndim == 2 else view
        ss = self.bound.sampler.sample(problem, num_reads=num_reads, seed=seed, initial_state=init.numpy())
        self.states[self.index] = torch.from_numpy(np.ascontiguousarray(ss.info["final_state"])).reshape(view.shape)
        return ss

    def __getattr__(self, item: str) -> Any:
        return getattr(self.__dict__["bound"], item)


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

    A :class:`ChainBoundSampler` (``PersistentChains.bind``) as ``sampler`` runs persistent chains: each call's
    problems start from the stored chain states of their (head, query) and the final states are stored back;
    ``num_reads`` must then be at least the number of chains.

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
    states = None
    if isinstance(sampler, ChainBoundSampler):  # persistent chains: states (B, H, Tq, chains, T) of this layer
        states = sampler.chains._states_for(sampler.key, B, H, Tq, T)
        if num_reads is not None and num_reads < sampler.chains.num_chains:
            raise ValueError(f"num_reads = {num_reads} is below the {sampler.chains.num_chains} persistent chains")

    def bound(index: tuple) -> dict[str, Any]:  # the call's sampler: the chains of states[index], or as given
        return kw if states is None else {**kw, "sampler": _ChainCall(sampler, states, index)}

    every = slice(None)
    if not causal or pad_with_mask:
        mask = tril.expand(B, H, T, T) if causal else None
        prob = IsingProblem._derived(
            h, J[None, :, None].expand(B, H, Tq, T, T), _scalar_if_single(b[None, :, None].expand(B, H, Tq)), mask
        )
        return differentiable_marginals(prob, seed=checks.spawn_seeds(seed, 1, keep_none=True)[0], **bound(()))
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
            m = differentiable_marginals(prob, seed=sd, **bound((every, every, hi - 1, every, slice(0, hi))))
            m = m[:, :, None]  # (B, H, 1, hi)
        else:  # queries lo-1..hi-1 padded to hi keys, future keys masked (free, decoupled spins)
            mask = tril[lo - 1 : hi, :hi].expand(B, H, g, hi)
            prob = IsingProblem._derived(
                h[:, :, lo - 1 : hi, :hi],
                J[None, :, None, :hi, :hi].expand(B, H, g, hi, hi),
                _scalar_if_single(b[None, :, None].expand(B, H, g)),
                mask,
            )
            index = (every, every, slice(lo - 1, hi), every, slice(0, hi))
            m = differentiable_marginals(prob, seed=sd, **bound(index))  # (B, H, g, hi), 0 on masked keys
        parts.append(torch.nn.functional.pad(m, (0, T - hi)))
    return torch.cat(parts, dim=2)
