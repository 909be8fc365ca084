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

import difflib
import logging
import os
import re
import warnings
from typing import Any

import numpy as np
import qiskit_ibm_runtime
from qiskit_ibm_runtime import Batch, QiskitRuntimeService, Session

from hybrid_attention.checks import check_positive_int
from hybrid_attention.circuits.program import CircuitOptions, DQAProgram, resolve_coupling_map
from hybrid_attention.circuits.qiskit_dqa import DQATemplate
from hybrid_attention.circuits.schedule import DQASchedule

from .base import progress
from .circuit import CircuitSampler
from .ledger import JobLedger, LedgerEntry, circuit_text, pub_sha256
from .mitigation import calibration_circuits, measured_qubits
from .qpu_cost import circuit_seconds, qpu_seconds, rep_delay_of

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

logger = logging.getLogger(__name__)

_MODES = ("auto", "job", "batch", "session")
_DD_SEQUENCES = ("XX", "XpXm", "XY4")


class IBMJobError(RuntimeError):
    """A runtime job failed or was cancelled, or a chunk could not be submitted.

    Attributes:
        job_id: the failed job's id (``None``: the submission itself was refused).
        status: its final status string (``"NOT_SUBMITTED"`` for a refused submission).
        completed: ``{chunk_start: bits (C, shots, n)}`` of the chunks that finished (kept so a caller can resume
            without paying for them again; in a batch this includes chunks submitted after the failed one).
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


def runtime_sampler() -> tuple[type, str]:
    """``(class, kind)`` of the runtime Sampler this installation offers: ``kind = "executor"`` for the client-side
    ``qiskit_ibm_runtime.executor_sampler.Sampler`` (>= 0.50), else ``"legacy"`` for ``qiskit_ibm_runtime.SamplerV2``.

    Example:
        >>> from hybrid_attention.backends.ibm import runtime_sampler
        >>> runtime_sampler()[1] in ("executor", "legacy")
        True
    """
    try:
        from qiskit_ibm_runtime.executor_sampler import Sampler
    except ImportError:  # an older runtime (or one without samplomatic): the server-side primitive
        from qiskit_ibm_runtime import SamplerV2

        return SamplerV2, "legacy"
    return Sampler, "executor"


# ---------------------------------------------------------------------- fake backends by name
def _fake_classes() -> dict[str, type]:
    """``{backend_name: class}`` of the fake backends (``FakeTorino.backend_name == "fake_torino"``)."""
    from qiskit_ibm_runtime import fake_provider
    from qiskit_ibm_runtime.fake_provider.fake_backend import FakeBackendV2

    out = {}
    for attr in dir(fake_provider):
        obj = getattr(fake_provider, attr)
        if attr.startswith("Fake") and isinstance(obj, type) and issubclass(obj, FakeBackendV2):
            out[str(getattr(obj, "backend_name", attr))] = obj
    return out


def fake_backend_names() -> list[str]:
    """Names of the runtime's fake backends (``qiskit_ibm_runtime.fake_provider``), e.g. ``"fake_torino"``.

    Example:
        >>> from hybrid_attention.backends.ibm import fake_backend_names
        >>> {"fake_torino", "fake_manila", "fake_fractional"} <= set(fake_backend_names())
        True
    """
    return sorted(_fake_classes())


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def fake_backend(name: str) -> Any:
    """The fake backend called ``name``: ``"fake_torino"``, ``"FakeTorino"`` or ``"fake_manila_v2"`` all work (case,
    ``_`` / ``-`` and a ``V2`` suffix are ignored; the class name works too: ``"FakeFractionalBackend"``).

    Raises:
        ValueError: no fake backend has that name; the message lists the close matches.

    Example:
        >>> from hybrid_attention.backends.ibm import fake_backend
        >>> fake_backend("FakeManilaV2").name, fake_backend("fake_manila").num_qubits
        ('fake_manila', 5)
    """
    if not isinstance(name, str):
        raise TypeError(f"a fake backend name must be a string, got {type(name).__name__}")
    classes = _fake_classes()
    key = _norm(name)
    for bname, cls in classes.items():  # the backend name, or the class name with or without its V2 suffix
        cname = _norm(cls.__name__)
        if key in (_norm(bname), cname, cname.removesuffix("v2"), _norm(bname) + "v2"):
            return cls()
    close = difflib.get_close_matches(name.lower().replace("-", "_"), list(classes), n=5, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ValueError(
        f"ibm: no fake backend named {name!r}{hint} (qiskit_ibm_runtime.fake_provider has {len(classes)}: "
        "see hybrid_attention.backends.ibm.fake_backend_names())"
    )


def is_fake_backend_name(name: str) -> bool:
    """Whether ``name`` means a fake backend (starts with ``fake``, any case): resolved offline, never a device."""
    return _norm(name).startswith("fake")


# ---------------------------------------------------------------------- fractional gates
def has_fractional_rzz(backend: Any) -> bool:
    """Whether the backend's native ``rzz`` has angle bounds that exclude negative angles (IBM's fractional
    ``RZZ(0 <= theta <= pi/2)``): the DQA circuit must then be emitted with folded RZZ. False for targets without
    ``rzz`` or with an unrestricted one (``AerSimulator``).

    Example:
        >>> from hybrid_attention.backends.ibm import fake_backend, has_fractional_rzz
        >>> has_fractional_rzz(fake_backend("fake_fractional")), has_fractional_rzz(fake_backend("fake_torino"))
        (True, False)
    """
    target = getattr(backend, "target", None)
    if target is None or "rzz" not in target.operation_names:
        return False
    if not hasattr(target, "gate_has_angle_bounds"):  # qiskit < 2.0: no angle bounds; IBM's fractional RZZ has them
        return True
    return bool(target.gate_has_angle_bounds("rzz")) and not target.supported_angle_bound("rzz", [-0.1])


def _rzz_angles(isa: Any, values: np.ndarray) -> np.ndarray:
    """Every bound angle of the ISA circuit's ``rzz`` gates over the rows of ``values (C, P)`` (flat)."""
    column = {p: i for i, p in enumerate(isa.parameters)}
    out = []
    for ins in isa.data:
        if ins.operation.name != "rzz":
            continue
        par = ins.operation.params[0]
        if par in column:
            out.append(values[:, column[par]])
        elif getattr(par, "parameters", None):  # an expression of parameters
            out.append(np.array([float(par.bind({p: row[column[p]] for p in par.parameters})) for row in values]))
        else:
            out.append(np.array([float(par)]))
    return np.concatenate(out) if out else np.zeros(0)


def _check_rzz_angles(isa: Any, values: np.ndarray, backend: Any) -> None:
    """``ValueError`` before any submission when a bound ``rzz`` angle lies outside the target's angle bounds."""
    target = backend.target
    for a in np.unique(np.round(_rzz_angles(isa, values), 12)):
        if not target.supported_angle_bound("rzz", [float(a)]):
            raise ValueError(
                f"ibm: backend {getattr(backend, 'name', backend)!r} rejects RZZ({float(a):.6g}) (fractional gates "
                "take angles in [0, pi/2]); nothing was submitted. Use fold_rzz=True (or None: automatic), which "
                "folds every angle into [0, pi/2] (needs |2 beta dt B J| <= pi/2), or a backend without fractional gates"
            )


def _is_local(backend: Any) -> bool:
    """Fake backends and plain simulators run in the runtime's local mode."""
    mod = type(backend).__module__
    return "fake_provider" in mod or mod.startswith("qiskit_aer") or "fake" in type(backend).__name__.lower()


def _resolve_backend(
    backend: Any, *, allow_hardware: bool, instance: str | None, fractional: bool
) -> tuple[Any, bool, Any]:
    """``(backend object, local, service or None)``: a fake name is resolved offline; a device name or ``None`` needs
    the opt-in and credentials (both checked before the service is contacted)."""
    if isinstance(backend, str) and is_fake_backend_name(backend):
        return fake_backend(backend), True, None
    if backend is not None and not isinstance(backend, str) and not hasattr(backend, "target"):
        raise TypeError(
            f"ibm: backend must be a BackendV2, a device or fake-backend name, or None, got {type(backend).__name__}"
        )
    if backend is not None and not isinstance(backend, str) and _is_local(backend):
        return backend, True, None
    if not allow_hardware:
        raise ValueError(
            "ibm: submitting to a real IBM Quantum device needs the explicit opt-in allow_hardware=True "
            "(QPU time is billed); pass a fake backend such as 'fake_torino' (or FakeTorino()) to run offline"
        )
    if isinstance(backend, (str, type(None))):
        if not has_credentials():
            raise RuntimeError(
                "ibm: no IBM Quantum credentials found: set QISKIT_IBM_TOKEN (and QISKIT_IBM_INSTANCE) or "
                "save an account with QiskitRuntimeService.save_account(token=..., instance=...)"
            )
        token = os.environ.get("QISKIT_IBM_TOKEN")
        inst = instance or os.environ.get("QISKIT_IBM_INSTANCE")
        service = QiskitRuntimeService(token=token, instance=inst) if token else QiskitRuntimeService(instance=inst)
        del token
        # fractional-gate devices expose RZZ(0 <= theta <= pi/2) only when asked for: needed by fold_rzz=True
        backend = (
            service.backend(backend, use_fractional_gates=fractional)
            if backend
            else service.least_busy(operational=True, simulator=False, use_fractional_gates=fractional)
        )
        return backend, False, service
    return backend, False, getattr(backend, "service", None)


class IBMSampler(CircuitSampler):
    """DQA circuits through qiskit-ibm-runtime's Sampler (client-side executor-based, or legacy ``SamplerV2``).

    Args:
        backend: a fake backend name (``"fake_torino"``: offline, local mode; see :func:`fake_backend_names`), a
            backend object (``FakeTorino()``, ``AerSimulator()``: local mode), a device name (``"ibm_torino"``), or
            ``None`` for the least busy operational device (real devices need credentials and ``allow_hardware=True``).
        schedule: the :class:`DQASchedule`.
        mode: ``"auto"`` (a ``Batch`` for calls of more than one chunk, else job mode), ``"job"`` (one job per chunk),
            ``"batch"`` (one ``Batch`` kept until :meth:`close`) or ``"session"`` (a ``Session``, closed by :meth:`close`).
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
        chunk_size, default_num_reads: see :class:`~hybrid_attention.backends.circuit.CircuitSampler`.
        sampler_options: options of the runtime Sampler (e.g. ``{"dynamical_decoupling": {"enable": True}}``),
            checked here against the primitive's option schema.
        ledger: a job ledger (a ``.jsonl`` path or a :class:`~hybrid_attention.backends.ledger.JobLedger`): every
            PUB is recorded before its result is awaited, and a PUB the ledger already holds is never submitted
            again (its stored bits are read, or its job is collected by id; see :mod:`.ledger`). Calls are
            resumable when their ``seed`` is fixed (the seed is part of a PUB's identity). ``None``: no ledger.
        service: what collects a ledger's jobs by id (``service.job(job_id)``): default the service the device
            came from, or a new ``QiskitRuntimeService`` when first needed.
        max_qpu_seconds: on a real device, a call whose estimated QPU time (:meth:`estimate`) exceeds this many
            seconds is refused (``ValueError``) before anything is submitted; ``None``: no limit. Ignored offline.
        qpu_model: keywords of :func:`~hybrid_attention.backends.qpu_cost.qpu_seconds` replacing its defaults
            (e.g. a measured ``per_circuit_seconds``).
        dynamical_decoupling: ``None`` (off) or a sequence, ``"XX"``, ``"XpXm"`` or ``"XY4"``: the runtime Sampler's
            ``dynamical_decoupling`` option (applied by the client-side Sampler, so in local mode too; the legacy
            ``SamplerV2`` ignores it in local mode, with a warning).
        twirling: Pauli twirling of the two-qubit gates and of the measurements through the runtime Sampler's
            ``twirling`` option (``enable_gates``, ``enable_measure``; randomisations ``"auto"``); same scope.
        readout_mitigation: mitigate read-out errors (:mod:`.mitigation`, mthree): the SampleSet holds every
            configuration weighted by its mitigated probability. The calibration (2 circuits x
            ``calibration_shots``) runs through this sampler's route (ledger, estimate) once per measured qubit set.
        calibration_shots: shots per calibration circuit.

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

    def __init__(
        self,
        backend: Any = None,
        *,
        schedule: DQASchedule | None = None,
        mode: str = "auto",
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
        dynamical_decoupling: str | None = None,
        twirling: bool = False,
        readout_mitigation: bool = False,
        calibration_shots: int = 8192,
    ) -> None:
        super().__init__(schedule=schedule, chunk_size=chunk_size, default_num_reads=default_num_reads)
        if ledger is not None and not isinstance(ledger, (str, os.PathLike, JobLedger)):
            raise TypeError(f"ibm: ledger must be a path or a JobLedger, got {type(ledger).__name__}")
        if mode not in _MODES:
            raise ValueError(f"ibm: mode must be one of {_MODES}, got {mode!r}")
        if restrict_couplings not in (None, "raise", "drop"):
            raise ValueError(f"ibm: restrict_couplings must be None, 'raise' or 'drop', got {restrict_couplings!r}")
        if fold_rzz not in (None, True, False):
            raise TypeError(f"ibm: fold_rzz must be True, False or None (automatic), got {fold_rzz!r}")
        backend, local, found = _resolve_backend(
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
        self.backend, self.local, self.mode, self.fractional = backend, local, mode, fractional
        self.optimization_level = int(optimization_level)
        self._sampler_cls, self.primitive = runtime_sampler()
        self.sampler_options = _suppression_options(dict(sampler_options or {}), dynamical_decoupling, twirling)
        self.dynamical_decoupling, self.twirling = dynamical_decoupling, bool(twirling)
        if not isinstance(readout_mitigation, bool):
            raise TypeError(f"ibm: readout_mitigation must be True or False, got {readout_mitigation!r}")
        self.readout_mitigation = readout_mitigation
        self.calibration_shots = check_positive_int(calibration_shots, "ibm: calibration_shots")
        self._calibrations: dict[tuple[int, ...], dict[str, Any]] = {}
        try:  # the option schema is the primitive's: check it now, not at the first submission
            self._sampler_cls(mode=backend, options=dict(self.sampler_options))
        except Exception as exc:
            raise ValueError(f"ibm: sampler_options {self.sampler_options!r} rejected by the runtime: {exc}") from exc
        self.max_qubits = int(backend.num_qubits)
        self._ctx: Any = None
        self._last: dict[str, Any] = {"job_ids": [], "mode": None, "resumed": 0}
        self._texts: dict[int, tuple[Any, str]] = {}  # id(ISA circuit) -> (circuit, its QASM text) for PUB hashes

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
        would transpile differently."""
        if self.ledger is None or tmpl in self._isa:
            return self._transpiled(tmpl, self.backend, self.optimization_level)
        import hashlib

        from qiskit import qpy

        layout = list(self.circuit_options.layout[: tmpl.n]) if self.circuit_options.layout else None
        key = hashlib.sha256(
            f"{circuit_text(tmpl.circuit)}|{self.backend_name}|{self.optimization_level}|{layout}".encode()
        ).hexdigest()
        path = self.ledger.path.with_name(self.ledger.path.name + ".isa") / f"{key}.qpy"
        if path.exists():
            with open(path, "rb") as f:
                isa = qpy.load(f)[0]
            if isa.num_parameters != tmpl.num_parameters:
                raise ValueError(f"ibm: the stored ISA circuit {str(path)!r} does not fit its template")
            self._isa[tmpl] = isa
            return isa
        isa = self._transpiled(tmpl, self.backend, self.optimization_level)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            qpy.dump(isa, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return isa

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
            _check_rzz_angles(isa, values, self.backend)
        ctx = self._context(2)[0] if self.mode in ("batch", "session") else None
        pub = self._submit(isa, values, int(shots), int(seed), ctx)
        try:
            return self._collect(pub), pub.job_id
        except Exception as exc:
            if isinstance(exc, IBMJobError):
                raise
            raise IBMJobError(
                f"ibm: job {pub.job_id} ended with status {_status(pub.job)} ({exc})",
                job_id=pub.job_id,
                status=_status(pub.job),
                completed={},
                job_ids=[pub.job_id],
            ) from exc

    # ------------------------------------------------------------------ cost
    def isa_stats(self, isa: Any) -> dict[str, Any]:
        """``depth``, ``two_qubit_gates`` and ``circuit_seconds`` (duration of one execution from the device's
        instruction durations, ``None`` when unknown) of an ISA circuit."""
        ops = isa.count_ops()
        return {
            "depth": int(isa.depth()),
            "two_qubit_gates": int(sum(v for k, v in ops.items() if k in ("cz", "cx", "ecr", "rzz"))),
            "circuit_seconds": circuit_seconds(isa, self.backend),
        }

    def cost(self, isa: Any, *, jobs: int, circuits: int, shots: int) -> dict[str, Any]:
        """The estimate of ``jobs`` jobs (one PUB each) running ``circuits`` bindings of ``isa`` for ``shots`` shots
        each: the keys of :meth:`estimate`."""
        st = self.isa_stats(isa)
        model = {"rep_delay": rep_delay_of(self.backend), "circuit_seconds": st["circuit_seconds"], **self.qpu_model}
        secs = qpu_seconds(circuits=int(circuits), shots=int(shots), depth=st["depth"], jobs=int(jobs), **model)
        return {
            "jobs": int(jobs),
            "pubs": int(jobs),
            "circuits": int(circuits),
            "shots": int(circuits) * int(shots),
            "depth": st["depth"],
            "two_qubit_gates": st["two_qubit_gates"],
            "qpu_seconds": secs,
        }

    def estimate(self, problem: Any, num_reads: int | None = None) -> dict[str, Any]:
        """What :meth:`sample` would submit for ``problem`` with ``num_reads`` shots, without submitting anything.

        Args:
            problem: an :class:`~hybrid_attention.IsingProblem` (any batch shape).
            num_reads: shots per problem (default ``default_num_reads``).

        Returns:
            ``{"jobs", "pubs", "circuits", "shots", "depth", "two_qubit_gates", "qpu_seconds"}``: jobs and PUBs (one
            PUB per chunk of ``chunk_size`` problems, one job per PUB), circuits (parameter bindings: one per
            problem), shots in all (circuits x reads), depth and two-qubit gates of the ISA circuit, and the
            estimated QPU seconds (:mod:`~hybrid_attention.backends.qpu_cost`).

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
        est = self.cost(isa, jobs=-(-B // self.chunk_size), circuits=B, shots=shots)
        if self.readout_mitigation and tuple(measured_qubits(isa)) not in self._calibrations:
            zeros, _ = calibration_circuits(self.max_qubits, measured_qubits(isa))
            cal = self.cost(zeros, jobs=2, circuits=2, shots=self.calibration_shots)
            est = {**est, **{k: est[k] + cal[k] for k in ("jobs", "pubs", "circuits", "shots", "qpu_seconds")}}
            est["calibration"] = {k: cal[k] for k in ("jobs", "circuits", "shots", "qpu_seconds")}
        return est

    def check_budget(self, est: dict[str, Any]) -> None:
        """Refuse (``ValueError``, nothing submitted) an estimate above ``max_qpu_seconds`` on a real device."""
        if self.local or self.max_qpu_seconds is None or est["qpu_seconds"] <= self.max_qpu_seconds:
            return
        raise ValueError(
            f"ibm: the call is estimated at {est['qpu_seconds']:,.1f} QPU seconds ({est['jobs']} job(s), "
            f"{est['circuits']:,} circuit(s), {est['shots']:,} shots) on {self.backend_name}, above max_qpu_seconds = "
            f"{self.max_qpu_seconds:g}; nothing was submitted (raise max_qpu_seconds on purpose: QPU time is billed)"
        )

    def _sample(self, problem: Any, *, num_reads: int | None, seed: Any, **options: Any) -> Any:
        if not self.local and self.max_qpu_seconds is not None:
            self.check_budget(self.estimate(problem, num_reads))
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
        for k, circ in enumerate(calibration_circuits(self.max_qubits, list(qubits))):
            pub = self._submit(circ, np.zeros((1, 0)), self.calibration_shots, 7919 + k, None)
            bits.append(self._collect(pub).reshape(-1, len(qubits)))
        cal = {"matrices": assignment_matrices(*bits), "qubits": qubits, "shots": self.calibration_shots}
        self._calibrations[qubits] = cal
        return {**cal, "ran": True}

    # ------------------------------------------------------------------ the ledger
    @property
    def backend_name(self) -> str:
        """The backend's name (as the ledger records it)."""
        return str(getattr(self.backend, "name", self.backend))

    def _pub_hash(self, isa: Any, values: np.ndarray, shots: int, seed: int) -> str:
        key = id(isa)
        if key not in self._texts or self._texts[key][0] is not isa:
            self._texts[key] = (isa, circuit_text(isa))
        return pub_sha256(self._texts[key][1], values, shots, seed)

    def _submit(self, isa: Any, values: np.ndarray, shots: int, seed: int, ctx: Any) -> _Pub:
        """Submit one PUB, or find it in the ledger: its stored bits, or its job collected by id (device)."""
        if self.ledger is None:
            job = self._primitive(seed, ctx).run([(isa, values)], shots=shots)
            return _Pub(None, job, job.job_id(), None, shots)
        pub = self._pub_hash(isa, values, shots, seed)
        entry = self.ledger.lookup(pub, self.backend_name)
        if entry is not None:
            found = self._resume(entry)
            if found is not None:
                self._last["resumed"] = self._last.get("resumed", 0) + 1
                return found
        job = self._primitive(seed, ctx).run([(isa, values)], shots=shots)
        jid = job.job_id()
        self.ledger.record("submitted", job_id=jid, backend=self.backend_name, pub_sha256=pub, shots=shots)
        return _Pub(pub, job, jid, None, shots)

    def _resume(self, entry: LedgerEntry) -> _Pub | None:
        """The PUB of a ledger entry without submitting it, or ``None`` when it must be submitted (again)."""
        where = f"ledger {str(self.ledger.path)!r} line {entry.line}"
        if entry.event == "completed":
            bits = self.ledger.load_bits(entry.pub_sha256)
            if bits is not None:
                logger.info("ibm: PUB %s read from %s (job %s)", entry.pub_sha256[:12], where, entry.job_id)
                return _Pub(entry.pub_sha256, None, entry.job_id, bits, entry.shots)
        if entry.event == "failed":
            warnings.warn(f"ibm: {where}: job {entry.job_id} failed; its PUB is submitted again", stacklevel=4)
            return None
        if self.local:  # a local-mode job lived in the process that ran it
            warnings.warn(
                f"ibm: {where}: job {entry.job_id} ({entry.event}) has no stored bits and local-mode jobs cannot be "
                "fetched back; its PUB is run again locally (free; the same seed gives the same bits)",
                stacklevel=4,
            )
            return None
        try:
            job = self._runtime_service().job(entry.job_id)
        except Exception as exc:
            raise IBMJobError(
                f"ibm: {where}: job {entry.job_id} on {entry.backend} could not be fetched from the runtime service "
                f"({exc}); nothing was submitted. If that job is lost, move the ledger aside to submit its PUBs again",
                job_id=entry.job_id,
                status="UNKNOWN",
                completed={},
                job_ids=[entry.job_id],
            ) from exc
        logger.info("ibm: PUB %s collected by job id %s (%s)", entry.pub_sha256[:12], entry.job_id, where)
        return _Pub(entry.pub_sha256, job, entry.job_id, None, entry.shots)

    def _runtime_service(self) -> Any:
        if self.service is None:
            token = os.environ.get("QISKIT_IBM_TOKEN")
            inst = self.instance or os.environ.get("QISKIT_IBM_INSTANCE")
            self.service = (
                QiskitRuntimeService(token=token, instance=inst) if token else QiskitRuntimeService(instance=inst)
            )
        return self.service

    def _collect(self, pub: _Pub) -> np.ndarray:
        """The bits ``(B, shots, Q)`` of a submitted (or resumed) PUB; the ledger records the outcome. Raises what
        ``job.result()`` raises, or :class:`IBMJobError` for a job that ended in error or was cancelled."""
        if pub.bits is not None:
            return pub.bits
        try:
            result = pub.job.result()
        except Exception:
            self._record("failed", pub, status=_status(pub.job))
            raise
        status = _status(pub.job)
        if status in ("ERROR", "CANCELLED"):
            self._record("failed", pub, status=status)
            raise IBMJobError(
                f"ibm: job {pub.job_id} ended with status {status}",
                job_id=pub.job_id,
                status=status,
                completed={},
                job_ids=[pub.job_id],
            )
        bits = result[0].data.meas.to_bool_array(order="little")
        if self.ledger is not None and pub.sha is not None:
            self.ledger.store_bits(pub.sha, bits)
            self._record("completed", pub)
        return bits

    def _record(self, event: str, pub: _Pub, **extra: Any) -> None:
        if self.ledger is not None and pub.sha is not None:
            self.ledger.record(
                event, job_id=pub.job_id, backend=self.backend_name, pub_sha256=pub.sha, shots=pub.shots, **extra
            )

    def _context(self, chunks: int) -> tuple[Any, bool]:
        """``(Batch/Session or None, opened for this call only)`` for a call of ``chunks`` chunks."""
        if self.mode == "job" or (self.mode == "auto" and chunks < 2):
            return None, False
        if self.mode == "auto":
            return Batch(backend=self.backend), True
        if self._ctx is None:
            self._ctx = (Batch if self.mode == "batch" else Session)(backend=self.backend)
        return self._ctx, False

    def _primitive(self, seed: int, ctx: Any = None) -> Any:
        sampler = self._sampler_cls(mode=ctx if ctx is not None else self.backend, options=dict(self.sampler_options))
        if self.local:
            sampler.options.simulator.seed_simulator = int(seed)
        return sampler

    def _run_chunks(
        self, tmpl: DQATemplate, values: np.ndarray, starts: list[int], shots: int, seeds: list[int]
    ) -> np.ndarray:
        isa = self.isa_circuit(tmpl)
        if self.fractional:  # the device's angle bounds, checked for every chunk before the first submission
            _check_rzz_angles(isa, values, self.backend)
        ctx, own = self._context(len(starts))
        kind = (
            "job"
            if ctx is None
            else ("session" if isinstance(ctx, Session) and not isinstance(ctx, Batch) else "batch")
        )
        self._last = {"job_ids": [], "mode": kind, "resumed": 0}
        try:
            return self._submit_and_collect(isa, values, starts, shots, seeds, ctx)
        finally:
            if own:
                ctx.close()

    def _submit_and_collect(
        self, isa: Any, values: np.ndarray, starts: list[int], shots: int, seeds: list[int], ctx: Any
    ) -> np.ndarray:
        """Submit the chunks (all before the first wait in a batch/session on a device, else one at a time) and
        collect their bits; :class:`IBMJobError` after collecting every submitted job if one failed."""
        ahead = len(starts) if (ctx is not None and not self.local) else 1
        done: dict[int, np.ndarray] = {}
        job_ids: list[str] = self._last["job_ids"]
        pending: list[tuple[int, Any]] = []
        failure: tuple[str | None, str, Exception | None] | None = None
        todo = list(zip(starts, seeds))
        bar = progress(range(len(starts)), len(starts), self.name)
        for _ in bar:
            while todo and len(pending) < ahead and failure is None:
                st, sd = todo.pop(0)
                chunk = values[st : st + self.chunk_size]
                try:
                    pub = self._submit(isa, chunk, shots, sd, ctx)
                except IBMJobError:  # a ledger job that cannot be collected: nothing is submitted
                    raise
                except Exception as e:  # refused at submission: keep what the jobs already submitted return
                    failure = (None, "NOT_SUBMITTED", e)
                    break
                job_ids.append(pub.job_id)
                logger.info("ibm: chunk %d (%d problems): job %s", st, len(chunk), job_ids[-1])
                pending.append((st, pub))
            if not pending:
                break
            st, pub = pending.pop(0)
            try:
                done[st] = self._collect(pub)
            except IBMJobError as e:
                failure = failure or (pub.job_id, e.status, None)
            except Exception as e:
                failure = failure or (pub.job_id, _status(pub.job), e)
        if failure is not None:
            jid, status, exc = failure
            why = f" ({exc})" if exc is not None else ""
            what = f"job {jid} ended with status {status}" if jid is not None else "a chunk could not be submitted"
            raise IBMJobError(
                f"ibm: {what}{why}; {len(done)} completed chunk(s) kept on this exception's .completed",
                job_id=jid,
                status=status,
                completed=done,
                job_ids=job_ids,
            ) from exc
        return np.concatenate([done[st] for st in starts], axis=0)

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
        if self._ctx is not None:
            try:
                self._ctx.close()
            finally:
                self._ctx = None
        super().close()


class _Pub:
    """One PUB of a call: its ledger hash (``None`` without a ledger), the job (``None`` when read from the ledger),
    the job id and the bits when already known."""

    __slots__ = ("sha", "job", "job_id", "bits", "shots")

    def __init__(self, sha: str | None, job: Any, job_id: str, bits: np.ndarray | None, shots: int = 0) -> None:
        self.sha, self.job, self.job_id, self.bits, self.shots = sha, job, str(job_id), bits, int(shots)


def _suppression_options(opts: dict[str, Any], dd: str | None, twirling: bool) -> dict[str, Any]:
    """``sampler_options`` with the first-class error-suppression options merged in (a conflict raises)."""
    if dd is not None:
        if dd not in _DD_SEQUENCES:
            raise ValueError(f"ibm: dynamical_decoupling must be None or one of {_DD_SEQUENCES}, got {dd!r}")
        if "dynamical_decoupling" in opts:
            raise ValueError("ibm: give dynamical decoupling once: dynamical_decoupling= or sampler_options, not both")
        opts["dynamical_decoupling"] = {"enable": True, "sequence_type": dd}
    if not isinstance(twirling, bool):
        raise TypeError(f"ibm: twirling must be True or False, got {twirling!r}")
    if twirling:
        if "twirling" in opts:
            raise ValueError("ibm: give twirling once: twirling=True or sampler_options['twirling'], not both")
        opts["twirling"] = {"enable_gates": True, "enable_measure": True}
    return opts


def _status(job: Any) -> str:
    try:
        st = job.status()
    except Exception:
        return "UNKNOWN"
    return getattr(st, "name", str(st)).upper()
