"""DQA circuits: Ising problem + schedule -> Trotterized diabatic-quantum-annealing programs.

The circuits floor owns the DQA program: what is applied, in which order, with which angles, and how it becomes
a qiskit or PennyLane circuit. It sits above the core (imports :mod:`hybrid_attention.ising`,
:mod:`hybrid_attention.checks`, :mod:`hybrid_attention.metrics` and numpy) and below the backends; qiskit and
pennylane are imported inside the emitters, on use.

* :class:`DQASchedule` (``schedule``): the documented linear schedule and Trotter slices, options;
* ``program``: the neutral program every consumer reads: :func:`layers`, :class:`DQAProgram` (values, angles,
  gate counts), :class:`CircuitOptions`, size checks (:data:`~.program.MAX_GATES`);
* :func:`dqa_probabilities` / :func:`dqa_state` (``reference``): independent numpy statevector, the oracle;
* :func:`dqa_circuit`, :func:`dqa_template`, :func:`dqa_qasm3` (``qiskit_dqa``): the qiskit emitter and templates;
* ``pennylane_dqa``: the PennyLane emitter (broadcasting over a batch);
* ``temperature``: effective inverse temperature of DQA output (leading order, fit, calibration);
* ``export``: :func:`to_sparse_pauli_op`, :func:`to_qml_hamiltonian` (the problem Hamiltonian) and :func:`to_qasm3`
  (OpenQASM 3 with standard gates only, readable by qiskit and PennyLane).
"""

from __future__ import annotations

from .export import to_qasm3, to_qml_hamiltonian, to_sparse_pauli_op
from .program import CircuitOptions, DQAProgram, dqa_program, layers, program_for
from .qiskit_dqa import DQATemplate, dqa_circuit, dqa_qasm3, dqa_template, template_for
from .reference import dqa_probabilities, dqa_state
from .schedule import DQASchedule
from .temperature import calibrate, effective_beta, fit_temperature, leading_order_beta

__all__ = [
    "DQASchedule",
    "layers",
    "DQAProgram",
    "dqa_program",
    "program_for",
    "CircuitOptions",
    "dqa_probabilities",
    "dqa_state",
    "dqa_circuit",
    "dqa_template",
    "template_for",
    "dqa_qasm3",
    "DQATemplate",
    "leading_order_beta",
    "effective_beta",
    "fit_temperature",
    "calibrate",
    "to_sparse_pauli_op",
    "to_qml_hamiltonian",
    "to_qasm3",
]
