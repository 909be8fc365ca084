"""The files a :class:`~hybrid_attention.backends.ibm.ledger.JobLedger` keeps beside its JSON Lines file.

* Stored results, ``<ledger>.bits/<pub_sha256>.npz`` (:func:`store_result`, :func:`load_result`): the measured bits
  of a completed PUB together with that PUB's sha256 and its job id. The hash is checked on load, so a result file
  that was swapped, copied over or renamed is refused instead of returning another PUB's bits; a truncated or
  corrupt file is refused too. Both raise :class:`StoredResultError` naming the file; nothing is submitted.
  Results stored by an earlier version (``<pub_sha256>.npy``, bits only) are still read: only their shape can be
  checked, and a warning says so.
* The rescue file (:func:`rescue_paths`): where an event goes when the ledger itself cannot be written (a full or
  read-only disk) after a job was accepted, so that its job id is never lost: ``<ledger>.rescue`` next to the
  ledger, else a file in the temporary directory named after the ledger's absolute path. The ledger reads both
  when it loads and moves their events into itself at its next successful write.
* The torn-line file ``<ledger>.torn`` (:func:`keep_torn`): a copy of every line cut short by a crash or a full
  disk, with its line number, kept aside when the ledger reads past it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "StoredResultError",
    "store_result",
    "load_result",
    "result_path",
    "rescue_paths",
    "read_rescued",
    "append_line",
    "keep_torn",
    "glued_event",
    "rescue_event",
]

logger = logging.getLogger("hybrid_attention.backends.ibm.ledger")


class StoredResultError(ValueError):
    """A stored result that cannot be trusted: unreadable, or not the result of the PUB it is filed under.
    ``path``: the file."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path


def result_path(bits_dir: Path, pub: str) -> Path:
    """Where the result of PUB ``pub`` is stored (``<ledger>.bits/<pub>.npz``)."""
    return Path(bits_dir) / f"{pub}.npz"


def store_result(bits_dir: Path, pub: str, bits: np.ndarray, job_id: str | None = None) -> Path:
    """Store a completed PUB's bits with its hash and job id (temporary file, fsync'd, renamed: never half a file)."""
    bits_dir = Path(bits_dir)
    bits_dir.mkdir(parents=True, exist_ok=True)
    final = result_path(bits_dir, pub)
    tmp = final.with_name(final.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, bits=np.asarray(bits, dtype=bool), pub_sha256=np.array(pub), job_id=np.array(str(job_id or "")))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    return final


def _advice(path: Path, job_id: str) -> str:
    job = f"job {job_id}" if job_id else "its job"
    return (
        f"move {str(path)!r} aside and run again: {job} is then collected by its id on a device (free), or run "
        "again locally in local mode; nothing was submitted"
    )


def load_result(bits_dir: Path, pub: str, *, shots: int | None = None, job_id: str = "") -> np.ndarray | None:
    """The stored bits ``(B, shots, Q)`` of PUB ``pub``, ``None`` when none were stored.

    Raises:
        StoredResultError: the file is unreadable, holds another PUB's hash, or its shots differ from ``shots``.
    """
    path = result_path(bits_dir, pub)
    legacy = Path(bits_dir) / f"{pub}.npy"
    if not path.exists():
        return _load_legacy(legacy, shots, job_id) if legacy.exists() else None
    try:
        with np.load(path, allow_pickle=False) as z:
            bits, stored = np.asarray(z["bits"]), str(z["pub_sha256"])
    except Exception as exc:  # zipfile, numpy and OS errors alike: the file is damaged
        raise StoredResultError(
            path,
            f"ledger: the stored result {str(path)!r} is unreadable ({type(exc).__name__}: {exc}); "
            + _advice(path, job_id),
        ) from exc
    if stored != pub:
        raise StoredResultError(
            path,
            f"ledger: the stored result {str(path)!r} belongs to PUB {stored[:16]}..., not to PUB {pub[:16]}... it "
            "is filed under (a file swapped, copied or renamed?); " + _advice(path, job_id),
        )
    _check_shape(path, bits, shots, job_id)
    return bits


def _check_shape(path: Path, bits: np.ndarray, shots: int | None, job_id: str) -> None:
    if bits.ndim not in (2, 3) or bits.dtype != bool or (shots is not None and bits.shape[-2] != int(shots)):
        raise StoredResultError(
            path,
            f"ledger: the stored result {str(path)!r} holds {bits.dtype} bits of shape {bits.shape}, expected bools "
            f"of shape ([circuits,] {shots}, qubits); " + _advice(path, job_id),
        )


def _load_legacy(path: Path, shots: int | None, job_id: str) -> np.ndarray:
    try:
        bits = np.asarray(np.load(path, allow_pickle=False))
    except Exception as exc:
        raise StoredResultError(
            path,
            f"ledger: the stored result {str(path)!r} is unreadable ({type(exc).__name__}: {exc}); "
            + _advice(path, job_id),
        ) from exc
    _check_shape(path, bits, shots, job_id)
    logger.warning("ledger: %s was stored without its PUB hash (an earlier version): only its shape is checked", path)
    return bits


def rescue_paths(ledger: Path) -> list[Path]:
    """Where events go when ``ledger`` cannot be written: ``<ledger>.rescue``, else the temporary directory."""
    ledger = Path(ledger)
    key = hashlib.sha256(str(ledger.absolute()).encode()).hexdigest()[:16]
    spare = Path(tempfile.gettempdir()) / f"hybrid-attention-{key}-{ledger.name}.rescue"
    return [ledger.with_name(ledger.name + ".rescue"), spare]


def append_line(path: Path, text: str) -> None:
    """Append ``text`` and a newline to ``path`` with ``os.write`` (every byte, or ``OSError``), then fsync."""
    data = (text + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_rescued(ledger: Path) -> list[tuple[Path, list[dict[str, Any]]]]:
    """``[(rescue file, its events)]`` of the rescue files of ``ledger`` that exist (damaged lines skipped)."""
    out = []
    for path in rescue_paths(ledger):
        if not path.is_file():
            continue
        events = []
        for line in path.read_bytes().splitlines():
            with contextlib.suppress(ValueError):
                obj = json.loads(line)
                if isinstance(obj, dict):
                    events.append(obj)
        out.append((path, events))
    return out


def keep_torn(ledger: Path, line: int, raw: bytes) -> Path | None:
    """Copy torn line ``line`` of ``ledger`` into ``<ledger>.torn`` (once per line); the side file, or ``None`` if
    it cannot be written."""
    side = Path(ledger).with_name(Path(ledger).name + ".torn")
    entry = {"line": line, "text": raw.decode("utf-8", "replace")}
    try:
        if side.is_file():
            for known in side.read_bytes().splitlines():
                with contextlib.suppress(ValueError):
                    if json.loads(known) == entry:
                        return side
        append_line(side, json.dumps(entry))
    except OSError:
        return None
    return side


def glued_event(line: bytes) -> tuple[Any, int]:
    """``(event, position)`` of a JSON event glued onto the end of a torn line (``(None, -1)``: none)."""
    pos = line.find(b'{"event"', 1)
    while pos > 0:
        try:
            return json.loads(line[pos:]), pos
        except (json.JSONDecodeError, UnicodeDecodeError):
            pos = line.find(b'{"event"', pos + 1)
    return None, -1


def rescue_event(ledger: Path, obj: dict[str, Any], line: str, exc: OSError) -> tuple[Path | None, str]:
    """Write the event ``line`` that ``ledger`` refused to the first writable rescue file (:func:`rescue_paths`);
    ``(that file or None, the message naming the job id and the file)``."""
    saved = None
    for path in rescue_paths(ledger):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            append_line(path, line)
        except OSError:
            continue
        saved = path
        break
    where = (
        f"its {obj['event']} event is saved in {str(saved)!r}, which the ledger reads when it is next loaded: a "
        "rerun finds the job instead of submitting its PUB again"
        if saved is not None
        else "no rescue file could be written either: note the job id"
    )
    msg = (
        f"ledger {str(ledger)!r} cannot be written ({exc.strerror or exc}) after the runtime accepted job "
        f"{obj['job_id']} (PUB {obj['pub_sha256'][:16]}..., backend {obj['backend']}): {where}"
    )
    return saved, msg
