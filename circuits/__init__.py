"""DQA circuits: Ising problem + schedule -> Trotterized diabatic-quantum-annealing programs.

Installed as ``hybrid_attention.circuits`` (the repository keeps it at the top-level folder ``circuits/``
and maps it through ``package_dir`` in ``setup.cfg``; nothing named ``circuits`` is installed on its own).
Imports only :mod:`hybrid_attention.ising` and numpy; qiskit and pennylane are imported inside the emitters.

* :class:`DQASchedule` (``schedule``): the SPEC's linear schedule and Trotter slices, options;
* :func:`dqa_probabilities` / :func:`dqa_state` (``reference``): independent numpy statevector, the oracle;
* :func:`dqa_circuit`, :func:`dqa_template`, :func:`dqa_qasm3` (``qiskit_dqa``): qiskit emitter and templates;
* ``pennylane_dqa``: the same program for PennyLane (broadcasting over a batch);
* ``temperature``: effective inverse temperature of DQA output (leading order, fit, calibration).
"""

from __future__ import annotations

from .qiskit_dqa import CircuitOptions, DQATemplate, dqa_circuit, dqa_qasm3, dqa_template, template_for
from .reference import dqa_probabilities, dqa_state
from .schedule import DQASchedule
from .temperature import calibrate, effective_beta, fit_temperature, leading_order_beta

__all__ = ["DQASchedule", "dqa_probabilities", "dqa_state", "dqa_circuit", "dqa_template", "template_for",
           "dqa_qasm3", "CircuitOptions", "DQATemplate", "leading_order_beta", "effective_beta",
           "fit_temperature", "calibrate"]
