"""Mean-field marginals (naive and TAP) with a differentiable fixed point, for Ising problems of any size.

Naive mean field solves ``m = tanh(beta (h + J m))``; TAP adds the Onsager reaction term::

    m_j = tanh(beta (h_j + sum_k J_jk m_k - beta m_j sum_k J_jk**2 (1 - m_k**2)))

Both are solved by a damped parallel fixed-point iteration ``m <- (1 - d) m + d f(m)`` from ``m = tanh(beta h)``.
The stopping test is on the fixed-point residual ``max |f(m) - m|``.
They are approximations: exact when ``J = 0`` (the spins are independent), accurate to ``O(J**2)`` (naive) or
``O(J**3)`` (TAP) for weak couplings, and poor for strong or frustrated couplings at low temperature, where the
iteration may also fail to converge (logged as a warning; see ``results/meanfield/`` for the measured errors).

Gradients (:meth:`MeanFieldSampler.differentiable_marginals`): ``"implicit"`` (default) differentiates the fixed
point itself, ``dm = (I - df/dm)^-1 df/dtheta``, solving the adjoint system by the same damped iteration in the
backward pass (memory of one step); ``"unroll"`` backpropagates through every iteration.
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

__all__ = ["MeanFieldSampler", "mean_field"]

logger = logging.getLogger(__name__)

_METHODS = ("naive", "tap")
_GRADS = ("implicit", "unroll")


def _update(
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

    Returns:
        ``(m (G, R, n), info)`` with ``info = {"iterations", "converged", "residual"}`` (the implicit backward adds
        ``"backward_iterations"`` when it runs); ``m`` is differentiable with respect to ``h``, ``J`` and ``beta``.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    b = beta[..., None]
    tap = method == "tap"
    need_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (h, J, beta))
    unroll = need_grad and grad == "unroll"
    m = torch.tanh(b * h)
    if not unroll:
        m = m.detach()
    res, it = float("inf"), 0
    with torch.set_grad_enabled(unroll):
        for it in range(1, max_iter + 1):  # noqa: B007 (the count is reported after the loop)
            step = _update(m, h, J, mask, tap, b) - m
            res = float(step.detach().abs().max()) if step.numel() else 0.0  # fixed-point residual |f(m) - m|
            if res < tol:
                break
            m = m + damping * step
    info = {"iterations": it, "converged": res < tol, "residual": res}
    if warn and not info["converged"]:
        logger.warning(
            "mean field (%s) did not converge in %d iterations (residual %.2e); strong couplings?", method, it, res
        )
    if need_grad and not unroll:
        m = _implicit(m.detach(), h, J, mask, tap, b, damping, max_iter, tol, info)
    return m, info


def _implicit(
    m_star: torch.Tensor, h, J, mask, tap, b, damping: float, max_iter: int, tol: float, info: dict
) -> torch.Tensor:
    """Attach the implicit-function gradient of the fixed point ``m* = f(m*, theta)``; the backward pass records
    its adjoint iterations in ``info["backward_iterations"]``."""
    m = _update(m_star, h, J, mask, tap, b)  # one step with the graph to theta (value = m* at convergence)
    z0 = m_star.clone().requires_grad_(True)
    with torch.enable_grad():
        f0 = _update(z0, h, J, mask, tap, b)

    def hook(g: torch.Tensor) -> torch.Tensor:
        # solve v = g + (df/dm)^T v by the damped iteration; v then flows into theta through m's graph
        if g is None:
            return g
        v = g
        # the stopping test is relative to the incoming gradient's scale: a training loss averaged over many
        # targets gives entries far below ``tol``, and an absolute test would stop after one step (a truncated,
        # not the implicit, gradient)
        scale = float(g.abs().max())
        if scale == 0.0:
            return g
        for k in range(1, max_iter + 1):
            info["backward_iterations"] = k
            vjp = torch.autograd.grad(f0, z0, v, retain_graph=True)[0]
            new = (1 - damping) * v + damping * (g + vjp)
            if not torch.isfinite(new).all():  # no stable fixed point (strong couplings): one-step gradient instead
                logger.warning("mean-field implicit backward diverged; using the one-step gradient")
                return g
            done = float((new - v).abs().max()) < tol * scale
            v = new
            if done:
                break
        return v

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
        num_reads: int = 1024,
    ) -> None:
        super().__init__()
        if method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        if grad not in _GRADS:
            raise ValueError(f"grad must be one of {_GRADS}, got {grad!r}")
        if isinstance(damping, bool) or not isinstance(damping, (int, float)) or not 0 < damping <= 1:
            raise ValueError(f"damping must be in (0, 1], got {damping!r}")
        if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol > 0):
            raise ValueError(f"tol must be > 0 or None, got {tol!r}")
        self.method, self.grad, self.damping = method, grad, float(damping)
        self.tol = None if tol is None else float(tol)
        self.max_iter = check_positive_int(max_iter, "max_iter")
        self.default_num_reads = check_positive_int(num_reads, "num_reads")
        self.last_info: dict[str, Any] = {}

    @property
    def properties(self) -> dict[str, Any]:
        return {**super().properties, "method": self.method}

    def __repr__(self) -> str:
        return f"MeanFieldSampler(method={self.method!r}, damping={self.damping}, grad={self.grad!r})"

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
