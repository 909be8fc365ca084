"""DQA circuits: Ising problem + schedule -> Trotterized diabatic-quantum-annealing programs.

Installed as ``hybrid_attention.circuits`` (the repository keeps it at the top-level folder ``circuits/``
and maps it through ``package_dir`` in ``setup.cfg``; nothing named ``circuits`` is installed on its own).
Imports only :mod:`hybrid_attention.ising`; qiskit and pennylane are imported inside the emitters.
"""

from __future__ import annotations

from .schedule import DQASchedule

__all__ = ["DQASchedule"]
