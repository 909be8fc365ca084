"""IBM Quantum DQA sampler: qiskit-ibm-runtime's client-side (executor-based) Sampler in job, ``Batch`` or ``Session``
mode, with the legacy ``SamplerV2`` as the fallback on runtimes without it.

Needs the ``ibm`` extra (``pip install 'hybrid-attention[ibm]'``).

* Offline: pass a fake backend by name (``IBMSampler(backend="fake_torino")``, any backend of
  ``qiskit_ibm_runtime.fake_provider``: :func:`fake_backend_names`) or as an object (``backend=FakeTorino()``). The
  runtime then runs in local mode on Aer with the fake device's noise model: the same transpile-submit-collect code
  path, no account needed.
* Real hardware: ``IBMSampler(backend="ibm_torino", allow_hardware=True)`` (or ``backend=None`` for the least
  busy device). Credentials come from the saved account (``QiskitRuntimeService.save_account``) or the
  environment variables ``QISKIT_IBM_TOKEN`` / ``QISKIT_IBM_INSTANCE``; they are checked before anything else
  and never logged or stored in ``info``. Without ``allow_hardware=True`` nothing is ever submitted to a device.

The primitive: ``qiskit_ibm_runtime.executor_sampler.Sampler`` (qiskit-ibm-runtime >= 0.50: the PUBs become a
``QuantumProgram`` run by the ``Executor``, pre- and post-processing on the client) when it imports, else the
runtime's ``SamplerV2`` (deprecated in 0.50); :func:`runtime_sampler` says which, and ``info["primitive"]`` records it.

Each template is transpiled once to the backend's ISA (cached); a chunk of problems is one PUB (one job). In
``mode="auto"`` (the default) a call of more than one chunk runs in a ``Batch`` opened and closed by the call, and on a
real device every chunk of a batch or session is submitted before the first result is awaited (the jobs run side by
side); local mode ignores batches and sessions and runs the chunks one after the other. A failed or cancelled job
raises :class:`IBMJobError` carrying the job id and the chunks completed.

Fractional gates: a backend whose target has ``rzz`` with angle bounds (IBM's fractional ``RZZ(0 <= theta <= pi/2)``,
e.g. ``FakeFractionalBackend`` or ``service.backend(name, use_fractional_gates=True)``) gets the folded RZZ form
automatically (``fold_rzz=None``); ``fold_rzz=False`` on such a backend warns, and every bound RZZ angle of the ISA
circuit is checked against the target's bounds before the first job of a call is submitted (``ValueError`` otherwise).
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any, ClassVar

import numpy as np
import qiskit_ibm_runtime

from hybrid_attention.circuits.program import CircuitOptions, DQAProgram, resolve_coupling_map
from hybrid_attention.circuits.qiskit_dqa import DQATemplate
from hybrid_attention.circuits.schedule import DQASchedule

from ..dqa.circuit import CircuitSampler
from .billing import Billing
from .cost import qpu_seconds
from .devices import (
    check_rzz_angles,
    fake_backend,
    fake_backend_names,
    has_credentials,
    has_fractional_rzz,
    is_fake_backend_name,
    resolve_backend,
    runtime_sampler,
)
from .jobs import IBMJobError, RuntimeJobs, job_status, load_isa, save_isa
from .ledger import JobLedger, circuit_text
from .mitigation import calibration_circuits, measured_qubits
from .options import IBM_OPTION_GROUPS, Execution, Mitigation

__all__ = [
    "IBMSampler",
    "IBMJobError",
    "Execution",
    "Mitigation",
    "has_credentials",
    "runtime_sampler",
    "fake_backend",
    "fake_backend_names",
    "is_fake_backend_name",
    "has_fractional_rzz",
]

logger = logging.getLogger(__name__)

_DEFAULT_EXECUTION = Execution()
_DEFAULT_MITIGATION = Mitigation()


class IBMSampler(RuntimeJobs, Billing, CircuitSampler):
    """DQA circuits through qiskit-ibm-runtime's Sampler (client-side executor-based, or legacy ``SamplerV2``).

    Args:
        backend: a fake backend name (``"fake_torino"``: offline, local mode; see :func:`fake_backend_names`), a
            backend object (``FakeTorino()``, ``AerSimulator()``: local mode), a device name (``"ibm_torino"``), or
            ``None`` for the least busy operational device (real devices need credentials and ``allow_hardware=True``).
        schedule: the :class:`DQASchedule`.
        execution: the :class:`~.options.Execution`: ``mode`` (``"auto"``: a ``Batch`` for calls of more than one
            chunk, else job mode; ``"job"``; ``"batch"``: one ``Batch`` kept until :meth:`close`; ``"session"``: a
            ``Session`` closed by :meth:`close`, refused before submission on a simulator or an Open Plan instance),
            ``max_execution_time`` (the runtime's per-job limit; a job estimated above it is refused before
            submission), and the retries of transient service errors (``max_attempts``, ``backoff_seconds``,
            ``max_backoff_seconds``). On a device, job mode for a call of several jobs warns with the projected
            per-job overhead.
        allow_hardware: explicit opt-in to submit to a real device (billed QPU time).
        instance: IBM Cloud instance CRN (default ``QISKIT_IBM_INSTANCE`` or the saved account's).
        optimization_level: transpiler level for the one-time ISA transpilation.
        fold_rzz: emit folded RZZ (angles in ``[0, pi/2]``). ``None`` (default): exactly when the backend has
            fractional RZZ (:func:`has_fractional_rzz`); ``False`` on such a backend warns, and a call with a negative
            RZZ angle is refused (``ValueError``) before anything is submitted. For a device name, ``True`` asks the
            service for the fractional-gate version of the device.
        restrict_couplings: ``None`` (all-to-all, SWAPs inserted), ``"raise"`` or ``"drop"``: keep only couplings
            between spins adjacent on the device graph (``layout`` maps spin ``j`` to a physical qubit).
        layout: physical qubit per spin (initial layout).
        chunk_size, default_num_reads: see :class:`~hybrid_attention.backends.dqa.circuit.CircuitSampler`.
        sampler_options: options of the runtime Sampler (e.g. ``{"dynamical_decoupling": {"enable": True}}``),
            checked here against the primitive's option schema.
        ledger: a job ledger (a ``.jsonl`` path or a :class:`~hybrid_attention.backends.ibm.ledger.JobLedger`): every
            PUB is recorded before its result is awaited, and a PUB the ledger already holds is never submitted
            again (its stored bits are read, or its job is collected by id; see :mod:`.ledger`). Calls are
            resumable when their ``seed`` is fixed (the seed is part of a PUB's identity). ``None``: no ledger.
        service: what collects a ledger's jobs by id (``service.job(job_id)``): default the service the device
            came from, or a new ``QiskitRuntimeService`` when first needed.
        max_qpu_seconds: on a real device, a call whose estimated QPU time (:meth:`estimate`) exceeds this many
            seconds is refused (``ValueError``) before anything is submitted, and a budget below one job's overhead
            is refused when the sampler is built; ``None``: no limit. Ignored offline.
        qpu_model: keywords of :func:`~hybrid_attention.backends.ibm.cost.qpu_seconds` replacing its defaults
            (e.g. a measured ``per_circuit_seconds``: ``hybrid-attention estimate calibrate``).
        mitigation: the :class:`~.options.Mitigation`: ``dynamical_decoupling`` (``None``, ``"XX"``, ``"XpXm"`` or
            ``"XY4"``) and ``twirling`` (the runtime Sampler's options, applied by the client-side Sampler in local
            mode too; the legacy ``SamplerV2`` ignores them in local mode, with a warning), ``readout_mitigation``
            (mthree, :mod:`.mitigation`: the SampleSet holds every configuration weighted by its mitigated
            probability; the calibration, 2 circuits x ``calibration_shots``, runs through this sampler's route,
            ledger and estimate, once per measured qubit set).

    The registry (:func:`~hybrid_attention.backends.get_sampler`, ``--sampler-option``) also takes the fields of
    ``execution`` and ``mitigation`` as flat options (``get_sampler("ibm", mode="batch", twirling=True)``).

    Example:
        >>> from hybrid_attention import IsingProblem
        >>> from hybrid_attention.backends import get_sampler
        >>> import torch
        >>> s = get_sampler("ibm", backend="fake_manila")  # offline: runtime local mode with the device's noise
        >>> s.sample(IsingProblem(torch.tensor([0.5, -0.2])), num_reads=64, seed=0).spins.shape
        (64, 2)
    """

    name = "ibm"
    parameters: dict[str, str] = {}
    option_groups: ClassVar[dict[str, tuple[str, str]]] = IBM_OPTION_GROUPS

    def __init__(
        self,
        backend: Any = None,
        *,
        schedule: DQASchedule | None = None,
        execution: Execution = _DEFAULT_EXECUTION,
        allow_hardware: bool = False,
        instance: str | None = None,
        optimization_level: int = 1,
        fold_rzz: bool | None = None,
        restrict_couplings: str | None = None,
        layout: list[int] | None = None,
        chunk_size: int = 256,
        default_num_reads: int = 1024,
        sampler_options: dict[str, Any] | None = None,
        ledger: str | os.PathLike | JobLedger | None = None,
        service: Any = None,
        max_qpu_seconds: float | None = None,
        qpu_model: dict[str, float] | None = None,
        mitigation: Mitigation = _DEFAULT_MITIGATION,
    ) -> None:
        super().__init__(schedule=schedule, chunk_size=chunk_size, default_num_reads=default_num_reads)
        if ledger is not None and not isinstance(ledger, (str, os.PathLike, JobLedger)):
            raise TypeError(f"ibm: ledger must be a path or a JobLedger, got {type(ledger).__name__}")
        for arg, kind in ((execution, Execution), (mitigation, Mitigation)):
            if not isinstance(arg, kind):
                raise TypeError(f"ibm: {kind.__name__.lower()} must be a {kind.__name__}, got {type(arg).__name__}")
        if restrict_couplings not in (None, "raise", "drop"):
            raise ValueError(f"ibm: restrict_couplings must be None, 'raise' or 'drop', got {restrict_couplings!r}")
        if fold_rzz not in (None, True, False):
            raise TypeError(f"ibm: fold_rzz must be True, False or None (automatic), got {fold_rzz!r}")
        backend, local, found = resolve_backend(
            backend, allow_hardware=bool(allow_hardware), instance=instance, fractional=bool(fold_rzz)
        )
        self.ledger = ledger if isinstance(ledger, JobLedger) or ledger is None else JobLedger(ledger)
        self.service = service if service is not None else found
        self.instance = instance
        if max_qpu_seconds is not None and (isinstance(max_qpu_seconds, bool) or not max_qpu_seconds >= 0):
            raise ValueError(f"ibm: max_qpu_seconds must be a non-negative number or None, got {max_qpu_seconds!r}")
        self.max_qpu_seconds = None if max_qpu_seconds is None else float(max_qpu_seconds)
        self.qpu_model = dict(qpu_model or {})
        qpu_seconds(circuits=1, shots=1, **self.qpu_model)  # unknown keys fail now
        fractional = has_fractional_rzz(backend)
        if fold_rzz is False and fractional:  # legal while every angle is >= 0; checked per call before submission
            warnings.warn(
                f"ibm: backend {getattr(backend, 'name', backend)!r} has fractional RZZ gates (angles in [0, pi/2] "
                "only): with fold_rzz=False a call whose RZZ angles are negative is refused before submission; "
                "use fold_rzz=True or None (automatic)",
                stacklevel=2,
            )
        fold = fractional if fold_rzz is None else bool(fold_rzz)
        cmap = resolve_coupling_map(backend) if restrict_couplings else None
        self.circuit_options = CircuitOptions(
            fold_rzz=fold,
            coupling_map=cmap,
            layout=tuple(layout) if layout else None,
            on_missing=restrict_couplings or "raise",
        )
        self.backend, self.local, self.mode, self.fractional = backend, local, execution.mode, fractional
        self.execution, self.mitigation = execution, mitigation
        self.optimization_level = int(optimization_level)
        self._sampler_cls, self.primitive = runtime_sampler()
        self.sampler_options = _runtime_options(dict(sampler_options or {}), mitigation, execution)
        self.dynamical_decoupling, self.twirling = mitigation.dynamical_decoupling, mitigation.twirling
        self.readout_mitigation, self.calibration_shots = mitigation.readout_mitigation, mitigation.calibration_shots
        self._calibrations: dict[tuple[int, ...], dict[str, Any]] = {}
        try:  # the option schema is the primitive's: check it now, not at the first submission
            self._sampler_cls(mode=backend, options=dict(self.sampler_options))
        except Exception as exc:
            raise ValueError(f"ibm: sampler_options {self.sampler_options!r} rejected by the runtime: {exc}") from exc
        self.max_qubits = int(backend.num_qubits)
        self._ctx: Any = None
        self._last: dict[str, Any] = {"job_ids": [], "mode": None, "resumed": 0}
        self._texts: dict[int, tuple[Any, str]] = {}  # id(ISA circuit) -> (circuit, its QASM text) for PUB hashes
        self._isa_files: dict[int, tuple[Any, Any]] = {}  # id(ISA circuit) -> (circuit, its .qpy path): not yet written
        self._settled = False  # the ledger's intents were settled with the service (device)
        self._stats: dict[int, tuple[Any, dict[str, Any]]] = {}  # id(ISA circuit) -> (circuit, isa_stats)
        self._warned_job_mode = False
        if not self.local:
            self.check_budget_covers_a_job()
        if self.ledger is not None:
            check_ledger_backend(self.ledger, self.backend_name)

    @property
    def properties(self) -> dict[str, Any]:
        props = super().properties
        props.update(
            {
                "backend": getattr(self.backend, "name", str(self.backend)),
                "local": self.local,
                "mode": self.mode,
                "primitive": self.primitive,
                "fractional_rzz": self.fractional,
                "fold_rzz": self.circuit_options.fold_rzz,
                "execution": self.execution,
                "dynamical_decoupling": self.dynamical_decoupling,
                "twirling": self.twirling,
                "readout_mitigation": self.readout_mitigation,
                "versions": {"qiskit_ibm_runtime": qiskit_ibm_runtime.__version__},
            }
        )
        return props

    # ------------------------------------------------------------------ compile and submit
    def isa_circuit(self, tmpl: DQAProgram) -> Any:
        """The template (a DQA circuit or a qemcmc proposal) transpiled to the backend's ISA (once per template).

        With a ledger the ISA circuit is also stored next to it (``<ledger>.isa/<sha256>.qpy``, keyed by the logical
        circuit, the backend, the optimisation level and the layout) and read back by a later run: a resumed run
        submits exactly the circuits of the interrupted one (so their PUB hashes match), even after a qiskit upgrade
        would transpile differently. It is written just before its first PUB is submitted (:meth:`persist_isa`),
        never by an estimate or a refused call. A stored circuit that cannot be read raises ``ValueError`` naming
        the file."""
        if self.ledger is None or tmpl in self._isa:
            return self._transpiled(tmpl, self.backend, self.optimization_level)
        import hashlib

        layout = list(self.circuit_options.layout[: tmpl.n]) if self.circuit_options.layout else None
        key = hashlib.sha256(
            f"{circuit_text(tmpl.circuit)}|{self.backend_name}|{self.optimization_level}|{layout}".encode()
        ).hexdigest()
        path = self.ledger.path.with_name(self.ledger.path.name + ".isa") / f"{key}.qpy"
        if path.exists():
            isa = load_isa(path, tmpl.num_parameters)
            self._isa[tmpl] = isa
            return isa
        isa = self._transpiled(tmpl, self.backend, self.optimization_level)
        self._isa_files[id(isa)] = (isa, path)
        return isa

    def persist_isa(self, isa: Any) -> None:
        """Write a freshly transpiled ISA circuit next to the ledger (once; before its first PUB is submitted)."""
        pending = self._isa_files.pop(id(isa), None)
        if pending is not None and pending[0] is isa:
            save_isa(pending[1], isa)

    def run_isa(self, isa: Any, values: np.ndarray, *, shots: int, seed: int) -> tuple[np.ndarray, str]:
        """Run one ISA circuit (from :meth:`isa_circuit`) for a block of parameter values as one job: the device's
        RZZ angle bounds are checked first (fractional-gate backends), the job runs in this sampler's Batch/Session
        when ``mode`` is ``"batch"`` or ``"session"`` (else on its own), with its runtime Sampler and options.

        Args:
            isa: the transpiled circuit; values: ``(B, P)`` parameter values, one row per bound circuit.
            shots: measurements per bound circuit; seed: the simulator seed (local/fake backends).

        Returns:
            ``(bits, job_id)``: ``(B, shots, Q)`` bools (qubit ``k`` at index ``k``) and the runtime job's id.
        """
        if self.fractional:
            check_rzz_angles(isa, values, self.backend)
        ctx = self._context(2)[0] if self.mode in ("batch", "session") else None
        pub = self._submit(isa, values, int(shots), int(seed), ctx)
        try:
            return self._collect(pub), pub.job_id
        except Exception as exc:
            if isinstance(exc, IBMJobError):
                raise
            raise IBMJobError(
                f"ibm: job {pub.job_id} ended with status {job_status(pub.job)} ({exc})",
                job_id=pub.job_id,
                status=job_status(pub.job),
                completed={},
                job_ids=[pub.job_id],
            ) from exc

    # ------------------------------------------------------------------ cost
    def estimate(self, problem: Any, num_reads: int | None = None) -> dict[str, Any]:
        """What :meth:`sample` would submit for ``problem`` with ``num_reads`` shots, without submitting anything.

        Args:
            problem: an :class:`~hybrid_attention.IsingProblem` (any batch shape).
            num_reads: shots per problem (default ``default_num_reads``).

        Returns:
            ``{"jobs", "pubs", "circuits", "shots", "depth", "two_qubit_gates", "qpu_seconds", "overhead_seconds",
            "largest_job_seconds", "mode"}``: jobs and PUBs (one PUB per chunk of ``chunk_size`` problems, one job
            per PUB), circuits (parameter bindings: one per problem), shots in all (circuits x reads), depth and
            two-qubit gates of the ISA circuit, the estimated QPU seconds (:mod:`~hybrid_attention.backends.ibm.cost`),
            their fixed part (per job, per circuit, session gaps), the largest job's seconds and the execution mode.

        Example:
            >>> import torch
            >>> from hybrid_attention import IsingProblem
            >>> s = IBMSampler(backend="fake_manila", chunk_size=2)
            >>> e = s.estimate(IsingProblem(torch.zeros(5, 2)), num_reads=100)
            >>> e["jobs"], e["circuits"], e["shots"]
            (3, 5, 500)
        """
        problem = self.validate(problem, num_reads=num_reads)
        shots = self.default_num_reads if num_reads is None else int(num_reads)
        flat = problem.flatten()
        tmpl = self._template(flat)
        B = int(flat.h.shape[0])
        isa = self.isa_circuit(tmpl)
        est = self.cost(
            isa, jobs=-(-B // self.chunk_size), circuits=B, shots=shots, job_circuits=min(B, self.chunk_size)
        )
        if self.readout_mitigation and tuple(measured_qubits(isa)) not in self._calibrations:
            zeros, _ = calibration_circuits(self.max_qubits, measured_qubits(isa))
            cal = self.cost(zeros, jobs=2, circuits=2, shots=self.calibration_shots)
            keys = ("jobs", "pubs", "circuits", "shots", "qpu_seconds", "overhead_seconds")
            est = {**est, **{k: est[k] + cal[k] for k in keys}}
            est["largest_job_seconds"] = max(est["largest_job_seconds"], cal["largest_job_seconds"])
            est["calibration"] = {k: cal[k] for k in ("jobs", "circuits", "shots", "qpu_seconds")}
        return est

    def _sample(self, problem: Any, *, num_reads: int | None, seed: Any, **options: Any) -> Any:
        if not self.local:  # every refusal before anything is submitted (billing.Billing.check_call)
            self.check_call(self.estimate(problem, num_reads))
        if self.ledger is not None and seed is None:
            logger.warning("ibm: a ledger is set but seed=None: this call cannot be resumed (pass a seed)")
        return super()._sample(problem, num_reads=num_reads, seed=seed, **options)

    def _readout_calibration(self, tmpl: DQATemplate) -> dict[str, Any]:
        from .mitigation import assignment_matrices

        isa = self.isa_circuit(tmpl)
        qubits = tuple(measured_qubits(isa))
        if qubits in self._calibrations:
            return {**self._calibrations[qubits], "ran": False}
        bits = []
        ctx = self._context(2)[0] if self.mode in ("batch", "session") else None
        for k, circ in enumerate(calibration_circuits(self.max_qubits, list(qubits))):
            pub = self._submit(circ, np.zeros((1, 0)), self.calibration_shots, 7919 + k, ctx)
            bits.append(self._collect(pub).reshape(-1, len(qubits)))
        cal = {"matrices": assignment_matrices(*bits), "qubits": qubits, "shots": self.calibration_shots}
        self._calibrations[qubits] = cal
        return {**cal, "ran": True}

    def _extra_info(self, tmpl: DQATemplate) -> dict[str, Any]:
        isa = self.isa_circuit(tmpl)
        ops = isa.count_ops()
        twoq = sum(v for k, v in ops.items() if k in ("cz", "cx", "ecr", "rzz"))
        return {
            "job_ids": list(self._last["job_ids"]),
            "mode": self._last["mode"],
            "resumed_pubs": int(self._last.get("resumed", 0)),
            "ledger": None if self.ledger is None else str(self.ledger.path),
            "primitive": self.primitive,
            "depth": isa.depth(),
            "two_qubit_gates": int(twoq),
            "backend_name": getattr(self.backend, "name", None),
            "local": self.local,
            "fold_rzz": self.circuit_options.fold_rzz,
        }

    def close(self) -> None:
        """Close the Batch/Session (if any). Idempotent."""
        try:
            if self._ctx is not None:
                try:
                    self._ctx.close()
                finally:
                    self._ctx = None
        finally:
            if self.ledger is not None:
                self.ledger.close()  # this sampler's share of the ledger's lock
        super().close()


def _runtime_options(opts: dict[str, Any], mitigation: Mitigation, execution: Execution) -> dict[str, Any]:
    """``sampler_options`` with the suppression options of ``mitigation`` and ``execution.max_execution_time``
    merged in (an option given twice raises ``ValueError``)."""
    opts = mitigation.runtime_options(opts)
    if execution.max_execution_time is not None:
        if "max_execution_time" in opts:
            raise ValueError("ibm: give max_execution_time once: max_execution_time= or sampler_options, not both")
        opts["max_execution_time"] = int(execution.max_execution_time)
    return opts


def check_ledger_backend(ledger: JobLedger, backend: str) -> None:
    """``ValueError`` (before anything is submitted) when ``ledger`` holds jobs, none of them on ``backend``: the
    ledger of a run on another device, whose PUBs this sampler would never find (and so pay for again)."""
    seen = {e.backend for e in ledger.entries()}
    if seen and backend not in seen:
        raise ValueError(
            f"ibm: the job ledger {str(ledger.path)!r} records jobs on {sorted(seen)}, not on {backend!r}: it "
            "belongs to a run on another backend, and none of its PUBs would be found here; nothing was submitted. "
            "Give this run its own ledger (another --out), or run it on the ledger's backend"
        )
