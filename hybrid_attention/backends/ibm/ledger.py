"""The job ledger of the IBM route: every PUB submitted to the runtime is recorded before anyone waits on it, so a
run that crashes (or is stopped with Ctrl-C, or killed) and is started again never submits, and never pays for, a PUB
whose job already ran.

The ledger is a JSON Lines file, append-only, one object per event, each line written whole (``os.write``) and
``fsync``'d before the call goes on::

    {"event": "intent", "job_id": "", "backend": "ibm_torino", "pub_sha256": "5e0f...", "shots": 1024, "time": ...}
    {"event": "submitted", "job_id": "d1abc...", "backend": "ibm_torino", "pub_sha256": "5e0f...", "shots": 1024,
     "time": "2026-12-04T16:40:02.113+00:00"}
    {"event": "completed", "job_id": "d1abc...", ..., "usage_seconds": 3.1, "estimate_seconds": 3.3, "metrics": {...}}

Events: ``intent`` (written before the PUB is handed to the runtime: the job, tagged with the PUB's hash, may or may
not have been accepted), ``submitted`` (the runtime accepted the job), ``completed`` (its bits are stored),
``failed`` (it ended in error or was cancelled: a later run submits that PUB again). ``pub_sha256``
(:func:`pub_sha256`) identifies a PUB by what decides its result: the ISA circuit (its OpenQASM 3 text), the
parameter values (dtype, shape and bytes), the shots and the seed. When a job completes, its measured bits are stored
next to the ledger with the PUB's hash and the job id, ``<ledger>.bits/<pub_sha256>.npz``
(:meth:`JobLedger.store_bits`), before the ``completed`` line is written; the hash is checked when they are read
back (:mod:`.ledger_store`).

Resuming (:meth:`JobLedger.lookup`): a PUB with stored bits is read from disk; one that was submitted but never
completed is collected by its job id from the runtime service (``QiskitRuntimeService.job``) on a real device; an
``intent`` without a job id (a crash between the runtime accepting the job and the ``submitted`` line) is settled by
asking the service for the jobs tagged with the PUB's hash (``QiskitRuntimeService.jobs(job_tags=[...])``) before
the PUB is submitted again. In the runtime's local mode (fake backends) a job lives only in the process that ran it:
such a PUB is run again locally (free, and the same bits for the same seed), with a warning naming the ledger line.

Failures and damage:

* the ledger cannot be written after a job was accepted (a full or read-only disk): the event goes to a rescue
  file (``<ledger>.rescue``, else the temporary directory), the job id is logged and raised
  (:class:`LedgerWriteError`), and the next load of the ledger reads the rescue file, so a resume finds the job;
* a line that is not JSON (a write cut short by a crash or a full disk) is reported with a warning naming the file
  and line, copied to ``<ledger>.torn`` and skipped; an event glued onto it by an earlier version is recovered; the
  next event always starts a line of its own;
* a line that is JSON but not a ledger event raises ``ValueError`` naming the line; a job id the service does not
  know is the caller's error (:class:`~hybrid_attention.backends.ibm.sampler.IBMSampler` raises, naming the line, and
  submits nothing).

One ledger is used by one process at a time: a ledger that writes takes the lock ``<ledger>.lock`` (the run
directories' lock, :mod:`..file_lock`) until :meth:`JobLedger.close`, and a second process is refused with
:class:`LedgerLocked` before it submits anything. Ledgers of one path in one process share the lock.

Test hook: with the environment variable ``HYBRID_ATTENTION_TEST_KILL_AFTER_SUBMITTED=K`` set, the process kills
itself (``SIGKILL``, as ``kill -9``) right after writing its ``K``-th ``submitted`` line: the crash between
submission and collection that the resume tests replay.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import signal
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..file_lock import FileLocked, drop_shared, hold_shared
from .ledger_store import (
    StoredResultError,
    append_line,
    glued_event,
    keep_torn,
    load_result,
    read_rescued,
    rescue_event,
    result_path,
    store_result,
)

__all__ = [
    "JobLedger",
    "LedgerEntry",
    "LedgerLocked",
    "LedgerWriteError",
    "StoredResultError",
    "EVENTS",
    "pub_sha256",
    "circuit_text",
]

logger = logging.getLogger(__name__)

#: the events a ledger line may hold
EVENTS = ("intent", "submitted", "completed", "failed")
_FIELDS = ("event", "job_id", "backend", "pub_sha256", "shots", "time")
_KILL_ENV = "HYBRID_ATTENTION_TEST_KILL_AFTER_SUBMITTED"
_submitted_here = [0]  # submitted lines written by this process (for the test hook)


class LedgerLocked(FileLocked):
    """Another process uses the ledger (``path``: its lock file, ``pid``: the owner if known)."""


class LedgerWriteError(OSError):
    """The ledger could not record an event after the runtime accepted a job. ``job_id``: that job;
    ``rescue``: the file the event was written to instead (``None``: none could be written)."""

    def __init__(self, message: str, *, job_id: str, event: str, rescue: Path | None, errno_: int | None) -> None:
        super().__init__(errno_ or 0, message)
        self.job_id, self.event, self.rescue = job_id, event, rescue

    def __str__(self) -> str:
        return self.strerror or ""


def circuit_text(circuit: Any) -> str:
    """The canonical text of a (parametrised, ISA) qiskit circuit that :func:`pub_sha256` hashes: its OpenQASM 3
    program (gate names, physical qubits, parameter names and expressions, measurements). Parameter objects carry
    a random uuid, so qpy bytes differ between processes for the same circuit; the QASM text does not."""
    from qiskit import qasm3

    return qasm3.dumps(circuit)


def pub_sha256(circuit: str | Any, values: np.ndarray, shots: int, seed: int | None) -> str:
    """sha256 (hex) of one PUB: the ISA circuit (its :func:`circuit_text`, or that text), the parameter values
    ``(B, P)`` (as float64: shape and bytes), the shots and the seed.

    Example:
        >>> import numpy as np
        >>> a = pub_sha256("OPENQASM 3.0;", np.zeros((2, 3)), 100, 7)
        >>> a == pub_sha256("OPENQASM 3.0;", np.zeros((2, 3)), 100, 7), a == pub_sha256("OPENQASM 3.0;", np.zeros((2, 3)), 100, 8)
        (True, False)
    """
    text = circuit if isinstance(circuit, str) else circuit_text(circuit)
    v = np.ascontiguousarray(np.asarray(values, dtype=np.float64))
    h = hashlib.sha256()
    h.update(text.encode())
    h.update(
        json.dumps({"shape": list(v.shape), "shots": int(shots), "seed": None if seed is None else int(seed)}).encode()
    )
    h.update(v.tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class LedgerEntry:
    """What the ledger knows of one PUB: its last event (``intent``, ``submitted``, ``completed`` or ``failed``), the
    job id (``""`` for an intent), the backend, the shots, the 1-based line of that event (0 for an event read from a
    rescue file), its time, for a rescued event the rescue file, and ``details``: the line's other fields (on a
    ``completed`` line the usage the job reported and the model's estimate, :mod:`.usage`)."""

    event: str
    job_id: str
    backend: str
    pub_sha256: str
    shots: int
    line: int
    time: str = ""
    source: str = ""
    details: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def where(self, ledger: Path) -> str:
        """``ledger 'PATH' line N`` (or the rescue file an event was read from), for messages."""
        return f"rescue file {self.source!r}" if self.source else f"ledger {str(ledger)!r} line {self.line}"


class JobLedger:
    """An append-only JSON Lines ledger of runtime jobs (module docstring), with the completed jobs' bits.

    Args:
        path: the ledger file (created with its parent directory when missing; an existing one is read, with its
            rescue files).

    Example:
        >>> import tempfile, numpy as np
        >>> led = JobLedger(tempfile.mkdtemp() + "/jobs.jsonl")
        >>> led.record("submitted", job_id="j1", backend="fake_manila", pub_sha256="ab" * 32, shots=8)
        >>> led.store_bits("ab" * 32, np.zeros((1, 8, 2), dtype=bool))
        >>> led.record("completed", job_id="j1", backend="fake_manila", pub_sha256="ab" * 32, shots=8)
        >>> led.close()
        >>> JobLedger(led.path).lookup("ab" * 32, "fake_manila").event
        'completed'
    """

    def __init__(self, path: str | os.PathLike) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"ledger: path must be a str or os.PathLike, got {type(path).__name__}")
        self.path = Path(path)
        if self.path.exists() and self.path.is_dir():
            raise ValueError(f"ledger: {str(self.path)!r} is a directory; expected a .jsonl file path")
        self.bits_dir = self.path.with_name(self.path.name + ".bits")
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self._entries: dict[tuple[str, str], LedgerEntry] = {}
        self._jobs: set[str] = set()
        self._lines = 0
        self._offset = 0  # bytes of the file read so far
        self._cut = False  # the bytes read so far end inside a line
        self._rescued: list[tuple[Path, list[dict[str, Any]]]] = []
        self._holding = False
        self._finalizer: Any = None
        self.refresh()

    # ------------------------------------------------------------------ reading
    def refresh(self) -> None:
        """Read what was appended since the last read (another ledger object, or another process before this one
        took the lock), then the rescue files."""
        size = self.path.stat().st_size if self.path.is_file() else 0  # (st_size: a device file reads as empty)
        if size < self._offset:  # replaced by a shorter file: read it afresh
            self._entries, self._jobs, self._lines, self._offset, self._cut = {}, set(), 0, 0, False
        if size > self._offset:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                raw = f.read(size - self._offset)
            self._read(raw)
            self._offset += len(raw)
        self._rescued = read_rescued(self.path)
        for path, events in self._rescued:
            for obj in events:
                self._apply(obj, 0, source=str(path))

    def _read(self, raw: bytes) -> None:
        if self._cut and raw.startswith(b"\n"):  # the newline that ends the line cut short, read (and counted) before
            raw = raw[1:]
        lines = raw.split(b"\n")
        tail = lines.pop()  # b"" when the text ends with a newline, else a line cut short
        if tail:
            lines.append(tail)
        for k, line in enumerate(lines):
            self._lines += 1
            if line.strip():
                self._parse(line, last=k == len(lines) - 1 and bool(tail))
        self._cut = bool(tail)

    def _parse(self, line: bytes, *, last: bool) -> None:
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._torn(line, last)
            return
        self._apply(obj, self._lines)

    def _torn(self, line: bytes, last: bool) -> None:
        """A line cut short: kept aside in ``<ledger>.torn`` and reported; an event glued onto it (an append after a
        cut without a newline, by an earlier version) is recovered."""
        glued, pos = glued_event(line)
        torn = line if glued is None else line[:pos]
        side = keep_torn(self.path, self._lines, torn)
        where = "its last line" if last else "a line"
        kept = f"kept in {str(side)!r}" if side is not None else "could not be copied aside"
        warnings.warn(
            f"ledger {str(self.path)!r}: {where} (line {self._lines}) is not JSON (a write cut short by a crash or a "
            f"full disk?): skipped and {kept}: {torn[:80]!r}"
            + ("; the event glued onto it was recovered" if glued is not None else ""),
            stacklevel=4,
        )
        if isinstance(glued, dict):
            self._apply(glued, self._lines)

    def _apply(self, obj: Any, line: int, source: str = "") -> None:
        if not isinstance(obj, dict) or any(f not in obj for f in _FIELDS) or obj["event"] not in EVENTS:
            raise ValueError(
                f"ledger {source or str(self.path)!r} line {line}: expected an object with the fields {list(_FIELDS)} "
                f"and an event in {list(EVENTS)}, got {str(obj)[:200]}"
            )
        e = LedgerEntry(
            obj["event"],
            str(obj["job_id"]),
            str(obj["backend"]),
            str(obj["pub_sha256"]),
            int(obj["shots"]),
            line,
            str(obj.get("time", "")),
            source,
            {k: v for k, v in obj.items() if k not in _FIELDS and k != "rescued_from"},
        )
        old = self._entries.get((e.pub_sha256, e.backend))
        if (source or "rescued_from" in obj) and old is not None and old.time > e.time:
            return  # a rescued event older than what the ledger holds
        self._entries[(e.pub_sha256, e.backend)] = e
        if e.job_id:
            self._jobs.add(e.job_id)

    def lookup(self, pub: str, backend: str) -> LedgerEntry | None:
        """The last event recorded for PUB hash ``pub`` on ``backend`` (``None``: never submitted)."""
        return self._entries.get((pub, str(backend)))

    def entries(self) -> list[LedgerEntry]:
        """Every PUB's last event, in the order of those events (rescued events last)."""
        return sorted(self._entries.values(), key=lambda e: (bool(e.source), e.line))

    @property
    def job_ids(self) -> set[str]:
        """Every job id the ledger holds."""
        return set(self._jobs)

    # ------------------------------------------------------------------ the lock
    def hold(self) -> None:
        """Take the ledger's lock for this process (kept until :meth:`close`), then read what another process
        appended before. Ledgers of one path in one process share the lock.

        Raises:
            LedgerLocked: another process uses the ledger.
        """
        if self._holding:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            key = hold_shared(self.lock_path)
        except FileLocked as exc:
            owner = f"process {exc.pid}" if exc.pid else "another process"
            raise LedgerLocked(
                self.lock_path,
                exc.pid,
                f"ledger {str(self.path)!r} is in use by {owner} (lock {str(self.lock_path)!r}): one ledger is "
                "written by one process at a time; wait for it to finish or give this run another ledger "
                "(nothing was submitted)",
            ) from None
        self._holding = True
        self._finalizer = weakref.finalize(self, drop_shared, key, self.lock_path)
        self.refresh()

    def close(self) -> None:
        """Release this ledger's share of the lock (the lock file goes with the last one). Idempotent."""
        if self._holding:
            self._holding = False
            self._finalizer()

    def __enter__(self) -> JobLedger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ writing
    def record(self, event: str, *, job_id: str, backend: str, pub_sha256: str, shots: int, **extra: Any) -> None:
        """Append one event line (written whole and fsync'd before returning). ``extra``: further JSON fields (e.g.
        the failure's status). Takes the lock first (:meth:`hold`).

        Raises:
            LedgerLocked: another process uses the ledger.
            LedgerWriteError: a ``submitted``, ``completed`` or ``failed`` line could not be written (its event went
                to a rescue file, named in the error, and is read back by the next load).
            OSError: an ``intent`` line could not be written (nothing may be submitted then).
        """
        if event not in EVENTS:
            raise ValueError(f"ledger: event must be one of {EVENTS}, got {event!r}")
        obj = {
            "event": event,
            "job_id": str(job_id),
            "backend": str(backend),
            "pub_sha256": str(pub_sha256),
            "shots": int(shots),
            "time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
            **extra,
        }
        line = json.dumps(obj, sort_keys=False)
        self.hold()
        try:
            self._heal()
            self._append(line)
        except OSError as exc:
            if event == "intent":
                raise OSError(exc.errno, f"ledger: cannot write {str(self.path)!r} ({exc.strerror or exc})") from exc
            err = self._rescue(obj, line, exc)
            self._apply(obj, 0, source=str(err.rescue or "(not written)"))
            raise err from exc
        self._apply(obj, self._lines)
        logger.debug("ledger %s: %s %s", self.path, event, job_id)
        if event == "submitted" and os.environ.get(_KILL_ENV):
            _submitted_here[0] += 1
            if _submitted_here[0] == int(os.environ[_KILL_ENV]):
                os.kill(os.getpid(), signal.SIGKILL)

    def _append(self, line: str) -> None:
        """Append ``line`` on a line of its own: after reading what others appended, a newline first when the file
        ends inside a line (a write cut short)."""
        self.refresh()
        size = self.path.stat().st_size if self.path.is_file() else 0
        cut = False
        if size:
            with open(self.path, "rb") as f:
                f.seek(size - 1)
                cut = f.read(1) != b"\n"
        append_line(self.path, ("\n" if cut else "") + line)
        self._lines += 1
        self._offset = self.path.stat().st_size if self.path.is_file() else 0
        self._cut = False

    def _heal(self) -> None:
        """Move the events of the rescue files into the ledger (then remove those files)."""
        rescued, self._rescued = self._rescued, []
        for path, events in rescued:
            for obj in events:
                self._append(json.dumps({**obj, "rescued_from": str(path)}))
            path.unlink(missing_ok=True)
            logger.info("ledger %s: %d event(s) moved in from the rescue file %s", self.path, len(events), path)
        self._rescued = []  # (each append above read the rescue files again)

    def _rescue(self, obj: dict[str, Any], line: str, exc: OSError) -> LedgerWriteError:
        """Write an event the ledger refused to a rescue file; the error naming the job id and that file."""
        saved, msg = rescue_event(self.path, obj, line, exc)
        logger.error("%s", msg)
        return LedgerWriteError(msg, job_id=str(obj["job_id"]), event=obj["event"], rescue=saved, errno_=exc.errno)

    # ------------------------------------------------------------------ stored results
    def bits_path(self, pub: str) -> Path:
        """Where the bits of PUB ``pub`` are stored (``<ledger>.bits/<pub>.npz``)."""
        return result_path(self.bits_dir, pub)

    def store_bits(self, pub: str, bits: np.ndarray, job_id: str | None = None) -> None:
        """Store a completed PUB's bits with its hash and job id (never half a file: :mod:`.ledger_store`)."""
        self.hold()
        store_result(self.bits_dir, pub, bits, job_id)

    def load_bits(self, pub: str, *, shots: int | None = None, job_id: str = "") -> np.ndarray | None:
        """The stored bits of PUB ``pub`` (``None``: none stored), checked against the PUB's hash and ``shots``.

        Raises:
            StoredResultError: the file is unreadable or holds another PUB's result (the message names it).
        """
        return load_result(self.bits_dir, pub, shots=shots, job_id=job_id)

    def __repr__(self) -> str:
        return f"JobLedger({str(self.path)!r}, pubs={len(self._entries)})"
