"""Compiled (numba) per-row loops of naive mean field's solver ``solver="rows"`` in float32: the forward iteration
``m <- m + d (f(m) - m)``, ``f(m) = tanh(beta (h + J m))``, and the implicit backward's adjoint iteration
``v <- v + d (g + A^T v - v)`` with the secant step of :func:`.fixed_point._secant` (``A = diag(D) J``).

The same iterations, stopping tests and hand-over as the torch loops of :mod:`.fixed_point` (each row stops once
``max_j |f(m)_j - m_j| < tol``; rows still unconverged after :data:`~.fixed_point.SWITCH` iterations go to Newton in
the forward solve and to a direct float64 solve in the adjoint, both in torch), without their per-iteration cost:
the torch loops spend most of a training step's solve on the dispatch and elementwise passes of about 15 operations
per iteration over a batch that shrinks as rows converge (most rows take a few iterations, the slowest 40-70 in
training: ``results/bench/meanfield_run.md``). Here
each row iterates alone, in cache, over its active width only (the last unmasked spin + 1: a causal row ``r`` costs
``r**2`` per iteration). Two differences from the torch loops, both within the stopping test: a row is recorded at
the first iterate that passes (the torch loop records rows when a quarter of the batch passes, so a row that passed
earlier may iterate on), and ``tanh`` is a rational approximation (Eigen's float ``tanh``: its clamp and
coefficients; at most 3e-7 from ``tanh`` in absolute value, ``tests/backends/test_mf_kernel.py``), which vectorises
where a call to the C library's ``tanhf`` does not.

One difference in the hand-over (:func:`solve_rows`): the forward iteration's rows still unconverged after
:data:`~.fixed_point.SWITCH` iterations do not go to Newton at once but iterate on, up to :data:`LONG` iterations,
in a slow stage that stops a row once the estimated distance to its fixed point ``r / (1 - rho)`` is below ``tol``
(``r`` its residual, ``rho`` its rate of convergence over the last :data:`RATE_WINDOW` iterations); only the rows
that do not pass by then go to Newton, from the iterate after ``SWITCH`` (Newton's start without the slow stage).
In training at T = 128, 16-144 rows per step are past ``SWITCH``; on ten states of a T = 128 run
(``python -m bench.meanfield_slow``, ``results/bench/meanfield_run.md`` section 00001) the slow stage passed 711 of
those 715 rows (the other 4 went to Newton from its usual start: the same answers) and the step's whole forward solve
took 1.9-4.7x less CPU time than with Newton for all of them. Each passed row is within 1.7e-4 of its fixed point
(Newton's answers: within 4.1e-4); 707 are at the fixed point Newton reaches (within 6e-12, both polished in
float64), 4 at another local minimum of the free energy, in each case a higher one than Newton's: the iteration's own
limit, where Newton's descent from iterate 51 left that basin for a lower minimum (about one row of 8192 every few
steps). The stopping rule on the distance, not the residual, is what keeps those rows as accurate as Newton's: where
``rho`` is near 1 the residual test alone lets a row stop up to ``1 / (1 - rho)`` times ``tol`` away
(``tests/backends/test_mf_kernel.py`` tests the slow stage's rows at most 2 ``tol`` away where that factor exceeds
20).

Compiled on first use and cached on disk by numba (``pip install numba``, the ``fast`` extra); without numba the
torch loops run (:func:`available`).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import torch

from .fixed_point import SWITCH, stragglers

__all__ = ["available", "finite", "forward", "adjoint", "widths", "solve_rows"]

#: LLVM fast math (vectorised sums, FMA, no NaN or infinity: the callers hand the loops finite inputs only,
#: :func:`finite`; about twice as fast as the same loops without ``nnan`` and ``ninf`` here)
_FLAGS = True
#: iterations at most of a row in :func:`solve_rows` before Newton (the slow stage runs from
#: :data:`~.fixed_point.SWITCH` on; see the module docstring)
LONG = 400
#: iterations over which the slow stage estimates a row's rate of convergence (:func:`forward`)
RATE_WINDOW = 8
_LOOPS: dict[str, object] = {}


def available() -> bool:
    """Whether the compiled loops can run (``numba`` importable; not imported here)."""
    return importlib.util.find_spec("numba") is not None


def _jit(name: str):
    """The jitted loop ``name`` (compiled on first use, cached on disk by numba); the helpers that the loops call
    (:data:`_HELPERS`) are compiled first and take their places in this module (numba calls compiled functions
    only)."""
    if name not in _LOOPS:
        import numba

        # error_model="numpy": a float division by zero gives inf instead of raising, so divisions vectorise
        opts = {"cache": True, "nogil": True, "fastmath": _FLAGS, "error_model": "numpy"}
        for helper in _HELPERS:
            if helper not in _LOOPS:
                _LOOPS[helper] = globals()[helper] = numba.njit(**opts)(globals()[helper])
        _LOOPS[name] = numba.njit(**opts)(globals()[name])
    return _LOOPS[name]


def _axpy8(y, x, J, W):  # noqa: N803
    """``y[:W] += x[:W] @ J[:W, :W]`` (rows of ``J`` contiguous), eight rows of ``J`` per pass over ``y``: a pass
    loads and stores ``y`` once for eight products instead of once per product (1.5x faster on the 2-core CPU this
    was tuned on, at W = 64 and 128)."""
    k = 0
    while k + 7 < W:
        x0, x1, x2, x3 = x[k], x[k + 1], x[k + 2], x[k + 3]
        x4, x5, x6, x7 = x[k + 4], x[k + 5], x[k + 6], x[k + 7]
        for j in range(W):
            y[j] += ((x0 * J[k, j] + x1 * J[k + 1, j]) + (x2 * J[k + 2, j] + x3 * J[k + 3, j])) + (
                (x4 * J[k + 4, j] + x5 * J[k + 5, j]) + (x6 * J[k + 6, j] + x7 * J[k + 7, j])
            )
        k += 8
    while k < W:
        xk = x[k]
        for j in range(W):
            y[j] += xk * J[k, j]
        k += 1


def _tanh_masked(out, z, beta, mask, W):
    """``out[:W] = tanh(beta z[:W]) mask[:W]`` by Eigen's float rational form of ``tanh`` (its clamp, beyond which the
    form is within float eps of +-1, and its coefficients; at most 3e-7 from ``tanh``)."""
    f32 = np.float32
    c = f32(7.90531110763549805)
    a13, a11, a9 = f32(-2.76076847742355e-16), f32(2.00018790482477e-13), f32(-8.60467152213735e-11)
    a7, a5, a3, a1 = f32(5.12229709037114e-08), f32(1.48572235717979e-05), f32(6.37261928875436e-04), f32(
        4.89352455891786e-03
    )  # fmt: skip
    b6, b4, b2, b0 = f32(1.19825839466702e-06), f32(1.18534705686654e-04), f32(2.26843463243900e-03), f32(
        4.89352518554385e-03
    )  # fmt: skip
    for j in range(W):
        t = min(max(beta * z[j], -c), c)
        t2 = t * t
        p = t * (((((((a13 * t2 + a11) * t2 + a9) * t2 + a7) * t2 + a5) * t2 + a3) * t2) + a1)
        q = ((b6 * t2 + b4) * t2 + b2) * t2 + b0
        out[j] = p / q * mask[j]


#: the jitted functions that the loops call, compiled before them (:func:`_jit`)
_HELPERS = ("_axpy8", "_tanh_masked")


def _forward_loop(h, J, mask, b, width, x0, start, damping, tol, max_iter, switch, out, img, count, res):  # noqa: C901
    """Plain-Python body of the compiled forward loop (numba nopython subset; see :func:`forward`)."""
    R, n = h.shape
    f32 = np.float32
    field = np.empty(n, f32)
    x = np.empty(n, f32)
    fx = np.empty(n, f32)
    hist = np.empty(RATE_WINDOW, f32)  # the last residuals (the slow stage's rate estimate)
    for r in range(R):
        W = min(n, (width[r] + 7) // 8 * 8)  # whole vectors of 8 floats (the spins past the width are masked)
        if start:
            for j in range(W):
                x[j] = min(max(x0[r, j], f32(-1.0)), f32(1.0)) * mask[r, j]
        else:  # tanh(beta h)
            _tanh_masked(x, h[r], b[r], mask[r], W)
        count[r] = max_iter
        rmax = f32(0.0)
        r_switch = f32(0.0)
        for it in range(1, max_iter + 1):
            for j in range(W):
                field[j] = h[r, j]
            _axpy8(field, x, J, W)  # J symmetric: (J m)_j = sum_k m_k J_kj
            _tanh_masked(fx, field, b[r], mask[r], W)
            rmax = f32(0.0)
            for j in range(W):
                rmax = max(rmax, abs(fx[j] - x[j]))
            passed = rmax < tol
            if passed and it > switch:  # the slow stage: the estimated error r / (1 - rho) below tol as well
                rho = f32(1.0)
                if it > RATE_WINDOW:
                    rho = (rmax / max(hist[it % RATE_WINDOW], f32(1e-30))) ** f32(1.0 / RATE_WINDOW)
                passed = rho < f32(1.0) and rmax < tol * (f32(1.0) - rho)
            if passed:
                for j in range(W):
                    out[r, j] = x[j]
                    img[r, j] = fx[j]
                count[r] = it
                break
            hist[it % RATE_WINDOW] = rmax
            for j in range(W):
                x[j] += damping * (fx[j] - x[j])
            if it == switch:  # where Newton resumes if the slow stage does not pass either
                r_switch = rmax
                for j in range(W):
                    out[r, j] = x[j]
        else:  # unconverged: the iterate after `switch` (where Newton resumes) and that iterate's predecessor's residual
            if switch < max_iter:
                rmax = r_switch
            else:
                for j in range(W):
                    out[r, j] = x[j]
        res[r] = rmax


def _adjoint_loop(g, D, J, width, damping, tol, max_iter, out, count, res):  # noqa: C901
    """Plain-Python body of the compiled adjoint loop (numba nopython subset; see :func:`adjoint`)."""
    R, n = g.shape
    f32 = np.float32
    v = np.empty(n, f32)
    w = np.empty(n, f32)
    fx = np.empty(n, f32)
    step = np.empty(n, f32)
    gp = np.empty(n, f32)  # the previous damped iterate and step (the secant step's memory)
    sp = np.empty(n, f32)
    tiny = f32(np.finfo(np.float32).tiny)
    for r in range(R):
        W = width[r]
        for j in range(W):
            v[j] = g[r, j]
        count[r] = max_iter
        rmax = f32(0.0)
        for it in range(1, max_iter + 1):
            for j in range(W):
                fx[j] = g[r, j]
                w[j] = D[r, j] * v[j]
            _axpy8(fx, w, J, W)  # A^T v = J (D v), J symmetric
            rmax = f32(0.0)
            for j in range(W):
                s = fx[j] - v[j]
                step[j] = s
                rmax = max(rmax, abs(s))
            if rmax < tol:
                for j in range(W):
                    out[r, j] = v[j]
                count[r] = it
                break
            # the damped iterate, then the secant step against the previous one (Anderson with memory 1, its
            # coefficient clipped to [-1, 1]: .fixed_point._secant)
            if it == 1:
                for j in range(W):
                    gp[j] = v[j] + damping * step[j]
                    sp[j] = step[j]
                    v[j] = gp[j]
                continue
            num = f32(0.0)
            den = f32(0.0)
            for j in range(W):
                dr = step[j] - sp[j]
                num += dr * step[j]
                den += dr * dr
            cc = min(max(num / max(den, tiny), f32(-1.0)), f32(1.0))
            for j in range(W):
                gn = v[j] + damping * step[j]
                v[j] = gn - cc * (gn - gp[j])
                gp[j] = gn
                sp[j] = step[j]
        else:
            for j in range(W):
                out[r, j] = v[j]
        res[r] = rmax


def finite(*ts: torch.Tensor) -> bool:
    """Whether every entry of ``ts`` is finite (one sum each; a sum that overflows counts as not finite, which
    only sends the caller to the torch loops)."""
    return all(bool(torch.isfinite(t.sum())) for t in ts)


def widths(mask: torch.Tensor | None, shape: tuple[int, ...]) -> torch.Tensor:
    """Each row's active width (its last unmasked spin + 1; 0 if none), ``(G, R)`` int64 for ``mask (G, R, n)``
    (``None``: every row at full width ``n`` of ``shape (G, R, n)``)."""
    G, R, n = shape
    if mask is None:
        return torch.full((G, R), n, dtype=torch.int64)
    last = torch.arange(1, n + 1, dtype=torch.int64)
    return torch.where(mask != 0, last, 0).amax(-1).expand(G, R).contiguous()


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().contiguous().numpy()


def forward(
    h: torch.Tensor,
    J: torch.Tensor,
    mask: torch.Tensor | None,
    b: torch.Tensor,
    width: torch.Tensor,
    start: torch.Tensor | None,
    *,
    damping: float,
    tol: float,
    max_iter: int,
    switch: int | None = None,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The damped iteration of naive mean field on one coupling group's rows, each row alone until it passes.

    A row passes once ``max |f(x) - x| < tol``; after ``switch`` iterations (the slow stage, where the rate of
    convergence ``rho`` is near 1 and the residual understates the distance to the fixed point, about
    ``r / (1 - rho)``) once also ``r < tol (1 - rho)``, ``rho`` estimated from the residuals over the last
    :data:`RATE_WINDOW` iterations: the distance, not only the residual, below ``tol``.

    Args:
        h: ``(R, n)`` float32 fields; J: ``(n, n)`` symmetric; mask: ``(R, n)`` 0/1 or ``None``; b: ``(R,)`` inverse
            temperatures; width: ``(R,)`` active widths (:func:`widths`); start: ``(R, n)`` or ``None``
            (``tanh(beta h)``), clamped to ``[-1, 1]`` and masked.
        damping, tol, max_iter: the step ``d``, the per-row stopping tolerance, the iterations at most.
        switch: the iterations before the slow stage (``None``: ``max_iter``, no slow stage).
        out: ``(x, image)`` to write into, contiguous ``(R, n)`` float32 zeros (``None``: new ones).

    Returns:
        ``(x, count, res, image)``: ``x (R, n)`` each converged row at the first iterate that passed, an
        unconverged one (``res >= tol``) at the iterate after ``switch`` iterations (where Newton resumes);
        ``count (R,)`` its map evaluations (``max_iter`` if unconverged); ``res (R,)`` the residual
        ``max |f(x) - x|`` of the last iterate tested (unconverged: of the iterate before ``x``); ``image (R, n)``
        ``f(x)`` of the converged rows (0 elsewhere). Spins beyond a row's width are 0 in ``x`` and ``image``.
    """
    R, n = h.shape
    x, img = (h.new_zeros(R, n), h.new_zeros(R, n)) if out is None else out
    count, res = torch.empty(R, dtype=torch.int64), h.new_empty(R)
    mk = _np(mask) if mask is not None else np.ones((1, n), np.float32).repeat(R, 0)
    x0 = _np(start) if start is not None else mk
    _jit("_forward_loop")(
        _np(h), _np(J), mk, _np(b), _np(width), x0, start is not None, np.float32(damping), np.float32(tol),
        int(max_iter), int(max_iter if switch is None else min(switch, max_iter)), x.numpy(), img.numpy(),
        count.numpy(), res.numpy(),
    )  # fmt: skip
    return x, count, res, img


def adjoint(
    g: torch.Tensor, D: torch.Tensor, J: torch.Tensor, width: torch.Tensor, *, damping: float, tol: float, max_iter: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The adjoint iteration ``v = g + A^T v`` (``A = diag(D) J``) of one coupling group's rows, secant-accelerated,
    each row alone until ``max |g + A^T v - v| < tol``.

    Args: ``g, D (R, n)`` float32 (``D = beta (1 - f^2)``, 0 on masked spins), ``J (n, n)`` symmetric, ``width (R,)``.

    Returns:
        ``(v (R, n), count (R,), res (R,))`` as :func:`forward`'s first three (``v`` 0 beyond each row's width).
    """
    R, n = g.shape
    v = g.new_zeros(R, n)
    count, res = torch.empty(R, dtype=torch.int64), g.new_empty(R)
    _jit("_adjoint_loop")(
        _np(g), _np(D), _np(J), _np(width), np.float32(damping), np.float32(tol), int(max_iter), v.numpy(),
        count.numpy(), res.numpy(),
    )  # fmt: skip
    return v, count, res


def solve_rows(
    h: torch.Tensor,
    J: torch.Tensor,
    mask: torch.Tensor | None,
    b: torch.Tensor,
    damping: float,
    tol: float,
    max_iter: int,
    width: torch.Tensor,
    start: torch.Tensor | None = None,
) -> tuple[torch.Tensor, int, float, dict[str, float], torch.Tensor]:
    """:func:`.fixed_point.solve_rows` for naive mean field in float32 by :func:`forward` (finite inputs:
    :func:`finite`), one coupling group at a time, with its slow stage from :data:`~.fixed_point.SWITCH` to
    :data:`LONG` iterations (the module docstring), then Newton for the rows still unconverged, from the iterate
    after ``SWITCH`` (:func:`.fixed_point.newton_free_energy` with the budget it has there, ``max_iter - SWITCH``).

    Args: ``h (G, R, n)``, ``J (G or 1, n, n)``, ``mask (G or 1, R, n)`` or ``None``, ``b (G or 1, R or 1, 1)``,
    ``width (G, R)`` (:func:`widths`), ``start (G, R, n)`` or ``None``; the rest as there.

    Returns: as :func:`.fixed_point.solve_rows` (``m, iterations, residual, extra, image``).
    """
    G, R, n = h.shape
    m, f = h.new_zeros(h.shape), h.new_zeros(h.shape)
    iters, res, spent, newton = 0, 0.0, 0.0, 0
    for g in range(G):
        Jg, bg = J[g if J.shape[0] > 1 else 0], b[g if b.shape[0] > 1 else 0]
        mg = None if mask is None else mask[g if mask.shape[0] > 1 else 0]
        _, count, rr, _ = forward(
            h[g], Jg, mg, bg[:, 0].expand(R), width[g], None if start is None else start[g],
            damping=damping, tol=tol, max_iter=min(max_iter, LONG), switch=SWITCH, out=(m[g], f[g]),
        )  # fmt: skip
        spent += float((count * width[g] ** 2).sum())
        slow = rr >= tol
        if bool(slow.any()):  # naive mean field's stragglers: Newton, in torch
            rows = slow.nonzero().squeeze(1)
            late = [(rows, int(width[g].index_select(0, rows).max()), count.index_select(0, rows))]
            steps, r_late = stragglers(m[g], f[g], h[g], Jg, bg, mg, late, tol, max_iter)
            newton += len(rows) if max_iter > SWITCH else 0
            iters, res = max(iters, int(late[0][2].max()) + steps), max(res, r_late)
            rr = rr.masked_fill(slow, 0.0)
        if R:
            iters, res = max(iters, int(count.max())), max(res, float(rr.max()))
    return m, iters, res, {"work": spent / max(1, G * R * n * n), "newton_rows": newton, "kernel": "compiled"}, f
