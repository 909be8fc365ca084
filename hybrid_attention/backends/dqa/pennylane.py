"""PennyLane DQA sampler: the DQA program on any PennyLane device, broadcast over a chunk of problems.

Needs the ``pennylane`` extra (``pip install 'hybrid-attention[pennylane]'``). ``qml.sample`` returns wire
``j`` in column ``j``, which is already the toolkit's spin order.

The device is a name (a fresh device per chunk, seeded from the call's ``seed``) or a ``qml.device`` object, used
as given: its wires must include ``0 .. n-1`` (or be unset) and it draws shots from its own random state (fix it
with ``qml.device(..., seed=...)``), so a per-call ``seed`` is refused rather than silently ignored.

Example:
    >>> import torch
    >>> from hybrid_attention import IsingProblem
    >>> from hybrid_attention.backends import get_sampler
    >>> sampler = get_sampler("pennylane", device="default.qubit")
    >>> sampler.sample(IsingProblem(torch.randn(4, 2)), num_reads=100, seed=0).spins.shape
    (4, 100, 2)
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pennylane as qml

from hybrid_attention.circuits.pennylane_dqa import dqa_qnode
from hybrid_attention.circuits.program import CircuitOptions, DQAProgram, count_gates, program_for
from hybrid_attention.circuits.schedule import DQASchedule
from hybrid_attention.ising import IsingProblem

from .circuit import CircuitSampler

__all__ = ["PennyLaneSampler"]

logger = logging.getLogger(__name__)


class PennyLaneSampler(CircuitSampler):
    """DQA circuits on a PennyLane device.

    Args:
        device: device name (default ``"lightning.qubit"``; any installed PennyLane device, e.g.
            ``"default.qubit"``), a fresh device per chunk with that chunk's seed; or a ``qml.device`` object,
            used as is (``sample(seed=...)`` is then refused: the device's own seed decides the shots).
        schedule, chunk_size, options, default_num_reads: see :class:`~hybrid_attention.backends.dqa.circuit.CircuitSampler`
            (``options.fold_rzz`` / coupling maps are qiskit hardware options and are rejected here).
        max_qubits: qubit limit (default 26 for state-vector devices).
        device_kwargs: extra keyword arguments for ``qml.device``.
    """

    name = "pennylane"
    parameters: dict[str, str] = {}

    def __init__(
        self,
        *,
        device: Any = "lightning.qubit",
        schedule: DQASchedule | None = None,
        chunk_size: int = 256,
        options: CircuitOptions | None = None,
        default_num_reads: int = 1024,
        max_qubits: int = 26,
        device_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(schedule=schedule, chunk_size=chunk_size, options=options, default_num_reads=default_num_reads)
        if not isinstance(device, str) and not _is_device(device):
            raise TypeError(
                f"pennylane: device must be a device name or a qml.device object, got {type(device).__name__}"
            )
        if not isinstance(device, str) and device_kwargs:
            raise TypeError("pennylane: device_kwargs only apply to a device given by name")
        if self.circuit_options.fold_rzz or self.circuit_options.coupling_map is not None:
            raise ValueError(
                "pennylane: fold_rzz and coupling_map are IBM hardware options; use the 'ibm' or 'aer' sampler"
            )
        try:
            if isinstance(device, str):
                qml.device(device, wires=1, **(device_kwargs or {}))
        except Exception as exc:  # pennylane raises DeviceError for unknown names
            raise ValueError(f"pennylane: cannot create device {device!r}: {exc}") from exc
        self.device = device
        self.device_kwargs = dict(device_kwargs or {})
        self.max_qubits = int(max_qubits)

    @property
    def properties(self) -> dict[str, Any]:
        props = super().properties
        props.update({"device": _device_name(self.device), "versions": {"pennylane": qml.__version__}})
        return props

    def validate(
        self, problem: Any, *, num_reads: Any = None, seed: Any = None, options: dict | None = None
    ) -> IsingProblem:
        """The circuit samplers' checks, then, for a device object: its wires hold ``0 .. n-1`` and no ``seed``
        (the object's own random state draws the shots; a seed would be silently ignored)."""
        problem = super().validate(problem, num_reads=num_reads, seed=seed, options=options)
        if isinstance(self.device, str):
            return problem
        if seed is not None:
            raise ValueError(
                "pennylane: a qml.device object draws shots from its own random state (qml.device(..., seed=...)); "
                "pass seed=None, or give the device by name for per-call seeds"
            )
        wires = getattr(self.device, "wires", None)
        if wires is not None and len(wires) and not set(range(problem.n)) <= set(wires.labels):
            raise ValueError(
                f"pennylane: the device's wires {list(wires.labels)} do not include the problem's wires 0..{problem.n - 1}"
            )
        return problem

    def _state_bytes(self, n: int) -> tuple[float, str] | None:
        """A state-vector device holds at least one complex128 state: ``16 * 2**n`` bytes (a lower bound: broadcasting
        devices hold one per problem of a chunk)."""
        return 16.0 * 2.0**n, f"statevector: 16 * 2**{n} bytes"

    def _template(self, problem: IsingProblem) -> DQAProgram:
        """The neutral program (no qiskit circuit: the PennyLane emitter builds its own tape)."""
        return program_for(problem, self.schedule, self.circuit_options)

    def _chunk_values(self, tmpl: DQAProgram, flat: Any) -> np.ndarray:
        return tmpl.values(flat)  # physical values: the PennyLane program computes its angles itself

    def _run_chunk(self, tmpl: DQAProgram, values: np.ndarray, shots: int, seed: int) -> np.ndarray:
        if isinstance(self.device, str):
            dev = qml.device(self.device, wires=tmpl.n, seed=seed, **self.device_kwargs)
        else:
            dev = self.device
        qnode = dqa_qnode(tmpl.n, tmpl.edges, self.schedule, device=dev, shots=shots, measurement="sample")
        x = values if values.shape[0] > 1 else values[0]
        bits = np.asarray(qnode(x)).reshape(values.shape[0], shots, tmpl.n)
        return bits.astype(bool)

    def _extra_info(self, tmpl: DQAProgram) -> dict[str, Any]:
        return {
            "device": _device_name(self.device),
            "num_gates": count_gates(tmpl.n, len(tmpl.edges), self.schedule, measure=False),
        }


def _is_device(obj: Any) -> bool:
    """A PennyLane device object (new ``qml.devices.Device`` API or a legacy device)."""
    bases = tuple(c for c in (getattr(qml.devices, "Device", None), getattr(qml.devices, "LegacyDevice", None)) if c)
    return isinstance(obj, bases)


def _device_name(device: Any) -> str:
    return device if isinstance(device, str) else str(getattr(device, "name", None) or type(device).__name__)
