"""The ablation grid on a Dask cluster: one task per (mode, T, lr, seed) run.

:func:`run_grid` submits each run that is not finished yet as a task running
:func:`hybrid_attention.apps.ablate.runs.run_one` (the serial path's own function) in a worker process, and waits for
all of them; :func:`hybrid_attention.apps.ablate.grid.ablate` then tabulates the run directories exactly as after a
serial grid, so the summaries are the same.

* Each run directory is written by one task only: :func:`~hybrid_attention.apps.train.train` holds its lock
  (:func:`hybrid_attention.apps.run_files.lock_directory`) for the whole run, and a second task on it (e.g. a retry
  while the first still runs) is refused with ``DirectoryLocked`` instead of interleaving writes. The ablation
  directory's own lock is held by the driver.
* A worker killed under a run: the scheduler reschedules the task, which resumes the run from its last checkpoint
  (or starts it afresh if it had none); finished runs are never touched again. A task that raises is retried
  ``retries`` times.
* Workers must see the same ``--out`` path (one machine, or a shared file system) and have the project installed.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hybrid_attention.apps.distributed import DEFAULT_RETRIES, dask_client, run_tasks
from hybrid_attention.apps.train import TrainConfig

from .runs import run_one

__all__ = ["run_grid", "run_task"]

logger = logging.getLogger(__name__)


def run_task(cfg: TrainConfig) -> dict[str, Any]:
    """The task of one run (in a worker process): :func:`~hybrid_attention.apps.ablate.runs.run_one`, reduced to
    ``{"run", "diverged", "step"}`` so that little travels back to the driver (the results are in the directory)."""
    m = run_one(cfg)
    return {"run": Path(cfg.out).name, "diverged": m is None, "step": None if m is None else m.get("step")}


def run_grid(
    configs: list[TrainConfig],
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    client: Any = None,
    retries: int = DEFAULT_RETRIES,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Run ``configs`` (validated grid runs, not finished) as Dask tasks; the :func:`run_task` records in
    completion order.

    Args:
        scheduler, workers: the cluster (:func:`hybrid_attention.apps.distributed.dask_client`); or
        client: an existing ``distributed.Client`` (instead of ``scheduler`` / ``workers``).
        retries: re-runs of a task that raised.

    Raises:
        ValueError: ``client`` together with ``scheduler`` or ``workers``.
        The error of a run that fails after its retries (bad data, a locked run directory, ...).
    """
    if client is not None and (scheduler is not None or workers is not None):
        raise ValueError(
            f"give either client= or scheduler=/workers=, got client and scheduler={scheduler!r}, workers={workers!r}"
        )
    if client is None:
        with dask_client(scheduler, workers) as c:
            return run_grid(configs, client=c, retries=retries, progress=progress)
    done = []
    for cfg, rec in run_tasks(
        client,
        run_task,
        configs,
        name=lambda c: Path(c.out).name,
        retries=retries,
        progress=progress,
        desc="ablate",
    ):
        logger.info("%s: %s", cfg.out, "diverged" if rec["diverged"] else f"finished at step {rec['step']}")
        done.append(rec)
    return done
