"""Exclusive, non-blocking file locks (``fcntl.flock``) held by one process: the lock of a run directory
(:func:`hybrid_attention.apps.run_files.lock_directory`) and the lock of a job ledger
(:class:`~hybrid_attention.backends.ibm.ledger.JobLedger`) are both this one.

The lock file holds the owner's pid (for the message a second process gets) and is removed on release; a file left
by a killed process is harmless (the kernel drops the lock with the process). Without ``fcntl`` (Windows) nothing
is locked, with a warning.

Example:
    >>> import tempfile, pathlib
    >>> lock = pathlib.Path(tempfile.mkdtemp()) / "x.lock"
    >>> fd = acquire_lock(lock)
    >>> lock.read_text().strip() == str(os.getpid())
    True
    >>> release_lock(lock, fd); lock.exists()
    False
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from pathlib import Path

__all__ = ["FileLocked", "acquire_lock", "release_lock", "lock_owner", "hold_shared", "drop_shared"]

logger = logging.getLogger(__name__)
#: locks held through :func:`hold_shared` by this process: absolute path -> [descriptor, holders]
_SHARED: dict[str, list] = {}

try:
    import fcntl
except ImportError:  # Windows: no advisory locks through fcntl
    fcntl = None  # type: ignore[assignment]


class FileLocked(RuntimeError):
    """Another process holds the lock file ``path`` (``pid``: its owner, if known)."""

    def __init__(self, path: Path, pid: int | None, message: str | None = None) -> None:
        owner = f"process {pid}" if pid else "another process"
        super().__init__(message or f"{str(path)!r} is held by {owner}")
        self.path, self.pid = path, pid


def lock_owner(lock: Path) -> int | None:
    """The pid written in the lock file ``lock`` (``None``: unreadable or empty)."""
    try:
        return int(Path(lock).read_text().strip() or 0) or None
    except (OSError, ValueError):
        return None


def acquire_lock(lock: str | os.PathLike) -> int | None:
    """Open and ``flock`` the file ``lock`` (created if missing); the descriptor, or ``None`` where locking is not
    supported (no ``fcntl``, or a file system that refuses locks: warned).

    Raises:
        FileLocked: another open of the lock (another process, or another descriptor in this one) holds it.
        OSError: the lock file cannot be created (e.g. a read-only directory).
    """
    lock = Path(lock)
    if fcntl is None:
        logger.warning("no fcntl on this platform: %s is not locked against concurrent use", lock)
        return None
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise FileLocked(lock, lock_owner(lock)) from None
            logger.warning("cannot lock %s (%s): proceeding without a lock", lock, exc)
            return None
        # the previous owner unlinks the file when it releases: if it did so between our open and our flock we hold
        # a lock on an orphaned inode, so start again on the current file
        try:
            st = os.stat(lock)
        except FileNotFoundError:
            st = None
        own = os.fstat(fd)
        if st is not None and (st.st_ino, st.st_dev) == (own.st_ino, own.st_dev):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)


def release_lock(lock: str | os.PathLike, fd: int | None) -> None:
    """Remove the lock file (while still holding it: nobody can hold the next one yet) and close ``fd``."""
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.unlink(lock)
    with contextlib.suppress(OSError):
        os.close(fd)


def hold_shared(lock: str | os.PathLike) -> str:
    """Take the lock file ``lock`` for this process, shared by every holder in it (counted): the key to pass to
    :func:`drop_shared`. Raises :class:`FileLocked` when another process holds it."""
    key = str(Path(lock).absolute())
    if key not in _SHARED:
        _SHARED[key] = [acquire_lock(lock), 0]
    _SHARED[key][1] += 1
    return key


def drop_shared(key: str, lock: str | os.PathLike) -> None:
    """One holder of this process lets go of the lock taken by :func:`hold_shared`; the last one releases it."""
    held = _SHARED.get(key)
    if held is None:
        return
    held[1] -= 1
    if held[1] <= 0:
        del _SHARED[key]
        release_lock(lock, held[0])
