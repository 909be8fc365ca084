"""The IBM wing: DQA circuits on IBM Quantum through qiskit-ibm-runtime. Needs the ``ibm`` extra for the sampler.

* ``sampler``: :class:`~hybrid_attention.backends.ibm.sampler.IBMSampler` (registry name ``ibm``): job, batch or
  session, fractional RZZ, coupling-graph restriction; ``options``: its grouped settings (``Execution``,
  ``Mitigation``); ``billing``: cost and the refusals before submission (budget, job limit, sessions);
* ``jobs``: submitting and collecting runtime jobs, one PUB per chunk, through the ``ledger`` (every PUB recorded
  by job id before anyone waits on it, so a rerun submits nothing twice), with the ``retry`` of transient service
  errors; ``usage``: the usage jobs report, against the estimate, and the cost model's calibration;
* ``devices``: credentials, fake backends by name, RZZ bounds, resolving a backend; ``fractional``: IBM's fractional
  RZZ / RX added to a fake Heron backend offline (``fake_torino_fractional``); ``line_layout``: a line of qubits
  chosen from gate and read-out errors (and T1/T2 over a duration);
* ``cost``: the QPU-time model behind every estimate; ``mitigation``: readout-error mitigation (also used by aer);
* ``runtime_double``: a test double of the runtime service that keeps jobs in a directory, reports usage from a
  documented model and fails on command, for offline tests.

The public names of ``sampler`` are importable from here (``from hybrid_attention.backends.ibm import
IBMSampler``); qiskit-ibm-runtime is imported on first use of one of them, so ``cost`` and ``ledger`` stay light.
"""

from __future__ import annotations

from ..base import lazy_exports

__all__ = [
    "IBMSampler",
    "IBMJobError",
    "has_credentials",
    "runtime_sampler",
    "fake_backend",
    "fake_backend_names",
    "is_fake_backend_name",
    "has_fractional_rzz",
]

__getattr__ = lazy_exports(__name__, ".sampler", __all__)
