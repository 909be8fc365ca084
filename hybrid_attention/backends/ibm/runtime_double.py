"""A test double of the IBM runtime service for the job-ledger tests: it stands between an
:class:`~hybrid_attention.backends.ibm.sampler.IBMSampler` and the runtime as a real device would.

Each submitted PUB is run at once on the sampler's own runtime primitive (local mode on the fake backend, seeded with
the chunk's seed), and its bits are kept in a directory (the "server"), so that a job outlives the client process
that submitted it, as a job on a device does. ``job(job_id)`` fetches a job back (``QiskitRuntimeService.job``);
an unknown id raises. Every submission is appended to ``submissions.log`` (one line: job id and a hash of the PUB's
values, shots and seed) so that a test counts what was submitted, across processes.
"""

from __future__ import annotations

import hashlib
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

    def attach(self, sampler: Any) -> Any:
        """Route ``sampler``'s submissions through this double, as a device (``local`` False), and collect its
        ledger's jobs here (``sampler.service``)."""
        real = sampler._primitive

        def primitive(seed: int, ctx: Any = None) -> Any:
            inner = real(seed, ctx)
            inner.options.simulator.seed_simulator = int(seed)  # a device sampler is unseeded: seed it here
            return _Submitter(self, inner, seed)

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

    def _store(self, bits: np.ndarray, key: str) -> str:
        job_id = f"double-{len(self.submissions()):04d}-{key[:8]}"
        np.save(self.root / f"{job_id}.npy", bits)
        with open(self.root / "submissions.log", "a") as f:
            f.write(f"{job_id} {key}\n")
            f.flush()
            os.fsync(f.fileno())
        return job_id

    def job(self, job_id: str) -> DoubleJob:
        """``QiskitRuntimeService.job``: the job with this id; ``RuntimeError`` for an unknown id."""
        path = self.root / f"{job_id}.npy"
        if not path.exists():
            raise RuntimeError(f"Job {job_id} not found")
        self.fetched.append(job_id)
        return DoubleJob(job_id, np.load(path))


class _Submitter:
    def __init__(self, double: RuntimeDouble, inner: Any, seed: int) -> None:
        self.double, self.inner, self.seed = double, inner, seed

    def run(self, pubs: list[Any], shots: int) -> DoubleJob:
        ((circuit, values),) = pubs
        bits = self.inner.run(pubs, shots=shots).result()[0].data.meas.to_bool_array(order="little")
        key = hashlib.sha256(np.ascontiguousarray(values, dtype=np.float64).tobytes() + f"{shots},{self.seed}".encode())
        return DoubleJob(self.double._store(bits, key.hexdigest()), bits)


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
