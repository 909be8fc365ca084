"""Coarse-grained threads for the simulators: independent chunks of a batch on a few threads, one intra-op thread each.

torch parallelises each kernel over its intra-op threads, which pays a barrier per kernel call. The native simulators
run many small kernels (a Trotter slice of a cache-sized sub-chunk is a few GEMMs of ~100 microseconds), so with two
intra-op threads every kernel waits for the slower thread: on a machine shared with other work (a descheduled thread
stalls each barrier) the ``statevector`` sampler measured 33-37 ms per call with two threads against 23-26 ms with
one (issue #44). Independent sub-chunks run on separate threads instead need no barrier until the end, the way Aer
runs its experiments in parallel.

:func:`chunk_workers` chooses the threads of one call from the work: never more than torch's intra-op thread count
(the user's budget, ``torch.set_num_threads``), never more than the chunks, and one thread when the call is too small
to repay a thread's start-up. :func:`run_chunks` runs the chunks on that many threads with torch's intra-op threads set
to one for the duration of the call (:func:`intra_op_threads`, restored after; torch's setting is process-wide, so a
concurrent torch call in another thread of the same process runs single-threaded meanwhile). With one worker the
chunks run in the calling thread, in order, exactly as a plain loop. The pool's threads are long-lived and, when they
are as many as the process's CPUs, each is pinned to one (:func:`_pinned_cpus`): unpinned, a woken thread starts on
the waker's CPU, and on a busy machine both chunk threads of a call ran on one core.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import torch

__all__ = ["intra_op_threads", "chunk_workers", "run_chunks", "MIN_CHUNK_WORK", "PIN_WORKERS"]

T = TypeVar("T")

#: least work of a call (in complex multiply-adds) worth a second thread: about 1 ms of arithmetic, 20x the ~50 us of
#: starting and joining a thread pool
MIN_CHUNK_WORK = 1 << 22
#: pin each pool thread to a CPU of its own (:func:`_pinned_cpus`); read when a pool is first made
PIN_WORKERS = True


@contextlib.contextmanager
def intra_op_threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to ``n`` inside the block, restored after (process-wide, as torch's setting is)."""
    before = torch.get_num_threads()
    if n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def chunk_workers(chunks: int, work: float, *, budget: int | None = None) -> int:
    """Threads for ``chunks`` independent chunks totalling ``work`` multiply-adds.

    Args:
        chunks: independent pieces of the call.
        work: the call's arithmetic (complex multiply-adds or comparable units).
        budget: the most threads to use (default: torch's intra-op thread count).

    Returns:
        ``min(budget, chunks)``, or 1 below :data:`MIN_CHUNK_WORK`.
    """
    budget = torch.get_num_threads() if budget is None else budget
    if chunks < 2 or budget < 2 or work < MIN_CHUNK_WORK:
        return 1
    return min(budget, chunks)


def run_chunks(fn: Callable[..., T], items: Sequence[Any], workers: int) -> list[T]:
    """``[fn(*item) for item in items]``, on ``workers`` threads with one intra-op thread each when ``workers > 1``.

    ``fn`` must be safe to run concurrently on different items (the simulators' scratch buffers are per thread:
    :mod:`.workspace`). Results keep the order of ``items``.
    """
    if workers <= 1:
        return [fn(*item) for item in items]
    with intra_op_threads(1):
        return list(_pool(workers).map(lambda item: fn(*item), items))


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(workers: int) -> ThreadPoolExecutor:
    """A long-lived pool of ``workers`` threads: their per-thread scratch buffers (:mod:`.workspace`) survive from
    call to call (fresh threads would fault in fresh buffers every call, which measured 1.5x slower than one thread),
    and torch fixes a thread's intra-op thread count at its first parallel kernel (one, inside :func:`run_chunks`).
    Each worker is pinned to a CPU of its own when the workers are as many as the process's CPUs (:func:`_pinned_cpus`)."""
    with _POOLS_LOCK:
        if workers not in _POOLS:
            cpus = _pinned_cpus(workers)
            init, args = (None, ()) if cpus is None else (_pin_worker, (cpus, itertools.count()))
            _POOLS[workers] = ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix="hybrid-attention-chunk", initializer=init, initargs=args
            )
        return _POOLS[workers]


def _pinned_cpus(workers: int) -> list[int] | None:
    """The CPUs the ``workers`` pool threads are pinned to, one each (``None``: no pinning).

    Unpinned, the kernel wakes a pool thread on the CPU of the thread that woke it (the caller's) and moves it to an
    idle CPU only at its next load balancing: with the other CPUs busy (a shared machine, or the caller's own
    OpenMP threads) both chunk threads of a ~20 ms call measured sharing one core, at 0.8-0.9 cores per call and
    1.2-1.3x the time of one thread (issue #44). Pinned to distinct CPUs they start on two cores at once. Only with
    :data:`PIN_WORKERS`, on Linux (``os.sched_setaffinity``), and when the workers are exactly as many as the CPUs the
    process may run on (its affinity set: ``taskset`` and cgroup CPU sets are respected), one each: the pool then
    covers the CPUs an unpinned pool could use. With more CPUs than workers the threads stay unpinned, since several
    processes (a sweep's workers) would otherwise pin theirs to the same CPUs."""
    if not PIN_WORKERS or not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    return cpus if len(cpus) == workers else None


def _pin_worker(cpus: list[int], counter: Iterator[int]) -> None:
    """Pool initializer: pin the calling thread to the next CPU of ``cpus`` (Linux: affinity 0 is the calling
    thread's, not the process's)."""
    os.sched_setaffinity(0, {cpus[next(counter) % len(cpus)]})
