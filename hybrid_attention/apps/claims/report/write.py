"""Writing the claims report: ``claims.md``, per study ``summary.md``, ``summary.csv``, ``comparisons.csv`` and the
plots, and the cost table (:func:`write_report`)."""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any

from ..costs import cost_rows, cost_table, measured_costs
from . import load as _load
from . import render as _render
from .findings import findings_from
from .plots import write_plots
from .sampler_training import load_sampler_training, sampler_training_markdown, sampler_training_path
from .tables import study_table

__all__ = ["write_report"]

logger = logging.getLogger(__name__)


def write_report(
    root: str | Path, out: str | Path | None = None, *, quantum_training: str | Path | None = None
) -> Path:
    """Write ``claims.md`` (findings, verdict rules, damaged runs, the finding-8 table, per-study tables), per study
    ``<study>/summary.md`` (pilot studies: with their pilot tables), ``summary.csv``, ``comparisons.csv`` and the
    plots, and ``costs.md`` / ``costs.csv`` to ``out`` (default ``root``). Finding 8 reads the quantum-training
    ``summary.json`` at ``quantum_training`` (default ``<root>/../quantum_training/summary.json``). Damaged runs
    (:mod:`.load`) are left out of every statistic, listed in ``claims.md`` and warned about. Returns the path of
    ``claims.md``.

    Raises:
        FileNotFoundError: ``root`` holds no finished run, or ``quantum_training`` given but not a file.
        ValueError: a malformed quantum-training ``summary.json`` (checked before anything is written).
    """
    qt_path = sampler_training_path(root, quantum_training)
    qt_rows = load_sampler_training(qt_path)
    root = Path(root)
    out = Path(out) if out is not None else root
    data, damaged = _load.all_rows(root)
    if not data:
        bad = f" ({len(damaged)} damaged, listed above)" if damaged else ""
        raise FileNotFoundError(f"no usable finished runs under {str(root)!r}/<study>/runs{bad}")
    out.mkdir(parents=True, exist_ok=True)
    sections = [_write_study(out, s, own, data) for s, own in data.items()]
    _write_costs(root, out)
    main = [s for s in data if not s.startswith("pilot")]
    lines = ["# The paper's findings against our runs", ""]
    if main:
        lines += _render.findings_markdown(findings_from(data, qt_path, qt_rows))
    else:
        lines += ["No main study has finished runs yet: only pilot tables below (no verdicts from pilots).", ""]
    lines += _render.damaged_markdown(damaged)
    lines += [sampler_training_markdown(qt_path, qt_rows)]
    lines += sections
    path = out / "claims.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _write_study(out: Path, s: str, own: list[dict[str, Any]], data: dict[str, list]) -> str:
    """A study's ``summary.md``, CSVs and plots; returns its markdown (a section of ``claims.md``)."""
    base = _load.field_base(s)
    rows = _load.with_references(s, own, data.get(base, []) if base else [])
    cells, comps = study_table(rows)
    d = out / s
    d.mkdir(parents=True, exist_ok=True)
    md = _render.study_markdown(s, rows, cells, comps)
    if len(rows) > len(own):
        md += f"\nsoftmax and j (uniform J-only): the runs of the study `{base}` with the same block sizes and seeds.\n"
    if s.startswith("pilot"):
        md += _render.pilot_markdown(own)
    else:
        md += _render.budget_markdown(own) + _render.breakdown_markdown(own)
    (d / "summary.md").write_text(md)
    with open(d / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(cells[0]))
        w.writeheader()
        w.writerows(cells)
    with open(d / "comparisons.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["block_size", "mode", "ref", "n", "mean_gain", "sd", "lo", "hi", "p", "best_mean_gain"])
        for c in comps:
            r, best = c["res"], (c["best"].mean if c["best"] is not None else "")
            w.writerow([c["block_size"], c["mode"], c["ref"], r.n, r.mean, r.sd, r.lo, r.hi, r.p, best])
    write_plots(d, s, rows, cells, comps)
    return md


def _write_costs(root: Path, out: Path) -> None:
    """``costs.csv`` and ``costs.md`` (measured milliseconds per step of every finished run); skipped with a
    warning when a run's files lack what the cost table reads (that run is listed as damaged)."""
    try:
        crow = cost_rows(root)
        table = cost_table(measured_costs(root)) if crow else ""
    except (KeyError, TypeError, ValueError) as exc:
        logger.warning("costs.md and costs.csv not written: a run's files lack a value they need (%r)", exc)
        return
    if not crow:
        return
    with open(out / "costs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(crow[0]))
        w.writeheader()
        w.writerows(crow)
    (out / "costs.md").write_text(
        "Measured training time per step (median over finished runs, one torch thread per run, evaluation "
        "excluded):\n\n" + table
    )
