"""Exports of a problem and its DQA program to other toolkits' formats.

* :func:`to_sparse_pauli_op`: the problem Hamiltonian ``H_P = - sum_j h_j Z_j - sum_{j<k} J_jk Z_j Z_k`` as a qiskit
  ``SparsePauliOp`` (qubit ``j`` is spin ``j``; qiskit's little-endian labels, qubit 0 rightmost);
* :func:`to_qml_hamiltonian`: the same operator as a PennyLane ``qml.Hamiltonian`` on wires ``0 .. n-1``;
* :func:`to_qasm3`: the bound DQA circuit (:func:`~.qiskit_dqa.dqa_circuit`) as OpenQASM 3 text using only gates of
  ``stdgates.inc`` (``h``, ``rz``, ``rx``, ``cx``, ``x``): each ``RZZ(theta)`` is written as
  ``cx a, b; rz(theta) b; cx a, b`` (equal as unitaries, global phase included). qiskit's own ``qasm3.dumps`` writes
  ``rzz`` through a custom gate definition that PennyLane's ``qml.from_qasm3`` cannot read; this text round-trips
  through both ``qiskit.qasm3.loads`` and ``qml.from_qasm3``. PennyLane's reader (0.45) knows the standard gates
  without the include and rejects ``include`` statements: pass ``include=False`` (and ``measure=False``: it maps the
  final measurement onto the wrong wires) for it; its wires are then named ``"q[j]"`` (rename them with
  ``qml.map_wires(f, {f"q[{j}]": j for j in range(n)})``). qiskit needs the include.

``H_P |z> = E(s(z)) |z>`` (docs/theory.md section 2): its diagonal in the computational basis is the energy of every
configuration. ``beta`` is not part of ``H_P`` (the circuit encodes ``beta * H_P``). Masked (dropped) spins carry no
terms. Every function takes one problem (unbatched, or a batch of one); qiskit and PennyLane are imported on use.

Example:
    >>> import torch
    >>> from hybrid_attention import IsingProblem
    >>> p = IsingProblem(torch.tensor([0.5, -0.25]), torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
    >>> to_sparse_pauli_op(p).to_list()
    [('IZ', (-0.5+0j)), ('ZI', (0.25+0j)), ('ZZ', (-1+0j))]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hybrid_attention.ising import IsingProblem

from .program import CircuitOptions, drop_missing_couplings, program_for
from .schedule import DQASchedule

__all__ = ["ising_terms", "to_sparse_pauli_op", "to_qml_hamiltonian", "to_qasm3"]


def _one(problem: IsingProblem, what: str) -> IsingProblem:
    if not isinstance(problem, IsingProblem):
        raise TypeError(f"{what}: expected an IsingProblem, got {type(problem).__name__}")
    if problem.h.numel() != problem.n:
        raise ValueError(f"{what} needs one problem instance, got batch shape {tuple(problem.batch_shape)}")
    return problem.flatten()


def ising_terms(problem: IsingProblem) -> tuple[list[tuple[int, float]], list[tuple[int, int, float]]]:
    """Nonzero terms of ``H_P`` for one problem: ``([(j, -h_j)], [(j, k, -J_jk)])`` with ``j < k`` (coefficients of
    ``Z_j`` and ``Z_j Z_k``; masked spins carry none)."""
    p = _one(problem, "ising_terms")
    h, J = p.dropped()
    h = h.detach().double().cpu().numpy().reshape(p.n)
    J = J.detach().double().cpu().numpy().reshape(p.n, p.n)
    fields = [(j, -float(h[j])) for j in range(p.n) if h[j] != 0.0]
    couplings = [(j, k, -float(J[j, k])) for j in range(p.n) for k in range(j + 1, p.n) if J[j, k] != 0.0]
    return fields, couplings


def to_sparse_pauli_op(problem: IsingProblem) -> Any:
    """``H_P`` as a qiskit ``SparsePauliOp`` on ``n`` qubits (an all-zero problem gives ``0 * I``).

    Its matrix is diagonal with entry ``c`` (``c = sum_j b_j 2**j``, qiskit's order) equal to ``E(s)`` for
    ``s = 1 - 2 b``.
    """
    from qiskit.quantum_info import SparsePauliOp

    fields, couplings = ising_terms(problem)
    terms = [("Z", [j], c) for j, c in fields] + [("ZZ", [j, k], c) for j, k, c in couplings]
    return SparsePauliOp.from_sparse_list(terms or [("", [], 0.0)], num_qubits=problem.n)


def to_qml_hamiltonian(problem: IsingProblem) -> Any:
    """``H_P`` as a PennyLane ``qml.Hamiltonian`` (``qml.Z(j)``, ``qml.Z(j) @ qml.Z(k)``; an all-zero problem gives
    ``0 * I``). Use ``wire_order=range(n)`` for its matrix (PennyLane puts wire 0 first, most significant)."""
    import pennylane as qml

    fields, couplings = ising_terms(problem)
    coeffs = [c for _, c in fields] + [c for _, _, c in couplings]
    ops = [qml.Z(j) for j, _ in fields] + [qml.Z(j) @ qml.Z(k) for j, k, _ in couplings]
    if not ops:
        coeffs, ops = [0.0], [qml.Identity(0)]
    return qml.Hamiltonian(coeffs, ops)


def to_qasm3(
    problem: IsingProblem,
    schedule: DQASchedule,
    *,
    measure: bool = True,
    include: bool = True,
    options: CircuitOptions | None = None,
) -> str:
    """OpenQASM 3 text of the bound DQA circuit with standard gates only (module docstring).

    Args:
        problem: one problem (its ``beta`` scales ``h`` and ``J`` in the circuit, as in every backend).
        schedule: the :class:`DQASchedule`.
        measure: end with ``meas = measure q;`` into ``bit[n] meas`` (qubit ``j`` -> bit ``j``).
        include: start with ``include "stdgates.inc";`` (standard; ``False`` for PennyLane's ``qml.from_qasm3``).
        options: :class:`CircuitOptions` (a coupling map restricts the couplings; ``fold_rzz`` writes the folded
            form; ``on_missing="drop"`` drops couplings off the map as in :func:`~.qiskit_dqa.dqa_circuit`).

    Returns:
        the program text: ``OPENQASM 3.0;``, ``include "stdgates.inc";``, ``qubit[n] q;`` and the gates.

    Raises:
        ValueError: a batch of problems; a program above :data:`~.program.MAX_GATES` gates (before building).
    """
    p = _one(problem, "to_qasm3")
    opts = options or CircuitOptions()
    prog = program_for(p, schedule, opts)
    if opts.coupling_map is not None and opts.on_missing == "drop":
        p = drop_missing_couplings(p, prog.edges)
    angles = iter(prog.bindings(p)[0].tolist())
    n, fmt = p.n, _angle
    lines = ["OPENQASM 3.0;", *(['include "stdgates.inc";'] if include else []), f"qubit[{n}] q;"]
    if measure:
        lines.append(f"bit[{n}] meas;")
    lines += [f"h q[{j}];" for j in range(n)]
    for kind, val in prog.layers():
        if kind == "D":  # exp(-i a H_D) = RX(-2a) on every qubit
            lines += [f"rx({fmt(-2.0 * val)}) q[{j}];" for j in range(n)]
            continue
        lines += [f"rz({fmt(next(angles))}) q[{j}];" for j in range(n)]
        for j, k in prog.edges:
            rzz = [next(angles), next(angles)] if opts.fold_rzz else [next(angles)]
            for i, theta in enumerate(rzz):
                if opts.fold_rzz and i == 0:
                    lines.append(f"x q[{j}];")
                # RZZ(theta) on (j, k) = CX(j -> k) . RZ(theta) on k . CX(j -> k)
                lines += [f"cx q[{j}], q[{k}];", f"rz({fmt(theta)}) q[{k}];", f"cx q[{j}], q[{k}];"]
                if opts.fold_rzz and i == 0:
                    lines.append(f"x q[{j}];")
    if measure:
        lines.append("meas = measure q;")
    return "\n".join(lines) + "\n"


def _angle(x: float) -> str:
    """Shortest text that reads back to the same float64."""
    return repr(float(np.float64(x)))
