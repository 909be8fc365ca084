"""DQA schedules: ``H(t) = A(t) H_D + B(t) H_P`` on ``[0, tau]`` and their Trotter steps (docs/theory.md section 4).

Defaults are fixed by docs/theory.md: linear ``A(t) = gamma (1 - t/tau)``, ``B(t) = energy_scale * t/tau``, first-order
Trotterization with ``steps`` slices, ``dt = tau / steps``, midpoints ``t_k = (k + 1/2) dt``; slice ``k`` applies
``exp(-i dt B(t_k) H_P)`` then ``exp(-i dt A(t_k) H_D)`` with ``H_P = -sum h Z - sum J ZZ`` and ``H_D = -sum X``.
As gates: ``RZ(-2 dt B h_j)``, ``RZZ(-2 dt B J_jk)``, then ``RX(-2 dt A)``.

``order=2`` gives the symmetric (Strang) splitting ``exp(-i dt/2 A H_D) exp(-i dt B H_P) exp(-i dt/2 A H_D)`` per
slice, an option; ``shape`` selects other schedule shapes (``"linear"`` default, ``"sin2"`` smooth ramp).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["DQASchedule"]

_SHAPES = ("linear", "sin2")


@dataclass(frozen=True)
class DQASchedule:
    """Annealing schedule and its Trotterization.

    Args:
        tau: total anneal time (> 0; ``tau -> 0`` is a sudden quench with uniform output).
        steps: number of Trotter slices ``K`` (>= 1).
        gamma: driver strength ``Gamma`` (``A(0) = gamma``).
        energy_scale: ``lambda``, the problem energy scale (``B(tau) = energy_scale``).
        shape: ``"linear"`` (the default) or ``"sin2"`` (``s(x) = sin^2(pi x / 2)``).
        order: 1 (the default, problem then driver) or 2 (symmetric splitting).
        field_scale: factor on the fields inside the circuit (compensation: DQA samples couplings at about
            twice the inverse temperature of the fields, so ``field_scale=2`` balances them; see
            :mod:`hybrid_attention.circuits.temperature`). Default 1 (the default program).
        coupling_scale: factor on the couplings inside the circuit (default 1).

    Example:
        >>> s = DQASchedule(tau=1.0, steps=4)
        >>> s.dt, [round(float(t), 3) for t in s.times()]
        (0.25, [0.125, 0.375, 0.625, 0.875])
    """

    tau: float
    steps: int
    gamma: float = 1.0
    energy_scale: float = 1.0
    shape: str = "linear"
    order: int = 1
    field_scale: float = 1.0
    coupling_scale: float = 1.0

    def __post_init__(self) -> None:
        for name in ("tau", "gamma", "energy_scale", "field_scale", "coupling_scale"):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float, np.floating, np.integer))
                or not math.isfinite(float(v))
            ):
                raise ValueError(f"DQASchedule.{name} must be a finite number, got {v!r}")
        if self.tau <= 0:
            raise ValueError(f"DQASchedule.tau must be > 0, got {self.tau}")
        if isinstance(self.steps, bool) or not isinstance(self.steps, (int, np.integer)) or self.steps < 1:
            raise ValueError(f"DQASchedule.steps must be an integer >= 1, got {self.steps!r}")
        if self.shape not in _SHAPES:
            raise ValueError(f"DQASchedule.shape must be one of {_SHAPES}, got {self.shape!r}")
        if self.order not in (1, 2):
            raise ValueError(f"DQASchedule.order must be 1 or 2, got {self.order!r}")

    @property
    def dt(self) -> float:
        return float(self.tau) / int(self.steps)

    def times(self) -> np.ndarray:
        """Slice midpoints ``t_k = (k + 1/2) dt``, shape ``(steps,)``."""
        return (np.arange(int(self.steps)) + 0.5) * self.dt

    def _ramp(self, x: np.ndarray) -> np.ndarray:
        if self.shape == "linear":
            return x
        return np.sin(0.5 * np.pi * x) ** 2

    def A(self, t: np.ndarray | float) -> np.ndarray:
        """Driver coefficient ``A(t) = gamma (1 - ramp(t/tau))``."""
        return float(self.gamma) * (1.0 - self._ramp(np.asarray(t, dtype=float) / float(self.tau)))

    def B(self, t: np.ndarray | float) -> np.ndarray:
        """Problem coefficient ``B(t) = energy_scale * ramp(t/tau)``."""
        return float(self.energy_scale) * self._ramp(np.asarray(t, dtype=float) / float(self.tau))

    def coefficients(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-slice ``(dt * B(t_k), dt * A(t_k))``, each ``(steps,)``: the phases the gates implement.

        The problem layer of slice ``k`` is ``exp(-i b_k H_P)`` and the driver layer ``exp(-i a_k H_D)``
        (for ``order=2`` the driver layer is split into two halves of ``a_k / 2`` around the problem layer).
        """
        t = self.times()
        return self.dt * self.B(t), self.dt * self.A(t)
