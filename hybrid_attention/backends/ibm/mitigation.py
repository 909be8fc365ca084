"""Readout-error mitigation of the circuit samplers' measured distributions (``readout_mitigation=True`` of the
``ibm`` and ``aer`` samplers), with mthree (the ``mitigation`` extra, also part of ``ibm``: ``pip install
'hybrid-attention[mitigation]'``; Nation et al., PRX Quantum 2, 040326 (2021)).

Calibration: two circuits on the device, every measured physical qubit prepared in ``|0>`` (nothing applied) and
in ``|1>`` (an ``x`` gate), each measured ``calibration_shots`` times, simultaneously (so crosstalk present during
the real read-out is present in the calibration). They run through the sampler's own route: on the IBM route they
are PUBs like any other, recorded in the ledger and counted in the cost estimate (2 circuits x
``calibration_shots``). Each qubit's 2 x 2 assignment matrix ``A[meas, prep]`` goes to
``mthree.M3Mitigation.cals_from_matrices`` (mthree's convention: column = prepared state), and
``apply_correction`` turns each problem's counts into a quasi-probability distribution (mthree solves the
tensored-readout linear system in the subspace of observed bit strings).

Honest clipping: quasi-probabilities can be negative. :func:`mitigated_probabilities` sets negative entries to
zero and renormalises (it reports the mass removed); it does not use mthree's nearest-probability projection, which
moves mass between observed strings. Marginals are then those of the clipped distribution.

What a calibration cannot see: errors before the measurement (gate noise, decoherence) are left as they are; this
mitigates read-out only. The 2 x 2 model ignores correlated read-out errors beyond those the simultaneous
preparation averages in.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "MAX_MITIGATED_SPINS",
    "measured_qubits",
    "calibration_circuits",
    "assignment_matrices",
    "mitigated_probabilities",
]

#: mitigated outputs are full probability tables over ``2**n`` strings: ``n`` is bounded
MAX_MITIGATED_SPINS = 14


def measured_qubits(circuit: Any) -> list[int]:
    """The physical qubit measured into each classical bit of ``circuit`` (an ISA circuit), in clbit order."""
    out: dict[int, int] = {}
    for inst in circuit.data:
        if inst.operation.name == "measure":
            out[circuit.find_bit(inst.clbits[0]).index] = circuit.find_bit(inst.qubits[0]).index
    n = circuit.num_clbits
    if sorted(out) != list(range(n)):
        raise ValueError(f"mitigation: every classical bit must be measured once, got {sorted(out)} of {n}")
    return [out[j] for j in range(n)]


def calibration_circuits(num_qubits: int, qubits: list[int]) -> tuple[Any, Any]:
    """``(all zeros, all ones)``: ISA circuits on a ``num_qubits``-qubit device preparing the measured ``qubits``
    in ``|0>`` / ``|1>`` and measuring qubit ``qubits[j]`` into classical bit ``j`` of a register ``meas``."""
    from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister

    circs = []
    for one in (False, True):
        qc = QuantumCircuit(QuantumRegister(num_qubits, "q"), ClassicalRegister(len(qubits), "meas"))
        if one:
            for q in qubits:
                qc.x(q)
        qc.barrier()
        for j, q in enumerate(qubits):
            qc.measure(q, j)
        circs.append(qc)
    return circs[0], circs[1]


def assignment_matrices(zeros: np.ndarray, ones: np.ndarray) -> list[np.ndarray]:
    """Per classical bit ``j`` the matrix ``A[meas, prep]`` (float32, columns sum to 1) from the calibration bits
    ``zeros``/``ones`` ``(shots, n)`` (bools, column ``j`` = bit ``j``).

    Example:
        >>> z = np.array([[0, 0], [1, 0], [0, 0], [0, 0]], bool); o = np.ones((4, 2), bool)
        >>> assignment_matrices(z, o)[0].tolist()
        [[0.75, 0.0], [0.25, 1.0]]
    """
    p1_given0 = np.asarray(zeros, dtype=np.float64).reshape(-1, zeros.shape[-1]).mean(0)
    p1_given1 = np.asarray(ones, dtype=np.float64).reshape(-1, ones.shape[-1]).mean(0)
    mats = []
    for a, b in zip(p1_given0, p1_given1):
        mats.append(np.array([[1 - a, 1 - b], [a, b]], dtype=np.float32))
    return mats


def mitigated_probabilities(bits: np.ndarray, matrices: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Readout-mitigated distributions of measured bits.

    Args:
        bits: ``(B, shots, n)`` bools, column ``j`` = classical bit ``j``; matrices: :func:`assignment_matrices`.

    Returns:
        ``(probabilities (B, 2**n), negative_mass (B,))``: mthree's quasi-probabilities with negative entries set to
        zero and renormalised (index ``c = sum_j b_j 2**j``), and the (absolute) negative mass that was removed.
    """
    try:
        import mthree
    except ImportError as exc:
        raise ImportError(
            "readout_mitigation needs mthree: pip install 'hybrid-attention[mitigation]' (or pip install mthree)"
        ) from exc

    B, shots, n = bits.shape
    if n > MAX_MITIGATED_SPINS:
        raise ValueError(f"mitigation: n = {n} is above the {MAX_MITIGATED_SPINS} spins of a mitigated table")
    if len(matrices) != n:
        raise ValueError(f"mitigation: {len(matrices)} calibration matrices for {n} measured bits")
    mit = mthree.M3Mitigation()
    mit.cals_from_matrices([np.asarray(m, dtype=np.float32) for m in matrices])
    idx = (bits.astype(np.int64) << np.arange(n)).sum(-1)  # (B, shots)
    probs = np.zeros((B, 1 << n))
    neg = np.zeros(B)
    for b in range(B):
        vals, cnt = np.unique(idx[b], return_counts=True)
        counts = {format(int(v), f"0{n}b"): int(c) for v, c in zip(vals, cnt)}  # rightmost character = bit 0
        quasi = mit.apply_correction(counts, list(range(n)))
        for key, q in quasi.items():
            probs[b, int(key, 2)] = q
        neg[b] = -probs[b][probs[b] < 0].sum()
        probs[b] = np.clip(probs[b], 0.0, None)
        total = probs[b].sum()
        probs[b] = probs[b] / total if total > 0 else np.full(1 << n, 1.0 / (1 << n))
    return probs, neg
