"""The QPU-time model behind every cost estimate of the IBM route (``IBMSampler.estimate``, ``hybrid-attention
estimate``, ``--max-qpu-seconds``).

What IBM bills is *usage*: the time the QPU is locked for a workload (job and batch modes: the sum of the jobs'
quantum time; session mode: the session's wall-clock time) [1]. The runtime's own estimate of a job's quantum time,
``RuntimeJobV2.usage_estimation["quantum_seconds"]`` (qiskit-ibm-runtime, from the service's
``estimated_running_time_seconds``), exists only once a job has been submitted [1, 2], and ``Sampler.run(...,
dry_run=True)`` asks the server; neither is available before submission, offline. This module therefore estimates
locally from the timing structure of a superconducting QPU run:

``qpu_seconds = jobs * per_job_seconds + circuits * per_circuit_seconds + circuits * shots * (rep_delay +
circuit_seconds)``

* ``rep_delay``: the delay between one shot's measurement and the next shot, the device's
  ``configuration().default_rep_delay`` (250 us on IBM's Falcon, Eagle and Heron devices, and on their fake
  backends; the runtime option ``execution.rep_delay`` [3]);
* ``circuit_seconds``: the duration of one execution of the ISA circuit, from the device's instruction durations
  (``QuantumCircuit.estimate_duration(target)``) when known, else ``depth * layer_seconds``;
* ``per_circuit_seconds``: loading one set of parameter values (one circuit of a PUB's bindings) into the control
  electronics; ``per_job_seconds``: the fixed cost of a job (initialisation, calibration loading, result transfer).

The two overheads are **not published by IBM**; the defaults here (:data:`DEFAULT_MODEL`) are assumptions of this
project, chosen on the high side, so that an estimate errs towards refusing. Check them against the runtime's
``usage_estimation`` / ``job.usage()`` of one small real job before trusting a large estimate, and pass measured
values as keywords (``qpu_seconds(..., per_circuit_seconds=...)``; ``IBMSampler(qpu_model={...})``).

[1] IBM Quantum documentation, "Workload usage" (guides/estimate-job-run-time).
[2] qiskit-ibm-runtime, ``RuntimeJobV2.usage_estimation``.
[3] qiskit-ibm-runtime, ``options_models.execution.ExecutionOptions.rep_delay``.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["qpu_seconds", "DEFAULT_MODEL", "circuit_seconds", "rep_delay_of"]

#: the model's constants (seconds); ``rep_delay`` and ``layer_seconds`` are replaced by a device's own values
DEFAULT_MODEL: dict[str, float] = {
    "rep_delay": 250e-6,  # IBM devices' default_rep_delay
    "layer_seconds": 100e-9,  # one ISA layer (two-qubit gates take 68-660 ns on IBM devices; 1q ~ 30-60 ns)
    "per_circuit_seconds": 5e-3,  # assumption: loading one parameter binding
    "per_job_seconds": 2.0,  # assumption: fixed cost of a job
}


def qpu_seconds(*, circuits: int, shots: int, depth: int | None = None, **model: Any) -> float:
    """Estimated QPU seconds (billed usage) of running ``circuits`` circuits (parameter bindings) ``shots`` times
    each (module docstring).

    Args:
        circuits: circuits executed (each parameter binding of each PUB counts once).
        shots: shots per circuit.
        depth: depth of the ISA circuit (used for ``circuit_seconds`` when that is not given: ``depth *
            layer_seconds``; ``None``: circuit time neglected next to ``rep_delay``).
        model: ``jobs`` (default 1), ``rep_delay``, ``circuit_seconds``, ``layer_seconds``,
            ``per_circuit_seconds``, ``per_job_seconds`` (defaults :data:`DEFAULT_MODEL`).

    Raises:
        ValueError: a negative or non-integer count, or an unknown model key.

    Example:
        >>> round(qpu_seconds(circuits=10, shots=1000, depth=100, per_job_seconds=0, per_circuit_seconds=0), 4)
        2.6
        >>> qpu_seconds(circuits=0, shots=1000)
        0.0
    """
    unknown = set(model) - {"jobs", "circuit_seconds", *DEFAULT_MODEL}
    if unknown:
        raise ValueError(
            f"qpu_seconds: unknown model key(s) {sorted(unknown)}; expected jobs, circuit_seconds or "
            f"{sorted(DEFAULT_MODEL)}"
        )
    for name, v in (("circuits", circuits), ("shots", shots), ("jobs", model.get("jobs", 1))):
        if isinstance(v, bool) or not isinstance(v, (int,)) and not (isinstance(v, float) and v.is_integer()) or v < 0:
            raise ValueError(f"qpu_seconds: {name} must be a non-negative integer, got {v!r}")
    if circuits == 0:
        return 0.0
    m = {**DEFAULT_MODEL, **{k: v for k, v in model.items() if v is not None}}
    jobs = int(m.get("jobs", 1))
    if "circuit_seconds" in m:
        circ = float(m["circuit_seconds"])
    else:
        circ = 0.0 if depth is None else float(depth) * float(m["layer_seconds"])
    per_shot = float(m["rep_delay"]) + circ
    total = (
        jobs * float(m["per_job_seconds"]) + circuits * float(m["per_circuit_seconds"]) + circuits * shots * per_shot
    )
    return float(total) if math.isfinite(total) else math.inf


def rep_delay_of(backend: Any) -> float | None:
    """A backend's default repetition delay in seconds (``configuration().default_rep_delay``), or ``None``."""
    try:
        value = backend.configuration().default_rep_delay
    except Exception:  # BackendV2 without a configuration (AerSimulator, a plain target)
        return None
    return None if value is None else float(value)


def circuit_seconds(circuit: Any, backend: Any) -> float | None:
    """Duration in seconds of one execution of an ISA ``circuit`` on ``backend`` from its instruction durations
    (``QuantumCircuit.estimate_duration``), or ``None`` when the target does not know them."""
    try:
        return float(circuit.estimate_duration(backend.target, unit="s"))
    except Exception:  # no durations in the target, or a parametrised delay
        return None
