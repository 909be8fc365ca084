"""What a call of :class:`~.ibm.IBMSampler` will cost and whether it may run, decided before anything is submitted:
the cost of ISA circuits by the model of :mod:`.cost` (per job, per call; the execution mode's share), the budget
(``max_qpu_seconds``: refused above it, and refused outright when it cannot cover one job's overhead), the runtime's
per-job limit (``Execution.max_execution_time``: a job estimated above it is refused), whether the backend and the
instance's plan have sessions (a simulator has none; "Open Plan users cannot submit session jobs", IBM Quantum
documentation, Execution modes using REST API), and the warning that job mode shows for a call of several jobs.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

from .cost import DEFAULT_MODEL, circuit_seconds, overhead_seconds, qpu_seconds, rep_delay_of

__all__ = ["Billing", "instance_plan"]

logger = logging.getLogger("hybrid_attention.backends.ibm.sampler")

_TWO_QUBIT = ("cz", "cx", "ecr", "rzz")


def instance_plan(service: Any, instance: str | None = None) -> str | None:
    """The plan name (lower case, e.g. ``"open"``) of the service's active instance (or of ``instance``), from
    ``QiskitRuntimeService.instances()``; ``None`` when the service cannot tell."""
    try:
        crn = instance or service.active_instance()
        for inst in service.instances():
            if crn in (inst.get("crn"), inst.get("name")):
                return str(inst.get("plan") or "").lower() or None
    except Exception as exc:  # an older runtime, or a service that does not answer: unknown
        logger.info("ibm: the instance's plan is unknown (%s: %s)", type(exc).__name__, exc)
    return None


class Billing:
    """The cost half of :class:`~.ibm.IBMSampler` (a mixin): the sampler provides ``backend``, ``backend_name``,
    ``local``, ``mode``, ``execution``, ``qpu_model``, ``max_qpu_seconds``, ``instance``, ``_stats`` and
    ``_runtime_service``."""

    def isa_stats(self, isa: Any) -> dict[str, Any]:
        """``depth``, ``two_qubit_gates`` and ``circuit_seconds`` (duration of one execution from the device's
        instruction durations, ``None`` when unknown) of an ISA circuit (computed once per circuit)."""
        known = self._stats.get(id(isa))
        if known is not None and known[0] is isa:
            return known[1]
        ops = isa.count_ops()
        st = {
            "depth": int(isa.depth()),
            "two_qubit_gates": int(sum(v for k, v in ops.items() if k in _TWO_QUBIT)),
            "circuit_seconds": circuit_seconds(isa, self.backend),
        }
        self._stats[id(isa)] = (isa, st)
        return st

    def _model(self, st: dict[str, Any]) -> dict[str, Any]:
        return {"rep_delay": rep_delay_of(self.backend), "circuit_seconds": st["circuit_seconds"], **self.qpu_model}

    def cost(
        self, isa: Any, *, jobs: int, circuits: int, shots: int, job_circuits: int | None = None
    ) -> dict[str, Any]:
        """The estimate of ``jobs`` jobs (one PUB each) running ``circuits`` bindings of ``isa`` for ``shots`` shots
        each, in this sampler's execution mode: the keys of :meth:`~.ibm.IBMSampler.estimate`. ``job_circuits``:
        the bindings of the largest job (default ``ceil(circuits / jobs)``)."""
        st = self.isa_stats(isa)
        model = self._model(st)
        jobs, circuits, shots = int(jobs), int(circuits), int(shots)
        secs = qpu_seconds(circuits=circuits, shots=shots, depth=st["depth"], jobs=jobs, mode=self.mode, **model)
        largest = job_circuits if job_circuits is not None else (-(-circuits // jobs) if jobs else 0)
        fixed = {k: model[k] for k in DEFAULT_MODEL if k in model}
        return {
            "jobs": jobs,
            "pubs": jobs,
            "circuits": circuits,
            "shots": circuits * shots,
            "depth": st["depth"],
            "two_qubit_gates": st["two_qubit_gates"],
            "qpu_seconds": secs,
            "overhead_seconds": overhead_seconds(jobs=jobs, circuits=circuits, mode=self.mode, **fixed),
            "largest_job_seconds": self.job_seconds(isa, int(largest), shots) if largest else 0.0,
            "mode": self.mode,
        }

    def job_seconds(self, isa: Any, circuits: int, shots: int) -> float:
        """The model's QPU seconds of one job of ``circuits`` bindings of ``isa``, ``shots`` shots each."""
        st = self.isa_stats(isa)
        return qpu_seconds(circuits=circuits, shots=shots, depth=st["depth"], jobs=1, mode=self.mode, **self._model(st))

    def shot_seconds(self, isa: Any) -> float:
        """The model's seconds per shot of ``isa``: the repetition delay plus the circuit's duration."""
        st = self.isa_stats(isa)
        m = {**DEFAULT_MODEL, **{k: v for k, v in self._model(st).items() if v is not None}}
        circ = m["circuit_seconds"] if m.get("circuit_seconds") is not None else st["depth"] * m["layer_seconds"]
        return float(m["rep_delay"]) + float(circ)

    def job_overhead(self) -> float:
        """The model's fixed cost of one job in this mode (``per_job_seconds``, plus ``session_gap_seconds`` in a
        session, plus one circuit's ``per_circuit_seconds``)."""
        fixed = {k: v for k, v in self.qpu_model.items() if k in DEFAULT_MODEL}
        return overhead_seconds(jobs=1, circuits=1, mode=self.mode, **fixed)

    # ------------------------------------------------------------------ refusals before submission
    def check_budget_covers_a_job(self) -> None:
        """``ValueError`` when ``max_qpu_seconds`` (on a device) cannot cover one job's fixed overhead."""
        if self.max_qpu_seconds is None or self.max_qpu_seconds >= self.job_overhead():
            return
        raise ValueError(
            f"ibm: max_qpu_seconds = {self.max_qpu_seconds:g} cannot cover one job on {self.backend_name}: its "
            f"fixed overhead alone is {self.job_overhead():g} s by the cost model (per_job_seconds = "
            f"{self.qpu_model.get('per_job_seconds', DEFAULT_MODEL['per_job_seconds']):g} s, an assumption; "
            "calibrate it with `hybrid-attention estimate calibrate`); nothing was submitted"
        )

    def check_budget(self, est: dict[str, Any]) -> None:
        """Refuse (``ValueError``, nothing submitted) an estimate above ``max_qpu_seconds`` on a real device."""
        if self.local or self.max_qpu_seconds is None or est["qpu_seconds"] <= self.max_qpu_seconds:
            return
        short = self.max_qpu_seconds < self.job_overhead()
        raise ValueError(
            f"ibm: the call is estimated at {est['qpu_seconds']:,.1f} QPU seconds ({est['jobs']} job(s), "
            f"{est['circuits']:,} circuit(s), {est['shots']:,} shots) on {self.backend_name}, above max_qpu_seconds = "
            f"{self.max_qpu_seconds:g}; nothing was submitted (raise max_qpu_seconds on purpose: QPU time is billed)"
            + (f"; the budget cannot cover even one job's overhead ({self.job_overhead():g} s)" if short else "")
        )

    def check_job_limit(self, est: dict[str, Any]) -> None:
        """Refuse (``ValueError``) a call whose largest job is estimated above ``execution.max_execution_time``
        (the service would cancel it after billing that long)."""
        limit = self.execution.max_execution_time
        if self.local or limit is None or est.get("largest_job_seconds", 0.0) <= limit:
            return
        raise ValueError(
            f"ibm: a job of this call is estimated at {est['largest_job_seconds']:,.1f} QPU seconds, above "
            f"max_execution_time = {limit} s: the service would cancel it (and bill the time it ran); nothing was "
            "submitted. Lower chunk_size (fewer problems per job) or raise max_execution_time"
        )

    def check_mode_available(self) -> None:
        """Refuse (``ValueError``, before any submission) ``mode="session"`` on a device without sessions (a
        simulator) or an instance whose plan has none (the Open Plan). Local mode accepts every mode and ignores it."""
        if self.local or self.mode != "session":
            return
        try:
            simulator = bool(self.backend.configuration().simulator)
        except Exception:  # BackendV2 without a configuration: a device as far as we can tell
            simulator = False
        if simulator:
            raise ValueError(
                f"ibm: mode='session' was asked of {self.backend_name}, a simulator: it has no sessions; nothing was "
                "submitted. Use mode='batch' or 'job'"
            )
        plan = instance_plan(self._runtime_service(), self.instance)
        if plan == "open":
            raise ValueError(
                "ibm: mode='session' (the default of qemcmc and training on the IBM route) needs a plan with "
                "sessions, and this instance is on the Open Plan (Open Plan users cannot submit session jobs); nothing "
                "was submitted. Pass mode='batch' (--sampler-option mode=batch), or mode='job' (each job queues on "
                "its own)"
            )

    def warn_job_mode(self, est: dict[str, Any]) -> None:
        """On a device in job mode, warn (once per sampler) that a call of several jobs runs them one by one, with
        the projected per-job overhead."""
        if self.local or self.mode != "job" or est["jobs"] < 2:
            return
        per_job = self.qpu_model.get("per_job_seconds", DEFAULT_MODEL["per_job_seconds"])
        msg = (
            f"ibm: job mode on {self.backend_name}: this call submits {est['jobs']:,} jobs, each queued on its own and "
            f"each paying the per-job overhead ({per_job:g} s, an assumption of the cost model): "
            f"{est['jobs'] * per_job:,.1f} s of the estimated {est['qpu_seconds']:,.1f} s; mode='batch' (independent "
            "jobs) or mode='session' (iterative workloads) runs them without queueing in between"
        )
        if self._warned_job_mode:
            logger.info("%s", msg)
            return
        self._warned_job_mode = True
        warnings.warn(msg, stacklevel=5)

    def check_call(self, est: dict[str, Any]) -> None:
        """Every refusal of a device call before submission (budget, job limit, session availability), then the
        job-mode warning. Offline (local mode) nothing is refused."""
        if self.local:
            return
        self.check_budget(est)
        self.check_job_limit(est)
        self.check_mode_available()
        self.warn_job_mode(est)
