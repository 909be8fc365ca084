"""Running the ablation grid: every (mode, T, lr, seed) run of :func:`ablate`, resumed or skipped as its directory
says, and the directory's marker ``ablation.json`` (which settings it is bound to, the union of its grids).

Serially in this process by default; with ``scheduler=`` or ``workers=`` each run is one Dask task
(:mod:`hybrid_attention.apps.ablate.cluster`), and the summaries are the same.

The learning-rate axis and run names (:func:`run_dir`): a directory has an *lr axis* once it holds, or is asked
for, more than one learning rate. Runs at the directory's *untagged* learning rate are named
``runs/<mode>_T<T>_s<seed>``; runs at any other learning rate carry a tag, ``runs/<mode>_T<T>_lr<tag>_s<seed>``
(:func:`lr_tag`, e.g. ``lr3e-03``). The untagged learning rate is the one a directory started with when it started
with a single one (also the one of a marker that records no ``lrs``, only ``settings.lr``), and none when it started
with several. So a single-rate directory continued with ``lrs`` that include its learning rate reuses its runs as
they are, and a directory without an lr axis has untagged run names only.

The marker rule: the settings of ``_SETTINGS`` must match the directory's (a setting the marker does not record
counts as its :class:`TrainConfig` default). ``lr`` is one of them only while neither the directory nor the call has
an lr axis (a single ``--lr`` other than the directory's is refused); with an lr axis on either side every learning
rate is accepted and joins the directory's ``lrs``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import numbers
import time
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from hybrid_attention.apps.run_files import lock_directory, write_json
from hybrid_attention.apps.train import TrainConfig, upgrade_saved
from hybrid_attention.apps.train.flags import MODEL_FLAGS

from .cluster import run_grid
from .report import divergence, is_finished, load_json, report
from .runs import run_one

__all__ = ["ablate", "run_dir", "lr_tag", "project"]

logger = logging.getLogger(__name__)

#: the settings an ablation directory is bound to (ablation.json)
_SETTINGS = ("task", "max_steps", *MODEL_FLAGS)


def lr_tag(lr: float) -> str:
    """The learning rate in a run directory's name: the shortest scientific notation that reads back as the same
    float (only digits, ``.``, ``e``, ``+`` and ``-``: safe in any file system).

    Example:
        >>> lr_tag(3e-3), lr_tag(0.0015), lr_tag(1.0), float(lr_tag(0.1 + 0.2)) == 0.1 + 0.2
        ('3e-03', '1.5e-03', '1e+00', True)
    """
    lr = float(lr)
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"a learning rate must be a finite number > 0, got {lr!r}")
    for digits in range(17):  # 17 significant digits always round-trip a float64
        tag = f"{lr:.{digits}e}"
        if float(tag) == lr:
            return tag
    raise AssertionError(f"no round-tripping tag for {lr!r}")  # unreachable


def run_dir(out: Path, mode: str, T: int, seed: int, lr: float | None = None) -> Path:
    """The run directory of one grid point: ``out/runs/<mode>_T<T>_s<seed>`` (``lr=None``: the directory's untagged
    learning rate), else ``out/runs/<mode>_T<T>_lr<tag>_s<seed>`` with the :func:`lr_tag` of ``lr``."""
    tag = "" if lr is None else f"_lr{lr_tag(lr)}"
    return Path(out) / "runs" / f"{mode}_T{T}{tag}_s{seed}"


def ablate(
    base: TrainConfig,
    out: str | Path,
    modes: list[str],
    block_sizes: list[int],
    seeds: list[int],
    *,
    lrs: list[float] | None = None,
    progress: bool = True,
    scheduler: str | None = None,
    workers: int | None = None,
) -> list[dict[str, Any]]:
    """Run (or resume) every missing run of the grid, then tabulate and plot. Returns the per-run rows.

    All configurations are validated before the first run starts. Runs that diverge
    (:class:`hybrid_attention.apps.train.TrainingDiverged`) are left out of the tables and listed by :func:`diverged_runs`.

    Args:
        base: the settings shared by every run (its ``attention``, ``block_size``, ``seed`` and ``out`` are set per
            run; so is ``lr`` when ``lrs`` is given).
        out: the ablation directory (resumable; bound to the settings of its first call, see the module docstring).
        modes, block_sizes, seeds: the grid's axes.
        lrs: a learning-rate axis: one run per (mode, T, lr, seed), and the report gives the best learning rate per
            (mode, T) besides the table per learning rate. ``None`` (or ``[base.lr]``): the single ``base.lr``, run
            directories and reports exactly as without the axis.
        scheduler: address of a Dask scheduler: each run is a task on its cluster
            (:func:`hybrid_attention.apps.ablate.cluster.run_grid`).
        workers: instead, a local Dask cluster of this many single-threaded worker processes. Neither: serially
            in this process. Either way the runs are the same and so are the summaries.

    Raises:
        ValueError: a bad setting or learning rate, or settings other than those of the ablation in ``out``.
        hybrid_attention.apps.run_files.DirectoryLocked: another process is working in ``out``.
        ImportError: a cluster is asked for without ``distributed`` installed.
    """
    from hybrid_attention.apps.distributed import check_cluster

    check_cluster(scheduler, workers)
    out = Path(out)
    lrs = _check_lrs([base.lr] if lrs is None else lrs)
    grid = []
    for seed in seeds:  # seed-major: an interrupted ablation has every (mode, T, lr) cell for the first seeds
        for T in block_sizes:
            for lr in lrs:
                for mode in modes:
                    cfg = dataclasses.replace(
                        base,
                        attention=mode,
                        block_size=T,
                        seed=seed,
                        lr=lr,
                        out=str(run_dir(out, mode, T, seed, lr)),  # the final name is known under the lock
                        resume=True,
                        progress=False,
                    )
                    cfg.validate()
                    grid.append(cfg)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    with lock_directory(out):
        untagged = _write_marker(out, dataclasses.replace(base, lr=lrs[0]), modes, block_sizes, seeds, lrs)
        configs = [
            dataclasses.replace(
                c, out=str(run_dir(out, c.attention, c.block_size, c.seed, None if c.lr == untagged else c.lr))
            )
            for c in grid
        ]
        todo = [c for c in configs if not is_finished(Path(c.out)) and not divergence(Path(c.out))]
        logger.info("ablation: %d runs, %d already finished or diverged", len(configs), len(configs) - len(todo))
        project(todo, workers)
        if todo and (scheduler is not None or workers is not None):
            run_grid(todo, scheduler=scheduler, workers=workers, progress=progress)
            return report(out, base.task)
        bar = tqdm(
            todo, desc=f"ablate {base.task}{'' if base.ffn else ' no-ffn'}", disable=not progress, dynamic_ncols=True
        )
        for cfg in bar:
            bar.set_postfix(run=Path(cfg.out).name, refresh=True)
            run_one(cfg)
        return report(out, base.task)


def project(todo: list[TrainConfig], workers: int | None = None) -> float:
    """Log the projected wall time of the runs ``todo`` before the first starts, and return it (seconds, serial).

    One run per (mode, block size) is probed as ``train`` probes it before its first step
    (:func:`hybrid_attention.apps.train.projected_seconds`: a warm-up pass, then timed full-batch passes, nothing
    written); seeds and learning rates do not change a step's cost, so the other runs of that group count the same.
    A run resumed from a checkpoint counts in full (an upper bound). With ``workers``, the serial time is divided
    among them (ideal balance: a lower bound)."""
    from hybrid_attention.apps.timing import duration
    from hybrid_attention.apps.train import projected_seconds

    if not todo:
        return 0.0
    groups: dict[tuple[str, int], list[TrainConfig]] = {}
    for cfg in todo:
        groups.setdefault((cfg.attention, cfg.block_size), []).append(cfg)
    t0 = time.perf_counter()
    total = sum(projected_seconds(cfgs[0]) * len(cfgs) for cfgs in groups.values())
    spread = f", about {duration(total / workers)} on {workers} workers" if workers else ""
    logger.info(
        f"ablation: {len(todo)} runs to train, projected {duration(total)} in all{spread} (probe: one run per mode "
        f"and block size, {duration(time.perf_counter() - t0)})"
    )
    return total


def _check_lrs(lrs: Any) -> list[float]:
    """The learning rates of the grid as floats, duplicates dropped, order kept; ``ValueError``/``TypeError`` naming
    the bad entry."""
    if isinstance(lrs, (str, bytes)) or not hasattr(lrs, "__iter__"):
        raise TypeError(f"lrs must be a list of learning rates, got {lrs!r}")
    lrs = list(lrs)
    if not lrs:
        raise ValueError("lrs must hold at least one learning rate, got an empty list")
    for lr in lrs:
        if isinstance(lr, bool) or not isinstance(lr, numbers.Real):
            raise TypeError(f"a learning rate must be a number, got {lr!r} in lrs={lrs!r}")
        if not (math.isfinite(lr) and lr > 0):
            raise ValueError(f"a learning rate must be a finite number > 0, got {lr!r} in lrs={lrs!r}")
    return list(dict.fromkeys(float(lr) for lr in lrs))


def _config_defaults() -> dict[str, Any]:
    """The :class:`TrainConfig` default of every field."""
    out = {}
    for f in dataclasses.fields(TrainConfig):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def _write_marker(
    out: Path, base: TrainConfig, modes: list[str], block_sizes: list[int], seeds: list[int], lrs: list[float]
) -> float | None:
    """Refuse other settings than those of the ablation in ``out`` (the rule of the module docstring); record the
    settings and the union of the grids. Returns the directory's untagged learning rate (``None``: every run name
    carries its learning rate)."""
    marker = out / "ablation.json"
    old = load_json(marker) if marker.is_file() else {}
    old_settings = upgrade_saved(old.get("settings", {}))  # settings recorded under an older name: today's
    # a marker without "lrs" records its single lr in its settings, and its runs are untagged
    old_lrs = old.get("lrs", [old_settings["lr"]] if "lr" in old_settings else [])
    if not old:
        untagged = lrs[0] if len(lrs) == 1 else None
    else:
        untagged = old.get("untagged_lr", old_settings.get("lr"))
    axis = len(set(lrs)) > 1 or len(set(old_lrs)) > 1
    settings = {k: getattr(base, k) for k in _SETTINGS if k != "lr" or not axis}
    if old:
        defaults = _config_defaults()
        missing = object()
        diff = {}
        for k, v in settings.items():
            a = old_settings.get(k, missing)
            if (defaults[k] if a is missing else a) != v:
                diff[k] = f"existing {defaults[k]!r} (not recorded: the default)" if a is missing else f"existing {a!r}"
                diff[k] += f", now {v!r}"
        if diff:
            hint = ""
            if "lr" in diff:
                both = " ".join(str(x) for x in sorted({*old_lrs, *lrs}))
                hint = f" (to compare learning rates in this directory, give them all: --lrs {both})"
            raise ValueError(
                f"{str(out)!r} holds an ablation with other settings: "
                + ", ".join(f"{k}: {d}" for k, d in diff.items())
                + f"{hint}; choose another --out"
            )
    grid = {
        "modes": sorted(set(modes) | set(old.get("modes", []))),
        "block_sizes": sorted(set(block_sizes) | set(old.get("block_sizes", []))),
        "seeds": sorted(set(seeds) | set(old.get("seeds", []))),
        "lrs": sorted(set(lrs) | set(old_lrs)),
    }
    write_json(marker, {"settings": settings, **grid, "untagged_lr": untagged})
    return untagged
