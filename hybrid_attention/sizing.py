"""Parameter counts and width matching: how wide a model of another depth or attention must be to have as many
parameters as a given one (e.g. a two-layer softmax arm matched to a one-layer ``hj`` model).

:func:`count_parameters` counts the trainable parameters of ``Transformer(config)`` (a throw-away model, built
without touching the caller's random state). A coupling-shaped parameter ``J_raw (H, T, T)`` (modes ``hj``, ``j``,
``bias``) counts by its free entries, ``T (T - 1) / 2`` per head: ``J`` is symmetric with a zero diagonal and only the
strict upper triangle of ``J_raw`` is used (``free=False`` counts every stored entry, as ``metrics.json``'s
``n_params`` does). :func:`matched_width` scans the widths (multiples of ``n_head``) of the other model and returns
the one whose count is closest to the reference's, with both counts.

Example:
    >>> from hybrid_attention.model import TransformerConfig
    >>> ref = TransformerConfig(vocab_size=65, block_size=16, n_embd=64, attention="hj")
    >>> m = matched_width(ref)  # two-layer softmax by default
    >>> m.n_embd, m.params, m.reference_params
    (46, 58788, 59576)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from .model import Transformer, TransformerConfig

__all__ = ["count_parameters", "MatchedWidth", "matched_width"]


def count_parameters(config: TransformerConfig, *, free: bool = True) -> int:
    """Trainable parameters of ``Transformer(config)`` (module docstring).

    Args:
        config: the model.
        free: count a coupling matrix ``J_raw (H, T, T)`` by its ``H T (T - 1) / 2`` free entries (``False``:
            by its ``H T^2`` stored ones).
    """
    if not isinstance(config, TransformerConfig):
        raise TypeError(f"config must be a TransformerConfig, got {type(config).__name__}")
    with torch.random.fork_rng(devices=[]):  # the initialisation draws leave the caller's random state alone
        model = Transformer(config)
    total = 0
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if free and name.endswith("J_raw") and p.ndim == 3 and p.shape[-1] == p.shape[-2]:
            H, T = p.shape[0], p.shape[-1]
            total += H * T * (T - 1) // 2
        else:
            total += p.numel()
    return total


@dataclass(frozen=True)
class MatchedWidth:
    """The result of :func:`matched_width`.

    Attributes:
        n_embd: the matched model's width.
        params: its parameter count; reference_params: the reference's (both by :func:`count_parameters`).
        config: the matched model's :class:`~hybrid_attention.model.TransformerConfig`.
    """

    n_embd: int
    params: int
    reference_params: int
    config: TransformerConfig

    @property
    def relative_difference(self) -> float:
        """``params / reference_params - 1``."""
        return self.params / self.reference_params - 1


def matched_width(
    reference: TransformerConfig,
    *,
    n_layer: int = 2,
    attention: str = "softmax",
    max_embd: int | None = None,
    free: bool = True,
    **changes: Any,
) -> MatchedWidth:
    """The width at which a model of ``n_layer`` layers and ``attention`` (and any other ``changes`` of the
    :class:`~hybrid_attention.model.TransformerConfig`, e.g. ``ffn=False``) has the parameter count closest to
    ``reference``'s (ties: the narrower). Everything else (vocabulary, block size, heads, head type) is the
    reference's.

    Args:
        reference: the model to match (e.g. one layer of ``hj``).
        n_layer, attention: the matched model's depth and attention mode.
        max_embd: the widest candidate (default: 4 x the reference's width).
        free: as in :func:`count_parameters`.

    Raises:
        ValueError: ``changes`` holds ``n_embd`` (that is the answer), or no candidate width is valid.

    Example (a study plan: the one-layer hj arm's settings, the two-layer softmax arm's width)::

        cfg = TrainConfig(task="runs", pointer="attention", attention="hj", block_size=32, sampler="meanfield")
        m = matched_width(cfg.model_config())
        two_layer = {"attention": "softmax", "n_layer": 2, "n_embd": m.n_embd}
    """
    if not isinstance(reference, TransformerConfig):
        raise TypeError(f"reference must be a TransformerConfig, got {type(reference).__name__}")
    if "n_embd" in changes:
        raise ValueError("matched_width chooses n_embd; do not pass it in changes")
    target = count_parameters(reference, free=free)
    top = 4 * reference.n_embd if max_embd is None else max_embd
    base = dataclasses.replace(reference, n_layer=n_layer, attention=attention, **changes)
    step = base.n_head
    widths = range(step, top + 1, step)
    if not widths:
        raise ValueError(f"no width in {step} .. {top} (multiples of n_head = {step}) to match")
    # every parameter's size is a product of at most two widths: the count is a quadratic in the width, fixed by
    # three counts (three builds instead of one per candidate); the chosen width is counted again
    xs = [step * k for k in (1, 2, 3)]
    ys = [count_parameters(dataclasses.replace(base, n_embd=x), free=free) for x in xs]
    coeffs = torch.linalg.solve(
        torch.tensor([[x * x, x, 1.0] for x in xs], dtype=torch.float64), torch.tensor(ys, dtype=torch.float64)
    )
    predicted = [round(float(coeffs[0] * w * w + coeffs[1] * w + coeffs[2])) for w in widths]
    width = min(zip(widths, predicted), key=lambda wp: (abs(wp[1] - target), wp[0]))[0]
    cfg = dataclasses.replace(base, n_embd=width)
    n = count_parameters(cfg, free=free)
    assert n == predicted[widths.index(width)], "the parameter count is a quadratic in the width"
    return MatchedWidth(width, n, target, cfg)
