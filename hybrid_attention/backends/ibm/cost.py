"""The QPU-time model behind every cost estimate of the IBM route (``IBMSampler.estimate``, ``hybrid-attention
estimate``, ``--max-qpu-seconds``).

What IBM bills is *usage*: the time the QPU is locked for a workload [1]. In job and batch mode that is the sum of
the jobs' quantum time; in session mode it is the session's wall-clock time while it is active, idle time between
jobs included [1]. The runtime's own estimate of a job's quantum time, ``RuntimeJobV2.usage_estimation``, exists only
once a job has been submitted [2], so this module estimates locally from the timing structure of a superconducting
QPU run:

``qpu_seconds = jobs * per_job_seconds + circuits * per_circuit_seconds + circuits * shots * (rep_delay +
circuit_seconds) [+ jobs * session_gap_seconds in session mode]``

Every constant, with where it comes from (:data:`MODEL_SOURCES`):

======================  ============  ===================================================================================
constant                default       source
======================  ============  ===================================================================================
``rep_delay``           250 us        the device: ``configuration().default_rep_delay`` (the runtime option
                                      ``execution.rep_delay`` [3]); 250 us on IBM's Falcon, Eagle and Heron devices
``circuit_seconds``     per circuit   the device: ``QuantumCircuit.estimate_duration(target)`` from its instruction
                                      durations; else ``depth * layer_seconds``
``layer_seconds``       100 ns        assumption (two-qubit gates take 68-660 ns on IBM devices), used only when the
                                      target has no durations
``per_circuit_seconds`` 5 ms          **assumption**: loading one parameter binding (not published by IBM)
``per_job_seconds``     2 s           **assumption**: a job's fixed cost (initialisation, result transfer; not
                                      published by IBM). Charged in *every* mode: each job's quantum time counts in
                                      job and batch mode, and a session runs its jobs one by one [1]
``session_gap_seconds`` 1 s           **assumption**: session mode only, the client's time between one job's result
                                      and the next submission of an iterative workload, billed because session usage
                                      is wall-clock [1]
======================  ============  ===================================================================================

The assumptions are chosen on the high side, so that an estimate errs towards refusing. Measure them: every
completed job's reported usage is kept in the job ledger (:mod:`.usage`), ``hybrid-attention estimate ... --out DIR``
sets the estimate against it per job, and ``hybrid-attention estimate calibrate --out DIR`` fits ``per_job_seconds``
and ``per_circuit_seconds`` to it; pass the fitted values as keywords (``qpu_seconds(..., per_circuit_seconds=...)``;
``IBMSampler(qpu_model={...})``).

[1] IBM Quantum documentation, "Workload usage", https://quantum.cloud.ibm.com/docs/guides/estimate-job-run-time
[2] qiskit-ibm-runtime, ``RuntimeJobV2.usage_estimation``.
[3] qiskit-ibm-runtime, ``options_models.execution.ExecutionOptions.rep_delay``.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["qpu_seconds", "DEFAULT_MODEL", "MODEL_SOURCES", "circuit_seconds", "rep_delay_of", "overhead_seconds"]

#: the model's constants (seconds); ``rep_delay`` and ``layer_seconds`` are replaced by a device's own values
DEFAULT_MODEL: dict[str, float] = {
    "rep_delay": 250e-6,  # IBM devices' default_rep_delay
    "layer_seconds": 100e-9,  # one ISA layer (two-qubit gates take 68-660 ns on IBM devices; 1q ~ 30-60 ns)
    "per_circuit_seconds": 5e-3,  # assumption: loading one parameter binding
    "per_job_seconds": 2.0,  # assumption: fixed cost of a job
    "session_gap_seconds": 1.0,  # assumption: client time between iterative jobs of a session (billed there)
}

#: where each constant of :data:`DEFAULT_MODEL` comes from (the module docstring's table)
MODEL_SOURCES: dict[str, str] = {
    "rep_delay": "device configuration default_rep_delay (runtime option execution.rep_delay)",
    "layer_seconds": "assumption (used only when the target has no instruction durations)",
    "per_circuit_seconds": "assumption (not published by IBM)",
    "per_job_seconds": "assumption (not published by IBM); charged in every execution mode",
    "session_gap_seconds": "assumption; session usage is wall-clock time (IBM docs, Workload usage)",
}


def qpu_seconds(*, circuits: int, shots: int, depth: int | None = None, mode: str = "job", **model: Any) -> float:
    """Estimated QPU seconds (billed usage) of running ``circuits`` circuits (parameter bindings) ``shots`` times
    each (module docstring).

    Args:
        circuits: circuits executed (each parameter binding of each PUB counts once).
        shots: shots per circuit.
        depth: depth of the ISA circuit (used for ``circuit_seconds`` when that is not given: ``depth *
            layer_seconds``; ``None``: circuit time neglected next to ``rep_delay``).
        model: ``jobs`` (default 1), ``rep_delay``, ``circuit_seconds``, ``layer_seconds``,
            ``per_circuit_seconds``, ``per_job_seconds``, ``session_gap_seconds`` (defaults :data:`DEFAULT_MODEL`).

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
    fixed = overhead_seconds(jobs=jobs, circuits=circuits, mode=mode, **{k: m[k] for k in DEFAULT_MODEL})
    total = fixed + circuits * shots * per_shot
    return float(total) if math.isfinite(total) else math.inf


def overhead_seconds(*, jobs: int, circuits: int, mode: str = "job", **model: Any) -> float:
    """The fixed part of :func:`qpu_seconds`: ``jobs * per_job_seconds + circuits * per_circuit_seconds`` plus, in
    session mode, ``jobs * session_gap_seconds`` (``model``: :data:`DEFAULT_MODEL` keys replacing the defaults).

    Example:
        >>> overhead_seconds(jobs=3, circuits=10), overhead_seconds(jobs=3, circuits=10, mode="session")
        (6.05, 9.05)
    """
    m = {**DEFAULT_MODEL, **{k: v for k, v in model.items() if v is not None}}
    gap = float(m["session_gap_seconds"]) if mode == "session" else 0.0
    return int(jobs) * (float(m["per_job_seconds"]) + gap) + int(circuits) * float(m["per_circuit_seconds"])


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
