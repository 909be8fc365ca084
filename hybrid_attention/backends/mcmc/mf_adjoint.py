"""The implicit backward's adjoint systems ``v = g + (df/dm)^T v`` of mean field, per row (``solver="rows"``):
the accelerated iteration of :func:`.fixed_point.iterate_blocks` for :data:`~.fixed_point.SWITCH` steps, then a direct
float64 solve for the rows still unconverged; and (:class:`RowsFixedPoint`, naive mean field) the whole implicit
gradient as one autograd Function, the parameters' gradients in closed form from the adjoint."""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from torch.autograd.function import once_differentiable

from . import fixed_point, mf_kernel
from .fixed_point import iterate_blocks

__all__ = ["adjoint_rows", "block_adjoint", "solve_direct", "RowsFixedPoint"]

logger = logging.getLogger(__name__)


def adjoint_rows(
    vjp: Callable[[int], Callable[[torch.Tensor, dict[str, torch.Tensor]], torch.Tensor]],
    gs: list[torch.Tensor],
    datas: list[dict[str, torch.Tensor]],
    wide: tuple[str, ...],
    jacobian: Callable[[dict[str, torch.Tensor], int], torch.Tensor] | None,
    *,
    damping: float,
    tol: float,
    max_iter: int,
) -> tuple[list[torch.Tensor], int]:
    """The adjoint systems ``v = g + A^T v`` of row blocks of one coupling matrix: the damped iteration
    (:func:`~.fixed_point.iterate_blocks`) for :data:`~.fixed_point.SWITCH` steps, then a direct float64 solve of
    ``(I - A^T) v = g`` for the rows still unconverged.

    Args:
        vjp: ``width -> ((v (r, L), data) -> A^T v)`` for the rows in ``data``.
        gs: per block, the incoming gradient ``(r_k, L_k)``.
        datas, wide: per block, the per-row tensors for ``vjp`` and ``jacobian``; the keys of width ``L_k``.
        jacobian: ``(data, L) -> A (r, L, L)`` (only called for the stragglers), or ``None``: iterate up to
            ``max_iter``.
        tol, max_iter: a row stops once ``max |g + A^T v - v| < tol``; at most ``max_iter`` iterations.

    Returns:
        ``(v per block, iterations of the slowest row)``.
    """
    datas = [{**d, "g": g} for d, g in zip(datas, gs)]
    first = max_iter if jacobian is None else min(max_iter, fixed_point.SWITCH)

    def fmap(L: int):
        A = vjp(L)
        return lambda v, d: A(v, d).add_(d["g"])

    solved = iterate_blocks(
        fmap, [g.clone() for g in gs], datas, (*wide, "g"), damping=damping, tol=tol, max_iter=first, accelerate=True
    )
    slowest = 0
    for (v, count, res), d in zip(solved, datas):
        late = res >= tol
        if jacobian is not None and bool(late.any()) and max_iter > fixed_point.SWITCH:
            d = {k: x[late] for k, x in d.items()}
            v[late] = solve_direct(jacobian(d, v.shape[1]), d["g"])
            count[late] += 1
        slowest = max(slowest, int(count.max()) if count.numel() else 0)
    return [v for v, _, _ in solved], slowest


def solve_direct(A: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """``(I - A^T) v = g`` per row in float64 (``A (r, L, L)``, ``g (r, L)``), in ``g``'s dtype; a row without a
    solution gets ``g`` (no stable fixed point there: the one-step gradient, as the damped adjoint does)."""
    A = A.double()
    eye = torch.eye(A.shape[-1], dtype=A.dtype)
    sol, info = torch.linalg.solve_ex(eye - A.transpose(1, 2), g.double()[..., None])
    sol = sol[..., 0]
    bad = (info != 0) | ~torch.isfinite(sol).all(-1)
    if bool(bad.any()):
        logger.warning("mean-field adjoint: %d singular rows; using the one-step gradient there", int(bad.sum()))
        sol[bad] = g[bad].double()
    return sol.to(g.dtype)


def _adjoint_map(J: torch.Tensor, J2: torch.Tensor | None):
    """``width -> ((v, data) -> A^T v)`` of mean field's Jacobian ``A = diag(D) J`` (plus the Onsager term's
    derivative for TAP, ``J2 = J^2``; ``data`` holds ``D``, ``b`` and, for TAP, ``S``, ``m``, ``two_m``)."""

    def at(L: int):
        JL, J2L = J[:L, :L], None if J2 is None else J2[:L, :L]

        def apply(v: torch.Tensor, d: dict[str, torch.Tensor]) -> torch.Tensor:
            w = v * d["D"]
            o = w @ JL
            if J2L is not None:
                o.sub_(d["b"] * w * d["S"]).add_(d["b"] * d["two_m"] * ((w * d["m"]) @ J2L))
            return o

        return apply

    return at


def block_adjoint(
    gs: list[torch.Tensor], parts: list[tuple], tap_parts: list[tuple] | None, damping, tol, max_iter, info
):
    """The row blocks' adjoints ``v = g + A^T v`` (``gs[k] (G, r_k, L_k)``) by :func:`adjoint_rows`, one coupling
    group at a time (the blocks of a group together); ``parts[k] = (D, J, b)`` and ``tap_parts[k] = (S, m, 2 m, J^2)``
    as :func:`~hybrid_attention.backends.mcmc.meanfield.implicit` builds them."""
    out = [torch.empty_like(g) for g in gs]
    tap = tap_parts is not None
    widest = max(range(len(parts)), key=lambda k: parts[k][1].shape[-1])  # the blocks' J: leading blocks of its J
    for gi in range(gs[0].shape[0]):
        datas = []
        for k, (D, _, b) in enumerate(parts):
            d = {"D": D[gi], "b": _group(b, gi).expand(gs[k].shape[1], 1)}
            if tap:
                d.update(S=tap_parts[k][0][gi], m=tap_parts[k][1][gi], two_m=tap_parts[k][2][gi])
            datas.append(d)
        Jg = _group(parts[widest][1], gi)
        vjp = _adjoint_map(Jg, _group(tap_parts[widest][3], gi) if tap else None)
        jac = None if tap else (lambda d, L, Jg=Jg: d["D"][:, :, None] * Jg[:L, :L])  # A = diag(D) J
        vs, it = adjoint_rows(
            vjp, [g[gi] for g in gs], datas, ("D", "S", "m", "two_m"), jac, damping=damping, tol=tol, max_iter=max_iter
        )
        for o, v in zip(out, vs):
            o[gi] = v
        info["backward_iterations"] = max(it, info.get("backward_iterations", 0))
    return out


def _group(t: torch.Tensor, g: int) -> torch.Tensor:
    """Group ``g`` of a tensor whose leading dimension is the coupling group (or 1: shared by all)."""
    return t[g if t.shape[0] > 1 else 0]


class RowsFixedPoint(torch.autograd.Function):
    """Naive mean field's fixed point with its implicit gradient in closed form (``solver="rows"``).

    ``forward(h (G, R, n), J (G, n, n), b (G, R, 1), m_star, image, mask, blocks, damping, tol, max_iter, info,
    width)`` returns ``image = f(m*) = tanh(b (h + m* J)) mask`` of the forward solve's solution ``m_star`` (both
    computed by :func:`~.fixed_point.solve_rows` or :func:`.mf_kernel.solve_rows`, no graph): the value the legacy
    implicit step
    :func:`~hybrid_attention.backends.mcmc.meanfield.implicit` returns. The backward solves the adjoint
    ``v = g + A^T v`` (``A = diag(D) J``, ``D = b (1 - f^2) mask``) per row (stopping relative to the incoming
    gradient's scale; :func:`block_adjoint` in ``blocks``, or with the rows' active widths ``width (G, R)`` the
    compiled loop, :func:`.mf_kernel.adjoint`, ``None``: the former) and applies ``df/dtheta`` directly: ``w = D v``
    is the gradient of ``h``, ``m*^T w`` that of ``J`` (per group), ``sum_j v_j (1 - f_j^2) mask_j (h + m* J)_j`` that of ``b``: the legacy
    route's gradients (a differentiable step ``f(m*, theta)`` with a hook on it) without its graph.
    """

    @staticmethod
    def forward(ctx, h, J, b, m_star, image, mask, blocks, damping, tol, max_iter, info, width=None):  # noqa: ANN001, ANN205
        ctx.save_for_backward(h, J, b, m_star, image, mask)
        ctx.settings = (blocks, damping, tol, max_iter, info, width)
        return image

    @staticmethod
    @once_differentiable
    def backward(ctx, g):  # noqa: ANN001, ANN205
        h, J, b, m_star, f, mask = ctx.saved_tensors
        blocks, damping, tol, max_iter, info, width = ctx.settings
        info["backward_iterations"] = 0
        none = (None,) * 9
        # the stopping test is relative to the incoming gradient's scale (a loss averaged over many targets gives
        # entries far below tol; an absolute test would stop after one step: a truncated, not the implicit, gradient)
        scale = float(g.abs().max())
        if scale == 0.0:
            return (None, None, None, *none)
        slope = 1 - f * f  # dtanh / dz at the fixed point
        if mask is not None:
            slope.mul_(mask)
        D = slope * b
        if width is not None and mf_kernel.finite(g):
            v = _adjoint_compiled(g, D, J, width, damping, tol * scale, max_iter, info)
        else:  # (a non-finite gradient: the torch loops, at full width if the forward ran compiled)
            v = _adjoint(g, D, J, b, blocks, damping, tol * scale, max_iter, info)
        w = v.mul_(D) if not ctx.needs_input_grad[2] else v * D
        gJ = torch.bmm(m_star.transpose(1, 2), w) if ctx.needs_input_grad[1] else None
        gb = None
        if ctx.needs_input_grad[2]:  # autograd sums it to b's shape if b was broadcast
            gb = (v.mul_(slope) * torch.bmm(m_star, J).add_(h)).sum(-1, keepdim=True)
        return (w if ctx.needs_input_grad[0] else None), gJ, gb, *none


def _adjoint(g, D, J, b, blocks, damping: float, tol: float, max_iter: int, info: dict) -> torch.Tensor:
    """The adjoint ``v (G, R, n)`` of :class:`RowsFixedPoint` by :func:`block_adjoint`, on the forward solve's row
    blocks gathered once into block order (``blocks`` ``None``: all rows at full width). Spins beyond a block's
    width are masked (``D = 0`` there): their adjoint, 0 here, never reaches ``theta``."""
    if blocks is None:
        return block_adjoint([g], [(D, J, b)], None, damping, tol, max_iter, info)[0]
    order, spans = fixed_point.block_layout(blocks, g.shape[1])
    gs, Ds = g.index_select(1, order), D.index_select(1, order)
    bs = b.expand(*g.shape[:2], 1).index_select(1, order)
    parts = [(Ds[:, a:c, :L], J[:, :L, :L], bs[:, a:c]) for a, c, L in spans]
    vs = block_adjoint([gs[:, a:c, :L] for a, c, L in spans], parts, None, damping, tol, max_iter, info)
    v = torch.zeros_like(gs)
    for vb, (a, c, L) in zip(vs, spans):
        v[:, a:c, :L] = vb
    return torch.empty_like(v).index_copy_(1, order, v)


def _adjoint_compiled(g, D, J, width, damping: float, tol: float, max_iter: int, info: dict) -> torch.Tensor:
    """The adjoint ``v (G, R, n)`` of :class:`RowsFixedPoint` by the compiled loop (:func:`.mf_kernel.adjoint`), one
    coupling group at a time, the rows still unconverged after :data:`~.fixed_point.SWITCH` iterations solved
    directly (:func:`solve_direct`) as :func:`adjoint_rows` does."""
    v = torch.empty_like(g)
    first = min(max_iter, fixed_point.SWITCH)
    for gi in range(g.shape[0]):
        Jg = _group(J, gi)
        vg, count, res = mf_kernel.adjoint(g[gi], D[gi], Jg, width[gi], damping=damping, tol=tol, max_iter=first)
        late = res >= tol
        if bool(late.any()) and max_iter > fixed_point.SWITCH:
            vg[late] = solve_direct(D[gi][late][:, :, None] * Jg, g[gi][late])
            count[late] += 1
        v[gi] = vg
        if count.numel():
            info["backward_iterations"] = max(int(count.max()), info.get("backward_iterations", 0))
    return v
