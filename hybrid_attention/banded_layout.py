"""The block engine's field layout: scores ``beta h`` gathered into the blocks' windows as one strided view.

Used by :func:`hybrid_attention.banded._block_run` (docs/banded.md). The block plan
(:func:`hybrid_attention.banded._block_plan`) puts key ``p - t`` of block ``b`` (``p = g0 + g + k b`` its last
position; ``g0`` the first block's end when bidirectional, else 0) and query ``g + k m`` (causal) or ``m``
(bidirectional) of slot ``m`` of group ``g`` at ``X[b, :, g, m, :, t]``. Both indices are affine in ``(b, g, m, t)``
and no two entries share a (key, query) pair, so with the keys padded by ``k - 1`` ghosts in front (and the keys and
queries padded with zeros behind, in a buffer laid out ``(R, P, queries, keys)``) the whole gather is one ``as_strided`` view, read with the window bits reversed
(``t' = k - 1 - t`` has a positive key stride), and its adjoint is the same view of a zero buffer written once. This
replaces advanced indexing whose backward (an accumulating ``index_put``) cost as much as a dense block engine's
whole sweep at ``W = 4``.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["BlockFieldsFn"]


def _geometry(n: int, Q: int, k: int, nb: int, G: int, Qs: int, causal: bool, P: int, R: int):
    """The padded buffer's shape ``(R, P, queries, keys)`` (the memory order of the callers' ``x``, so filling it is a
    plain copy) and the view's size, strides and offset."""
    g0 = 0 if causal else (n - 1) % k
    Kp = g0 + k * nb + k - 1  # ghosts in front, keys up to the last block's end
    Qp = max(Q, k * Qs if causal else Qs)
    sQ, sP, sR = Kp, Qp * Kp, P * Qp * Kp
    size = (nb, P, G, Qs, R, k)
    stride = (k, sP, 1 + sQ if causal else 0, k * sQ if causal else sQ, sR, 1)
    return (R, P, Qp, Kp), size, stride, g0


class BlockFieldsFn(torch.autograd.Function):
    """``forward(x (n, P, Q, R), ok (nb, G, Q', 1, k) bool, k, causal) -> X (nb, P, G, Q', R, k)``: the fields of
    every block window and slot (module docstring), 0 where ``ok`` is false (ghosts, padding slots and, causal, keys
    after the slot's query). ``x`` may have any strides. Backward: the adjoint of that gather (a scatter without
    collisions), so ``dL/dx`` is 0 on the entries no slot reads."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, ok: torch.Tensor, k: int, causal: bool):
        n, P, Q, R = x.shape
        nb, G, Qs = ok.shape[0], ok.shape[1], ok.shape[2]
        shape, size, stride, offset = _geometry(n, Q, k, nb, G, Qs, causal, P, R)
        buf = x.new_zeros(shape)
        buf[:, :, :Q, k - 1 : k - 1 + n].copy_(x.permute(3, 1, 2, 0))
        mask = ok[:, None, :, :, :, :]  # (nb, 1, G, Q', 1, k)
        # mask the strided view in its own (reversed) bit order, then flip the contiguous result: a flip of the
        # strided view itself runs several times slower
        X = torch.where(mask.flip(-1), buf.as_strided(size, stride, offset), 0.0).flip(-1)
        ctx.geom, ctx.nQ = (shape, size, stride, offset), (n, Q, k)
        ctx.save_for_backward(mask)
        return X

    @staticmethod
    def backward(ctx, gX: torch.Tensor) -> tuple[Any, ...]:
        (mask,) = ctx.saved_tensors
        shape, size, stride, offset = ctx.geom
        n, Q, k = ctx.nQ
        buf = gX.new_zeros(shape)
        buf.as_strided(size, stride, offset).copy_(torch.where(mask, gX, 0.0).flip(-1))
        return buf[:, :, :Q, k - 1 : k - 1 + n].permute(3, 1, 2, 0), None, None, None
