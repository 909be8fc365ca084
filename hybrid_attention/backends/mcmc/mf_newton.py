"""Newton's method on the naive mean-field free energy for the rows that the fixed-point iteration of
:mod:`.fixed_point` leaves unconverged after :data:`~.fixed_point.SWITCH` iterations (float64, a positive definite
shift of the Hessian where needed, an Armijo line search: every step lowers the free energy).

The first :data:`M_STEPS` steps move along straight lines in the magnetisations ``m``; the rows still unconverged
then take Newton steps in the fields ``u = atanh(m)`` (:func:`_newton_fields`). Both have the same first-order
direction (``dm = (1 - m^2) du``), but near a saturated spin (``|m|`` within 1e-6 of 1, common in training from
about step 100 at T = 128) a straight line in ``m`` leaves the box ``[-1, 1]`` at a tiny step: the line search
shrinks it and each step gains a constant factor in ``1 - |m|`` (rows took 17-37 steps), while on the curve
``m = tanh(u + a du)`` the saturated spin's equation is nearly linear in ``u`` and Newton converges in a few steps.
Fields from the start could reach a different minimum of the free energy (a higher one, in 2 of 32 stragglers at a
T = 128 step-250 state): the first steps in ``m`` keep the minimum that Newton in ``m`` alone reaches (no row moved by
1e-2 on the stragglers of 9 training states of T = 64 and 128, in half the time at T = 128)."""

from __future__ import annotations

import torch

__all__ = ["newton_free_energy", "free_energy"]

#: Newton steps in the magnetisations before the rows still unconverged go on in the fields (module docstring)
M_STEPS = 3
#: the fields bound: ``tanh(18)`` is within 5e-16 of 1, and ``1 - tanh(u)^2`` stays a positive float64
U_MAX = 18.0


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
    m = m.to(torch.float64, copy=True)  # updated in place below: a float64 input must stay the caller's
    h, J, b = h.double(), J.double(), b.double()
    mk = torch.ones_like(m) if mask is None else mask.double()
    b = b.expand(len(m), 1)
    m, count, res = _newton_magnetisations(m, h, J, b, mk, tol, min(max_iter, M_STEPS))
    late = (res >= tol).nonzero().squeeze(1)
    if len(late) and max_iter > M_STEPS:
        x, hh, bb, kk = (t.index_select(0, late) for t in (m, h, b, mk))
        x, steps, r = _newton_fields(x, hh, J, bb, kk, tol, max_iter - M_STEPS)
        m.index_copy_(0, late, x)
        count.index_add_(0, late, steps)
        res.index_copy_(0, late, r)
    return m.to(dt), count, res.to(dt)


def _newton_magnetisations(m, h, J, b, mk, tol: float, max_iter: int):
    """Newton steps along straight lines in ``m`` (float64 ``m, h, mk (r, n)``, ``b (r, 1)``): ``(m, steps,
    residual)``."""
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
    return m, count, res


def _newton_fields(m, h, J, b, mk, tol: float, max_iter: int):
    """Newton steps in the fields ``u = atanh(m)`` (float64 ``m, h, mk (r, n)``, ``b (r, 1)``): ``(m, steps,
    residual)``. With ``S = sqrt(1 - m^2)`` (0 on masked spins) the step solves the symmetric system
    ``(I / b - S J S) y = -S grad F`` (``S H S`` for the Hessian ``H`` of ``F`` in ``m``: positive definite where
    ``H`` is, its entries bounded where ``H``'s diagonal ``1 / (b (1 - m^2))`` is not), ``du = y / S``; the line search
    on ``m = tanh(u + a du)``, ``u`` within ``[-U_MAX, U_MAX]``."""
    u = torch.atanh(m.clamp(-1 + 1e-15, 1 - 1e-15)).clamp_(-U_MAX, U_MAX) * mk
    count = torch.zeros(len(m), dtype=torch.long)
    res = m.new_zeros(len(m))
    rows = torch.arange(len(m))  # the rows still unconverged
    for it in range(max_iter + 1):
        uu, hh, bb, kk = u[rows], h[rows], b[rows], mk[rows]
        x = torch.tanh(uu) * kk
        local = x @ J
        r = (torch.tanh(bb * (hh + local)) * kk - x).abs().amax(-1)
        res[rows] = r
        rows, uu, x, hh, bb, kk, local, r = (t[r >= tol] for t in (rows, uu, x, hh, bb, kk, local, r))
        if it == max_iter or not len(rows):
            break
        count[rows] += 1
        S = kk / torch.cosh(uu)  # sqrt(1 - m^2) on the active spins, 0 on masked ones
        grad = (uu / bb - hh - local) * kk  # dF/dm
        K = torch.diag_embed(1 / bb.expand_as(kk)) - J * S[:, :, None] * S[:, None, :]
        y = _descent(K, S * grad)
        du = torch.where(kk > 0, y / torch.where(kk > 0, S, 1.0), 0.0)
        u[rows] = _line_search_fields(uu, du, (S * grad * y).sum(-1), x, hh, J, bb, kk, r)
    return torch.tanh(u) * mk, count, res


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


def free_energy(m, h, J, b, mk) -> torch.Tensor:
    """The naive mean-field free energy ``F(m) = -h.m - m.J.m / 2 - S(m) / beta`` per row (masked spins are 0 and
    carry no entropy): ``m, h, mk (r, n)`` float64 (``mk`` the 0/1 mask), ``J (n, n)``, ``b (r, 1)`` inverse
    temperatures -> ``(r,)``."""
    p, q = ((1 + m) / 2).clamp_min(1e-300), ((1 - m) / 2).clamp_min(1e-300)
    entropy = -((p * p.log() + q * q.log()) * mk).sum(-1)
    return -(h * m).sum(-1) - 0.5 * ((m @ J) * m).sum(-1) - entropy / b[:, 0]


def _backtrack(point, F0, slope, h, J, b, mk, r):  # noqa: ANN001, ANN202 (internal)
    """Armijo backtracking shared by both line searches: each row's step ``a`` (from 1) halved until ``F`` at
    ``point(a) -> (x, m)`` (``x`` the iterate returned, ``m`` its magnetisations) drops by ``1e-4 a slope``, or stays
    within float64's resolution of ``F`` while the residual ``r`` shrinks (40 halvings at most); returns ``x``."""
    flat = 1e-13 * (1 + F0.abs())
    a = F0.new_ones(len(F0), 1)  # one step per row
    x = None
    for _ in range(40):
        x, m = point(a)
        F = free_energy(m, h, J, b, mk)
        ok = F <= F0 + 1e-4 * a[:, 0] * slope
        if not bool(ok.all()):
            r_new = (torch.tanh(b * (h + m @ J)) * mk - m).abs().amax(-1)
            ok |= (F <= F0 + flat) & (r_new < r)
        if bool(ok.all()):
            break
        a = torch.where(ok[:, None], a, a / 2)
    return x


def _line_search_fields(u, du, slope, m, h, J, b, mk, r) -> torch.Tensor:
    """:func:`_line_search` on the curve ``m = tanh(u + a du)`` (``slope``: ``dF/da`` at ``a = 0``), returning ``u``."""

    def point(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        new = (u + a * du).clamp(-U_MAX, U_MAX)
        return new, torch.tanh(new) * mk

    return _backtrack(point, free_energy(m, h, J, b, mk), slope, h, J, b, mk, r)


def _line_search(m, dm, grad, h, J, b, mk, r) -> torch.Tensor:
    """Armijo backtracking on the free energy: each row's step halved until ``F`` drops enough (40 times at most).
    Near a minimum ``F`` changes by about the squared residual, below float64's resolution of ``F``: there a step
    is also taken when ``F`` stays within that resolution and the residual ``r`` shrinks."""
    edge = 1 - 1e-15

    def point(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        new = (m + a * dm).clamp(-edge, edge) * mk
        return new, new

    return _backtrack(point, free_energy(m, h, J, b, mk), (grad * dm).sum(-1), h, J, b, mk, r)
