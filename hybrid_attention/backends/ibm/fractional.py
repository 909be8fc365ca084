"""IBM Heron's fractional gates on a fake backend, offline: ``RZZ(theta)`` for ``0 <= theta <= pi/2`` on every CZ
coupler and ``RX(theta)`` on every qubit, added to a copy of the fake backend's target.

On the service a device exposes these gates when it is loaded with ``use_fractional_gates=True``
(``service.backend("ibm_torino", use_fractional_gates=True)``); the runtime's fake backends are snapshots of the
default (non-fractional) configuration, so ``FakeTorino()`` has no ``rzz``. :func:`with_fractional_gates` builds the
fractional version of a Heron fake backend so that transpilation, angle checks and Aer noise models can be compared
offline (``results/device_gates``).

Caveat, from IBM's documentation of fractional gates: the error values a fractional-gates target reports are copies
of the non-fractional gates' values (error reporting for fractional gates is not supported yet), and the gate times
are the same, so comparable error rates are "a reasonable assumption", especially when relaxation dominates. This
module makes the same assumption: each coupler's ``rzz`` gets its ``cz`` duration and error, each qubit's ``rx`` its
``sx`` duration and error. A noise model built from the result (``NoiseModel.from_backend``) therefore charges one
``RZZ(theta)`` exactly what it charges one ``CZ``, for any angle; a device may do better or worse at small angles.

Example:
    >>> from hybrid_attention.backends.ibm.fractional import with_fractional_gates
    >>> from hybrid_attention.backends.ibm.sampler import fake_backend, has_fractional_rzz
    >>> b = with_fractional_gates(fake_backend("fake_torino"))
    >>> b.name, has_fractional_rzz(b), has_fractional_rzz(fake_backend("fake_torino"))
    ('fake_torino_fractional', True, False)
"""

from __future__ import annotations

import copy
import math
from typing import Any

__all__ = ["with_fractional_gates", "FRACTIONAL_SUFFIX", "two_qubit_depth", "two_qubit_count"]

#: name suffix of a fake backend with fractional gates (``fake_backend("fake_torino_fractional")``)
FRACTIONAL_SUFFIX = "_fractional"
_TWO_QUBIT = ("cz", "ecr", "cx", "rzz")


def with_fractional_gates(backend: Any) -> Any:
    """A copy of a CZ-based fake backend (Heron: ``fake_torino``, ``fake_fez``, ...) whose target also has IBM's
    fractional ``rzz`` (angle bounds ``[0, pi/2]``, on every ``cz`` coupler, with its duration and error) and ``rx``
    (on every qubit, with ``sx``'s duration and error): module docstring for the assumption behind the errors.

    Raises:
        TypeError: not a runtime fake backend (``qiskit_ibm_runtime.fake_provider``). ValueError: the backend has no
        ``cz`` gate (Eagle's ECR devices have no fractional gates), or already has ``rzz``.
    """
    from qiskit.circuit import Parameter
    from qiskit.circuit.library import RXGate, RZZGate
    from qiskit.transpiler import InstructionProperties
    from qiskit_ibm_runtime.fake_provider.fake_backend import FakeBackendV2

    if not isinstance(backend, FakeBackendV2):
        raise TypeError(
            f"with_fractional_gates takes a qiskit_ibm_runtime fake backend (e.g. FakeTorino()), got "
            f"{type(backend).__name__}; a device is loaded with service.backend(name, use_fractional_gates=True)"
        )
    target = backend.target
    if "cz" not in target.operation_names:
        raise ValueError(
            f"with_fractional_gates needs a CZ (Heron) device, got {backend.name} with two-qubit gates "
            f"{sorted(set(target.operation_names) & set(_TWO_QUBIT))}"
        )
    if "rzz" in target.operation_names:
        raise ValueError(f"{backend.name} already has rzz gates")
    out = copy.copy(backend)
    new = copy.deepcopy(target)
    like = lambda name: {q: InstructionProperties(duration=p.duration, error=p.error) for q, p in target[name].items()}  # noqa: E731
    new.add_instruction(RZZGate(Parameter("theta")), like("cz"), angle_bounds=[(0.0, math.pi / 2)])
    new.add_instruction(RXGate(Parameter("theta")), like("sx"))
    out._target = new  # FakeBackendV2.target returns _target once built
    out.name = backend.name + FRACTIONAL_SUFFIX
    return out


def two_qubit_count(circuit: Any) -> int:
    """Two-qubit gates of a circuit (``cz``, ``ecr``, ``cx``, ``rzz``; barriers and measurements excluded)."""
    return sum(1 for ins in circuit.data if ins.operation.name in _TWO_QUBIT)


def two_qubit_depth(circuit: Any) -> int:
    """Depth of a circuit counting only its two-qubit gates (the layers of entangling gates a device runs)."""
    return int(circuit.depth(lambda ins: ins.operation.name in _TWO_QUBIT))
