"""Decoder-only Transformer (nanoGPT style) with Boltzmann attention: :class:`TransformerConfig`, :class:`Transformer`.

Two heads:

* ``head="lm"``: next-token logits over the vocabulary (Tiny Shakespeare).
* ``head="position"``: a pointer head: at each position ``i`` logits over the ``block_size`` positions
  ``j <= i`` (later positions are masked), for the bracket task (closing bracket -> its matching opening bracket).
  The loss counts only positions whose target is not ``ignore_index`` (-100).
* ``head="attention"``: the attention weights themselves point: the logits are ``log a_ij`` of the last layer's
  attention (mean over its heads), so the softmax over positions is exactly that attention row. No linear head.

:meth:`Transformer.couplings_zeroed` evaluates a trained model with every ``J`` set to 0 (a context manager).

Example:
    >>> import torch
    >>> cfg = TransformerConfig(vocab_size=10, block_size=8, n_embd=16, attention="hj")
    >>> model = Transformer(cfg)
    >>> idx = torch.randint(0, 10, (2, 8))
    >>> logits, loss = model(idx, idx)
    >>> tuple(logits.shape), bool(loss > 0)
    ((2, 8, 10), True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from . import exact as _exact
from .attention import ALL_MODES, BAND_SHAPES, COUPLED_MODES, AttentionProblems, BoltzmannAttention
from .mta import check_kernel_size
from .sampling import Sampling

__all__ = ["TransformerConfig", "Transformer", "IGNORE_INDEX", "HEADS"]

IGNORE_INDEX = -100
HEADS = ("lm", "position", "attention")


@dataclass
class TransformerConfig:
    """Model hyperparameters (names as in nanoGPT).

    Attributes:
        vocab_size: number of token ids.
        block_size: largest sequence length ``T`` (Ising spins per query in modes ``hj``/``j``).
        n_layer, n_head, n_embd: depth, heads per layer, width (``n_embd % n_head == 0``).
        ffn: include the MLP sub-block (the bracket ablation also runs without it).
        dropout: dropout probability.
        attention: ``softmax | hj | h | j`` or a control: ``bias`` (softmax with a learned positional bias) or
            ``mta`` (softmax over key-query-convolved scores, :mod:`hybrid_attention.mta`).
        beta: (initial) inverse temperature of the Ising attention.
        learn_beta: learn ``log beta`` per head.
        head: ``lm`` (next-token), ``position`` (pointer over positions) or ``attention`` (the last layer's
            attention weights are the pointer).
        j_field: mode ``j``: constant symmetry-breaking field (0: the paper's exactly uniform J-only attention).
        bias: biases in linear layers and layer norms.
        exact_max_spins: limit for exact enumeration (``exact.MAX_SPINS``); checked for ``hj``/``j`` with the
            exact path (``exact=True``).
        exact: whether marginals are computed exactly (``False`` when a sampler is attached).
        band: 0 (a full ``J``, today's model) or ``W`` with ``1 <= W < block_size``: couplings only between keys at
            distance ``<= W``, exact at any ``block_size`` by the transfer matrix (docs/banded.md; no ``exact_max_spins``
            limit then).
        band_shape: ``free`` (one coupling per position and distance) or ``toeplitz`` (one per distance).
        mta_query_kernel, mta_key_kernel: attention ``mta``: the convolution kernel's size ``(c_q, c_k)`` (``c_k``
            odd; default the paper's ``(6, 11)``).
    """

    vocab_size: int
    block_size: int
    n_layer: int = 1
    n_head: int = 1
    n_embd: int = 64
    ffn: bool = True
    dropout: float = 0.0
    attention: str = "hj"
    beta: float = 1.0
    learn_beta: bool = False
    head: str = "lm"
    bias: bool = True
    j_field: float = 0.0
    exact: bool = True
    exact_max_spins: int = _exact.MAX_SPINS
    band: int = 0
    band_shape: str = "free"
    mta_query_kernel: int = 6
    mta_key_kernel: int = 11

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError``/``TypeError`` with the expected and received value for bad settings."""
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"TransformerConfig.{name} must be an int, got {type(v).__name__} {v!r}")
            if v < 1:
                raise ValueError(f"TransformerConfig.{name} must be >= 1, got {v}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd must be divisible by n_head, got n_embd = {self.n_embd}, n_head = {self.n_head}")
        if self.attention not in ALL_MODES:
            raise ValueError(f"unknown attention mode {self.attention!r}; expected one of {ALL_MODES}")
        if (
            isinstance(self.j_field, bool)
            or not isinstance(self.j_field, (int, float))
            or not math.isfinite(self.j_field)
        ):
            raise ValueError(f"j_field must be a finite real number, got {self.j_field!r}")
        if self.j_field != 0 and self.attention != "j":
            raise ValueError(
                f"j_field applies to attention 'j' only, got j_field = {self.j_field} with {self.attention!r}"
            )
        check_kernel_size(self.mta_query_kernel, self.mta_key_kernel)
        if self.head not in HEADS:
            raise ValueError(f"unknown head {self.head!r}; expected one of {HEADS}")
        if not (isinstance(self.dropout, (int, float)) and 0.0 <= self.dropout < 1.0):
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if not (isinstance(self.beta, (int, float)) and math.isfinite(self.beta) and self.beta > 0):
            raise ValueError(f"beta must be a finite number > 0, got {self.beta!r}")
        self._validate_band()
        if self.exact and self.attention in ("hj", "j") and not self.band and self.block_size > self.exact_max_spins:
            raise ValueError(
                f"block_size = {self.block_size} is above the exact-enumeration limit of {self.exact_max_spins} spins for "
                f"attention {self.attention!r} (each query is an Ising system over up to block_size keys, 2**block_size "
                "states); use block_size <= the limit, a band (band = W < block_size: exact at any length), attention "
                "'softmax' or 'h', or an approximate sampler"
            )

    def _validate_band(self) -> None:
        if isinstance(self.band, bool) or not isinstance(self.band, int):
            raise TypeError(f"TransformerConfig.band must be an int, got {type(self.band).__name__} {self.band!r}")
        if self.band < 0:
            raise ValueError(f"TransformerConfig.band must be >= 0 (0 = a full J), got {self.band}")
        if self.band >= self.block_size:
            raise ValueError(
                f"TransformerConfig.band = {self.band} must be below block_size = {self.block_size} (a band of width "
                ">= block_size - 1 is a full J; use band 0)"
            )
        if self.band_shape not in BAND_SHAPES:
            raise ValueError(f"TransformerConfig.band_shape must be one of {BAND_SHAPES}, got {self.band_shape!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class MLP(nn.Module):
    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    """Pre-norm residual block: attention, then (optionally) the MLP."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = BoltzmannAttention(
            cfg.n_embd,
            cfg.n_head,
            cfg.block_size,
            mode=cfg.attention,
            beta=cfg.beta,
            learn_beta=cfg.learn_beta,
            dropout=cfg.dropout,
            bias=cfg.bias,
            j_field=cfg.j_field,
            band=cfg.band,
            band_shape=cfg.band_shape,
            kernel_size=(cfg.mta_query_kernel, cfg.mta_key_kernel),
        )
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias) if cfg.ffn else None
        self.mlp = MLP(cfg) if cfg.ffn else None

    def forward(
        self, x: torch.Tensor, *, sampling: Sampling | None = None, need_weights: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``x (B, T, n_embd) -> (x, a)``: the block's output and (with ``need_weights``) its attention weights
        ``(B, H, T, T)``, else ``None``."""
        y, a = self.attn(self.ln_1(x), sampling=sampling, need_weights=True)
        x = x + y
        if self.mlp is not None:
            x = x + self.mlp(self.ln_2(x))
        return x, (a if need_weights else None)


class Transformer(nn.Module):
    """Decoder-only Transformer: token + learned position embeddings, ``n_layer`` blocks, final norm, head.

    ``forward(idx (B, T) int64, targets (B, T) | None, *, sampling=None) -> (logits, loss)``; logits are
    ``(B, T, vocab_size)`` for ``head="lm"`` and ``(B, T, block_size)`` for ``head="position"`` (entries ``j > i``
    are ``-inf``); ``loss`` is the mean cross-entropy over targets != -100, or ``None`` without targets.
    ``sampling``: ``None`` for exact marginals, else a :class:`~hybrid_attention.sampling.Sampling` value; layer
    ``i`` gets its view ``sampling.layer(i)`` (its persistent chains live under the key ``layer<i>``).
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        if not isinstance(config, TransformerConfig):
            raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
        config.validate()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        out = config.vocab_size if config.head == "lm" else config.block_size
        self.head = (
            nn.Linear(config.n_embd, out, bias=config.head == "position") if config.head != "attention" else None
        )
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2 scaled init of residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    @property
    def attention_layers(self) -> list[BoltzmannAttention]:
        return [b.attn for b in self.blocks]

    def couplings(self) -> list[torch.Tensor | None]:
        """Per layer: ``J`` of shape ``(n_head, block_size, block_size)`` (detached) or ``None`` (for the control
        ``bias``: its learned positional bias, stored like ``J``)."""
        return [None if a.J is None else a.J.detach().clone() for a in self.attention_layers]

    @contextlib.contextmanager
    def couplings_zeroed(self) -> Iterator[Transformer]:
        """Within the block every layer's ``J`` is 0 (``hj`` then computes exactly what ``h`` computes with the same
        weights); the learned values are restored afterwards, also on an exception.

        Raises:
            ValueError: the model has no couplings (attention not in ``hj | j | bias``).
        """
        if self.config.attention not in COUPLED_MODES:
            raise ValueError(
                f"couplings_zeroed needs a model with couplings (attention in {COUPLED_MODES}), "
                f"got attention {self.config.attention!r}"
            )
        saved = [a.J_raw.detach().clone() for a in self.attention_layers]
        try:
            with torch.no_grad():
                for a in self.attention_layers:
                    a.J_raw.zero_()
            yield self
        finally:
            with torch.no_grad():
                for a, J in zip(self.attention_layers, saved):
                    a.J_raw.copy_(J)

    def _embed(self, idx: torch.Tensor, sampling: Sampling | None) -> torch.Tensor:
        """Checked inputs -> token + position embeddings ``(B, T, n_embd)`` (after dropout)."""
        if sampling is not None and not isinstance(sampling, Sampling):
            raise TypeError(f"sampling must be a Sampling or None, got {type(sampling).__name__}")
        if idx.ndim != 2:
            raise ValueError(f"idx must have shape (B, T), got {tuple(idx.shape)}")
        T = idx.shape[1]
        if T > self.config.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.config.block_size}")
        pos = torch.arange(T, device=idx.device)
        return self.drop(self.wte(idx) + self.wpe(pos))

    def _trunk(
        self, idx: torch.Tensor, sampling: Sampling | None, weights: str
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Embeddings and blocks: the last hidden state ``(B, T, n_embd)`` and the attention weights of every layer
        (``weights="all"``), of the last (``"last"``) or of none (``"none"``)."""
        x = self._embed(idx, sampling)
        maps = []
        for i, block in enumerate(self.blocks):
            need = weights == "all" or (weights == "last" and i == len(self.blocks) - 1)
            x, a = block(x, sampling=None if sampling is None else sampling.layer(i), need_weights=need)
            if need:
                maps.append(a)
        return x, maps

    def attention_maps(self, idx: torch.Tensor, *, sampling: Sampling | None = None) -> list[torch.Tensor]:
        """The attention weights of every layer for ``idx (B, T)``: a list of ``(B, n_head, T, T)`` tensors (rows sum
        to 1, zero on future keys), computed exactly or with ``sampling``."""
        return self._trunk(idx, sampling, "all")[1]

    @torch.no_grad()
    def attention_problems(self, idx: torch.Tensor, *, layers: list[int] | None = None) -> list[AttentionProblems]:
        """The Ising problems every attention layer solves on ``idx (B, T)``: one
        :class:`~hybrid_attention.attention.AttentionProblems` (fields ``h (B, H, T, T)``, couplings ``J (H, T, T)``,
        the visible-key ``mask (T, T)``, ``beta (H,)``) per layer, or per layer of ``layers``.

        The layers below a requested one run exactly (no sampler); nothing above the last requested layer runs, so
        the problems of layer 0 cost no marginals at all. Without gradients; call ``model.eval()`` first for
        problems without dropout.

        Raises:
            ValueError: a layer index out of range, or a layer that solves no Ising problems (``softmax``, ``bias``).
        """
        wanted = list(range(len(self.blocks))) if layers is None else [int(i) for i in layers]
        bad = [i for i in wanted if not 0 <= i < len(self.blocks)]
        if bad:
            raise ValueError(f"layers must be in [0, {len(self.blocks)}), got {bad}")
        x = self._embed(idx, None)
        out = {}
        for i, block in enumerate(self.blocks[: max(wanted, default=-1) + 1]):
            if i in wanted:
                out[i] = block.attn.problems(block.ln_1(x))
            if i < max(wanted):
                x, _ = block(x)
        return [out[i] for i in wanted]

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None, *, sampling: Sampling | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        pointer = self.config.head == "attention"
        x, maps = self._trunk(idx, sampling, "last" if pointer else "none")
        B, T = idx.shape
        if pointer:
            a = maps[-1].mean(1)  # (B, T, T); zero on future keys
            logits = torch.log(a.clamp_min(torch.finfo(a.dtype).tiny))
            if T < self.config.block_size:
                logits = F.pad(logits, (0, self.config.block_size - T), value=float("-inf"))
        else:
            logits = self.head(self.ln_f(x))
        if self.config.head in ("position", "attention"):
            future = torch.ones(T, self.config.block_size, dtype=torch.bool, device=idx.device).triu(1)
            logits = logits.masked_fill(future, float("-inf"))
        loss = None
        if targets is not None:
            if targets.shape != idx.shape:
                raise ValueError(f"targets must have shape {tuple(idx.shape)}, got {tuple(targets.shape)}")
            loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T), ignore_index=IGNORE_INDEX)
        return logits, loss
