"""Scale-out on Dask ``distributed``: the cluster behind ``ablate`` and ``fidelity``, and running tasks on it.

Owns what the commands that distribute their work share:

* :func:`add_cluster_arguments`: the flags ``--scheduler ADDRESS`` (an existing Dask scheduler, e.g. one started
  with ``dask scheduler`` and ``dask worker ADDRESS`` on several machines, or by dask-jobqueue) and ``--workers N``
  (a ``LocalCluster`` of ``N`` single-threaded worker processes on this machine, its dashboard on a free port).
  Neither: the serial path.
* :func:`check_cluster` (validation before any work) and :func:`dask_client` (a context manager yielding a
  ``distributed.Client``, or ``None`` for the serial path; a local cluster is shut down on exit).
* :func:`run_tasks`: submit one task per item with ``retries``, yield ``(item, result)`` as tasks finish, with a
  tqdm bar. A task lost with a killed worker is rescheduled by the scheduler (up to its ``allowed-failures``);
  an exception inside a task is retried ``retries`` times and then raised here.

``distributed`` is imported only when a cluster is asked for (``pip install 'hybrid-attention[dask]'``). Worker
processes started by a Dask nanny get ``OMP_NUM_THREADS=1`` (Dask's default), and training tasks set their torch
threads from ``TrainConfig.threads``, so ``N`` workers with one thread each use ``N`` cores.

Example:
    >>> with dask_client(None, None) as client:  # neither flag: the serial path, no cluster
    ...     client is None
    True
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .cli_types import positive_int

__all__ = ["DEFAULT_RETRIES", "add_cluster_arguments", "check_cluster", "dask_client", "run_tasks"]

logger = logging.getLogger(__name__)

#: retries of a task that raised (a worker killed under a task is handled by the scheduler, not counted here)
DEFAULT_RETRIES = 2
_HINT = "pip install 'hybrid-attention[dask]'"


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--scheduler ADDRESS`` and ``--workers N`` (mutually exclusive; neither: run serially here)."""
    g = parser.add_mutually_exclusive_group()
    g.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="run each task on this Dask scheduler, e.g. tcp://10.0.0.1:8786 (see docs/scale_out.md)",
    )
    g.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="run on a local Dask cluster of N single-threaded worker processes (default: serially, no Dask)",
    )


def check_cluster(scheduler: str | None, workers: int | None) -> None:
    """``ValueError``/``TypeError`` for bad cluster settings, and ``ImportError`` (with the install hint) when a
    cluster is asked for without ``distributed`` installed; raised before any work."""
    if scheduler is not None and workers is not None:
        raise ValueError(f"give either a scheduler address or a number of workers, got both ({scheduler!r}, {workers})")
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise ValueError(f"scheduler must be an address such as 'tcp://host:8786', got {scheduler!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if scheduler is not None or workers is not None:
        try:
            import distributed  # noqa: F401
        except ImportError as exc:
            raise ImportError(f"running on a Dask cluster needs the 'distributed' package; run: {_HINT}") from exc


@contextlib.contextmanager
def dask_client(scheduler: str | None = None, workers: int | None = None, *, timeout: float = 30.0) -> Iterator[Any]:
    """A ``distributed.Client`` for ``scheduler`` (an address) or for a new ``LocalCluster`` of ``workers``
    single-threaded processes (scheduler and dashboard on free ports); ``None`` when both are ``None`` (the serial path).

    The client is closed on exit, and so is a cluster this function started (an external scheduler is left
    running). ``timeout``: seconds to wait for the scheduler to answer.
    """
    check_cluster(scheduler, workers)
    if scheduler is None and workers is None:
        yield None
        return
    from distributed import Client, LocalCluster

    if scheduler is not None:
        client = Client(scheduler, timeout=timeout)
        try:
            n = len(client.nthreads())
            logger.info("connected to Dask scheduler %s (%d workers)", scheduler, n)
            if not n:  # legal (workers may join later, e.g. queued batch jobs) but the tasks wait until then
                logger.warning("the Dask scheduler %s has no workers yet: tasks wait until workers join", scheduler)
            yield client
        finally:
            client.close()
        return
    quiet = logging.getLogger("distributed")
    level = quiet.level
    quiet.setLevel(max(logging.WARNING, level))  # the in-process scheduler's INFO lines are not the command's output
    try:
        yield from _local_client(LocalCluster, Client, workers, timeout)
    finally:
        quiet.setLevel(level)


def _local_client(LocalCluster: Any, Client: Any, workers: int, timeout: float) -> Iterator[Any]:
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        scheduler_port=0,
        silence_logs=logging.ERROR,
    )
    try:
        client = Client(cluster, timeout=timeout)
        logger.info("local Dask cluster of %d workers, dashboard %s", workers, cluster.dashboard_link)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def run_tasks(
    client: Any,
    fn: Callable[..., Any],
    items: Iterable[Any],
    *,
    name: Callable[[Any], str] = str,
    retries: int = DEFAULT_RETRIES,
    progress: bool = True,
    desc: str = "tasks",
    **kwargs: Any,
) -> Iterator[tuple[Any, Any]]:
    """Run ``fn(item, **kwargs)`` as one Dask task per item; yield ``(item, result)`` in completion order.

    Args:
        client: a ``distributed.Client``.
        fn: a picklable (module-level) function; it runs in a worker process.
        name: the item's label in the task key (shown on the dashboard) and in the bar.
        retries: re-runs of a task that raised before its exception is raised here.
        progress: a tqdm bar over finished tasks.

    Raises:
        The exception of a task that still fails after ``retries`` re-runs (the other tasks are cancelled).
    """
    from distributed import as_completed
    from tqdm.auto import tqdm

    items = list(items)
    tag = uuid.uuid4().hex[:8]
    futures = {
        client.submit(fn, item, key=f"{desc}-{name(item)}-{tag}", retries=retries, pure=False, **kwargs): item
        for item in items
    }
    bar = tqdm(total=len(items), desc=desc, disable=not progress, dynamic_ncols=True)
    try:
        for fut in as_completed(list(futures)):
            result = fut.result()  # raises the task's exception after its retries
            item = futures[fut]
            bar.update(1)
            bar.set_postfix(done=name(item), refresh=False)
            yield item, result
    finally:
        bar.close()
        pending = [f for f in futures if not f.done()]
        if pending:  # an error or an interrupted caller: nothing keeps running on the cluster for us
            client.cancel(pending)
