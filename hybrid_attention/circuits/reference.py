"""Independent numpy statevector of the documented Trotterized DQA product: the oracle for every emitted circuit.

Deliberately small and separate from the emitters (no qiskit, no pennylane, no torch): it applies the layers of
:func:`.program.layers` in order, for each Trotter slice ``k`` with phases ``(b_k, a_k) = schedule.coefficients()``,

* the diagonal problem layer ``exp(-i b_k H_P)`` with ``H_P |z> = E(z) |z>`` (``E`` from ``h`` and ``J``
  scaled by ``schedule.field_scale`` / ``schedule.coupling_scale``),
* then the driver layer ``exp(-i a_k H_D) = prod_j (cos a_k + i sin a_k X_j)`` (``H_D = -sum_j X_j``),

starting from ``|+>^n``. ``order=2`` splits the driver into two half layers around the problem layer.
State index ``c = sum_j b_j 2**j`` (qubit ``j`` is bit ``j``; ``b_j = 0`` is ``s_j = +1``).

Example:
    >>> import numpy as np
    >>> from hybrid_attention.circuits import DQASchedule
    >>> p = dqa_probabilities(np.array([0.7]), np.zeros((1, 1)), DQASchedule(tau=1.0, steps=50))
    >>> bool(p[0] > p[1])   # a positive field favours s = +1 (bit 0)
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybrid_attention.checks import check_finite
from hybrid_attention.ising import index_to_spins

from .program import layers
from .schedule import DQASchedule

__all__ = ["dqa_state", "dqa_probabilities", "problem_energies", "apply_driver"]

_MAX_QUBITS = 20


def problem_energies(h: Any, J: Any) -> np.ndarray:
    """``E(z) = -sum_j h_j s_j - sum_{j<k} J_jk s_j s_k`` for every basis state.

    Args:
        h: ``(*batch, n)``; J: ``(n, n)`` or ``(*batch, n, n)`` symmetric, zero diagonal.

    Returns:
        ``(*batch, 2**n)`` float64, index ``c = sum_j b_j 2**j``.

    Raises:
        ValueError: a non-finite ``h`` or ``J``, or ``J`` of another size than ``h``.
    """
    h = np.asarray(h, dtype=np.float64)
    J = np.asarray(J, dtype=np.float64)
    check_finite(h, "h")
    check_finite(J, "J")
    n = h.shape[-1]
    if J.shape[-2:] != (n, n):
        raise ValueError(f"J must have shape (..., {n}, {n}) to match h's n = {n}, got {J.shape}")
    s = index_to_spins(np.arange(1 << n), n).astype(np.float64)  # (2^n, n), column j = spin j
    field = h @ s.T
    upper = np.triu(J, 1)
    coupling = np.einsum("cj,...jk,ck->...c", s, upper, s)
    return -(field + coupling)


def apply_driver(psi: np.ndarray, a: float, n: int) -> np.ndarray:
    """The driver layer ``exp(-i a H_D) = prod_j exp(i a X_j)`` (the same rotation on every qubit) on the rows of
    ``psi (B, 2**n)``, index ``c = sum_j b_j 2**j``; returns a new ``(B, 2**n)`` array.

    Example:
        >>> import numpy as np
        >>> psi = apply_driver(np.array([[1.0, 0.0]], dtype=complex), np.pi / 2, 1)  # exp(i pi/2 X)|0> = i|1>
        >>> np.round(psi, 12).tolist()
        [[0j, 1j]]
    """
    c, s = np.cos(a), 1j * np.sin(a)
    B = psi.shape[0]
    for q in range(n):
        v = psi.reshape(B, 1 << (n - q - 1), 2, 1 << q)  # axis 2 is qubit q
        psi = np.stack([c * v[:, :, 0] + s * v[:, :, 1], s * v[:, :, 0] + c * v[:, :, 1]], axis=2).reshape(B, -1)
    return psi


def dqa_state(h: Any, J: Any, schedule: DQASchedule) -> np.ndarray:
    """Final state of the Trotterized anneal.

    Args:
        h: fields ``(*batch, n)`` (apply masks beforehand: a dropped spin has zero field and couplings).
        J: couplings ``(n, n)`` or ``(*batch, n, n)``.
        schedule: the :class:`DQASchedule`.

    Returns:
        complex128 statevectors ``(*batch, 2**n)``.

    Raises:
        TypeError: ``schedule`` is not a :class:`DQASchedule`.
        ValueError: a non-finite ``h`` or ``J`` (before any work), a scalar ``h``, more than 20 qubits, mismatched
            shapes.
    """
    if not isinstance(schedule, DQASchedule):
        raise TypeError(f"schedule must be a DQASchedule, got {type(schedule).__name__}")
    h = np.asarray(h, dtype=np.float64)
    if h.ndim < 1:
        raise ValueError("h must have shape (*batch, n), got a scalar")
    n = h.shape[-1]
    if n > _MAX_QUBITS:
        raise ValueError(f"the reference statevector handles at most {_MAX_QUBITS} qubits, got n = {n}")
    J = np.asarray(J, dtype=np.float64)
    check_finite(h, "h")
    check_finite(J, "J")
    E = problem_energies(schedule.field_scale * h, schedule.coupling_scale * J)
    batch = E.shape[:-1]
    E = E.reshape(-1, 1 << n)
    psi = np.full(E.shape, 2.0 ** (-n / 2), dtype=np.complex128)
    for kind, val in layers(schedule):
        psi = apply_driver(psi, val, n) if kind == "D" else psi * np.exp(-1j * val * E)
    return psi.reshape(*batch, 1 << n)


def dqa_probabilities(h: Any, J: Any, schedule: DQASchedule) -> np.ndarray:
    """Measurement distribution ``|<z|psi>|^2`` of the anneal, ``(*batch, 2**n)`` float64 (sums to 1).

    Index ``c = sum_j b_j 2**j``, the same order as :func:`hybrid_attention.exact.probabilities`. Raises as
    :func:`dqa_state` (``ValueError`` for NaN or infinite fields or couplings, before any work).
    """
    psi = dqa_state(h, J, schedule)
    p = np.abs(psi) ** 2
    return p / p.sum(-1, keepdims=True)
