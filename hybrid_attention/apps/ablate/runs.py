"""One run of the ablation grid: train it, resume it from its checkpoint, or record that it diverged.

:func:`run_one` is the unit of work of both ways of running a grid: serially by
:func:`hybrid_attention.apps.ablate.grid.ablate`, and as one Dask task per run by
:func:`hybrid_attention.apps.ablate.cluster.run_grid`. Both import it from here, so the grid and the cluster modules
import one way (``grid -> cluster -> runs``, ``grid -> runs``).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from hybrid_attention.apps.run_files import LOCK_NAME, lock_directory, remove_stale_temporaries
from hybrid_attention.apps.train import TrainConfig, TrainingDiverged, train

__all__ = ["run_one", "prepare_run"]

logger = logging.getLogger(__name__)


def prepare_run(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` set to resume a run that has a checkpoint, or to start one that has none. A directory left by a run
    killed before its first checkpoint holds only its ``config.json`` (nothing computed): that is cleared so the run
    starts afresh."""
    d = Path(cfg.out)
    if (d / "checkpoint.pt").is_file():
        return dataclasses.replace(cfg, resume=True)
    if d.is_dir() and {p.name for p in d.iterdir()} <= {"config.json", LOCK_NAME}:
        with lock_directory(d):
            remove_stale_temporaries(d)
            (d / "config.json").unlink(missing_ok=True)
    return dataclasses.replace(cfg, resume=False)


def run_one(cfg: TrainConfig) -> dict[str, Any] | None:
    """Train (or resume) one grid run; its ``metrics.json`` content, or ``None`` if it diverged (recorded in its
    directory). The run directory is locked by :func:`~hybrid_attention.apps.train.train` while it runs, so a
    second task on the same run is refused instead of writing into it."""
    try:
        m = train(prepare_run(cfg))
    except TrainingDiverged as exc:
        logger.warning("%s", exc)
        return None
    logger.info("%s: %s", cfg.out, {k: v for k, v in m.items() if k.startswith("val_")})
    return m
