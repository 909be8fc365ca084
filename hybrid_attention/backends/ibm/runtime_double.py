"""A test double of the IBM runtime service: it stands between an
:class:`~hybrid_attention.backends.ibm.sampler.IBMSampler` and the runtime as a real device would, and fails on
command.

Each submitted PUB is run at once on the sampler's own runtime primitive (local mode on the fake backend, seeded with
the chunk's seed), and its bits are kept in a directory (the "server"), so that a job outlives the client process
that submitted it, as a job on a device does. ``job(job_id)`` fetches a job back (``QiskitRuntimeService.job``);
an unknown id raises. Every submission is appended to ``submissions.log`` (one line: job id and a hash of the PUB's
values, shots and seed) so that a test counts what was submitted, across processes, and its job tags (the runtime
Sampler's ``options.environment.job_tags``) to ``jobs.jsonl``: ``jobs(job_tags=[...])`` lists the jobs carrying
all those tags, newest first (``QiskitRuntimeService.jobs``). ``instances()`` and ``active_instance()`` report one
instance on ``plan`` (``"open"``: no sessions).

**Usage model.** A finished job reports, through ``usage()`` and ``metrics()["usage"]`` as a device job does, the
QPU seconds

``usage = (per_job_seconds + C * per_circuit_seconds + C * shots * (rep_delay + circuit_seconds)) * (1 + noise * u)``

for ``C`` bindings of the PUB's circuit, ``rep_delay`` the backend's ``default_rep_delay``, ``circuit_seconds`` the
circuit's duration on the backend's target (``estimate_duration``), the overheads of ``usage_model`` (default: those
of :data:`~hybrid_attention.backends.ibm.cost.DEFAULT_MODEL`) and ``u`` in ``[-1, 1]`` fixed by the job id (default
``noise = 0.04``): the job-to-job spread of a real device's figures.

**Faults on command** (each applies to the next submissions or jobs, in this process):

* :meth:`fail_submissions`: the next ``count`` submissions answer with a transient HTTP error (default 503); with
  ``accepted=True`` the service keeps the job before the answer is lost (a gateway timeout after acceptance);
* :meth:`queue`: the next job reports ``QUEUED`` for ``polls`` status polls before it runs;
* :meth:`cancel_next`: the next job ends ``CANCELLED`` (``result()`` raises, as the runtime does);
* :meth:`time_out_next`: the next job exceeds its ``max_execution_time`` (also any job whose modelled usage does):
  it ends ``ERROR`` and ``result()`` raises ``RuntimeJobMaxTimeoutError``, its usage the limit;
* :meth:`fail_results`: the next ``count`` waits for a result fail with a transient error.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from .cost import DEFAULT_MODEL

#: what a job of the double reports when nothing else is said
_DEFAULT_USAGE = {k: DEFAULT_MODEL[k] for k in ("per_job_seconds", "per_circuit_seconds", "layer_seconds")}


class RuntimeDouble:
    """A runtime service double keeping jobs in ``root``; :meth:`attach` makes a sampler submit through it.

    Args:
        root: the server's directory.
        usage_model: ``per_job_seconds``, ``per_circuit_seconds``, ``layer_seconds`` of the usage model (module
            docstring) replacing the defaults.
        usage_noise: the relative spread of the reported usage.
        plan: the plan of the one instance (``"open"`` has no sessions).
    """

    def __init__(
        self,
        root: str | os.PathLike,
        *,
        usage_model: dict[str, float] | None = None,
        usage_noise: float = 0.04,
        plan: str = "pay-as-you-go",
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.fetched: list[str] = []
        self.listed: list[list[str]] = []  # the tag sets asked for by jobs()
        self.usage_model = {**_DEFAULT_USAGE, **(usage_model or {})}
        self.usage_noise, self.plan = float(usage_noise), plan
        self.faults: dict[str, Any] = {"submit": [], "queue": 0, "cancel": 0, "timeout": 0, "result": 0}
        self.refused = 0  # submissions answered with an error

    def attach(self, sampler: Any) -> Any:
        """Route ``sampler``'s submissions through this double, as a device (``local`` False), and collect its
        ledger's jobs here (``sampler.service``)."""
        real = sampler._primitive

        def primitive(seed: int, ctx: Any = None, **kw: Any) -> Any:
            inner = real(seed, ctx, **kw)
            inner.options.simulator.seed_simulator = int(seed)  # a device sampler is unseeded: seed it here
            return _Submitter(self, inner, seed, getattr(sampler, "backend_name", ""), sampler.backend)

        sampler._primitive = primitive
        sampler.service = self
        sampler.local = False
        return sampler

    # ------------------------------------------------------------------ faults on command
    def fail_submissions(self, count: int = 1, *, status_code: int = 503, accepted: bool = False) -> None:
        """The next ``count`` submissions fail with HTTP ``status_code``; ``accepted``: after keeping the job."""
        self.faults["submit"] += [(int(status_code), bool(accepted))] * int(count)

    def queue(self, polls: int = 3) -> None:
        """The next job reports ``QUEUED`` for ``polls`` status polls."""
        self.faults["queue"] = int(polls)

    def cancel_next(self) -> None:
        """The next job is cancelled."""
        self.faults["cancel"] += 1

    def time_out_next(self) -> None:
        """The next job exceeds its maximum execution time."""
        self.faults["timeout"] += 1

    def fail_results(self, count: int = 1, *, status_code: int = 502) -> None:
        """The next ``count`` waits for a result fail with HTTP ``status_code``."""
        self.faults["result"] += int(count)
        self._result_status = int(status_code)

    # ------------------------------------------------------------------ the "server"
    def submissions(self) -> list[tuple[str, str]]:
        """``[(job_id, pub_key)]`` of every submission so far (all processes)."""
        log = self.root / "submissions.log"
        if not log.exists():
            return []
        return [tuple(line.split()) for line in log.read_text().splitlines() if line.strip()]  # type: ignore[misc]

    def _store(self, bits: np.ndarray | None, key: str, tags: list[str], backend: str, meta: dict[str, Any]) -> str:
        job_id = f"double-{len(self.submissions()):04d}-{key[:8]}"
        if bits is not None:
            np.save(self.root / f"{job_id}.npy", bits)
        (self.root / f"{job_id}.json").write_text(json.dumps(meta))
        for name, line in (
            ("jobs.jsonl", json.dumps({"job_id": job_id, "tags": list(tags), "backend": backend})),
            ("submissions.log", f"{job_id} {key}"),
        ):
            with open(self.root / name, "a") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())
        return job_id

    def usage_seconds(self, circuit: Any, backend: Any, circuits: int, shots: int, job_id: str) -> float:
        """The usage a job reports (the module docstring's model)."""
        m = self.usage_model
        try:
            rep = float(backend.configuration().default_rep_delay)
        except Exception:
            rep = DEFAULT_MODEL["rep_delay"]
        try:
            circ = float(circuit.estimate_duration(backend.target, unit="s"))
        except Exception:
            circ = circuit.depth() * m["layer_seconds"]
        base = m["per_job_seconds"] + circuits * m["per_circuit_seconds"] + circuits * shots * (rep + circ)
        u = int(hashlib.sha256(job_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF * 2 - 1
        return float(base * (1 + self.usage_noise * u))

    def instances(self) -> list[dict[str, str]]:
        """``QiskitRuntimeService.instances``: one instance on ``plan``."""
        return [{"crn": "crn:double", "plan": self.plan, "name": "double"}]

    def active_instance(self) -> str:
        """``QiskitRuntimeService.active_instance``."""
        return "crn:double"

    def jobs(
        self, *, job_tags: list[str] | None = None, backend_name: str | None = None, limit: int | None = 10, **kw: Any
    ) -> list[DoubleJob]:
        """``QiskitRuntimeService.jobs``: the jobs carrying every tag of ``job_tags`` (on ``backend_name``), newest
        first, at most ``limit``."""
        log = self.root / "jobs.jsonl"
        rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()] if log.exists() else []
        want = set(job_tags or [])
        found = [
            r for r in reversed(rows) if want <= set(r["tags"]) and backend_name in (None, r["backend"] or backend_name)
        ]
        self.listed.append(sorted(want))
        return [self.job(r["job_id"], fetch=False) for r in found[:limit]]

    def tags(self, job_id: str) -> list[str]:
        """The tags job ``job_id`` was submitted with."""
        log = self.root / "jobs.jsonl"
        rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()] if log.exists() else []
        return next((r["tags"] for r in rows if r["job_id"] == job_id), [])

    def job(self, job_id: str, *, fetch: bool = True) -> DoubleJob:
        """``QiskitRuntimeService.job``: the job with this id; ``RuntimeError`` for an unknown id."""
        bits_path, meta_path = self.root / f"{job_id}.npy", self.root / f"{job_id}.json"
        if not bits_path.exists() and not meta_path.exists():
            raise RuntimeError(f"Job {job_id} not found")
        if fetch:
            self.fetched.append(job_id)
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {"status": "DONE"}
        return DoubleJob(job_id, np.load(bits_path) if bits_path.exists() else None, meta, self)


class _Submitter:
    def __init__(self, double: RuntimeDouble, inner: Any, seed: int, backend: str, backend_obj: Any) -> None:
        self.double, self.inner, self.seed, self.backend, self.backend_obj = double, inner, seed, backend, backend_obj

    def run(self, pubs: list[Any], shots: int) -> DoubleJob:
        from qiskit_ibm_runtime.api.exceptions import RequestsApiError

        d = self.double
        fault = d.faults["submit"].pop(0) if d.faults["submit"] else None
        if fault is not None and not fault[1]:
            d.refused += 1
            raise RequestsApiError(f"'{fault[0]} Server Error: Service Unavailable'", status_code=fault[0])
        ((circuit, values),) = pubs
        key = hashlib.sha256(np.ascontiguousarray(values, dtype=np.float64).tobytes() + f"{shots},{self.seed}".encode())
        tags = list(self.inner.options.environment.job_tags or [])  # what the runtime would store with the job
        circuits = int(np.shape(values)[0]) if np.ndim(values) > 1 else 1
        meta: dict[str, Any] = {"status": "DONE", "circuits": circuits, "shots": int(shots)}
        limit = getattr(self.inner.options, "max_execution_time", None)
        probe = f"double-{len(d.submissions()):04d}-{key.hexdigest()[:8]}"  # the id _store will give
        usage = d.usage_seconds(circuit, self.backend_obj, circuits, int(shots), probe)
        bits = None
        if d.faults["cancel"]:
            d.faults["cancel"] -= 1
            meta.update(status="CANCELLED", usage=0.0)
        elif d.faults["timeout"] or (limit and usage > limit):
            d.faults["timeout"] = max(0, d.faults["timeout"] - 1)
            meta.update(status="ERROR", reason="max_execution_time", usage=float(limit or usage))
        else:
            bits = self.inner.run(pubs, shots=shots).result()[0].data.meas.to_bool_array(order="little")
            meta["usage"] = usage
        job_id = d._store(bits, key.hexdigest(), tags, self.backend, meta)
        job = DoubleJob(job_id, bits, meta, d, queued=d.faults["queue"])
        d.faults["queue"] = 0
        if fault is not None:  # accepted, then the answer was lost
            d.refused += 1
            raise RequestsApiError(f"'{fault[0]} Server Error: Gateway Time-out'", status_code=fault[0])
        return job


class DoubleJob:
    """A job of the double: ``job_id()``, ``status()``, ``result()`` shaped like a SamplerV2 result, ``usage()`` and
    ``metrics()`` as ``RuntimeJobV2`` has them."""

    def __init__(
        self,
        job_id: str,
        bits: np.ndarray | None,
        meta: dict[str, Any] | None = None,
        double: Any = None,
        queued: int = 0,
    ) -> None:
        self._id, self._bits, self._meta, self._double, self._queued = (
            job_id,
            bits,
            meta or {"status": "DONE"},
            double,
            queued,
        )

    def job_id(self) -> str:
        return self._id

    def status(self) -> str:
        if self._queued > 0:
            self._queued -= 1
            return "QUEUED"
        return str(self._meta.get("status", "DONE"))

    def result(self) -> list[Any]:
        from qiskit.primitives import BitArray
        from qiskit_ibm_runtime.api.exceptions import RequestsApiError
        from qiskit_ibm_runtime.exceptions import RuntimeInvalidStateError, RuntimeJobMaxTimeoutError

        d = self._double
        if d is not None and d.faults["result"]:
            d.faults["result"] -= 1
            raise RequestsApiError("'502 Server Error: Bad Gateway'", status_code=getattr(d, "_result_status", 502))
        while self.status() == "QUEUED":  # a device job waits in the queue
            pass
        status = self.status()
        if status == "CANCELLED":
            raise RuntimeInvalidStateError(f"Unable to retrieve result for job {self._id}. Job was cancelled.")
        if status == "ERROR":
            raise RuntimeJobMaxTimeoutError(f"Job {self._id} ran longer than its maximum execution time")
        meas = BitArray.from_bool_array(self._bits, order="little")
        return [SimpleNamespace(data=SimpleNamespace(meas=meas))]

    def usage(self) -> float:
        """``RuntimeJobV2.usage``: QPU seconds billed (the module docstring's model)."""
        return float(self._meta.get("usage", 0.0))

    def metrics(self) -> dict[str, Any]:
        """``RuntimeJobV2.metrics``: usage (and an empty timestamps record)."""
        u = self.usage()
        return {"timestamps": {}, "usage": {"quantum_seconds": u, "qpu_charge_time_seconds": u, "status": "complete"}}
