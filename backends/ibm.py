"""IBM Quantum DQA sampler: qiskit-ibm-runtime ``SamplerV2`` in job, ``Batch`` or ``Session`` mode.

Needs the ``ibm`` extra (``pip install 'hybrid-attention[ibm]'``).

* Offline: pass a fake backend (``from qiskit_ibm_runtime.fake_provider import FakeTorino``;
  ``IBMSampler(backend=FakeTorino())``). The runtime then runs in local mode on Aer with the fake device's
  noise model: the same transpile-submit-collect code path, no account needed.
* Real hardware: ``IBMSampler(backend="ibm_torino", allow_hardware=True)`` (or ``backend=None`` for the least
  busy device). Credentials come from the saved account (``QiskitRuntimeService.save_account``) or the
  environment variables ``QISKIT_IBM_TOKEN`` / ``QISKIT_IBM_INSTANCE``; they are checked before anything else
  and never logged or stored in ``info``. Without ``allow_hardware=True`` nothing is ever submitted to a device.

Each template is transpiled once to the backend's ISA (cached); a chunk of problems is one PUB (one job in
job mode). A failed or cancelled job raises :class:`IBMJobError` carrying the job id and the chunks
completed so far.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np
import qiskit_ibm_runtime
from qiskit_ibm_runtime import Batch, QiskitRuntimeService, SamplerV2, Session

from hybrid_attention.circuits.program import CircuitOptions, resolve_coupling_map
from hybrid_attention.circuits.qiskit_dqa import DQATemplate
from hybrid_attention.circuits.schedule import DQASchedule

from .circuit import CircuitSampler

__all__ = ["IBMSampler", "IBMJobError", "has_credentials"]

logger = logging.getLogger(__name__)

_MODES = ("job", "batch", "session")


class IBMJobError(RuntimeError):
    """A runtime job failed or was cancelled.

    Attributes:
        job_id: the failed job's id.
        status: its final status string.
        completed: ``{chunk_start: bits (C, shots, n)}`` of the chunks that finished before it (kept so a
            caller can resume without paying for them again).
        job_ids: ids of all jobs submitted in this call.
    """

    def __init__(
        self, message: str, *, job_id: str | None, status: str, completed: dict[int, np.ndarray], job_ids: list[str]
    ) -> None:
        super().__init__(message)
        self.job_id, self.status, self.completed, self.job_ids = job_id, status, completed, job_ids


def has_credentials() -> bool:
    """True if ``QISKIT_IBM_TOKEN`` is set or an account is saved on disk (nothing is contacted)."""
    if os.environ.get("QISKIT_IBM_TOKEN"):
        return True
    try:
        return bool(QiskitRuntimeService.saved_accounts())
    except Exception:  # unreadable config file counts as no credentials
        return False


def _is_local(backend: Any) -> bool:
    """Fake backends and plain simulators run in the runtime's local mode."""
    mod = type(backend).__module__
    return "fake_provider" in mod or mod.startswith("qiskit_aer") or "fake" in type(backend).__name__.lower()


class IBMSampler(CircuitSampler):
    """DQA circuits through qiskit-ibm-runtime's ``SamplerV2``.

    Args:
        backend: a backend object (a fake backend such as ``FakeTorino()`` runs offline in local mode), a
            device name, or ``None`` for the least busy operational device (real devices need credentials
            and ``allow_hardware=True``).
        schedule: the :class:`DQASchedule`.
        mode: ``"job"`` (one job per chunk), ``"batch"`` (a ``Batch``) or ``"session"`` (a ``Session``, closed by
            :meth:`close`).
        allow_hardware: explicit opt-in to submit to a real device (billed QPU time).
        instance: IBM Cloud instance CRN (default ``QISKIT_IBM_INSTANCE`` or the saved account's).
        optimization_level: transpiler level for the one-time ISA transpilation.
        fold_rzz: emit folded RZZ (angles in ``[0, pi/2]``) for fractional-gate backends.
        restrict_couplings: ``None`` (all-to-all, SWAPs inserted), ``"raise"`` or ``"drop"``: keep only couplings
            between spins adjacent on the device graph (``layout`` maps spin ``j`` to a physical qubit).
        layout: physical qubit per spin (initial layout).
        chunk_size, default_num_reads: see :class:`~hybrid_attention.backends.circuit.CircuitSampler`.
        sampler_options: options dict for the runtime ``SamplerV2`` (e.g. ``{"dynamical_decoupling": {"enable": True}}``).
    """

    name = "ibm"
    parameters: dict[str, str] = {}

    def __init__(
        self,
        backend: Any = None,
        *,
        schedule: DQASchedule | None = None,
        mode: str = "job",
        allow_hardware: bool = False,
        instance: str | None = None,
        optimization_level: int = 1,
        fold_rzz: bool = False,
        restrict_couplings: str | None = None,
        layout: list[int] | None = None,
        chunk_size: int = 256,
        default_num_reads: int = 1024,
        sampler_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(schedule=schedule, chunk_size=chunk_size, default_num_reads=default_num_reads)
        if mode not in _MODES:
            raise ValueError(f"ibm: mode must be one of {_MODES}, got {mode!r}")
        if restrict_couplings not in (None, "raise", "drop"):
            raise ValueError(f"ibm: restrict_couplings must be None, 'raise' or 'drop', got {restrict_couplings!r}")
        if backend is not None and not isinstance(backend, str) and not hasattr(backend, "target"):
            raise TypeError(f"ibm: backend must be a BackendV2, a device name or None, got {type(backend).__name__}")
        local = backend is not None and not isinstance(backend, str) and _is_local(backend)
        if not local:
            if not allow_hardware:
                raise ValueError(
                    "ibm: submitting to a real IBM Quantum device needs the explicit opt-in allow_hardware=True "
                    "(QPU time is billed); pass a fake backend such as FakeTorino() to run offline"
                )
            if isinstance(backend, (str, type(None))) and not has_credentials():
                raise RuntimeError(
                    "ibm: no IBM Quantum credentials found: set QISKIT_IBM_TOKEN (and QISKIT_IBM_INSTANCE) or "
                    "save an account with QiskitRuntimeService.save_account(token=..., instance=...)"
                )
        if isinstance(backend, (str, type(None))):
            token = os.environ.get("QISKIT_IBM_TOKEN")
            inst = instance or os.environ.get("QISKIT_IBM_INSTANCE")
            service = QiskitRuntimeService(token=token, instance=inst) if token else QiskitRuntimeService(instance=inst)
            # fractional-gate devices expose RZZ(0 < theta <= pi/2) only when asked for: needed by fold_rzz
            backend = (
                service.backend(backend, use_fractional_gates=bool(fold_rzz))
                if backend
                else service.least_busy(operational=True, simulator=False, use_fractional_gates=bool(fold_rzz))
            )
            del token
        cmap = resolve_coupling_map(backend) if restrict_couplings else None
        opts = CircuitOptions(
            fold_rzz=bool(fold_rzz),
            coupling_map=cmap,
            layout=tuple(layout) if layout else None,
            on_missing=restrict_couplings or "raise",
        )
        self.circuit_options = opts
        self.backend, self.local, self.mode = backend, local, mode
        self.optimization_level = int(optimization_level)
        self.sampler_options = dict(sampler_options or {})
        self.max_qubits = int(backend.num_qubits)
        self._ctx: Any = None

    @property
    def properties(self) -> dict[str, Any]:
        props = super().properties
        props.update(
            {
                "backend": getattr(self.backend, "name", str(self.backend)),
                "local": self.local,
                "mode": self.mode,
                "versions": {"qiskit_ibm_runtime": qiskit_ibm_runtime.__version__},
            }
        )
        return props

    # ------------------------------------------------------------------ compile and submit
    def isa_circuit(self, tmpl: DQATemplate) -> Any:
        """The template transpiled to the backend's ISA (once per template)."""
        return self._transpiled(tmpl, self.backend, self.optimization_level)

    def _primitive(self, seed: int) -> Any:
        if self.mode != "job" and self._ctx is None:
            self._ctx = (Batch if self.mode == "batch" else Session)(backend=self.backend)
        sampler = SamplerV2(
            mode=self._ctx if self._ctx is not None else self.backend, options=dict(self.sampler_options)
        )
        if self.local:
            sampler.options.simulator.seed_simulator = int(seed)
        return sampler

    def _run_chunks(
        self, tmpl: DQATemplate, values: np.ndarray, starts: list[int], shots: int, seeds: list[int]
    ) -> np.ndarray:
        isa = self.isa_circuit(tmpl)
        done: dict[int, np.ndarray] = {}
        job_ids: list[str] = []
        for st, sd in zip(starts, seeds):
            job = self._primitive(sd).run([(isa, values[st : st + self.chunk_size])], shots=shots)
            jid = job.job_id()
            job_ids.append(jid)
            logger.info(
                "ibm: submitted chunk %d (%d problems) as job %s", st, len(values[st : st + self.chunk_size]), jid
            )
            try:
                result = job.result()
            except Exception as exc:
                status = _status(job)
                raise IBMJobError(
                    f"ibm: job {jid} ended with status {status} ({exc}); {len(done)} completed chunk(s) kept "
                    "on this exception's .completed",
                    job_id=jid,
                    status=status,
                    completed=done,
                    job_ids=job_ids,
                ) from exc
            status = _status(job)
            if status in ("ERROR", "CANCELLED"):
                raise IBMJobError(
                    f"ibm: job {jid} ended with status {status}; {len(done)} completed chunk(s) kept on .completed",
                    job_id=jid,
                    status=status,
                    completed=done,
                    job_ids=job_ids,
                )
            done[st] = result[0].data.meas.to_bool_array(order="little")
        self._last_job_ids = job_ids
        return np.concatenate([done[st] for st in starts], axis=0)

    def _extra_info(self, tmpl: DQATemplate) -> dict[str, Any]:
        isa = self.isa_circuit(tmpl)
        ops = isa.count_ops()
        twoq = sum(v for k, v in ops.items() if k in ("cz", "cx", "ecr", "rzz"))
        return {
            "job_ids": list(getattr(self, "_last_job_ids", [])),
            "depth": isa.depth(),
            "two_qubit_gates": int(twoq),
            "backend_name": getattr(self.backend, "name", None),
            "local": self.local,
        }

    def close(self) -> None:
        """Close the Batch/Session (if any). Idempotent."""
        if self._ctx is not None:
            try:
                self._ctx.close()
            finally:
                self._ctx = None
        super().close()


def _status(job: Any) -> str:
    try:
        st = job.status()
    except Exception:
        return "UNKNOWN"
    return getattr(st, "name", str(st)).upper()
