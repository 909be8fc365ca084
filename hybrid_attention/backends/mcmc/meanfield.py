"""Mean-field marginals (naive and TAP) with a differentiable fixed point, for Ising problems of any size.

Naive mean field solves ``m = tanh(beta (h + J m))``; TAP adds the Onsager reaction term::

    m_j = tanh(beta (h_j + sum_k J_jk m_k - beta m_j sum_k J_jk**2 (1 - m_k**2)))

Both are solved by a damped parallel fixed-point iteration ``m <- (1 - d) m + d f(m)`` from ``m = tanh(beta h)``.
The stopping test is on the fixed-point residual ``max |f(m) - m|``: over the whole batch (``solver="damped"``, the
sampler's default and what runs recorded before the option existed) or per row (``solver="rows"``, what training
uses by default: :mod:`.fixed_point`; converged rows leave the batch, and rows of naive mean field still
unconverged after 50 iterations switch to Newton's method on the mean-field free energy; for naive mean field in
float32 the iterations run in compiled loops, one row at a time, when numba is installed: :mod:`.mf_kernel`).
They are approximations: exact when ``J = 0`` (the spins are independent), accurate to ``O(J**2)`` (naive) or
``O(J**3)`` (TAP) for weak couplings, and poor for strong or frustrated couplings at low temperature, where the
iteration may also fail to converge (logged as a warning; see ``results/meanfield/`` for the measured errors).

Gradients (:meth:`MeanFieldSampler.differentiable_marginals`): ``"implicit"`` (default) differentiates the fixed
point itself, ``dm = (I - df/dm)^-1 df/dtheta``, solving the adjoint system by the same damped iteration in the
backward pass (memory of one step; per row with ``solver="rows"``, the stragglers solved directly, and for naive
mean field the parameters' gradients in closed form: :class:`.mf_adjoint.RowsFixedPoint`); ``"unroll"``
backpropagates through every iteration.
Masked spins are decoupled (zero field and couplings), so their marginal is exactly 0.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

from hybrid_attention.checks import as_generator, check_positive_int, describe_seed
from hybrid_attention.grouping import Grouped
from hybrid_attention.ising import IsingProblem
from hybrid_attention.sampler import Sampler, SamplerCapabilities
from hybrid_attention.sampleset import SampleSet

from . import fixed_point, mf_adjoint, mf_kernel

__all__ = ["MeanFieldSampler", "mean_field"]

logger = logging.getLogger(__name__)

_METHODS = ("naive", "tap")
_GRADS = ("implicit", "unroll")
#: ``damped``: the whole batch iterates until its largest residual passes (legacy); ``rows``: per-row stopping,
#: Newton for the stragglers (:mod:`.fixed_point`)
SOLVERS = ("damped", "rows")
#: the loops of ``solver="rows"`` (naive mean field, float32): ``auto`` (compiled when numba is installed),
#: ``compiled`` (:mod:`.mf_kernel`), ``torch`` (:mod:`.fixed_point`)
KERNELS = ("auto", "compiled", "torch")


def update(
    m: torch.Tensor, h: torch.Tensor, J: torch.Tensor, mask: torch.Tensor | None, tap: bool, beta: torch.Tensor
) -> torch.Tensor:
    """``f(m)`` for ``m, h (G, R, n)``, ``J (G, n, n)``, ``beta (G, R, 1)``; masked entries stay 0."""
    field = h + torch.bmm(m, J)  # J symmetric: (m J)_j = sum_k J_jk m_k
    if tap:
        q = 1 - m * m if mask is None else (1 - m * m) * mask
        field = field - beta * m * torch.bmm(q, J * J)
    out = torch.tanh(beta * field)
    return out if mask is None else out * mask


def mean_field(
    h: torch.Tensor,
    J: torch.Tensor,
    beta: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    method: str = "naive",
    damping: float = 0.5,
    max_iter: int = 500,
    tol: float = 1e-7,
    grad: str = "implicit",
    warn: bool = True,
    solver: str = "damped",
    start: torch.Tensor | None = None,
    kernel: str = "auto",
) -> tuple[torch.Tensor, dict[str, Any]]:
    """Solve the mean-field equations for a batch grouped by coupling matrix (see :class:`~hybrid_attention.grouping.Grouped`).

    Args:
        h: ``(G, R, n)``; J: ``(G, n, n)`` symmetric; beta: ``(G, R)``; mask: ``(G, R, n)`` 0/1 or None
            (masked spins are held at 0, which drops them exactly).
        method: ``"naive"`` or ``"tap"``.
        damping: step ``d`` in ``(0, 1]`` of the damped iteration.
        max_iter, tol: stop when ``max |m_new - m| < tol`` or after ``max_iter`` iterations.
        grad: ``"implicit"`` or ``"unroll"`` (only matters when autograd is on).
        warn: log a warning when the iteration does not converge (off for callers that use any approximate
            solution, such as a Markov chain's starting law).
        solver: ``"damped"`` (stop when the whole batch passes ``tol``) or ``"rows"`` (each row stops on its own;
            Newton for the stragglers; :mod:`.fixed_point`). ``grad="unroll"`` always runs the damped iteration.
        start: ``(G, R, n)`` initial guess for ``solver="rows"`` (``None``: ``tanh(beta h)``); the stopping test
            alone decides the result.
        kernel: the loops of ``solver="rows"`` for naive mean field in float32: ``"auto"`` (compiled when numba is
            installed), ``"compiled"`` (:mod:`.mf_kernel`) or ``"torch"`` (:mod:`.fixed_point`); other settings,
            and inputs that are not all finite, always run the torch loops.

    Returns:
        ``(m (G, R, n), info)`` with ``info = {"iterations", "converged", "residual"}`` (``solver="rows"`` adds
        ``"work"``, the iterations' work in units of one full-width iteration of every row, and ``"newton_rows"``;
        the implicit backward adds ``"backward_iterations"`` when it runs); ``m`` is differentiable with respect
        to ``h``, ``J`` and ``beta``. With ``solver="rows"`` and naive mean field ``m`` is the map ``f`` at each
        row's solution (what the implicit step returns, with or without autograd), for the other settings the
        solution itself without autograd.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if start is not None and solver != "rows":
        raise ValueError(f"start (a warm start) needs solver='rows', got solver {solver!r}")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    b = beta[..., None]
    tap = method == "tap"
    need_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (h, J, beta))
    unroll = need_grad and grad == "unroll"
    image = None  # solver rows, naive mean field: f(m) at the solution m (the value returned)
    if unroll:
        m = torch.tanh(b * h)
        res, it = float("inf"), 0
        for it in range(1, max_iter + 1):  # noqa: B007 (the count is reported after the loop)
            step = update(m, h, J, mask, tap, b) - m
            res = float(step.detach().abs().max()) if step.numel() else 0.0  # fixed-point residual |f(m) - m|
            if res < tol:
                break
            m = m + damping * step
    else:
        mk = None if mask is None else mask.detach()
        st = None if start is None else start.detach().to(h.dtype)
        compiled = (
            solver == "rows"
            and not tap
            and h.dtype == torch.float32
            and kernel != "torch"
            and (kernel == "compiled" or mf_kernel.available())
            and mf_kernel.finite(*(t.detach() for t in (h, J, beta) + (() if st is None else (st,))))
        )
        # the rows' widths (compiled loops) or row blocks (torch loops): once for the forward iteration and the adjoint
        width = mf_kernel.widths(mk, h.shape) if compiled else None
        blocks = None if compiled else width_blocks(mk, h.shape[-1])
        extra: dict[str, Any] = {}
        with torch.no_grad():
            if compiled:
                m, it, res, extra, image = mf_kernel.solve_rows(
                    h.detach(), J.detach(), mk, b.detach(), damping, tol, max_iter, width, st
                )
            elif solver == "rows":
                m, it, res, extra, image = fixed_point.solve_rows(
                    h.detach(), J.detach(), mk, tap, b.detach(), damping, tol, max_iter, blocks, st
                )
            else:
                m, it, res = solve(h.detach(), J.detach(), mk, tap, b.detach(), damping, max_iter, tol, blocks)
    info = {"iterations": it, "converged": res < tol, "residual": res, **({} if unroll else extra)}
    if warn and not info["converged"]:
        logger.warning(
            "mean field (%s) did not converge in %d iterations (residual %.2e); strong couplings?", method, it, res
        )
    if need_grad and image is not None:  # naive mean field, solver rows: the map's value f(m*) and its gradient
        m = mf_adjoint.RowsFixedPoint.apply(h, J, b, m, image, mk, blocks, damping, tol, max_iter, info, width)
    elif image is not None:
        m = image
    elif need_grad and not unroll:
        m = implicit(m.detach(), h, J, mask, tap, b, damping, max_iter, tol, info, blocks, solver)
    return m, info


def _residual(m, h, J, mask, b, J2) -> torch.Tensor:
    """``f(m) - m`` in place of temporaries: the same operations as :func:`update` (bit for bit) without the graph;
    ``J2 = J * J`` for TAP, else ``None``."""
    field = torch.bmm(m, J).add_(h)
    if J2 is not None:
        q = 1 - m * m if mask is None else (1 - m * m) * mask
        field.sub_(b * m * torch.bmm(q, J2))
    out = field.mul_(b).tanh_()
    if mask is not None:
        out.mul_(mask)
    return out.sub_(m)


#: row blocks of :func:`solve` (rows sorted by active width; 4 blocks do about half the work of one on causal masks)
_BLOCKS = 4


def width_blocks(mask: torch.Tensor | None, n: int) -> list[tuple[torch.Tensor, int]] | None:
    """Rows ``r`` of ``mask (G, R, n)`` whose spins beyond ``L`` are masked in every group, as ``_BLOCKS`` blocks of
    ``(rows, L)`` sorted by ``L``; ``None`` when blocking would not save a fifth of the products (no mask, or masks
    that are not prefix-like)."""
    if mask is None or mask.shape[1] * n * n < 2**20:  # small batches: the blocks' overhead outweighs the saving
        return None
    on = mask[0] != 0 if mask.shape[0] == 1 else (mask != 0).any(0)  # (R, n): active in some group
    last = torch.arange(1, n + 1, dtype=torch.int32, device=mask.device)
    width = torch.where(on, last, 0).amax(-1)  # last active spin + 1 (0: none)
    order = torch.argsort(width, stable=True)
    blocks = [(rows, int(width[rows[-1]])) for rows in order.tensor_split(_BLOCKS) if rows.numel()]
    if sum(len(r) * L * L for r, L in blocks) > 0.8 * mask.shape[1] * n * n:
        return None
    return blocks


def solve(
    h, J, mask, tap: bool, b, damping: float, max_iter: int, tol: float, blocks: list[tuple[torch.Tensor, int]] | None
) -> tuple[torch.Tensor, int, float]:
    """The damped iteration ``m <- m + d (f(m) - m)`` from ``tanh(beta h)``, stopped when the largest residual of
    the whole batch is below ``tol`` (no gradient). Causal masks leave row ``r`` with ``L_r`` active spins; rows are
    iterated in blocks of similar ``L`` on the leading ``L x L`` block of ``J`` (the masked spins are 0 and enter no
    product), the same iteration and stopping test at about half the cost.

    ``blocks``: :func:`width_blocks` of ``mask``, or ``None`` to iterate the whole width.

    Returns ``(m (G, R, n), iterations, final residual)``.
    """
    if blocks is None:
        parts = [(h, J, mask, b)]
    else:
        parts = [(h[:, r, :L], J[:, :L, :L], mask[:, r, :L], b[:, r]) for r, L in blocks]
    ms = [torch.tanh(bb * hh) for hh, _, _, bb in parts]
    J2 = [JJ * JJ if tap else None for _, JJ, _, _ in parts]
    res, it = float("inf"), 0
    for it in range(1, max_iter + 1):  # noqa: B007 (the count is reported after the loop)
        steps = [_residual(m, *part, j2) for m, part, j2 in zip(ms, parts, J2)]
        res = max((float(st.abs().max()) for st in steps if st.numel()), default=0.0)  # max |f(m) - m|
        if res < tol:
            break
        for m, st in zip(ms, steps):
            m.add_(st.mul_(damping))
    if blocks is None:
        return ms[0], it, res
    m = h.new_zeros(h.shape)
    for mb, (r, L) in zip(ms, blocks):
        m[:, r, :L] = mb
    return m, it, res


def implicit(
    m_star: torch.Tensor,
    h,
    J,
    mask,
    tap,
    b,
    damping: float,
    max_iter: int,
    tol: float,
    info: dict,
    blocks,
    solver: str = "damped",
) -> torch.Tensor:
    """Attach the implicit-function gradient of the fixed point ``m* = f(m*, theta)``; the backward pass records
    its adjoint iterations in ``info["backward_iterations"]``.

    The adjoint system ``v = g + (df/dm)^T v`` is solved by the damped iteration with ``(df/dm)^T v`` in closed form
    (each problem's Jacobian is ``diag(beta (1 - f^2)) J`` for naive mean field, plus the Onsager term's derivative
    for TAP), in the forward iteration's row ``blocks`` (:func:`width_blocks`, or ``None``); ``v`` then flows into
    ``theta`` through one differentiable step ``f(m*, theta)``. ``solver="rows"``: each row stops on its own and
    the stragglers are solved directly (:func:`.mf_adjoint.adjoint_rows`, secant-accelerated; naive mean field)."""
    m = update(m_star, h, J, mask, tap, b)  # one step with the graph to theta (value = m* at convergence)
    with torch.no_grad():
        f = m.detach()
        bd, Jd = b.detach(), J.detach()
        mk = None if mask is None else mask.detach()
        D = bd * (1 - f * f) if mk is None else bd * (1 - f * f) * mk  # beta (1 - tanh^2) on the active spins
        sel = (lambda t: [t]) if blocks is None else (lambda t: [t[:, r, :L] for r, L in blocks])  # noqa: E731
        Js = [Jd] if blocks is None else [Jd[:, :L, :L] for _, L in blocks]
        parts = list(zip(sel(D), Js, sel(bd.expand(*f.shape[:2], 1)) if blocks else [bd]))
        if tap:  # the Onsager term -beta m_j sum_k J_jk^2 q_k, q = (1 - m^2) on the active spins
            q = 1 - m_star * m_star if mk is None else (1 - m_star * m_star) * mk
            J2 = Jd * Jd
            S = torch.bmm(q, J2)
            two_m = 2 * m_star if mk is None else 2 * m_star * mk
            taps = list(
                zip(sel(S), sel(m_star), sel(two_m), [J2] if blocks is None else [J2[:, :L, :L] for _, L in blocks])
            )

    def vjp(v: torch.Tensor, k: int) -> torch.Tensor:
        Dk, Jk, bk = parts[k]
        w = v * Dk
        out = torch.bmm(w, Jk)
        if tap:
            Sk, mk_, two_mk, J2k = taps[k]
            out.sub_(bk * w * Sk).add_(bk * two_mk * torch.bmm(w * mk_, J2k))
        return out

    def hook(g: torch.Tensor) -> torch.Tensor:
        # solve v = g + (df/dm)^T v by the damped iteration; v then flows into theta through m's graph
        if g is None:
            return g
        # the stopping test is relative to the incoming gradient's scale: a training loss averaged over many
        # targets gives entries far below ``tol``, and an absolute test would stop after one step (a truncated,
        # not the implicit, gradient)
        scale = float(g.abs().max())
        if scale == 0.0:
            return g
        gs = sel(g)
        vs = list(gs)
        if solver == "rows":
            info["backward_iterations"] = 0
            vs = mf_adjoint.block_adjoint(gs, parts, taps if tap else None, damping, tol * scale, max_iter, info)
        for it in range(1, max_iter + 1 if solver == "damped" else 1):
            info["backward_iterations"] = it
            news = [(1 - damping) * v + damping * (gk + vjp(v, k)) for k, (v, gk) in enumerate(zip(vs, gs))]
            if not all(bool(torch.isfinite(x).all()) for x in news):  # no stable fixed point: one-step gradient
                logger.warning("mean-field implicit backward diverged; using the one-step gradient")
                return g
            done = max((float((x - v).abs().max()) for x, v in zip(news, vs) if x.numel()), default=0.0) < tol * scale
            vs = news
            if done:
                break
        if blocks is None:
            return vs[0]
        out = g.clone()  # spins beyond a block's width are masked: their adjoint never reaches theta
        for v, (r, L) in zip(vs, blocks):
            out[:, r, :L] = v
        return out

    if m.requires_grad:
        m.register_hook(hook)
    return m


class MeanFieldSampler(Sampler):
    """Naive or TAP mean-field marginals; samples are drawn from the factorised distribution they define.

    Args:
        method: ``"naive"`` (default) or ``"tap"``.
        damping, max_iter, tol: fixed-point iteration settings (see :func:`mean_field`); ``tol=None`` (default) is
            ``max(1e-10, 1000 eps)`` of the problem's dtype (1.2e-4 in float32, 1e-10 in float64): float32 rounding
            keeps the residual of slowly converging problems near 1e-5, far below the approximation's own error.
        grad: ``"implicit"`` (default) or ``"unroll"`` for :meth:`differentiable_marginals`.
        solver: ``"damped"`` (default: the batch iterates until its largest residual passes ``tol``) or ``"rows"``
            (each row stops on its own, Newton for the stragglers; :mod:`.fixed_point`). Training uses ``"rows"``
            unless a run recorded none (runs started before the option existed keep ``"damped"``).
        kernel: the loops of ``solver="rows"`` for naive mean field in float32 (training's problems): ``"auto"``
            (default: compiled when numba is installed, the ``fast`` extra), ``"compiled"`` (:mod:`.mf_kernel`: each
            row iterates alone in a compiled loop, about twice as fast) or ``"torch"`` (:mod:`.fixed_point`). The
            same iteration and stopping test; results differ within the stopping tolerance.
        num_reads: reads per problem when ``sample(num_reads=None)``.

    The bridge calls :meth:`differentiable_marginals` (no sampling noise, gradients of the approximation).

    Example:
        >>> import torch
        >>> from hybrid_attention import IsingProblem
        >>> m = MeanFieldSampler().marginals(IsingProblem(torch.tensor([[0.5, -1.0]], dtype=torch.float64)))
        >>> bool(torch.allclose(m, torch.tanh(torch.tensor([[0.5, -1.0]], dtype=torch.float64))))  # exact for J = 0
        True
    """

    name = "meanfield"
    capabilities = SamplerCapabilities(differentiable=True, pad_with_mask=True, approximate=True)
    parameters: dict[str, str] = {}

    def __init__(
        self,
        *,
        method: str = "naive",
        damping: float = 0.5,
        max_iter: int = 500,
        tol: float | None = None,
        grad: str = "implicit",
        solver: str = "damped",
        kernel: str = "auto",
        num_reads: int = 1024,
    ) -> None:
        super().__init__()
        if method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        if grad not in _GRADS:
            raise ValueError(f"grad must be one of {_GRADS}, got {grad!r}")
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        if kernel == "compiled" and (solver, method) != ("rows", "naive"):
            raise ValueError(
                f"kernel='compiled' runs solver='rows' with method='naive'; got solver {solver!r}, method {method!r}"
            )
        if kernel == "compiled" and not mf_kernel.available():
            raise ImportError("kernel='compiled' needs numba: pip install numba (or use kernel='torch')")
        if isinstance(damping, bool) or not isinstance(damping, (int, float)) or not 0 < damping <= 1:
            raise ValueError(f"damping must be in (0, 1], got {damping!r}")
        if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol > 0):
            raise ValueError(f"tol must be > 0 or None, got {tol!r}")
        self.method, self.grad, self.damping, self.solver, self.kernel = method, grad, float(damping), solver, kernel
        self.tol = None if tol is None else float(tol)
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.default_num_reads = check_positive_int(num_reads, "num_reads")
        self.last_info: dict[str, Any] = {}

    @property
    def properties(self) -> dict[str, Any]:
        return {**super().properties, "method": self.method, "solver": self.solver, "kernel": self.kernel}

    def __repr__(self) -> str:
        return (
            f"MeanFieldSampler(method={self.method!r}, damping={self.damping}, grad={self.grad!r}, "
            f"solver={self.solver!r}, kernel={self.kernel!r})"
        )

    def differentiable_marginals(self, problem: IsingProblem) -> torch.Tensor:
        """Mean-field ``<s_j>``, ``(*batch, n)`` in the problem's dtype, differentiable w.r.t. h, J and beta."""
        self.validate(problem)
        gp = Grouped(problem)
        tol = self.tol if self.tol is not None else max(1e-10, 1000 * torch.finfo(gp.h.dtype).eps)
        m, self.last_info = mean_field(
            gp.h,
            gp.J,
            gp.beta,
            gp.mask,
            method=self.method,
            damping=self.damping,
            max_iter=self.max_iter,
            tol=tol,
            grad=self.grad,
            solver=self.solver,
            kernel=self.kernel,
        )
        return gp.ungroup(m)

    def _marginals(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> torch.Tensor:
        """Mean-field marginals (float64, no graph); the mean of ``num_reads`` reads from the factorised
        distribution when ``num_reads`` is given."""
        if num_reads is not None:
            return super()._marginals(problem, num_reads=num_reads, seed=seed, **options)
        return self._mean_field(problem)

    def _mean_field(self, problem: IsingProblem) -> torch.Tensor:
        with torch.no_grad():
            return self.differentiable_marginals(problem.detach().to(torch.float64))

    def _sample(self, problem: IsingProblem, *, num_reads: int | None, seed: Any) -> SampleSet:
        reads = self.default_num_reads if num_reads is None else int(num_reads)
        m = self._mean_field(problem).reshape(-1, problem.n).numpy()
        rng = as_generator(seed)
        u = rng.random((m.shape[0], reads, problem.n))
        spins = np.where(u < (1 + m[:, None, :]) / 2, 1, -1).astype(np.int8)
        info = {
            "backend": self.name,
            "num_reads": reads,
            "method": self.method,
            "seed": describe_seed(seed),
            **self.last_info,
        }
        w = np.full((m.shape[0], reads), 1.0 / reads)
        return SampleSet(
            spins.reshape(*problem.batch_shape, reads, problem.n), w.reshape(*problem.batch_shape, reads), problem, info
        )
