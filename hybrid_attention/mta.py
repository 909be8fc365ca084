"""Key-query convolution (Multi-Token Attention, Golovneva, Wang, Weston, Sukhbaatar 2025, arXiv 2504.00927): the
control attention mode ``mta``.

Each head's attention logits ``h_ij = q_i . k_j / sqrt(d)`` are convolved by a learnable 2-D kernel ``theta`` of
size ``(c_q, c_k)`` over (query, key) positions before the softmax:

``l_ij = sum_{a = 0 .. c_q - 1} sum_{b = -(c_k - 1)/2 .. (c_k - 1)/2} theta[c_q - 1 - a, (c_k - 1)/2 + b] * h~_{i-a, j+b}``

so query ``i``'s logit for key ``j`` pools the scores of the ``c_q`` latest queries (``i, i - 1, ...``; the query
axis is padded on one side only, as in the paper's code) against the keys around ``j`` (``c_k`` odd, centred).
Causal masking is applied before and after the convolution, as in the paper: ``h~`` is ``h`` with the score of every
key invisible to its query set to 0, so a visible logit ``l_ij`` (``j <= i``) pools only scores ``h_{i-a, j+b}``
with ``j + b <= i - a <= i``: no future key (and no future query) enters; then the logits of invisible keys are
``-inf`` and ``a_ij = softmax_j(l_ij)``. Positions outside the sequence are zeros (padding).

The kernel is initialised to the identity (``theta[c_q - 1, (c_k - 1)/2] = 1``, the paper's ``init_method:
identity``): ``l = h`` and the layer starts as plain softmax attention. Defaults ``(c_q, c_k) = (6, 11)``: the
paper's language-model setting (its toy task used ``(2, 9)``). Only the pre-softmax key-query convolution is here
(the paper's head-mixing convolution, post-softmax convolution and group normalisation are left out: one head, one
layer, isolating the effect of pooling neighbouring scores). Parameters: ``n_head * c_q * c_k`` per layer.

Example:
    >>> import torch
    >>> h = torch.randn(2, 1, 5, 5)
    >>> a = mta_weights(h, identity_kernel(1, 6, 11))
    >>> bool(torch.allclose(a, torch.softmax(h.masked_fill(torch.ones(5, 5).triu(1).bool(), float("-inf")), -1)))
    True
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn import functional as F

__all__ = ["DEFAULT_KERNEL", "check_kernel_size", "identity_kernel", "key_query_convolution", "mta_weights"]

#: ``(c_q, c_k)``: the paper's language-model kernel (query lags, keys around the centre)
DEFAULT_KERNEL = (6, 11)


def check_kernel_size(query_size: Any, key_size: Any) -> tuple[int, int]:
    """``(c_q, c_k)`` as ints: ``c_q >= 1``, ``c_k >= 1`` and odd (the key axis is centred); ``ValueError`` or
    ``TypeError`` naming the bad value."""
    for name, v in (("query kernel size c_q", query_size), ("key kernel size c_k", key_size)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"mta: the {name} must be an int, got {type(v).__name__} {v!r}")
        if v < 1:
            raise ValueError(f"mta: the {name} must be >= 1, got {v}")
    if key_size % 2 == 0:
        raise ValueError(f"mta: the key kernel size c_k must be odd (keys on both sides of the centre), got {key_size}")
    return query_size, key_size


def identity_kernel(n_head: int, query_size: int = 6, key_size: int = 11) -> torch.Tensor:
    """The identity kernel ``(n_head, c_q, c_k)``: 1 at ``[:, c_q - 1, (c_k - 1) // 2]`` (no lag, centre), 0 elsewhere."""
    query_size, key_size = check_kernel_size(query_size, key_size)
    k = torch.zeros(n_head, query_size, key_size)
    k[:, -1, key_size // 2] = 1.0
    return k


def key_query_convolution(h: torch.Tensor, kernel: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """The convolved logits (module docstring).

    Args:
        h: scores ``(B, H, Tq, T)``.
        kernel: ``(H, c_q, c_k)``, ``c_k`` odd.
        visible: boolean ``(Tq, T)``, key ``j`` visible to query ``i``.

    Returns:
        ``(B, H, Tq, T)`` logits, ``-inf`` on invisible keys.
    """
    if not isinstance(kernel, torch.Tensor) or kernel.ndim != 3 or kernel.shape[0] != h.shape[1]:
        raise ValueError(
            f"mta: kernel must be a tensor of shape (H, c_q, c_k) with H = {h.shape[1]}, "
            f"got {getattr(kernel, 'shape', type(kernel).__name__)}"
        )
    H, cq, ck = kernel.shape
    check_kernel_size(cq, ck)
    x = h.masked_fill(~visible, 0.0)  # masked before: an invisible key's score contributes nothing
    x = F.pad(x, ((ck - 1) // 2, (ck - 1) // 2, cq - 1, 0))  # keys centred, queries: past lags only
    out = F.conv2d(x, kernel.to(h.dtype)[:, None], groups=H)
    return out.masked_fill(~visible, float("-inf"))  # and after: no weight on an invisible key


def mta_weights(h: torch.Tensor, kernel: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
    """Attention weights ``(B, H, Tq, T)`` of mode ``mta``: the softmax over visible keys of
    :func:`key_query_convolution` (``causal``: key ``j <= i``; else all keys visible)."""
    Tq, T = h.shape[-2:]
    visible = torch.ones(Tq, T, dtype=torch.bool, device=h.device)
    if causal:
        visible = visible.tril()
    return torch.softmax(key_query_convolution(h, kernel, visible), dim=-1)
