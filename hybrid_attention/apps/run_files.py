"""Run-directory files: an exclusive lock per directory, atomic writes, and safe checkpoint loading.

Owns what ``hybrid-attention train``, ``ablate``, ``fidelity`` and ``demo`` share about their output directories:

* :func:`lock_directory`: an exclusive, non-blocking ``fcntl.flock`` on ``DIR/.lock`` held for a whole run, so a
  second process on the same directory is refused (:class:`DirectoryLocked`) instead of interleaving its writes.
  The lock file holds the owner's pid and is removed on release; a file left by a killed process is harmless (the
  kernel drops the lock with the process). Without ``fcntl`` (Windows) runs proceed unlocked, with a warning.
* :func:`atomic_write`: a fixed temporary name ``.NAME.tmp`` next to the target, ``fsync``, then ``os.replace``: the
  previous version stays intact until the new one is complete, and a temporary file left by a kill is overwritten
  by the next write or removed by :func:`remove_stale_temporaries` when the directory is next locked.
* :func:`load_checkpoint`: ``torch.load(weights_only=True)`` (tensors and plain containers only), with a
  ``ValueError`` naming the file for a truncated, corrupt or foreign checkpoint.

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with lock_directory(d):
    ...     write_json(d / "x.json", {"a": 1})
    >>> sorted(p.name for p in d.iterdir())
    ['x.json']
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from hybrid_attention.backends.file_lock import FileLocked, acquire_lock, release_lock

__all__ = [
    "LOCK_NAME",
    "DirectoryLocked",
    "lock_directory",
    "atomic_write",
    "write_json",
    "remove_stale_temporaries",
    "is_empty",
    "load_checkpoint",
]

logger = logging.getLogger(__name__)

LOCK_NAME = ".lock"
_TMP_SUFFIX = ".tmp"
#: files written through :func:`atomic_write` by train, ablate and fidelity (their temporaries are cleaned up)
_WRITTEN = ("checkpoint.pt", "metrics.json", "couplings.json", "config.json", "report.json", "ablation.json")


class DirectoryLocked(FileLocked):
    """Another process holds the lock of a run directory (``path``: the directory, ``pid``: its owner if known)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        owner = f"process {pid}" if pid else "another process"
        super().__init__(
            path,
            pid,
            f"{str(path)!r} is in use by {owner} (lock {str(path / LOCK_NAME)!r}); wait for it to finish "
            "or choose another directory",
        )


def _acquire(path: Path) -> int | None:
    """Lock ``path/.lock`` (:func:`hybrid_attention.backends.file_lock.acquire_lock`, the ledger's lock too)."""
    try:
        return acquire_lock(path / LOCK_NAME)
    except FileLocked as exc:
        raise DirectoryLocked(path, exc.pid) from None


@contextlib.contextmanager
def lock_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Hold an exclusive lock on the existing directory ``path`` for the ``with`` block.

    Stale temporary files of :func:`atomic_write` are removed once the lock is held.

    Raises:
        DirectoryLocked: another process (or another open of the lock in this process) holds it.
        OSError: the lock file cannot be created (e.g. a read-only directory).
    """
    path = Path(path)
    fd = _acquire(path)
    try:
        remove_stale_temporaries(path)
        yield path
    finally:
        release_lock(path / LOCK_NAME, fd)


def _tmp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}{_TMP_SUFFIX}")


def atomic_write(path: str | os.PathLike, write: Callable[[Any], Any]) -> None:
    """``write(binary_file)`` to ``.NAME.tmp`` in the same directory, ``fsync``, then ``os.replace`` onto ``path``.

    The fixed temporary name assumes one writer per directory (:func:`lock_directory`): a file left by a kill is
    overwritten by the next write. The previous ``path`` is untouched until the new file is complete.
    """
    path = Path(path)
    tmp = _tmp_name(path)
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno and not exc.filename:  # e.g. a full disk: say which file
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable (POSIX; not possible on every platform)
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """:func:`atomic_write` of ``obj`` as indented JSON."""
    atomic_write(path, lambda f: f.write(json.dumps(obj, indent=1).encode()))


def remove_stale_temporaries(path: str | os.PathLike) -> list[Path]:
    """Remove temporary files left in ``path`` by a killed write: every ``.NAME.*`` file for a ``NAME`` this package
    writes, which covers :func:`atomic_write`'s ``.NAME.tmp`` and ``tempfile.mkstemp``-style ``.NAME.XXXXXXXX``
    names. Call it only while holding the lock."""
    removed = []
    for p in Path(path).glob(".*"):
        if not p.is_file():
            continue
        if any(p.name.startswith(f".{n}.") for n in _WRITTEN):  # only files this package writes: never a user's
            with contextlib.suppress(OSError):
                p.unlink()
                removed.append(p)
    if removed:
        logger.info("removed %d temporary file(s) left by an interrupted write in %s", len(removed), path)
    return removed


def is_empty(path: str | os.PathLike) -> bool:
    """``path`` holds nothing but its lock file (a missing directory counts as empty)."""
    path = Path(path)
    return not path.is_dir() or all(p.name == LOCK_NAME for p in path.iterdir())


def load_checkpoint(path: str | os.PathLike, *, required: tuple[str, ...] = ("model", "config")) -> dict[str, Any]:
    """``torch.load(path, weights_only=True)`` on CPU, checked to be a dict holding ``required`` keys.

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: truncated, corrupt, or holding objects other than tensors and plain containers (the message
            names the file).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {str(path)!r}")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises RuntimeError, UnpicklingError, EOFError, ... depending on the damage
        raise ValueError(
            f"cannot load checkpoint {str(path)!r}: it is truncated, corrupt, or holds objects other than "
            f"tensors and plain containers, which are not loaded for safety ({_load_error(exc)})"
        ) from exc
    missing = [k for k in required if not isinstance(blob, dict) or k not in blob]
    if missing:
        raise ValueError(f"checkpoint {str(path)!r} is not a hybrid-attention checkpoint (missing {missing})")
    return blob


def _load_error(exc: BaseException) -> str:
    """The reason in one of torch.load's multi-line messages (which suggest ``weights_only=False``: not for us)."""
    text = str(exc)
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0].split(". ")[0].rstrip(".") if lines else type(exc).__name__
