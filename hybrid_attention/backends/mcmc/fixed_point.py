"""Fast fixed-point solves for mean field (``solver="rows"`` of
:class:`~hybrid_attention.backends.mcmc.meanfield.MeanFieldSampler`): the forward equations ``m = f(m)`` and the
implicit backward's adjoint system ``v = g + (df/dm)^T v``, each row (one Ising problem) with its own stopping test.

The legacy solver (``solver="damped"``) runs the damped iteration ``m <- m + d (f(m) - m)`` on the whole batch until
its largest residual is below ``tol``: every row pays for the slowest. In training the couplings grow and a few rows
become very slow (a Tiny Shakespeare run at T = 64: 5 iterations at initialisation; from about step 70 more than 500,
unconverged, while most rows still converged in tens). Here:

* the same damped iteration (same map, damping and start), but a row stops once its own residual
  ``max_j |f(m)_j - m_j|`` is below ``tol`` and leaves the batch (compacted once :data:`COMPACT` of it has converged);
* rows of naive mean field still unconverged after :data:`SWITCH` iterations switch to Newton's method on the
  mean-field free energy ``F(m) = -h.m - m.J.m / 2 - S(m) / beta`` (``S`` the binary entropy; its stationary points
  are the fixed points), in float64, with the Hessian ``diag(1 / (beta (1 - m^2))) - J`` shifted to be positive
  definite where it is not and an Armijo line search on ``F``: every step lowers ``F``. These rows are slow for any
  first-order method: on the way to their fixed point the free energy is nearly flat along a collective flip of
  several spins (an exploratory measurement at step 100 of that run: 9 rows of 4096 took the damped iteration 1600-1900 steps and
  Gauss-Seidel sweeps 400, to a well conditioned fixed point that Newton reached in 17 steps, within 6e-5);
* the adjoint's stragglers are solved directly (``(I - A^T) v = g`` per row, float64 LU).

Descent keeps the fixed point the damped iteration heads for in most rows, but where the free energy has several
minima (strong couplings) a row can settle in another one. Anderson acceleration was tried in exploration and dropped:
on these problems it left the damped iteration's basin in about 2 % of the rows, and its per-row least squares cost
several times the map itself.

Warm start: the solve may start from any guess (``start``); the stopping test alone decides when a row is done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

__all__ = ["iterate_rows", "newton_free_energy", "solve_rows", "adjoint_rows", "block_adjoint", "SWITCH"]

logger = logging.getLogger(__name__)

#: compact the batch once this fraction of its rows has converged
COMPACT = 0.25
#: iterations before the rows still unconverged switch to Newton (forward) or a direct solve (adjoint)
SWITCH = 50


def iterate_rows(
    fmap: Callable[[torch.Tensor, dict[str, torch.Tensor]], torch.Tensor],
    x: torch.Tensor,
    data: dict[str, torch.Tensor],
    *,
    damping: float,
    tol: float,
    max_iter: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The damped iteration ``x <- x + d (fmap(x) - x)`` with a stopping test per row: a row stops once
    ``max |fmap(x) - x| < tol`` and leaves the batch (compacted once :data:`COMPACT` of it has converged).

    Args:
        fmap: ``(x (r, n), data) -> (r, n)``, applied to the rows still iterating (``data`` holds their rows).
        x: ``(R, n)`` start.
        data: per-row tensors ``(R, ...)`` that ``fmap`` reads (gathered with the rows when the batch is compacted).
        damping, tol, max_iter: the step ``d``, the stopping tolerance, the iterations at most.

    Returns:
        ``(x (R, n), iterations (R,), residual (R,))``: each converged row at the iterate whose residual passed the
        test (an unconverged one at its last iterate), its count of map evaluations, its last ``max |fmap(x) - x|``.
    """
    R, n = x.shape
    out, res = x.clone(), x.new_full((R,), float("inf"))
    count = torch.zeros(R, dtype=torch.long)
    rows = torch.arange(R)
    live = torch.ones(R, dtype=torch.bool)  # rows still iterating (converged ones wait in the batch to be dropped)
    r = x.new_zeros(R)
    for it in range(1, max_iter + 1):
        step = fmap(x, data).sub_(x)
        r = step.abs().amax(-1) if n else step.new_zeros(len(x))
        done = (r < tol) & live
        if bool(done.any()):
            gone = rows[done]
            out[gone], count[gone], res[gone] = x[done], it, r[done]
            live &= ~done
            if not bool(live.any()):
                return out, count, res
            if int((~live).sum()) >= COMPACT * len(rows):  # drop the converged rows
                rows, x, step, r = rows[live], x[live], step[live], r[live]
                data = {k: v[live] for k, v in data.items()}
                live = live[live]
        step.mul_(damping)
        if not bool(live.all()):
            step.mul_(live[:, None])  # converged rows keep the iterate that passed
        x = x + step
    out[rows[live]], count[rows[live]], res[rows[live]] = x[live], max_iter, r[live]
    return out, count, res


def newton_free_energy(
    m: torch.Tensor,
    h: torch.Tensor,
    J: torch.Tensor,
    b: torch.Tensor,
    mask: torch.Tensor | None,
    *,
    tol: float,
    max_iter: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Newton's method on the naive mean-field free energy for a few rows (module docstring), float64.

    Args:
        m, h: ``(r, n)`` start and fields; J: ``(n, n)``; b: ``(r, 1)`` inverse temperatures; mask: ``(r, n)`` or None.
        tol, max_iter: stop a row once ``max |f(m) - m| < tol``; at most ``max_iter`` Newton steps.

    Returns:
        ``(m (r, n), steps (r,), residual (r,))`` in ``m``'s dtype.
    """
    dt = m.dtype
    m, h, J, b = m.double(), h.double(), J.double(), b.double()
    mk = torch.ones_like(m) if mask is None else mask.double()
    edge = 1 - 1e-15
    count = torch.zeros(len(m), dtype=torch.long)
    res = m.new_zeros(len(m))
    rows = torch.arange(len(m))  # the rows still unconverged
    for it in range(max_iter + 1):
        x, hh, bb, kk = m[rows], h[rows], b[rows], mk[rows]
        local = x @ J  # masked spins are 0: only active ones enter
        r = (torch.tanh(bb * (hh + local)) * kk - x).abs().amax(-1)
        res[rows] = r
        rows, x, hh, bb, kk, local, r = (t[r >= tol] for t in (rows, x, hh, bb, kk, local, r))
        if it == max_iter or not len(rows):
            break
        count[rows] += 1
        x = x.clamp(-edge, edge) * kk
        grad = (torch.atanh(x) / bb - hh - local) * kk  # dF/dm; zero at a fixed point
        D = (bb * (1 - x * x)).clamp_min(1e-300)
        hess = torch.diag_embed(torch.where(kk > 0, 1 / D, torch.ones_like(D))) - J * kk[:, :, None] * kk[:, None, :]
        m[rows] = _line_search(x, _descent(hess, grad) * kk, grad, hh, J, bb, kk, r)
    return m.to(dt), count, res.to(dt)


def _descent(hess: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """``-(H + s I)^-1 grad`` per row: Newton's step where the Hessian is positive definite (Cholesky), else with
    the shift ``s`` that lifts its lowest eigenvalue to 1e-6 (a descent direction)."""
    L, info = torch.linalg.cholesky_ex(hess)
    dm = -torch.cholesky_solve(grad[..., None], L)[..., 0]
    bad = info != 0
    if bool(bad.any()):
        lam, V = torch.linalg.eigh(hess[bad])
        shift = (1e-6 - lam[:, :1]).clamp_min(0)
        dm[bad] = -(V @ ((V.transpose(1, 2) @ grad[bad][..., None])[..., 0] / (lam + shift))[..., None])[..., 0]
    return dm


def _free_energy(m, h, J, b, mk) -> torch.Tensor:
    """``F(m)`` per row (masked spins are 0 and carry no entropy)."""
    p, q = ((1 + m) / 2).clamp_min(1e-300), ((1 - m) / 2).clamp_min(1e-300)
    entropy = -((p * p.log() + q * q.log()) * mk).sum(-1)
    return -(h * m).sum(-1) - 0.5 * ((m @ J) * m).sum(-1) - entropy / b[:, 0]


def _line_search(m, dm, grad, h, J, b, mk, r) -> torch.Tensor:
    """Armijo backtracking on the free energy: each row's step halved until ``F`` drops enough (40 times at most).
    Near a minimum ``F`` changes by about the squared residual, below float64's resolution of ``F``: there a step
    is also taken when ``F`` stays within that resolution and the residual ``r`` shrinks."""
    edge = 1 - 1e-15
    F0 = _free_energy(m, h, J, b, mk)
    flat = 1e-13 * (1 + F0.abs())
    slope = (grad * dm).sum(-1)
    a = m.new_ones(len(m), 1)
    new = m
    for _ in range(40):
        new = (m + a * dm).clamp(-edge, edge) * mk
        F = _free_energy(new, h, J, b, mk)
        ok = F <= F0 + 1e-4 * a[:, 0] * slope
        if not bool(ok.all()):
            r_new = (torch.tanh(b * (h + new @ J)) * mk - new).abs().amax(-1)
            ok |= (F <= F0 + flat) & (r_new < r)
        if bool(ok.all()):
            break
        a = torch.where(ok[:, None], a, a / 2)
    return new


def _mean_field_map(tap: bool, J: torch.Tensor, J2: torch.Tensor | None):
    """``f(m)`` on a block of rows: ``data`` holds ``h``, ``b`` (``(r, 1)``) and ``mask`` (or no mask)."""

    def fmap(m: torch.Tensor, data: dict[str, torch.Tensor]) -> torch.Tensor:
        field = (m @ J).add_(data["h"])
        mask = data.get("mask")
        if tap:
            q = 1 - m * m if mask is None else (1 - m * m) * mask
            field.sub_(data["b"] * m * (q @ J2))
        out = field.mul_(data["b"]).tanh_()
        return out if mask is None else out.mul_(mask)

    return fmap


def _parts(h, J, mask, b, blocks):
    """``(group, rows or None, width)`` of every block that the solves iterate (``blocks`` of
    :func:`~hybrid_attention.backends.mcmc.meanfield.width_blocks`, or ``None``: all rows at full width)."""
    G, _, n = h.shape
    if blocks is None:
        return [(g, None, n) for g in range(G)]
    return [(g, r, L) for g in range(G) for r, L in blocks]


def _take(t: torch.Tensor | None, g: int, r: torch.Tensor | None, L: int) -> torch.Tensor | None:
    if t is None:
        return None
    t = t[g] if t.shape[0] > 1 else t[0]
    return (t if r is None else t[r])[:, :L]


def solve_rows(
    h, J, mask, tap: bool, b, damping: float, tol: float, max_iter: int, blocks, start: torch.Tensor | None = None
) -> tuple[torch.Tensor, int, float, dict[str, float]]:
    """The mean-field equations per row (no gradient): :func:`iterate_rows` for :data:`SWITCH` iterations, then
    (naive mean field) :func:`newton_free_energy` for the rows still unconverged, per coupling group and row block.

    Args: as :func:`~hybrid_attention.backends.mcmc.meanfield.solve` (``h, mask (G, R, n)``, ``J (G, n, n)``,
    ``b (G, R, 1)``, ``damping``, ``blocks``), and ``start (G, R, n)``: the initial guess (``None``: ``tanh(beta h)``,
    the damped iteration's start), clamped to ``[-1, 1]`` and zero on masked spins.

    Returns:
        ``(m (G, R, n), iterations, residual, extra)``: the iterations (and Newton steps) of the slowest row, the
        largest final residual, and ``extra = {"work": the damped iterations' work in units of one full-width
        iteration of every row (rows leave once converged and blocks are narrower than n), "newton_rows": rows that
        switched to Newton}``.
    """
    G, R, n = h.shape
    m = h.new_zeros(h.shape)
    iters, res, spent, newton = 0, 0.0, 0.0, 0
    for g, r, L in _parts(h, J, mask, b, blocks):
        hh, mk = _take(h, g, r, L), _take(mask, g, r, L)
        bb = b[g] if b.shape[0] > 1 else b[0]
        bb = (bb if r is None else bb[r]).expand(len(hh), 1)
        Jg = J[g if J.shape[0] > 1 else 0, :L, :L]
        x0 = torch.tanh(bb * hh) if start is None else _take(start, g, r, L).clamp(-1, 1)
        if mk is not None:
            x0 = x0 * mk
        data = {"h": hh, "b": bb} | ({} if mk is None else {"mask": mk})
        fmap = _mean_field_map(tap, Jg, Jg * Jg if tap else None)
        first = max_iter if tap else min(max_iter, SWITCH)
        x, count, rr = iterate_rows(fmap, x0, data, damping=damping, tol=tol, max_iter=first)
        spent += float(count.sum()) * L * L
        late = rr >= tol
        if bool(late.any()) and not tap and max_iter > SWITCH:  # the stragglers: Newton on the free energy
            newton += int(late.sum())
            d = {k: v[late] for k, v in data.items()}
            x[late], steps, rr[late] = newton_free_energy(
                x[late], d["h"], Jg, d["b"], d.get("mask"), tol=tol / 4, max_iter=max_iter - SWITCH
            )
            count[late] += steps
        if r is None:
            m[g, :, :L] = x
        else:
            m[g, r, :L] = x
        if count.numel():
            iters = max(iters, int(count.max()))
            res = max(res, float(rr.max()))
    return m, iters, res, {"work": spent / max(1, G * R * n * n), "newton_rows": newton}


def adjoint_rows(
    vjp: Callable[[torch.Tensor, dict[str, torch.Tensor]], torch.Tensor],
    g: torch.Tensor,
    data: dict[str, torch.Tensor],
    jacobian: Callable[[dict[str, torch.Tensor]], torch.Tensor] | None,
    *,
    damping: float,
    tol: float,
    max_iter: int,
) -> tuple[torch.Tensor, int]:
    """The adjoint system ``v = g + A^T v`` of one block of rows: the damped iteration (:func:`iterate_rows`) for
    :data:`SWITCH` steps, then a direct float64 solve of ``(I - A^T) v = g`` for the rows still unconverged.

    Args:
        vjp: ``(v (r, n), data) -> A^T v`` for the rows in ``data``.
        g: ``(R, n)`` the incoming gradient.
        data: per-row tensors ``(R, ...)`` for ``vjp`` and ``jacobian``.
        jacobian: ``data -> A (r, n, n)`` (only called for the stragglers), or ``None``: iterate up to ``max_iter``.
        tol, max_iter: a row stops once ``max |g + A^T v - v| < tol``; at most ``max_iter`` iterations.

    Returns:
        ``(v (R, n), iterations of the slowest row)``.
    """
    data = {**data, "g": g}
    first = max_iter if jacobian is None else min(max_iter, SWITCH)
    v, count, res = iterate_rows(
        lambda v, d: vjp(v, d).add_(d["g"]), g.clone(), data, damping=damping, tol=tol, max_iter=first
    )
    late = res >= tol
    if jacobian is not None and bool(late.any()) and max_iter > SWITCH:
        d = {k: x[late] for k, x in data.items()}
        A = jacobian(d).double()
        eye = torch.eye(A.shape[-1], dtype=A.dtype)
        sol, info = torch.linalg.solve_ex(eye - A.transpose(1, 2), d["g"].double()[..., None])
        sol = sol[..., 0]
        bad = (info != 0) | ~torch.isfinite(sol).all(-1)
        if bool(bad.any()):  # no stable fixed point there: the one-step gradient, as the damped adjoint does
            logger.warning("mean-field adjoint: %d singular rows; using the one-step gradient there", int(bad.sum()))
            sol[bad] = d["g"][bad].double()
        v[late] = sol.to(v.dtype)
        count[late] += 1
    return v, int(count.max()) if count.numel() else 0


def block_adjoint(g: torch.Tensor, part: tuple, tap_part: tuple | None, damping, tol, max_iter, info) -> torch.Tensor:
    """One row block's adjoint ``v = g + A^T v`` (``g (G, r, L)``) by :func:`adjoint_rows`, one coupling
    group at a time; ``part = (D, J, b)`` and ``tap_part = (S, m, 2 m, J^2)`` as :func:`~hybrid_attention.backends.mcmc.meanfield.implicit` builds them."""
    D, Js, b = part
    out = torch.empty_like(g)
    for gi in range(g.shape[0]):
        Jg = Js[gi if Js.shape[0] > 1 else 0]
        data = {"D": D[gi], "b": b[gi if b.shape[0] > 1 else 0].expand(g.shape[1], 1)}
        J2g = None
        if tap_part is not None:
            S, m, two_m, J2 = tap_part
            data.update(S=S[gi], m=m[gi], two_m=two_m[gi])
            J2g = J2[gi if J2.shape[0] > 1 else 0]

        def vjp(v: torch.Tensor, d: dict[str, torch.Tensor], Jg=Jg, J2g=J2g) -> torch.Tensor:
            w = v * d["D"]
            o = w @ Jg
            if tap_part is not None:
                o.sub_(d["b"] * w * d["S"]).add_(d["b"] * d["two_m"] * ((w * d["m"]) @ J2g))
            return o

        jac = None if tap_part is not None else (lambda d, Jg=Jg: d["D"][:, :, None] * Jg)  # A = diag(D) J
        out[gi], it = adjoint_rows(vjp, g[gi], data, jac, damping=damping, tol=tol, max_iter=max_iter)
        info["backward_iterations"] = max(it, info.get("backward_iterations", 0))
    return out
