"""Projected QPU time of a quantum workload: :func:`qpu_seconds` (a PLACEHOLDER model).

This module is a placeholder with the interface of the hardware cost model (the ``estimate`` model of the IBM
hardware work, which replaces it): ``qpu_seconds(*, circuits, shots, depth=None, **model)``. Until then the
projection is the simplest model consistent with IBM's description of dynamic repetition-rate execution (the
circuits of a job run column-wise over a matrix of circuits and shots, with a repetition delay ``rep_delay``
inserted before every shot; IBM Quantum documentation, "Qubit initialization / repetition rate execution" and
"Workload usage"):

    ``qpu_seconds = circuits * shots * (rep_delay + depth * layer_time) + circuits * circuit_overhead``

The constants below are PLACEHOLDERS chosen as orders of magnitude, not measured or published values for any
device: ``rep_delay`` 250 us (the order of the ``backend.default_rep_delay`` of IBM devices: query the device),
``layer_time`` 0.5 us per circuit layer (a two-qubit gate layer plus single-qubit gates on current superconducting
devices), ``circuit_overhead`` 5 ms per distinct bound circuit (loading a parameter binding). Every number a report
derives from it is a projection under these assumptions and says so.

Example:
    >>> round(qpu_seconds(circuits=10, shots=1000, depth=100), 3)
    3.05
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["qpu_seconds"]

#: PLACEHOLDER: repetition delay before each shot, seconds
REP_DELAY_S = 250e-6
#: PLACEHOLDER: duration of one circuit layer, seconds
LAYER_TIME_S = 0.5e-6
#: PLACEHOLDER: fixed cost per bound circuit, seconds
CIRCUIT_OVERHEAD_S = 5e-3


def qpu_seconds(*, circuits: int, shots: int, depth: int | None = None, **model: Any) -> float:
    """Projected QPU seconds of ``circuits`` bound circuits of ``shots`` shots each (module docstring's model).

    Args:
        circuits: bound circuits (PUB bindings rows) run, >= 0.
        shots: shots per circuit, >= 0.
        depth: circuit layers (``None``: 0, the repetition delay alone).
        **model: overrides of the placeholder constants: ``rep_delay``, ``layer_time``, ``circuit_overhead``
            (seconds, >= 0).

    Raises:
        ValueError: negative counts or constants. TypeError: an unknown model key.
    """
    known = {"rep_delay": REP_DELAY_S, "layer_time": LAYER_TIME_S, "circuit_overhead": CIRCUIT_OVERHEAD_S}
    unknown = sorted(set(model) - set(known))
    if unknown:
        raise TypeError(f"qpu_seconds: unknown model key(s) {unknown}; accepted: {sorted(known)}")
    consts = {**known, **{k: float(v) for k, v in model.items()}}
    d = 0 if depth is None else depth
    for name, v in (("circuits", circuits), ("shots", shots), ("depth", d), *consts.items()):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise ValueError(f"qpu_seconds: {name} must be a finite number >= 0, got {v!r}")
    per_shot = consts["rep_delay"] + d * consts["layer_time"]
    return float(circuits * shots * per_shot + circuits * consts["circuit_overhead"])
