"""A test double of the IBM runtime service for the job-ledger tests: it stands between an
:class:`~hybrid_attention.backends.ibm.sampler.IBMSampler` and the runtime as a real device would.

Each submitted PUB is run at once on the sampler's own runtime primitive (local mode on the fake backend, seeded with
the chunk's seed), and its bits are kept in a directory (the "server"), so that a job outlives the client process
that submitted it, as a job on a device does. ``job(job_id)`` fetches a job back (``QiskitRuntimeService.job``);
an unknown id raises. Every submission is appended to ``submissions.log`` (one line: job id and a hash of the PUB's
values, shots and seed) so that a test counts what was submitted, across processes, and its job tags (the runtime
Sampler's ``options.environment.job_tags``) to ``jobs.jsonl``: ``jobs(job_tags=[...])`` lists the jobs carrying
all those tags, newest first (``QiskitRuntimeService.jobs``).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np


class RuntimeDouble:
    """A runtime service double keeping jobs in ``root``; :meth:`attach` makes a sampler submit through it."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.fetched: list[str] = []
        self.listed: list[list[str]] = []  # the tag sets asked for by jobs()

    def attach(self, sampler: Any) -> Any:
        """Route ``sampler``'s submissions through this double, as a device (``local`` False), and collect its
        ledger's jobs here (``sampler.service``)."""
        real = sampler._primitive

        def primitive(seed: int, ctx: Any = None, **kw: Any) -> Any:
            inner = real(seed, ctx, **kw)
            inner.options.simulator.seed_simulator = int(seed)  # a device sampler is unseeded: seed it here
            return _Submitter(self, inner, seed, getattr(sampler, "backend_name", ""))

        sampler._primitive = primitive
        sampler.service = self
        sampler.local = False
        return sampler

    # ------------------------------------------------------------------ the "server"
    def submissions(self) -> list[tuple[str, str]]:
        """``[(job_id, pub_key)]`` of every submission so far (all processes)."""
        log = self.root / "submissions.log"
        if not log.exists():
            return []
        return [tuple(line.split()) for line in log.read_text().splitlines() if line.strip()]  # type: ignore[misc]

    def _store(self, bits: np.ndarray, key: str, tags: list[str] = (), backend: str = "") -> str:
        job_id = f"double-{len(self.submissions()):04d}-{key[:8]}"
        np.save(self.root / f"{job_id}.npy", bits)
        for name, line in (
            ("jobs.jsonl", json.dumps({"job_id": job_id, "tags": list(tags), "backend": backend})),
            ("submissions.log", f"{job_id} {key}"),
        ):
            with open(self.root / name, "a") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())
        return job_id

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
        path = self.root / f"{job_id}.npy"
        if not path.exists():
            raise RuntimeError(f"Job {job_id} not found")
        if fetch:
            self.fetched.append(job_id)
        return DoubleJob(job_id, np.load(path))


class _Submitter:
    def __init__(self, double: RuntimeDouble, inner: Any, seed: int, backend: str = "") -> None:
        self.double, self.inner, self.seed, self.backend = double, inner, seed, backend

    def run(self, pubs: list[Any], shots: int) -> DoubleJob:
        ((circuit, values),) = pubs
        bits = self.inner.run(pubs, shots=shots).result()[0].data.meas.to_bool_array(order="little")
        key = hashlib.sha256(np.ascontiguousarray(values, dtype=np.float64).tobytes() + f"{shots},{self.seed}".encode())
        tags = list(self.inner.options.environment.job_tags or [])  # what the runtime would store with the job
        return DoubleJob(self.double._store(bits, key.hexdigest(), tags, self.backend), bits)


class DoubleJob:
    """A finished job: ``job_id()``, ``status()`` (``"DONE"``) and ``result()`` shaped like a SamplerV2 result."""

    def __init__(self, job_id: str, bits: np.ndarray) -> None:
        self._id, self._bits = job_id, bits

    def job_id(self) -> str:
        return self._id

    def status(self) -> str:
        return "DONE"

    def result(self) -> list[Any]:
        from qiskit.primitives import BitArray

        meas = BitArray.from_bool_array(self._bits, order="little")
        return [SimpleNamespace(data=SimpleNamespace(meas=meas))]
