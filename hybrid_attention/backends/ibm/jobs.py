"""Submitting and collecting :class:`~.ibm.IBMSampler`'s runtime jobs: one PUB per chunk, in job mode or in a
``Batch``/``Session``, through the job ledger (a PUB the ledger holds is read back or collected by id, never
submitted again), with failures raised as :class:`IBMJobError` carrying what completed.

With a ledger, each PUB's ``intent`` line is written before the PUB is handed to the runtime, and the job carries
the PUB's hash as a job tag (``options.environment.job_tags``); an intent left without a job id by a crash is settled
by asking the service for the jobs with that tag (``QiskitRuntimeService.jobs(job_tags=[...])``) before anything is
submitted again. On a device every job carries that tag, ledger or not.

A service that fails: a submission or a wait for a result that fails with a transient error (:mod:`.retry`) is
tried again with exponential backoff and jitter, up to ``Execution.max_attempts`` tries; before a submission is
tried again the service is asked for a job carrying the PUB's tag, so a job the service accepted is never submitted
twice. A job that exceeds ``max_execution_time``, is cancelled or fails raises :class:`IBMJobError` naming it (the
ledger records it ``failed``: a rerun submits it again). Each completed job's reported usage and metrics are written
on its ``completed`` line with the cost model's estimate for it (:mod:`.usage`)."""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any

import numpy as np
from qiskit_ibm_runtime import Batch, Session

from hybrid_attention.circuits.qiskit_dqa import DQATemplate

from ..base import progress
from .devices import check_rzz_angles, runtime_service
from .ledger import LedgerEntry, LedgerLocked, LedgerWriteError, StoredResultError, circuit_text, pub_sha256
from .retry import GaveUp, retrying
from .usage import job_usage

__all__ = ["IBMJobError", "RuntimeJobs", "job_status", "load_isa", "save_isa"]

logger = logging.getLogger("hybrid_attention.backends.ibm.sampler")


class IBMJobError(RuntimeError):
    """A runtime job failed or was cancelled, or a chunk could not be submitted.

    Attributes:
        job_id: the failed job's id (``None``: the submission itself was refused).
        status: its final status string (``"NOT_SUBMITTED"`` for a refused submission, ``"NOT_RECORDED"`` for a job
            the runtime accepted but the ledger could not record: its id is in the message and in a rescue file).
        completed: ``{chunk_start: bits (C, shots, n)}`` of the chunks that finished (kept so a caller can resume
            without paying for them again; in a batch this includes chunks submitted after the failed one).
        job_ids: ids of all jobs submitted in this call.
    """

    def __init__(
        self, message: str, *, job_id: str | None, status: str, completed: dict[int, np.ndarray], job_ids: list[str]
    ) -> None:
        super().__init__(message)
        self.job_id, self.status, self.completed, self.job_ids = job_id, status, completed, job_ids


class RuntimeJobs:
    """The job half of :class:`~.ibm.IBMSampler` (a mixin): the sampler provides ``backend``, ``local``, ``mode``,
    ``execution``, ``fractional``, ``ledger``, ``service``, ``instance``, ``chunk_size``, ``name``, ``_sampler_cls``,
    ``sampler_options``, ``_ctx``, ``_last``, ``_texts`` and :meth:`isa_circuit`."""

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
        rows = int(np.shape(values)[0]) if np.ndim(values) > 1 else 1
        cost = (self.job_seconds(isa, rows, shots), rows, self.shot_seconds(isa))
        if self.ledger is None:
            tag = None if self.local else self._pub_hash(isa, values, shots, seed)  # a retry asks the service by tag
            job = self._run_job(isa, values, shots, seed, ctx, tag)
            return _Pub(tag, job, job.job_id(), None, shots, cost)
        self.ledger.hold()  # one process per ledger: refused before anything is submitted
        if not self.local and not self._settled:
            self._settle_intents()
        pub = self._pub_hash(isa, values, shots, seed)
        entry = self.ledger.lookup(pub, self.backend_name)
        if entry is not None:
            found = self._resume(entry)
            if found is not None:
                self._last["resumed"] = self._last.get("resumed", 0) + 1
                found.cost = cost
                return found
        self.persist_isa(isa)
        self.ledger.record("intent", job_id="", backend=self.backend_name, pub_sha256=pub, shots=shots)
        job = self._run_job(isa, values, shots, seed, ctx, pub)
        jid = job.job_id()
        try:
            self.ledger.record("submitted", job_id=jid, backend=self.backend_name, pub_sha256=pub, shots=shots)
        except LedgerWriteError as exc:  # the job runs (and is billed): its id must reach the user
            raise IBMJobError(str(exc), job_id=jid, status="NOT_RECORDED", completed={}, job_ids=[jid]) from exc
        return _Pub(pub, job, jid, None, shots, cost)

    def _run_job(self, isa: Any, values: np.ndarray, shots: int, seed: int, ctx: Any, tag: str | None) -> Any:
        """Hand one PUB to the runtime (tagged ``tag``), trying again after transient errors; before each new try
        the service is asked for a live job carrying the tag, and that job is returned instead (never a second
        submission of a job the service accepted). :class:`IBMJobError` (``NOT_SUBMITTED``) after the last try."""

        def submit() -> Any:
            sampler = self._primitive(seed, ctx, tags=[tag]) if tag else self._primitive(seed, ctx)
            return sampler.run([(isa, values)], shots=shots)

        def accepted() -> Any:
            return None if tag is None or self.local else self._tagged_job(tag)

        try:
            return retrying(
                submit, self.execution, what=f"submitting a PUB to {self.backend_name}", before_retry=accepted
            )
        except GaveUp as exc:
            raise IBMJobError(
                f"ibm: {exc}; gave up (max_attempts = {self.execution.max_attempts}). Whether the service accepted "
                "the last try is unknown: the PUB's intent stays in the ledger and a rerun asks the service for its "
                "tag before submitting anything",
                job_id=None,
                status="NOT_SUBMITTED",
                completed={},
                job_ids=[],
            ) from exc.__cause__

    def _tagged_job(self, tag: str) -> Any:
        """The newest live job carrying ``tag`` on this backend, or ``None`` (transient errors propagate)."""
        jobs = self._runtime_service().jobs(job_tags=[tag], backend_name=self.backend_name, limit=10)
        alive = [j for j in jobs if job_status(j) not in ("ERROR", "CANCELLED")]
        if alive:
            logger.info("ibm: PUB %s was accepted after all (job %s): not submitted again", tag[:12], alive[0].job_id())
        return alive[0] if alive else None

    def _resume(self, entry: LedgerEntry) -> _Pub | None:
        """The PUB of a ledger entry without submitting it, or ``None`` when it must be submitted (again)."""
        where = entry.where(self.ledger.path)
        if entry.event == "completed":
            bits = self.ledger.load_bits(entry.pub_sha256, shots=entry.shots, job_id=entry.job_id)
            if bits is not None:
                logger.info("ibm: PUB %s read from %s (job %s)", entry.pub_sha256[:12], where, entry.job_id)
                return _Pub(entry.pub_sha256, None, entry.job_id, bits, entry.shots)
        if entry.event == "failed":
            warnings.warn(f"ibm: {where}: job {entry.job_id} failed; its PUB is submitted again", stacklevel=4)
            return None
        if self.local:  # a local-mode job lived in the process that ran it
            job = f"job {entry.job_id}" if entry.job_id else "the job of an unsettled intent"
            warnings.warn(
                f"ibm: {where}: {job} ({entry.event}) has no stored bits and local-mode jobs cannot be "
                "fetched back; its PUB is run again locally (free; the same seed gives the same bits)",
                stacklevel=4,
            )
            return None
        if entry.event == "intent":
            job = self._settle(entry)
            return None if job is None else _Pub(entry.pub_sha256, job, job.job_id(), None, entry.shots)
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

    def _settle_intents(self) -> None:
        """Settle every intent of this backend in the ledger (device): its job, found by tag, is recorded."""
        self._settled = True
        for entry in self.ledger.entries():
            if entry.event == "intent" and entry.backend == self.backend_name:
                self._settle(entry)

    def _settle(self, entry: LedgerEntry) -> Any:
        """The job the runtime accepted for an ``intent`` (found by its PUB-hash tag and recorded as ``submitted``),
        or ``None`` when the runtime has no such job (the PUB was never accepted: it may be submitted)."""
        where = entry.where(self.ledger.path)
        try:
            jobs = self._runtime_service().jobs(job_tags=[entry.pub_sha256], backend_name=entry.backend, limit=10)
        except Exception as exc:
            raise IBMJobError(
                f"ibm: {where}: the runtime service could not list the jobs tagged {entry.pub_sha256} ({exc}) to "
                "settle an intent left by an interrupted run; nothing was submitted (run again when it answers)",
                job_id=None,
                status="UNKNOWN",
                completed={},
                job_ids=[],
            ) from exc
        alive = [j for j in jobs if job_status(j) not in ("ERROR", "CANCELLED")]
        if not alive:
            logger.info("ibm: %s: no live job carries PUB %s: it was never accepted", where, entry.pub_sha256[:12])
            return None
        if len(alive) > 1:
            logger.warning("ibm: %s: %d jobs carry PUB %s; collecting the newest", where, len(alive), entry.pub_sha256)
        job = alive[0]
        self.ledger.record(
            "submitted",
            job_id=job.job_id(),
            backend=entry.backend,
            pub_sha256=entry.pub_sha256,
            shots=entry.shots,
            settled=True,
        )
        logger.info("ibm: %s: intent settled: PUB %s is job %s", where, entry.pub_sha256[:12], job.job_id())
        return job

    def _runtime_service(self) -> Any:
        if self.service is None:
            self.service = runtime_service(self.instance)
        return self.service

    def _collect(self, pub: _Pub) -> np.ndarray:
        """The bits ``(B, shots, Q)`` of a submitted (or resumed) PUB; the ledger records the outcome, with the
        job's reported usage. Waiting is tried again after transient errors (nothing is submitted). Raises
        :class:`IBMJobError` for a job that exceeded ``max_execution_time``, ended in error or was cancelled, else
        what ``job.result()`` raises."""
        if pub.bits is not None:
            return pub.bits
        if job_status(pub.job) == "QUEUED":
            logger.info("ibm: job %s is queued on %s; waiting for it", pub.job_id, self.backend_name)
        try:
            result = retrying(pub.job.result, self.execution, what=f"waiting for job {pub.job_id}")
        except Exception as exc:
            status = job_status(pub.job)
            if not isinstance(exc, GaveUp):  # the job ended: a rerun submits it again
                self._record("failed", pub, status=status)
            if type(exc).__name__ == "RuntimeJobMaxTimeoutError":
                raise self._timed_out(pub, status, exc) from exc
            if isinstance(exc, GaveUp):  # not recorded as failed: the job may still run, and is collected by id
                raise IBMJobError(
                    f"ibm: {exc}; job {pub.job_id} was submitted and may still run: a rerun with this ledger "
                    "collects it by its id instead of submitting it again",
                    job_id=pub.job_id, status="NOT_COLLECTED", completed={}, job_ids=[pub.job_id],
                ) from exc.__cause__  # fmt: skip
            raise
        status = job_status(pub.job)
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
            self.ledger.store_bits(pub.sha, bits, pub.job_id)
            usage, metrics = job_usage(pub.job)
            est, circuits, per_shot = pub.cost if pub.cost is not None else (None, None, None)
            self._record(
                "completed", pub, usage_seconds=usage, estimate_seconds=est, circuits=circuits,
                shot_seconds=per_shot, mode=self.mode, metrics=metrics,
            )  # fmt: skip
        return bits

    def _timed_out(self, pub: _Pub, status: str, exc: Exception) -> IBMJobError:
        est = f"{pub.cost[0]:,.1f} s" if pub.cost is not None else "unknown"
        limit = self.execution.max_execution_time
        return IBMJobError(
            f"ibm: job {pub.job_id} exceeded its maximum execution time (max_execution_time = "
            f"{'the service default' if limit is None else f'{limit} s'}; the cost model estimated it at {est}) and "
            f"was cancelled by the service ({exc}); the time it ran is billed. Raise max_execution_time or lower "
            "chunk_size; a rerun submits this PUB again",
            job_id=pub.job_id,
            status="TIMED_OUT",
            completed={},
            job_ids=[pub.job_id],
        )

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
            self.check_mode_available()  # a session of a simulator or an Open Plan instance: refused here
            self._ctx = (Batch if self.mode == "batch" else Session)(backend=self.backend)
        return self._ctx, False

    def _primitive(self, seed: int, ctx: Any = None, tags: list[str] | None = None) -> Any:
        """The runtime Sampler of one job: this sampler's options, the seed (local mode) and ``tags`` added to the
        job's tags (``options.environment.job_tags``: the PUB hash, by which an interrupted run finds the job)."""
        sampler = self._sampler_cls(mode=ctx if ctx is not None else self.backend, options=dict(self.sampler_options))
        if tags:
            sampler.options.environment.job_tags = [*(sampler.options.environment.job_tags or []), *tags]
        if self.local:
            sampler.options.simulator.seed_simulator = int(seed)
        return sampler

    def _run_chunks(
        self, tmpl: DQATemplate, values: np.ndarray, starts: list[int], shots: int, seeds: list[int]
    ) -> np.ndarray:
        isa = self.isa_circuit(tmpl)
        if self.fractional:  # the device's angle bounds, checked for every chunk before the first submission
            check_rzz_angles(isa, values, self.backend)
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
                except (IBMJobError, StoredResultError, LedgerLocked):  # nothing is submitted after these
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
            except IBMJobError as e:  # its message says what happened (a timeout, a wait given up)
                failure = failure or (pub.job_id, e.status, e)
            except Exception as e:
                failure = failure or (pub.job_id, job_status(pub.job), e)
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


class _Pub:
    """One PUB of a call: its hash (``None`` without a ledger in local mode), the job (``None`` when read from the
    ledger), the job id, the bits when already known, and ``cost``: the model's ``(seconds, circuits, seconds per
    shot)`` of its job."""

    __slots__ = ("sha", "job", "job_id", "bits", "shots", "cost")

    def __init__(
        self, sha: str | None, job: Any, job_id: str, bits: np.ndarray | None, shots: int = 0, cost: Any = None
    ) -> None:
        self.sha, self.job, self.job_id, self.bits, self.shots = sha, job, str(job_id), bits, int(shots)
        self.cost = cost


def job_status(job: Any) -> str:
    """A runtime job's status name in capitals (``"DONE"``, ``"ERROR"``, ...), ``"UNKNOWN"`` when it cannot be read."""
    try:
        st = job.status()
    except Exception:
        return "UNKNOWN"
    return getattr(st, "name", str(st)).upper()


def load_isa(path: Any, num_parameters: int) -> Any:
    """The ISA circuit stored at ``path`` (qpy); ``ValueError`` naming the file when it cannot be read or does not
    have ``num_parameters`` parameters (nothing is submitted then)."""
    from qiskit import qpy

    try:
        with open(path, "rb") as f:
            isa = qpy.load(f)[0]
    except Exception as exc:  # qpy raises struct, value, index, type and OS errors alike on a damaged file
        raise ValueError(
            f"ibm: the stored ISA circuit {str(path)!r} is unreadable ({type(exc).__name__}: {exc}); nothing was "
            "submitted. Move it aside to transpile again (PUBs of the interrupted run then match only if the "
            "transpiler gives the same circuit)"
        ) from exc
    if isa.num_parameters != num_parameters:
        raise ValueError(f"ibm: the stored ISA circuit {str(path)!r} does not fit its template")
    return isa


def save_isa(path: Any, isa: Any) -> None:
    """Store an ISA circuit at ``path`` (qpy; temporary file, fsync'd, renamed: never half a file)."""
    from qiskit import qpy

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        qpy.dump(isa, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
