"""Running a fidelity sweep into its report directory: :func:`run_sweep`, the resumable ``report.json``.

A report is continued only with the same ensemble (:data:`~hybrid_attention.apps.fidelity.config.ENSEMBLE_KEYS`) and
base point; other samplers or axis values extend it, and its configuration records the union.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from hybrid_attention.apps.hardware import LEDGER_NAME
from hybrid_attention.apps.run_files import LOCK_NAME, lock_directory, write_json

from . import band, sweep
from .config import ENSEMBLE_KEYS, GRID_KEYS, FidelityConfig, sweep_points
from .cost import mark_pareto
from .model import model_inputs
from .plots import plot_seconds, write_band_plots, write_plots
from .problems import banded_problems, ensemble_problems, problems_from_model
from .projection import project_sweep

__all__ = ["REPORT", "SUMMARY", "REPORT_VERSION", "load_report", "run_sweep"]

logger = logging.getLogger(__name__)

REPORT = "report.json"
#: the table ``hybrid-attention fidelity`` prints, saved next to the report and the plots
SUMMARY = "summary.md"
REPORT_VERSION = 1


def load_report(out: str | Path) -> dict[str, Any]:
    """Read ``out/report.json``."""
    with open(Path(out) / REPORT) as f:
        return json.load(f)


def _save(out: Path, report: dict[str, Any]) -> None:
    write_json(out / REPORT, report)


def _open_report(out: Path, cfg: FidelityConfig, overwrite: bool, command: str | None) -> dict[str, Any]:
    """The report to continue in ``out`` (locked by the caller), or a fresh one; ``ValueError`` naming the settings
    that differ from a report already there."""
    fresh = {
        "version": REPORT_VERSION,
        "config": dataclasses.asdict(cfg),
        "commands": [command] if command else [],
        "points": {},
    }
    (out / (REPORT + ".tmp")).unlink(missing_ok=True)  # a temporary report left by a killed write
    if overwrite:
        for old in [out / REPORT, out / SUMMARY, *out.glob("fidelity_vs_*.png")]:  # only files this command writes
            old.unlink(missing_ok=True)
        return fresh
    if not (out / REPORT).exists():
        if any(p.name != LOCK_NAME for p in out.iterdir()):
            raise ValueError(
                f"--out {out} exists, is not empty and holds no {REPORT}; choose another directory or pass --overwrite"
            )
        return fresh
    try:
        old = load_report(out)
    except ValueError as exc:
        raise ValueError(
            f"--out {out}: {REPORT} is damaged ({exc}); choose another directory or pass --overwrite"
        ) from exc
    if old.get("version") != REPORT_VERSION:
        raise ValueError(
            f"--out {out} holds a report of format version {old.get('version')}, this version writes "
            f"{REPORT_VERSION}; choose another directory or pass --overwrite"
        )
    old_cfg = {**dataclasses.asdict(cfg), **old.get("config", {})}  # a key the report does not record: as in cfg
    diff = {k: (old_cfg[k], getattr(cfg, k)) for k in (*ENSEMBLE_KEYS, "base") if old_cfg[k] != getattr(cfg, k)}
    if diff:
        what = " and ".join(
            w
            for w, keys in (("a different ensemble", ENSEMBLE_KEYS), ("another base point", ("base",)))
            if any(k in diff for k in keys)
        )
        hint = (
            " (pass --base "
            + ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in old_cfg["base"].items())
            + " to extend it)"
            if list(diff) == ["base"]
            else ""
        )
        raise ValueError(
            f"--out {out} holds a report of {what}: "
            + "; ".join(f"{k}: report {a!r}, now {b!r}" for k, (a, b) in diff.items())
            + f"{hint}; rerun with the report's settings, choose another directory or pass --overwrite"
        )
    union = {k: _union(old_cfg[k], getattr(cfg, k), ordered=k == "samplers") for k in GRID_KEYS}
    added = {k: [v for v in getattr(cfg, k) if v not in old_cfg[k]] for k in GRID_KEYS}
    if any(added.values()):
        logger.info("extending the report in %s with %s", out, {k: v for k, v in added.items() if v})
    old["config"] = {**dataclasses.asdict(cfg), **union}
    if command and command not in old.setdefault("commands", []):
        old["commands"].append(command)
    return old


def _union(old: list, new: list, *, ordered: bool) -> list:
    merged = list(dict.fromkeys([*old, *new]))
    return merged if ordered else sorted(merged)


def check_budgets(points: list[Any], problems_for: Any) -> None:
    """Each point with a ``budget`` (work per chain), validated by its sampler on the point's problems
    (``problems_for(n)``) with that budget and its shots: a budget whose chains, traces or sweep schedules exceed the
    memory budget is refused (``ValueError`` naming the size, the estimate and the budget) before any point is
    measured. A sampler whose dependencies are missing is left to the sweep (which skips it)."""
    for pt in points:
        if pt.budget is None:
            continue
        try:
            sampler = sweep.build_sampler(pt.sampler)
        except ImportError:
            continue
        try:
            options = {sweep.BUDGET_OPTION[pt.sampler]: int(pt.budget)}
            sampler.validate(problems_for(pt.n), num_reads=pt.shots, options=options)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"fidelity point {pt.key}: {exc}") from exc
        finally:
            sampler.close()


def _ensemble(cfg: FidelityConfig, n: int, cache: dict) -> Any:
    if n not in cache:
        if cfg.band:
            cache[n] = banded_problems(
                n, cfg.band, cfg.problems, seed=cfg.seed, scale=cfg.scale, beta=cfg.beta, coupling=cfg.coupling
            )
        elif cfg.ensemble != "model":
            cache[n] = ensemble_problems(
                cfg.ensemble, n, cfg.problems, seed=cfg.seed, scale=cfg.scale, beta=cfg.beta, coupling=cfg.coupling
            )
        else:
            model, idx = model_inputs(cfg.checkpoint, cfg.problems, seed=cfg.seed)
            cache[n] = problems_from_model(model, idx, n, layer=cfg.layer, head=cfg.head)
    return cache[n]


def run_sweep(
    cfg: FidelityConfig,
    out: str | Path,
    *,
    overwrite: bool = False,
    plots: bool = True,
    command: str | None = None,
    progress: bool = True,
    scheduler: str | None = None,
    workers: int | None = None,
) -> dict[str, Any]:
    """Measure every point of :func:`sweep_points` not already in ``out/report.json``; save after each point.

    Args:
        cfg: the sweep; out: report directory; overwrite: start a fresh report even if ``out`` holds one;
        plots: write PNGs; command: the command line recorded in the report; progress: tqdm bar.
        scheduler, workers: measure the points as Dask tasks on this scheduler, or on a local cluster of this many
            workers (:func:`hybrid_attention.apps.fidelity.sweep.measure_points`); neither: serially here. The
            points' numbers are the same either way (timings aside).

    Returns:
        The report dict (also in ``out/report.json``).

    Raises:
        ValueError: ``out`` holds something else, or a report with other settings (see :func:`_open_report`).
        hybrid_attention.apps.run_files.DirectoryLocked: another process is writing to ``out``.
    """
    from hybrid_attention.apps.distributed import check_cluster

    check_cluster(scheduler, workers)
    if cfg.band and (scheduler is not None or workers is not None):
        raise ValueError("a banded sweep (--band) runs in this process; drop --scheduler / --workers")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a directory")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        with lock_directory(out):
            report = _open_report(out, cfg, overwrite, command)
            cluster = {"scheduler": scheduler, "workers": workers}
            return _sweep(cfg, out, report, plots=plots, progress=progress, cluster=cluster)
    finally:
        if created:  # refused before writing anything: leave no directory behind
            with contextlib.suppress(OSError):
                out.rmdir()


def _sweep(
    cfg: FidelityConfig, out: Path, report: dict[str, Any], *, plots: bool, progress: bool, cluster: dict | None = None
) -> dict[str, Any]:
    todo = [p for p in sweep_points(cfg) if p.key not in report["points"]]
    if cfg.band:
        return _band_sweep(cfg, out, report, todo, plots=plots, progress=progress)
    logger.info("fidelity: %d points to measure, %d already in %s", len(todo), len(report["points"]), out)
    cache: dict = {}
    check_budgets(todo, lambda n: _ensemble(cfg, n, cache))  # before any point is measured
    skipped: dict[str, str] = report.setdefault("skipped", {})
    order = [*report["points"], *(p.key for p in todo)]
    measure = functools.partial(
        sweep.measure_point,
        seed=cfg.seed,
        calibration=cfg.calibration,
        backend=cfg.backend,
        ledger=str(Path(out) / LEDGER_NAME),
        mitigation=cfg.mitigation,
    )

    def keep(key: str, res: dict[str, Any]) -> None:
        skipped.pop(key, None)
        report["points"][key] = res
        _save(out, report)

    figures = (lambda: plot_seconds(report["config"])) if plots else None
    kept, _ = project_sweep(todo, lambda n: _ensemble(cfg, n, cache), measure, keep, figures)  # probe points kept
    todo = [p for p in todo if p.key not in kept]
    if todo and cluster and any(v is not None for v in cluster.values()):
        items = [(pt, _ensemble(cfg, pt.n, cache)) for pt in todo]
        for pt, (res, why) in sweep.measure_points(
            items,
            seed=cfg.seed,
            calibration=cfg.calibration,
            progress=progress,
            backend=cfg.backend,
            mitigation=cfg.mitigation,
            **cluster,
        ):
            if why is not None:
                logger.warning("skipping %s: %s", pt.key, why)
                skipped[pt.key] = why
                continue
            skipped.pop(pt.key, None)
            report["points"][pt.key] = res
            _save(out, report)  # in completion order: an interrupted sweep keeps every finished point
        todo = []
    for pt in tqdm(todo, desc="fidelity", disable=not progress, unit="pt"):
        try:
            res = measure(pt, _ensemble(cfg, pt.n, cache))
        except (ImportError, sweep.UnreachableTemperature) as exc:
            logger.warning("skipping %s: %s", pt.key, exc)
            skipped[pt.key] = str(exc)
            continue
        skipped.pop(pt.key, None)
        report["points"][pt.key] = res
        _save(out, report)
    report["points"] = {k: report["points"][k] for k in order if k in report["points"]}  # the serial order
    mark_pareto(report["points"])
    _save(out, report)
    if plots:
        report["plots"] = write_plots(report, out)
        _save(out, report)
    return report


def _band_sweep(
    cfg: FidelityConfig, out: Path, report: dict[str, Any], todo: list[Any], *, plots: bool, progress: bool
) -> dict[str, Any]:
    """The banded (device-scale) sweep: reach and projection first (:func:`band.project`), then each point."""
    cache: dict = {}
    skipped: dict[str, str] = report.setdefault("skipped", {})
    out_of_reach, _ = band.project(todo, lambda n: _ensemble(cfg, n, cache), seed=cfg.seed, calibration=cfg.calibration)
    skipped.update(out_of_reach)
    todo = [p for p in todo if p.key not in out_of_reach]
    for pt in tqdm(todo, desc="fidelity", disable=not progress, unit="pt"):
        try:
            res = band.measure_band_point(pt, _ensemble(cfg, pt.n, cache), seed=cfg.seed, calibration=cfg.calibration)
        except (ImportError, band.OutOfReach) as exc:
            logger.warning("skipping %s: %s", pt.key, exc)
            skipped[pt.key] = str(exc)
            continue
        skipped.pop(pt.key, None)
        report["points"][pt.key] = res
        _save(out, report)
    _save(out, report)
    if plots:
        report["plots"] = write_band_plots(report, out)
        _save(out, report)
    return report
