"""The IBM wing: DQA circuits on IBM Quantum through qiskit-ibm-runtime. Needs the ``ibm`` extra for the sampler.

* ``sampler``: :class:`~hybrid_attention.backends.ibm.sampler.IBMSampler` (registry name ``ibm``): job, batch or
  session, fractional RZZ, coupling-graph restriction, cost refusal;
* ``jobs``: submitting and collecting runtime jobs, one PUB per chunk, through the ``ledger`` (every PUB recorded
  by job id before anyone waits on it, so a rerun submits nothing twice);
* ``devices``: credentials, fake backends by name, RZZ bounds, resolving a backend;
* ``cost``: the QPU-time model behind every estimate; ``mitigation``: readout-error mitigation (also used by aer);
* ``runtime_double``: a test double of the runtime service that keeps jobs in a directory, for offline tests.

The public names of ``sampler`` are importable from here (``from hybrid_attention.backends.ibm import
IBMSampler``); qiskit-ibm-runtime is imported on first use of one of them, so ``cost`` and ``ledger`` stay light.
"""

from __future__ import annotations

import importlib
from typing import Any

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


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(".sampler", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
