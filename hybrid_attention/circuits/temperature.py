"""Effective temperature of DQA output: leading-order relation, fit against exact output, calibration.

Short anneals from ``|+>^n`` sample an approximately Boltzmann distribution (docs/theory.md section 4). Expanding the
Trotter product to second order in the slice phases ``(b_k, a_k)`` (a driver phase after a problem phase is
what turns phases into populations; the ``a a`` and ``b b`` terms cancel in ``|amplitude|^2``) gives

    ``p(z) ∝ 1 - 4 S (E_h(z) + 2 E_J(z)) + O(phase^3)``,    ``S = sum_k a_k sum_{k' <= k} b_k'``

with ``E_h = -h.s`` and ``E_J = -sum_{j<k} J_jk s_j s_k`` (the ``k`` in ``k' <= k``: slice ``k``'s driver
follows its own problem layer; for ``order=2`` half the driver precedes it). In the continuum
``S = int_0^tau dt A(t) int_0^t B(t') dt'``, which for the documented linear schedule is ``Gamma lambda tau^2 / 24``:

    ``beta_h = 4 S = Gamma lambda tau^2 / 6``,  ``beta_J = 8 S = 2 beta_h``

(times the problem's ``beta`` and the schedule's ``field_scale`` / ``coupling_scale``). Couplings see twice
the inverse temperature of the fields because flipping one spin changes each coupling term it touches by
twice the amount; ``field_scale=2`` (:func:`compensate`) balances them. The relation reproduces the table of docs/theory.md section 4
at small ``tau`` (0.00667 vs 0.0066 at ``tau = 0.2``) and underestimates higher-order effects beyond.

:func:`fit_temperature` fits ``(beta_h, beta_J)`` against the exact circuit output (the reference statevector)
with :func:`hybrid_attention.metrics.fit_effective_beta`; :func:`calibrate` picks ``tau`` or ``energy_scale``
for a target ``beta``, from the leading-order relation or by root finding on the fit.

Example:
    >>> from hybrid_attention.circuits import DQASchedule
    >>> bh, bJ = leading_order_beta(DQASchedule(tau=0.2, steps=400))
    >>> round(bh, 4), round(bJ, 4)   # the fitted values of the table of docs/theory.md section 4: 0.0066, 0.0133
    (0.0067, 0.0134)
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import numpy as np

from hybrid_attention.metrics import EffectiveBeta, fit_effective_beta

from .reference import dqa_probabilities
from .schedule import DQASchedule

__all__ = ["leading_order_beta", "effective_beta", "fit_temperature", "calibrate", "compensate", "random_problems"]

logger = logging.getLogger(__name__)


def _pair_sum(schedule: DQASchedule) -> float:
    """``S = sum_k a_k * (problem phase applied before driver slice k)``."""
    b, a = schedule.coefficients()
    before = np.cumsum(b)  # problem phase up to and including slice k
    if schedule.order == 2:  # half driver before slice k's problem layer, half after
        return float(np.sum(0.5 * a * (before - b) + 0.5 * a * before))
    return float(np.sum(a * before))


def leading_order_beta(schedule: DQASchedule, beta: float = 1.0) -> tuple[float, float]:
    """Leading-order effective inverse temperatures ``(beta_h, beta_J)`` of the DQA output.

    Args:
        schedule: the :class:`DQASchedule` (its ``field_scale`` / ``coupling_scale`` are included).
        beta: the problem's inverse temperature (the circuit encodes ``beta * H_P``).

    Returns:
        ``(4 S beta field_scale, 8 S beta coupling_scale)`` with ``S`` from the module docstring.
    """
    if not isinstance(schedule, DQASchedule):
        raise TypeError(f"schedule must be a DQASchedule, got {type(schedule).__name__}")
    S = _pair_sum(schedule) * float(beta)
    return 4.0 * S * float(schedule.field_scale), 8.0 * S * float(schedule.coupling_scale)


effective_beta = leading_order_beta


def compensate(schedule: DQASchedule) -> DQASchedule:
    """The same schedule with fields doubled relative to couplings, so ``beta_h = beta_J`` to leading order."""
    return dataclasses.replace(schedule, field_scale=2.0 * float(schedule.coupling_scale))


def random_problems(n: int = 4, batch: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Unit-normal ``h (batch, n)`` and symmetric ``J (batch, n, n)`` (upper triangle normal), as in docs/theory.md section 4."""
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(batch, n))
    U = np.triu(rng.normal(size=(batch, n, n)), 1)
    return h, U + np.swapaxes(U, -1, -2)


def fit_temperature(h: Any, J: Any, schedule: DQASchedule, *, beta: float = 1.0) -> EffectiveBeta:
    """Fit ``(beta_h, beta_J)`` to the exact output of the circuit for problems ``h (*batch, n)``, ``J``.

    Returns the per-problem :class:`~hybrid_attention.metrics.EffectiveBeta` (``r`` near 1 means the output
    is close to Boltzmann). ``beta`` scales the problem inside the circuit.
    """
    h = np.asarray(h, dtype=np.float64)
    J = np.asarray(J, dtype=np.float64)
    p = dqa_probabilities(beta * h, beta * J, schedule)
    return fit_effective_beta(p, h, J)


def calibrate(
    target_beta: float,
    schedule: DQASchedule,
    *,
    vary: str = "tau",
    method: str = "leading",
    problems: tuple[np.ndarray, np.ndarray] | None = None,
    which: str = "h",
    tol: float | None = None,
    max_iter: int | None = None,
) -> DQASchedule:
    """A schedule whose effective inverse temperature is ``target_beta``.

    Args:
        target_beta: the desired ``beta_h`` (``which="h"``) or ``beta_J`` (``which="J"``).
        schedule: the starting schedule; only ``vary`` changes (``steps`` stays: ``dt`` scales with ``tau``).
        vary: ``"tau"`` or ``"energy_scale"``.
        method: ``"leading"`` (closed form: ``beta ∝ tau^2`` and ``∝ energy_scale``) or ``"fit"`` (bisection in
            log space on the mean fitted beta of ``problems``, default :func:`random_problems`).
        which: calibrate the field (``"h"``) or coupling (``"J"``) temperature.
        tol, max_iter: ``"fit"`` only: the relative tolerance on the fitted beta (default ``1e-3``) and the most
            bisection steps (default 60).

    Returns:
        the calibrated :class:`DQASchedule`.

    Raises:
        ValueError: a bad ``target_beta``, ``vary``, ``method`` or ``which``; ``problems``, ``tol`` or ``max_iter``
            with ``method="leading"`` (which uses none of them); a target the fit cannot reach.
    """
    if not (isinstance(target_beta, (int, float)) and math.isfinite(target_beta) and target_beta > 0):
        raise ValueError(f"target_beta must be a positive finite number, got {target_beta!r}")
    if vary not in ("tau", "energy_scale"):
        raise ValueError(f"vary must be 'tau' or 'energy_scale', got {vary!r}")
    if method not in ("leading", "fit"):
        raise ValueError(f"method must be 'leading' or 'fit', got {method!r}")
    if which not in ("h", "J"):
        raise ValueError(f"which must be 'h' or 'J', got {which!r}")
    if method == "leading":
        given = [k for k, v in (("problems", problems), ("tol", tol), ("max_iter", max_iter)) if v is not None]
        if given:
            raise ValueError(f"{', '.join(given)} only apply to method='fit', got them with method='leading'")
    tol = 1e-3 if tol is None else float(tol)
    max_iter = 60 if max_iter is None else int(max_iter)
    idx = 0 if which == "h" else 1
    power = 2.0 if vary == "tau" else 1.0
    x0 = float(getattr(schedule, vary))
    lo_beta = leading_order_beta(schedule)[idx]
    x_lead = x0 * (target_beta / lo_beta) ** (1.0 / power)
    if method == "leading":
        return dataclasses.replace(schedule, **{vary: x_lead})
    h, J = problems if problems is not None else random_problems()

    def measured(x: float) -> float:
        f = fit_temperature(h, J, dataclasses.replace(schedule, **{vary: x}))
        return float(np.mean(f.beta_h if idx == 0 else f.beta_J))

    lo, hi = x_lead, x_lead
    while measured(lo) > target_beta:
        lo /= 2.0
    prev = -math.inf
    while (val := measured(hi)) < target_beta:
        if val <= prev or hi > 1e3 * x_lead:  # the fitted beta saturates (higher orders) before the target
            raise ValueError(
                f"cannot reach effective beta_{which} = {target_beta} by varying {vary}: the fitted value "
                f"peaks near {prev:.4g} at {vary} ~ {hi / 2:.4g}; vary 'tau' or lower the target"
            )
        prev, hi = val, hi * 2.0
    for _ in range(max_iter):
        mid = math.sqrt(lo * hi)
        val = measured(mid)
        if abs(val - target_beta) <= tol * target_beta:
            break
        lo, hi = (mid, hi) if val < target_beta else (lo, mid)
    logger.info("calibrated %s = %.6g for target beta_%s = %.4g (measured %.4g)", vary, mid, which, target_beta, val)
    return dataclasses.replace(schedule, **{vary: mid})
