"""Boltzmann attention (docs/theory.md section 3): the functional form and the multi-head ``BoltzmannAttention`` module.

For one head and query ``i`` with visible keys ``K_i`` (causal: ``j <= i``; bidirectional: all ``j``) the
scores ``h_ij = q_i . k_j / sqrt(d)`` are the local fields of an Ising model over the spins of ``K_i`` (masked
keys are dropped, not pinned), ``J`` is a learnable coupling matrix shared by all inputs,
``m_ij = <s_j>`` under ``p_i(s) ∝ exp(-beta E_i(s))``, ``alpha_ij = (1 + m_ij) / 2`` and the attention weights
are ``a_ij = alpha_ij / sum_{k in K_i} alpha_ik``.

Modes (the paper's four-way ablation):

* ``softmax``: standard scaled dot-product attention.
* ``hj``: Boltzmann attention, exact marginals by enumeration (:mod:`hybrid_attention.kernels`) or from a sampler
  (a :class:`~hybrid_attention.sampling.Sampling` value passed as ``sampling=``).
* ``h``: ``J = 0``: independent spins, ``alpha = sigmoid(2 beta h)`` in closed form (normalised sigmoid attention).
* ``j``: ``h = 0``: the energy is spin-flip symmetric, every ``m = 0`` and attention is exactly uniform over the
  visible keys (closed form; ``J`` then gets zero gradient, which is the exact answer). With a sampler, the
  sampler is run with ``h = 0`` and its (noisy) marginals are used. With a symmetry-breaking field
  ``j_field = eps != 0`` every score is replaced by the constant ``eps`` instead: the marginals then depend on ``J``
  (which becomes learnable), still not on the input (docs/theory.md, "Why J-only attention cannot learn").

Control (not one of the paper's modes, :data:`CONTROLS`):

* ``bias``: softmax attention with a learned positional bias: ``softmax_j(h_ij + B_ij)`` over the visible keys,
  with ``B`` symmetric and zero on the diagonal, stored exactly like ``J`` (same parameter, same count). It asks
  whether what ``J`` learns is just a positional prior.
* ``mta``: softmax attention over key-query-convolved scores (Multi-Token Attention, :mod:`hybrid_attention.mta`):
  a learnable ``(c_q, c_k)`` kernel per head pools the scores of neighbouring queries and keys before the softmax,
  causal masking before and after; initialised to the identity, so it starts as softmax. It asks whether pooling
  evidence across neighbouring keys, without couplings, does what ``J`` does.

Example:
    >>> import torch
    >>> from hybrid_attention.attention import boltzmann_attention
    >>> q = k = v = torch.randn(2, 1, 5, 8)
    >>> J = torch.zeros(1, 5, 5)
    >>> boltzmann_attention(q, k, v, J, mode="hj").shape
    torch.Size([2, 1, 5, 8])
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn import functional as F

from . import banded, checks, exact, kernels
from .ising import IsingProblem
from .mta import DEFAULT_KERNEL, identity_kernel, mta_weights
from .sampling import Sampling, check_sampling

__all__ = [
    "MODES",
    "CONTROLS",
    "ALL_MODES",
    "COUPLED_MODES",
    "boltzmann_attention",
    "attention_weights",
    "BoltzmannAttention",
    "AttentionProblems",
    "symmetric_couplings",
    "BAND_SHAPES",
]

#: the paper's four-way ablation
MODES = ("softmax", "hj", "h", "j")
#: control modes: ``bias`` = softmax with a learned positional bias of J's shape; ``mta`` = softmax over
#: key-query-convolved scores (Multi-Token Attention)
CONTROLS = ("bias", "mta")
ALL_MODES = MODES + CONTROLS
#: modes with a ``(H, T, T)`` coupling-shaped parameter ``J_raw``
COUPLED_MODES = ("hj", "j", "bias")
#: how a band of couplings is stored: ``free`` (one value per position and distance, ``(H, W, block_size)``) or
#: ``toeplitz`` (one value per distance, ``(H, W)``: relative position, extends to any sequence length)
BAND_SHAPES = ("free", "toeplitz")


def _check_band(band: Any) -> int:
    if isinstance(band, bool) or not isinstance(band, int):
        raise TypeError(f"band must be an int (0 = a full J, W >= 1 = couplings at key distance <= W), got {band!r}")
    if band < 0:
        raise ValueError(f"band must be >= 0 (0 = a full J, W >= 1 = couplings at key distance <= W), got {band}")
    return band


def _check_mode(mode: Any) -> str:
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a string, one of {ALL_MODES}, got {type(mode).__name__}")
    if mode not in ALL_MODES:
        raise ValueError(f"unknown attention mode {mode!r}; expected one of {ALL_MODES}")
    return mode


def _check_field(j_field: Any) -> float:
    if isinstance(j_field, bool) or not isinstance(j_field, (int, float)) or not math.isfinite(j_field):
        raise ValueError(f"j_field must be a finite real number, got {j_field!r}")
    return float(j_field)


def _visible(Tq: int, T: int, causal: bool, device: Any) -> torch.Tensor:
    """Boolean ``(Tq, T)`` mask of keys visible to each query (causal: key ``j <= i``)."""
    if not causal:
        return torch.ones(Tq, T, dtype=torch.bool, device=device)
    return torch.ones(Tq, T, dtype=torch.bool, device=device).tril()


def attention_weights(
    h: torch.Tensor,
    J: torch.Tensor | None = None,
    *,
    mode: str = "hj",
    causal: bool = True,
    beta: Any = 1.0,
    sampling: Sampling | None = None,
    j_field: float = 0.0,
    band: int = 0,
    kernel: torch.Tensor | None = None,
    **removed: Any,
) -> torch.Tensor:
    """Normalised attention weights from scores.

    Args:
        h: scores ``(B, H, Tq, T)`` (``q.k / sqrt(d)``); causal requires ``Tq == T``.
        J: couplings ``(H, T', T')``, ``T' >= T`` (leading ``T x T`` block used); required for ``hj``, ``j`` and
            ``bias`` (there it is the positional bias ``B``).
        mode: ``softmax | hj | h | j`` or a control, ``bias`` or ``mta`` (module docstring).
        causal: mask future keys (they are dropped from query ``i``'s Ising system).
        beta: inverse temperature, scalar or ``(H,)``, float or (learnable) tensor.
        sampling: ``None`` for exact marginals, else a :class:`~hybrid_attention.sampling.Sampling` value that
            :func:`hybrid_attention.bridge.attention_marginals` runs (DQA samples give a Boltzmann surrogate at the
            sampler's effective beta; see the bridge, which validates ``h``, ``J`` and ``beta`` on that route).
        j_field: mode ``j`` only: the constant symmetry-breaking field that replaces the scores (0: the paper's
            ``h = 0``, exactly uniform attention).
        band: 0 (a full ``J``, exact by enumeration up to ``exact.MAX_SPINS`` keys) or ``W >= 1``: ``J`` is zero beyond
            key distance ``W`` and the exact weights come from the transfer matrix of :mod:`hybrid_attention.banded`
            at any ``T`` (softmax over ``log alpha``; docs/banded.md). A ``J`` with couplings outside the band is refused.
        kernel: mode ``mta`` only: the key-query convolution kernel ``(H, c_q, c_k)`` (:mod:`hybrid_attention.mta`).

    Returns:
        ``(B, H, Tq, T)`` weights, zero on masked keys, rows summing to 1.

    Raises:
        TypeError: a removed keyword (``sampler=``, ``num_reads=``, ``seed=``: the message names the
            :class:`~hybrid_attention.sampling.Sampling` field that replaces it); ``sampling`` not a ``Sampling``.
    """
    sampling = check_sampling(sampling, "attention_weights", removed)
    mode = _check_mode(mode)
    band = _check_band(band)
    j_field = _check_field(j_field)
    if j_field != 0.0 and mode != "j":
        raise ValueError(f"j_field applies to mode 'j' only, got j_field = {j_field} with mode {mode!r}")
    if not isinstance(h, torch.Tensor) or h.ndim != 4:
        raise ValueError(
            f"scores h must be a tensor of shape (B, H, Tq, T), got {getattr(h, 'shape', type(h).__name__)}"
        )
    B, H, Tq, T = h.shape
    if causal and Tq != T:
        raise ValueError(f"causal attention needs as many queries as keys, got Tq = {Tq}, T = {T}")
    vis = _visible(Tq, T, causal, h.device)
    if mode == "softmax":
        if sampling is not None:
            raise ValueError("mode 'softmax' does not use a sampler; pass sampling=None")
        return torch.softmax(h.masked_fill(~vis, float("-inf")), dim=-1)
    if mode == "mta":
        if sampling is not None:
            raise ValueError("mode 'mta' (softmax over convolved scores) does not use a sampler; pass sampling=None")
        if kernel is None:
            raise ValueError("mode 'mta' needs a key-query convolution kernel of shape (H, c_q, c_k), got None")
        return mta_weights(h, kernel, causal=causal)
    if mode in COUPLED_MODES and J is None:
        raise ValueError(f"mode {mode!r} needs couplings J of shape (H, T', T'), got None")
    if mode == "bias" and sampling is not None:
        raise ValueError("mode 'bias' (softmax with a positional bias) does not use a sampler; pass sampling=None")
    if sampling is not None:  # the bridge validates J, beta and the scores it is given (once, on its entry)
        return _sampled_weights(h, J, beta, mode, causal, sampling, j_field, vis)
    if mode in COUPLED_MODES:
        J = checks.check_head_couplings(J, H, T).to(h.dtype)
    if mode == "bias":
        return torch.softmax((h + J[None, :, :Tq, :T]).masked_fill(~vis, float("-inf")), dim=-1)
    b = checks.beta_per_head(beta, H, h)
    if mode == "j" and j_field != 0.0:
        h = torch.full_like(h, j_field)  # a constant field breaks the spin-flip symmetry; the scores stay unused
        return _exact_weights(h, J, b, causal, band)
    if mode == "h":
        # independent spins: (1 + tanh(beta h)) / 2 = sigmoid(2 beta h); normalise in log space so the
        # weights stay exact and finite for any |h| (softmax of log-sigmoid is alpha / sum alpha).
        logit = F.logsigmoid(2.0 * b[None, :, None, None] * h).masked_fill(~vis, float("-inf"))
        return torch.softmax(logit, dim=-1)
    if mode == "j":
        # h = 0: spin-flip symmetry gives m = 0 exactly, alpha = 1/2 on every visible key.
        w = vis.to(h.dtype).expand(B, H, Tq, T)
        return w / w.sum(-1, keepdim=True)
    return _exact_weights(h, J, b, causal, band)


def _sampled_weights(
    h: torch.Tensor,
    J: Any,
    beta: Any,
    mode: str,
    causal: bool,
    sampling: Sampling,
    j_field: float,
    vis: torch.Tensor,
) -> torch.Tensor:
    """:func:`attention_weights` through a sampler (modes ``hj``, ``h``, ``j``): the bridge's marginals, normalised
    over the visible keys. ``J`` and ``beta`` as given: the bridge validates them."""
    from .bridge import attention_marginals  # the sampler route, imported on use

    H, T = h.shape[1], h.shape[-1]
    if mode == "h":
        J = torch.zeros(H, T, T, dtype=h.dtype, device=h.device)
    elif mode == "j":  # h = 0, or the constant symmetry-breaking field (the scores stay unused)
        h = torch.zeros_like(h) if j_field == 0.0 else torch.full_like(h, j_field)
    m = attention_marginals(h, J, beta, sampling=sampling, causal=causal)
    return _NormalisedWeights.apply(m, vis)


class _NormalisedWeights(torch.autograd.Function):
    """:func:`hybrid_attention.kernels.normalised_weights` (the layer's rule) in fewer passes over ``(B, H, T, T)``:
    ``alpha' = max(1 + m, 2 floor)`` on the visible keys, ``a = alpha' / sum alpha'``, bit for bit the rule's
    ``alpha = max((1 + m) / 2, floor)`` normalised (halving is exact in binary floating point, so every ``alpha'``
    and sum is exactly twice the rule's and every ratio the same); the backward in closed form,
    ``dL/dm = [visible, 1 + m >= 2 floor] (g - sum_k g_k a_k) / sum alpha'``, in the order of autograd's operations
    through the rule (so bit for bit its gradient too)."""

    @staticmethod
    def forward(ctx, m: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        floor = 2 * torch.finfo(m.dtype).tiny ** 0.5
        alpha = torch.add(m, 1.0)
        keep = (alpha >= floor).logical_and_(visible)  # the keys whose weight depends on m
        alpha.clamp_min_(floor).mul_(visible)
        total = alpha.sum(-1, keepdim=True)
        a = alpha.div_(total)
        ctx.save_for_backward(a, total, keep)
        return a

    @staticmethod
    @once_differentiable
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, None]:  # noqa: ANN001
        a, total, keep = ctx.saved_tensors
        # autograd's operations through the rule (DivBackward: g / s and -g ((alpha / s) / s) summed), each exactly
        # half of the rule's: the gradient is the rule's bit for bit, so training runs repeat to the last bit
        grad = (g / total).add_((-g * (a / total)).sum(-1, keepdim=True))
        return grad.mul_(keep), None


def _exact_weights(h: torch.Tensor, J: torch.Tensor, b: torch.Tensor, causal: bool, band: int) -> torch.Tensor:
    """Exact weights ``(B, H, Tq, T)`` of validated scores ``h``, couplings ``J (H, T, T)`` and ``b (H,)``: the transfer
    matrix for a band (any ``T``), enumeration for a full ``J`` (``T <= exact.MAX_SPINS``)."""
    if band:
        c = banded.diagonals(J, band)  # refuses a J with couplings outside the band
        return torch.softmax(banded.layer_log_alpha(h, c, b, causal=causal), dim=-1)
    exact.check_size(h.shape[-1])
    # J and beta were validated by the caller: the unvalidated kernel keeps the training hot path lean. Rows whose
    # alpha = (1 + m) / 2 underflows are redone from log alpha (kernels.exact_weights), the others are unchanged.
    return kernels.exact_weights(h, J, b, causal=causal)


def boltzmann_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    J: torch.Tensor | None = None,
    *,
    mode: str = "hj",
    causal: bool = True,
    beta: Any = 1.0,
    sampling: Sampling | None = None,
    j_field: float = 0.0,
    band: int = 0,
    kernel: torch.Tensor | None = None,
    **removed: Any,
) -> torch.Tensor:
    """Boltzmann attention (docs/theory.md section 3): ``o_i = sum_j a_ij v_j``.

    Args:
        q: queries ``(B, H, Tq, d)``.
        k: keys ``(B, H, T, d)``.
        v: values ``(B, H, T, dv)``.
        J: couplings ``(H, T', T')`` with ``T' >= T``, symmetric with zero diagonal (leading ``T x T`` block
            used); needed for modes ``hj`` and ``j``, ignored by ``softmax`` and ``h``.
        mode: ``softmax | hj | h | j`` or a control, ``bias`` or ``mta``.
        causal: query ``i`` sees keys ``j <= i`` only (masked keys are dropped from its Ising system).
        beta: inverse temperature: a float, or a tensor of shape ``()`` or ``(H,)`` (may require grad).
        sampling: ``None`` (exact marginals) or a :class:`~hybrid_attention.sampling.Sampling` value.
        j_field: mode ``j``: constant symmetry-breaking field (:func:`attention_weights`).
        band: 0 (full ``J``) or the band ``W`` of a banded ``J`` (:func:`attention_weights`).
        kernel: mode ``mta``: the key-query convolution kernel ``(H, c_q, c_k)``.

    Returns:
        ``(B, H, Tq, dv)``, differentiable w.r.t. ``q``, ``k``, ``v``, ``J`` and a tensor ``beta``. Works in
        float32 and float64.

    Raises:
        TypeError: a removed keyword (``sampler=``, ``num_reads=``, ``seed=``: the message names the
            :class:`~hybrid_attention.sampling.Sampling` field that replaces it).
    """
    sampling = check_sampling(sampling, "boltzmann_attention", removed)
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.ndim != 4:
            raise ValueError(
                f"{name} must be a tensor of shape (B, H, T, d), got {getattr(t, 'shape', type(t).__name__)}"
            )
    if q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3] or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"incompatible shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    h = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    a = attention_weights(
        h, J, mode=mode, causal=causal, beta=beta, sampling=sampling, j_field=j_field, band=band, kernel=kernel
    )
    return a @ v


def symmetric_couplings(raw: torch.Tensor) -> torch.Tensor:
    """Symmetric, zero-diagonal couplings from a raw ``(H, T, T)`` parameter: its strict upper triangle mirrored."""
    U = torch.triu(raw, diagonal=1)
    return U + U.transpose(-1, -2)


class BoltzmannAttention(nn.Module):
    """Multi-head (causal) self-attention with Boltzmann weights.

    Args:
        n_embd: model width (divisible by ``n_head``).
        n_head: number of heads; each head has its own couplings ``J`` of shape ``(block_size, block_size)``.
        block_size: largest sequence length ``T``.
        mode: ``softmax | hj | h | j`` or a control, ``bias`` or ``mta``.
        beta: initial inverse temperature: a finite real scalar > 0 (Python or numpy number, or a one-element
            tensor).
        learn_beta: learn ``log beta`` per head.
        causal: causal masking.
        dropout: dropout on the output projection.
        j_field: mode ``j`` only: constant symmetry-breaking field (0 = the paper's ``h = 0``).
        band: 0 (a full ``J``) or ``W`` with ``1 <= W < block_size``: couplings only between keys at distance ``<= W``,
            exact at any ``block_size`` by the transfer matrix (:mod:`hybrid_attention.banded`, docs/banded.md).
        band_shape: how a band is stored (:data:`BAND_SHAPES`): ``free`` (``J_raw (H, W, block_size)``,
            ``J_raw[:, d-1, j] = J_{j-d, j}``) or ``toeplitz`` (``J_raw (H, W)``, one value per distance: loads into a
            layer of any ``block_size``).
        kernel_size: mode ``mta`` only: ``(c_q, c_k)`` of the key-query convolution (``c_k`` odd; default the
            paper's ``(6, 11)``); its kernel ``mta_kernel (n_head, c_q, c_k)`` starts as the identity.

    ``J`` is stored as a raw parameter ``J_raw`` (initialised to zero); :attr:`J` mirrors its strict upper
    triangle (or, with a band, places its diagonals), so it is symmetric with a zero diagonal by construction, after
    any optimiser step. Loading a state dict saved with another band or band shape raises ``ValueError``.
    Modes ``softmax`` and ``h`` have no couplings parameter; the control ``bias`` stores its positional bias in
    ``J_raw`` (same shape, same count of free parameters, ``block_size (block_size - 1) / 2`` per head).

    ``forward(x, *, sampling=None, need_weights=False)``: exact marginals without ``sampling``, else those of the
    :class:`~hybrid_attention.sampling.Sampling` value; with ``need_weights`` it returns ``(y, a)``, ``a`` the
    attention weights ``(B, H, T, T)`` (the model's attention pointer head uses them).

    Example:
        >>> import torch
        >>> att = BoltzmannAttention(16, 2, block_size=8, mode="hj")
        >>> att(torch.randn(3, 8, 16)).shape
        torch.Size([3, 8, 16])
    """

    def __init__(
        self,
        n_embd: int,
        n_head: int,
        block_size: int,
        *,
        mode: str = "hj",
        beta: Any = 1.0,
        learn_beta: bool = False,
        causal: bool = True,
        dropout: float = 0.0,
        bias: bool = True,
        j_field: float = 0.0,
        band: int = 0,
        band_shape: str = "free",
        kernel_size: tuple[int, int] = DEFAULT_KERNEL,
    ) -> None:
        super().__init__()
        mode = _check_mode(mode)
        band = _check_band(band)
        if band_shape not in BAND_SHAPES:
            raise ValueError(f"band_shape must be one of {BAND_SHAPES}, got {band_shape!r}")
        j_field = _check_field(j_field)
        if j_field != 0.0 and mode != "j":
            raise ValueError(f"j_field applies to mode 'j' only, got j_field = {j_field} with mode {mode!r}")
        for name, value in (("n_embd", n_embd), ("n_head", n_head), ("block_size", block_size)):
            checks.check_positive_int(value, name)
        if n_embd % n_head:
            raise ValueError(f"n_embd must be divisible by n_head, got n_embd = {n_embd}, n_head = {n_head}")
        if band >= block_size:
            raise ValueError(
                f"band = {band} must be below block_size = {block_size} (a band of width >= block_size - 1 is a full "
                "J); use band 0 for a full J"
            )
        beta = checks.positive_real(beta, "beta")
        self.n_head, self.n_embd, self.block_size = n_head, n_embd, block_size
        self.mode, self.causal = mode, causal
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.dropout = nn.Dropout(dropout)
        self.j_field = j_field
        self.band, self.band_shape = band, band_shape
        if mode in COUPLED_MODES:
            self.J_raw = nn.Parameter(torch.zeros(self._raw_shape()))
        else:
            self.register_parameter("J_raw", None)
        if mode == "mta":
            self.mta_kernel = nn.Parameter(identity_kernel(n_head, *kernel_size))
        else:
            self.register_parameter("mta_kernel", None)
        log_beta = torch.full((n_head,), math.log(beta))
        if learn_beta:
            self.log_beta = nn.Parameter(log_beta)
        else:
            self.register_buffer("log_beta", log_beta)

    def _raw_shape(self) -> tuple[int, ...]:
        H, T, W = self.n_head, self.block_size, self.band
        if not W:
            return (H, T, T)
        return (H, W) if self.band_shape == "toeplitz" else (H, W, T)

    def _describe(self, shape: tuple[int, ...]) -> str:
        """The coupling storage a ``J_raw`` shape stands for (full J, free band or Toeplitz band)."""
        if len(shape) == 2:
            return f"a toeplitz band W = {shape[1]} (shape {tuple(shape)})"
        if len(shape) == 3 and shape[1] != shape[2]:
            return f"a free band W = {shape[1]} (shape {tuple(shape)})"
        return f"a full J (band 0, shape {tuple(shape)})"

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        saved = state_dict.get(prefix + "J_raw")
        if saved is not None and self.J_raw is not None and tuple(saved.shape) != tuple(self.J_raw.shape):
            raise ValueError(
                f"{prefix}J_raw: the state dict holds couplings as {self._describe(tuple(saved.shape))}, this layer "
                f"expects {self._describe(tuple(self.J_raw.shape))} (band = {self.band}, band_shape = "
                f"{self.band_shape!r}, block_size = {self.block_size}); build the model with the band it was saved with"
            )
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @property
    def J(self) -> torch.Tensor | None:
        """Couplings ``(n_head, block_size, block_size)``, symmetric, zero diagonal (``None`` without couplings);
        with a band, zero beyond key distance ``band``."""
        if self.J_raw is None:
            return None
        if self.band:
            return banded.dense_couplings(self.J_raw, self.block_size)
        return symmetric_couplings(self.J_raw)

    @property
    def beta(self) -> torch.Tensor:
        """Inverse temperature per head, shape ``(n_head,)``."""
        return self.log_beta.exp()

    def forward(
        self, x: torch.Tensor, *, sampling: Sampling | None = None, need_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """``x (B, T, n_embd) -> (B, T, n_embd)`` (and the weights ``(B, H, T, T)`` with ``need_weights``)."""
        B, T, C = x.shape
        h, v = self._scores_values(x)
        a = attention_weights(
            h,
            self.J,
            mode=self.mode,
            causal=self.causal,
            beta=self.beta,
            sampling=sampling,
            j_field=self.j_field,
            band=self.band,
            kernel=self.mta_kernel,
        )
        y = (a @ v).transpose(1, 2).contiguous().view(B, T, C)
        y = self.dropout(self.c_proj(y))
        return (y, a) if need_weights else y

    def _scores_values(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The scores ``h = q.k / sqrt(d_head)`` ``(B, H, T, T)`` and the values ``(B, H, T, d_head)`` of ``x``."""
        B, T, C = x.shape
        if T > self.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.block_size}")
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        shape = (B, T, self.n_head, C // self.n_head)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        return (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1]), v

    def problems(self, x: torch.Tensor) -> AttentionProblems:
        """The Ising problems this layer solves on its input ``x (B, T, n_embd)`` (the output of the block's first
        layer norm): the fields its marginals use (the scores in modes ``hj`` and ``h``; 0, or the constant
        ``j_field``, in mode ``j``), its couplings (0 in mode ``h``), the visible keys and ``beta`` per head.

        Raises:
            ValueError: the layer computes no Ising marginals (mode ``softmax`` or the control ``bias``).
        """
        if self.mode not in ("hj", "h", "j"):
            raise ValueError(f"attention mode {self.mode!r} solves no Ising problems (modes hj, h, j do)")
        h, _ = self._scores_values(x)
        T = h.shape[-1]
        if self.mode == "j":
            h = torch.full_like(h, self.j_field)
        J = self.J
        J = torch.zeros(self.n_head, T, T, dtype=h.dtype, device=h.device) if J is None else J[:, :T, :T]
        return AttentionProblems(h=h, J=J, mask=_visible(T, T, self.causal, h.device), beta=self.beta)


@dataclasses.dataclass(frozen=True)
class AttentionProblems:
    """The Ising problems of one attention layer on a batch (docs/theory.md section 3).

    Attributes:
        h: fields ``(B, H, T, T)``: ``h[b, head, i, j]`` is the field of key ``j`` in query ``i``'s system.
        J: couplings ``(H, T, T)``, symmetric, zero diagonal, shared by every query and input.
        mask: ``(T, T)`` bool, ``mask[i, j]`` is True when key ``j`` is a spin of query ``i``'s system (causal:
            ``j <= i``); masked keys are dropped, not pinned.
        beta: inverse temperature per head ``(H,)``.

    :meth:`ising` gives one query's problems as an :class:`~hybrid_attention.ising.IsingProblem`.
    """

    h: torch.Tensor
    J: torch.Tensor
    mask: torch.Tensor
    beta: torch.Tensor

    def ising(self, head: int, query: int, *, dtype: torch.dtype = torch.float64) -> IsingProblem:
        """Query ``query``'s problems of head ``head`` over its visible keys, for every row of the batch:
        ``h (B, n)``, ``J (n, n)`` (``n = query + 1`` causally), in ``dtype``."""
        H, T = self.J.shape[0], self.J.shape[-1]
        if not 0 <= head < H:
            raise ValueError(f"head must be in [0, {H}), got {head}")
        if not 0 <= query < T:
            raise ValueError(f"query must be in [0, {T}), got {query}")
        keys = self.mask[query].nonzero().flatten()
        h = self.h[:, head, query][:, keys]
        J = self.J[head][keys][:, keys]
        return IsingProblem(h.to(dtype), J.to(dtype), beta=float(self.beta[head]))
