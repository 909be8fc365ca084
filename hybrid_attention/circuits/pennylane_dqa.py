"""PennyLane emitter: the DQA program of :mod:`.program` as PennyLane operations, with parameter broadcasting.

Wire ``j`` is spin ``j``. Slice ``k`` applies ``qml.RZ(-2 b_k h_j)``, ``qml.IsingZZ(-2 b_k J_jk)`` (PennyLane's
``IsingZZ(phi) = exp(-i phi ZZ / 2)`` equals qiskit's ``RZZ``) and ``qml.RX(-2 a_k)``, starting from ``|+>^n``.
Fields and couplings may carry a leading batch dimension: PennyLane broadcasts the whole program over it,
so a batch of problems is one tape, not one circuit per problem.

Ordering: ``qml.sample`` column ``j`` is wire ``j`` (already spin order); ``qml.probs``/``qml.state`` put wire 0
first (most significant), so :func:`to_little_endian` reorders them to the toolkit's ``c = sum_j b_j 2**j``.

Example:
    >>> import numpy as np
    >>> from hybrid_attention.circuits import DQASchedule
    >>> from hybrid_attention.circuits.pennylane_dqa import dqa_qnode
    >>> qn = dqa_qnode(2, ((0, 1),), DQASchedule(tau=1.0, steps=5), measurement="probs")
    >>> p = to_little_endian(qn(np.array([[0.5, -0.2, 0.3]])), 2)
    >>> p.shape
    (1, 4)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .program import check_circuit_size, layers
from .schedule import DQASchedule

__all__ = ["dqa_ops", "dqa_qnode", "to_little_endian"]


def dqa_ops(x: Any, n: int, edges: Sequence[tuple[int, int]], schedule: DQASchedule) -> None:
    """Queue the DQA gates inside a PennyLane quantum function.

    Args:
        x: parameter values ``(P,)`` or ``(B, P)`` with ``P = n + len(edges)``: ``beta * h`` then ``beta * J_e``
            (the layout of :meth:`hybrid_attention.circuits.program.DQAProgram.values`).
        n: number of wires; edges: coupled pairs; schedule: the :class:`DQASchedule`.
    """
    import pennylane as qml

    check_circuit_size(n, len(edges), schedule, measure=False)
    fs, cs = float(schedule.field_scale), float(schedule.coupling_scale)
    x = np.asarray(x, dtype=float)
    for j in range(n):
        qml.Hadamard(wires=j)
    for kind, val in layers(schedule):
        if kind == "D":  # exp(-i a H_D) = RX(-2a) on every wire
            for j in range(n):
                qml.RX(-2.0 * val, wires=j)
            continue
        for j in range(n):
            qml.RZ(-2.0 * val * fs * x[..., j], wires=j)
        for e, (j, k) in enumerate(edges):
            qml.IsingZZ(-2.0 * val * cs * x[..., n + e], wires=[j, k])


def dqa_qnode(
    n: int,
    edges: Sequence[tuple[int, int]],
    schedule: DQASchedule,
    *,
    device: Any = "default.qubit",
    shots: int | None = None,
    measurement: str = "sample",
    seed: Any = None,
) -> Any:
    """A QNode ``f(x)`` running the DQA program on ``device`` (a name or a ``qml.device``).

    Args:
        measurement: ``"sample"`` (``(B, shots, n)`` bits, column ``j`` = wire ``j``), ``"probs"`` (wire 0
            most significant) or ``"state"``.
        shots: shots for ``"sample"``; seed: device seed where the device accepts one.
    """
    import pennylane as qml

    if measurement not in ("sample", "probs", "state"):
        raise ValueError(f"measurement must be 'sample', 'probs' or 'state', got {measurement!r}")
    dev = qml.device(device, wires=n, seed=seed) if isinstance(device, str) else device
    edges = tuple(edges)

    def circuit(x):
        dqa_ops(x, n, edges, schedule)
        if measurement == "sample":
            return qml.sample(wires=range(n))
        if measurement == "probs":
            return qml.probs(wires=range(n))
        return qml.state()

    qnode = qml.QNode(circuit, dev)
    if measurement == "sample":
        if shots is None:
            raise ValueError("measurement='sample' needs shots")
        qnode = qml.set_shots(qnode, shots=int(shots))
    return qnode


def to_little_endian(p: Any, n: int) -> np.ndarray:
    """Reorder PennyLane ``probs``/``state`` (wire 0 most significant) to index ``c = sum_j b_j 2**j``."""
    p = np.asarray(p)
    lead = p.shape[:-1]
    return (
        p.reshape(*lead, *([2] * n))
        .transpose(*range(len(lead)), *range(len(lead) + n - 1, len(lead) - 1, -1))
        .reshape(*lead, 1 << n)
    )
