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
import sys
from dataclasses import dataclass

import numpy as np

from hybrid_attention.checks import check_positive_int

__all__ = ["DQASchedule", "MIN_TAU"]

_SHAPES = ("linear", "sin2")

#: Shortest anneal a :class:`DQASchedule` accepts: the square root of the smallest normal float64 (about 1.5e-154).
#: The output's effective inverse temperature grows as ``tau**2`` (``beta_h = gamma * energy_scale * tau**2 / 6`` for
#: the linear schedule, :mod:`hybrid_attention.circuits.temperature`); below this bound ``tau**2`` is a subnormal
#: float64 or 0 (``5e-324**2 == 0``), so the leading-order temperature that the samplers report, the bridge's
#: surrogate gradients use and :func:`~hybrid_attention.circuits.temperature.calibrate` divides by is no longer a
#: number, and subnormal ``tau`` itself has lost most of its 53 significant bits. Any ``tau`` at or above the bound is
#: a legitimate short quench (its output is close to uniform).
MIN_TAU = math.sqrt(sys.float_info.min)


@dataclass(frozen=True)
class DQASchedule:
    """Annealing schedule and its Trotterization.

    Args:
        tau: total anneal time, at least :data:`MIN_TAU` (about 1.5e-154; ``tau -> 0`` is a sudden quench with
            uniform output).
        steps: number of Trotter slices ``K`` (>= 1).
        gamma: driver strength ``Gamma`` (``A(0) = gamma``), > 0: the anneal starts in ``|+>^n``, the ground state of
            ``-gamma H_D`` only for ``gamma > 0`` (a negative driver starts it in the highest state and the output
            favours high energies; ``gamma = 0`` leaves ``|+>^n`` unchanged: uniform output).
        energy_scale: ``lambda``, the problem energy scale (``B(tau) = energy_scale``), > 0 (0 encodes no problem at
            all, a negative scale the problem with the opposite sign).
        shape: ``"linear"`` (the default) or ``"sin2"`` (``s(x) = sin^2(pi x / 2)``).
        order: 1 (the default, problem then driver) or 2 (symmetric splitting).
        field_scale: factor on the fields inside the circuit, >= 0 (compensation: DQA samples couplings at about
            twice the inverse temperature of the fields, so ``field_scale=2`` balances them; see
            :mod:`hybrid_attention.circuits.temperature`). Default 1 (the default program); 0 switches the fields off.
        coupling_scale: factor on the couplings inside the circuit, >= 0 (default 1).

    Raises:
        TypeError: a value that is not a real number (``steps``: not an integer).
        ValueError: a non-finite value, ``tau < MIN_TAU``, ``gamma <= 0``, ``energy_scale <= 0``, a negative scale,
            ``steps < 1``, an unknown ``shape`` or ``order``. Every message names the field and the received value.

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
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.floating, np.integer)):
                raise TypeError(f"DQASchedule.{name} must be a real number, got {type(v).__name__} {v!r}")
            if not math.isfinite(float(v)):
                raise ValueError(f"DQASchedule.{name} must be a finite number, got {v!r}")
        if not self.tau >= MIN_TAU:
            raise ValueError(
                f"DQASchedule.tau must be >= MIN_TAU = {MIN_TAU:.3g} (below it tau**2, which sets the output "
                f"temperature, underflows float64), got {self.tau!r}"
            )
        for name in ("gamma", "energy_scale"):
            if not getattr(self, name) > 0:
                raise ValueError(f"DQASchedule.{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("field_scale", "coupling_scale"):
            if getattr(self, name) < 0:
                raise ValueError(f"DQASchedule.{name} must be >= 0, got {getattr(self, name)!r}")
        check_positive_int(self.steps, "DQASchedule.steps")
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
