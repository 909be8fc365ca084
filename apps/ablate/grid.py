"""Running the ablation grid: every (mode, T, seed) run of :func:`ablate`, resumed or skipped as its directory says.

Serially in this process by default; with ``scheduler=`` or ``workers=`` each run is one Dask task
(:mod:`hybrid_attention.apps.ablate.cluster`), and the summaries are the same.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from hybrid_attention.apps.run_files import LOCK_NAME, lock_directory, remove_stale_temporaries, write_json
from hybrid_attention.apps.train import TrainConfig, TrainingDiverged, train
from hybrid_attention.apps.train.flags import MODEL_FLAGS

from .report import divergence, is_finished, load_json, report

__all__ = ["ablate", "run_dir", "run_one"]

logger = logging.getLogger(__name__)

#: the settings an ablation directory is bound to (ablation.json)
_SETTINGS = ("task", "steps", *MODEL_FLAGS)


def run_dir(out: Path, mode: str, T: int, seed: int) -> Path:
    """The run directory of one grid point: ``out/runs/<mode>_T<T>_s<seed>``."""
    return out / "runs" / f"{mode}_T{T}_s{seed}"


def _prepare_run(cfg: TrainConfig) -> TrainConfig:
    """Resume a run that has a checkpoint; start one that has none. A directory left by a run killed before its
    first checkpoint holds only its ``config.json`` (nothing computed): that is cleared so the run starts afresh."""
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
        m = train(_prepare_run(cfg))
    except TrainingDiverged as exc:
        logger.warning("%s", exc)
        return None
    logger.info("%s: %s", cfg.out, {k: v for k, v in m.items() if k.startswith("val_")})
    return m


def ablate(
    base: TrainConfig,
    out: str | Path,
    modes: list[str],
    block_sizes: list[int],
    seeds: list[int],
    *,
    progress: bool = True,
    scheduler: str | None = None,
    workers: int | None = None,
) -> list[dict[str, Any]]:
    """Run (or resume) every missing run of the grid, then tabulate and plot. Returns the per-run rows.

    All configurations are validated before the first run starts. Runs that diverge
    (:class:`hybrid_attention.apps.train.TrainingDiverged`) are left out of the tables and listed by :func:`diverged_runs`.

    Args:
        scheduler: address of a Dask scheduler: each run is a task on its cluster
            (:func:`hybrid_attention.apps.ablate.cluster.run_grid`).
        workers: instead, a local Dask cluster of this many single-threaded worker processes. Neither: serially
            in this process. Either way the runs are the same and so are the summaries.

    Raises:
        hybrid_attention.apps.run_files.DirectoryLocked: another process is working in ``out``.
        ImportError: a cluster is asked for without ``distributed`` installed.
    """
    from hybrid_attention.apps.distributed import check_cluster

    check_cluster(scheduler, workers)
    out = Path(out)
    configs = []
    for seed in seeds:  # seed-major: an interrupted ablation has every (mode, T) cell for the first seeds
        for T in block_sizes:
            for mode in modes:
                cfg = dataclasses.replace(
                    base,
                    attention=mode,
                    block_size=T,
                    seed=seed,
                    out=str(run_dir(out, mode, T, seed)),
                    resume=True,
                    progress=False,
                )
                cfg.validate()
                configs.append(cfg)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    with lock_directory(out):
        _write_marker(out, base, modes, block_sizes, seeds)
        todo = [c for c in configs if not is_finished(Path(c.out)) and not divergence(Path(c.out))]
        logger.info("ablation: %d runs, %d already finished or diverged", len(configs), len(configs) - len(todo))
        if todo and (scheduler is not None or workers is not None):
            from .cluster import run_grid

            run_grid(todo, scheduler=scheduler, workers=workers, progress=progress)
            return report(out, base.task)
        bar = tqdm(
            todo, desc=f"ablate {base.task}{'' if base.ffn else ' no-ffn'}", disable=not progress, dynamic_ncols=True
        )
        for cfg in bar:
            bar.set_postfix(run=Path(cfg.out).name, refresh=True)
            run_one(cfg)
        return report(out, base.task)


def _write_marker(out: Path, base: TrainConfig, modes: list[str], block_sizes: list[int], seeds: list[int]) -> None:
    """Refuse other settings than those of the ablation in ``out``; record the settings and the union of the grids."""
    settings = {k: getattr(base, k) for k in _SETTINGS}
    marker = out / "ablation.json"
    old = load_json(marker) if marker.is_file() else {}
    if old:
        diff = {k: (old["settings"].get(k), v) for k, v in settings.items() if old["settings"].get(k) != v}
        if diff:
            raise ValueError(
                f"{str(out)!r} holds an ablation with other settings: "
                + ", ".join(f"{k}: existing {a!r}, now {b!r}" for k, (a, b) in diff.items())
                + "; choose another --out"
            )
    grid = {
        "modes": sorted(set(modes) | set(old.get("modes", []))),
        "block_sizes": sorted(set(block_sizes) | set(old.get("block_sizes", []))),
        "seeds": sorted(set(seeds) | set(old.get("seeds", []))),
    }
    write_json(marker, {"settings": settings, **grid})
