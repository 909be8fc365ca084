"""Newton's method on the naive mean-field free energy for the rows that the fixed-point iteration of
:mod:`.fixed_point` leaves unconverged after :data:`~.fixed_point.SWITCH` iterations (float64, a positive definite
shift of the Hessian where needed, an Armijo line search: every step lowers the free energy)."""

from __future__ import annotations

import torch

__all__ = ["newton_free_energy"]


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
