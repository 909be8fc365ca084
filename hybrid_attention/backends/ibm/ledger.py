"""The job ledger of the IBM route: every PUB submitted to the runtime is recorded before anyone waits on it, so a
run that crashes (or is stopped with Ctrl-C, or killed) and is started again never submits, and never pays for, a PUB
whose job already ran.

The ledger is a JSON Lines file, append-only, one object per event, each line flushed and ``fsync``'d before the
call goes on::

    {"event": "submitted", "job_id": "d1abc...", "backend": "ibm_torino", "pub_sha256": "5e0f...", "shots": 1024,
     "time": "2026-12-04T16:40:02.113+00:00"}
    {"event": "completed", "job_id": "d1abc...", ...}

Events: ``submitted`` (the runtime accepted the job), ``completed`` (its bits are stored), ``failed`` (it ended in
error or was cancelled: a later run submits that PUB again). ``pub_sha256`` (:func:`pub_sha256`) identifies a PUB by
what decides its result: the ISA circuit (its OpenQASM 3 text), the parameter values (dtype, shape and bytes), the
shots and the seed. When a job completes, its measured bits are stored next to the ledger, in the directory
``<ledger>.bits/<pub_sha256>.npy`` (:meth:`JobLedger.store_bits`), before the ``completed`` line is written.

Resuming (:meth:`JobLedger.lookup`): a PUB with stored bits is read from disk; one that was submitted but never
completed is collected by its job id from the runtime service (``QiskitRuntimeService.job``) on a real device.
In the runtime's local mode (fake backends) a job lives only in the process that ran it: such a PUB is run again
locally (free, and the same bits for the same seed), with a warning naming the ledger line.

Damage: a line that is not JSON (a write cut short by a crash: normally the last one) is skipped with a warning
naming the file and line; a line that is JSON but not a ledger event raises ``ValueError`` naming the line. A job id
the service does not know is the caller's error (:class:`~hybrid_attention.backends.ibm.sampler.IBMSampler` raises,
naming the line, and submits nothing).

One ledger is meant for one process at a time.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["JobLedger", "LedgerEntry", "EVENTS", "pub_sha256", "circuit_text"]

logger = logging.getLogger(__name__)

#: the events a ledger line may hold
EVENTS = ("submitted", "completed", "failed")
_FIELDS = ("event", "job_id", "backend", "pub_sha256", "shots", "time")
_KILL_ENV = "HYBRID_ATTENTION_TEST_KILL_AFTER_SUBMITTED"
_submitted_here = [0]  # submitted lines written by this process (for the test hook)


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
    """What the ledger knows of one PUB: its last event (``submitted``, ``completed`` or ``failed``), the job id,
    the backend, the shots and the 1-based line of that event."""

    event: str
    job_id: str
    backend: str
    pub_sha256: str
    shots: int
    line: int


class JobLedger:
    """An append-only JSON Lines ledger of runtime jobs (module docstring), with the completed jobs' bits.

    Args:
        path: the ledger file (created with its parent directory when missing; an existing one is read).

    Example:
        >>> import tempfile, numpy as np
        >>> led = JobLedger(tempfile.mkdtemp() + "/jobs.jsonl")
        >>> led.record("submitted", job_id="j1", backend="fake_manila", pub_sha256="ab" * 32, shots=8)
        >>> led.store_bits("ab" * 32, np.zeros((1, 8, 2), dtype=bool))
        >>> led.record("completed", job_id="j1", backend="fake_manila", pub_sha256="ab" * 32, shots=8)
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
        self._entries: dict[tuple[str, str], LedgerEntry] = {}
        self._jobs: set[str] = set()
        self._lines = 0
        self._needs_newline = False
        if self.path.exists():
            self._load()

    # ------------------------------------------------------------------ reading
    def _load(self) -> None:
        raw = self.path.read_bytes()
        self._needs_newline = bool(raw) and not raw.endswith(b"\n")
        lines = raw.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        for k, line in enumerate(lines, start=1):
            self._lines = k
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                where = "its last line" if k == len(lines) else f"line {k}"
                warnings.warn(
                    f"ledger {str(self.path)!r}: {where} (line {k}) is not JSON (a write cut short by a crash?): "
                    f"skipped: {line[:80]!r}",
                    stacklevel=3,
                )
                continue
            self._apply(obj, k)

    def _apply(self, obj: Any, line: int) -> None:
        if not isinstance(obj, dict) or any(f not in obj for f in _FIELDS) or obj["event"] not in EVENTS:
            raise ValueError(
                f"ledger {str(self.path)!r} line {line}: expected an object with the fields {list(_FIELDS)} and an "
                f"event in {list(EVENTS)}, got {str(obj)[:200]}"
            )
        e = LedgerEntry(
            obj["event"], str(obj["job_id"]), str(obj["backend"]), str(obj["pub_sha256"]), int(obj["shots"]), line
        )
        self._entries[(e.pub_sha256, e.backend)] = e
        self._jobs.add(e.job_id)

    def lookup(self, pub: str, backend: str) -> LedgerEntry | None:
        """The last event recorded for PUB hash ``pub`` on ``backend`` (``None``: never submitted)."""
        return self._entries.get((pub, str(backend)))

    def entries(self) -> list[LedgerEntry]:
        """Every PUB's last event, in the order of those events."""
        return sorted(self._entries.values(), key=lambda e: e.line)

    @property
    def job_ids(self) -> set[str]:
        """Every job id the ledger holds."""
        return set(self._jobs)

    # ------------------------------------------------------------------ writing
    def record(self, event: str, *, job_id: str, backend: str, pub_sha256: str, shots: int, **extra: Any) -> None:
        """Append one event line (flushed and fsync'd before returning). ``extra``: further JSON fields (e.g. the
        failure's status)."""
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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            if self._needs_newline:  # end the damaged line so that this event is a line of its own
                f.write("\n")
                self._lines += 1
                self._needs_newline = False
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        self._lines += 1
        self._apply(obj, self._lines)
        logger.debug("ledger %s: %s %s", self.path, event, job_id)
        if event == "submitted" and os.environ.get(_KILL_ENV):
            _submitted_here[0] += 1
            if _submitted_here[0] == int(os.environ[_KILL_ENV]):
                os.kill(os.getpid(), signal.SIGKILL)

    def bits_path(self, pub: str) -> Path:
        """Where the bits of PUB ``pub`` are stored (``<ledger>.bits/<pub>.npy``)."""
        return self.bits_dir / f"{pub}.npy"

    def store_bits(self, pub: str, bits: np.ndarray) -> None:
        """Store a completed PUB's bits (written to a temporary file, fsync'd, renamed: never half a file)."""
        self.bits_dir.mkdir(parents=True, exist_ok=True)
        final = self.bits_path(pub)
        tmp = final.with_name(final.name + ".tmp")
        with open(tmp, "wb") as f:
            np.save(f, np.asarray(bits, dtype=bool))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)

    def load_bits(self, pub: str) -> np.ndarray | None:
        """The stored bits of PUB ``pub``, or ``None`` when none were stored (or the file is unreadable: warned)."""
        path = self.bits_path(pub)
        if not path.exists():
            return None
        try:
            return np.load(path)
        except (OSError, ValueError) as exc:
            warnings.warn(f"ledger: the stored bits {str(path)!r} are unreadable ({exc}): ignored", stacklevel=2)
            return None

    def __repr__(self) -> str:
        return f"JobLedger({str(self.path)!r}, pubs={len(self._entries)})"
