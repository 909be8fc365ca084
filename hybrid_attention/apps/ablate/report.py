"""The ablation's results: reading its run directories, the summary statistics and the tables it writes.

With a learning-rate axis (the directory's ``ablation.json`` or its finished runs hold more than one learning rate)
:func:`report` adds an ``lr`` column to ``runs.csv``, writes the table per (mode, T, lr) to ``summary_by_lr.csv``,
and makes ``summary.csv``, ``metric_vs_T.png`` and the coupling profile those of the best learning rate per
(mode, T) (:func:`summarise_best_lr`: the same learning-rate budget for every mode); ``summary.md`` holds both
tables and ``metric_vs_lr.png`` the metric against the learning rate. With one learning rate there is no ``lr``
column, no per-lr table and no ``metric_vs_lr.png``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import statistics
from pathlib import Path
from typing import Any

from hybrid_attention.apps.train import TrainConfig
from hybrid_attention.attention import MODES

from .plots import plot_summary

__all__ = [
    "load_json",
    "is_finished",
    "divergence",
    "diverged_runs",
    "collect_runs",
    "summarise",
    "summarise_best_lr",
    "grid_lrs",
    "coupling_profile",
    "report",
    "summary_markdown",
]


def load_json(path: Path) -> Any:
    """The JSON content of ``path``."""
    with open(path) as f:
        return json.load(f)


def is_finished(d: Path) -> bool:
    """Whether the run in ``d`` finished (``metrics.json`` with ``finished: true``)."""
    p = d / "metrics.json"
    return p.is_file() and bool(load_json(p).get("finished"))


def divergence(d: Path) -> dict[str, Any] | None:
    """The ``diverged`` record of the run in ``d`` (``None``: it did not diverge)."""
    p = d / "metrics.json"
    return load_json(p).get("diverged") if p.is_file() else None


def diverged_runs(out: str | Path) -> dict[str, dict[str, Any]]:
    """``{run directory name: its metrics.json 'diverged' record}`` for the runs of ``out`` that diverged."""
    return {d.name: r for d in sorted((Path(out) / "runs").glob("*_T*_s*")) if (r := divergence(d))}


def _default_lr() -> float:
    """The :class:`TrainConfig` default learning rate: the learning rate of a run whose config records none."""
    return next(f.default for f in dataclasses.fields(TrainConfig) if f.name == "lr")


def collect_runs(out: str | Path) -> list[dict[str, Any]]:
    """One row per finished run under ``out/runs``: ``mode``, ``block_size``, ``lr``, ``seed``, ``steps``,
    ``elapsed_s``, ``val_loss`` and the task's metrics (``val_perplexity`` or ``val_accuracy``,
    ``val_string_accuracy``). ``lr`` is the run's learning rate (from its ``config.json``)."""
    out = Path(out)
    rows = []
    for d in sorted((out / "runs").glob("*_T*_s*")):
        if not is_finished(d):
            continue
        m = load_json(d / "metrics.json")
        c = load_json(d / "config.json")["run"]
        row = {
            "mode": c["attention"],
            "block_size": c["block_size"],
            "lr": c.get("lr", _default_lr()),
            "seed": c["seed"],
            "steps": m["step"],
            "elapsed_s": m["elapsed_s"],
            "val_loss": m["val_loss"],
        }
        for k in ("val_perplexity", "val_accuracy", "val_string_accuracy"):
            if k in m:
                row[k] = m[k]
        rows.append(row)
    return rows


def _metric(task: str) -> tuple[str, str]:
    return ("val_perplexity", "perplexity") if task == "shakespeare" else ("val_accuracy", "accuracy (%)")


def summarise(rows: list[dict[str, Any]], task: str, *, by_lr: bool = False) -> list[dict[str, Any]]:
    """Mean, std (ddof=1) and count per (mode, T); difference to softmax at the same T (also paired by seed).

    Args:
        rows: :func:`collect_runs` rows.
        task: ``"shakespeare"`` (perplexity, lower is better) or ``"brackets"`` (accuracy in %).
        by_lr: one row per (mode, T, lr), with an ``lr`` column, compared with softmax at the same T and learning
            rate. Without it the rows must hold a single learning rate (:func:`summarise_best_lr` picks one per
            (mode, T)).

    Raises:
        ValueError: ``rows`` hold several learning rates and ``by_lr`` is false.
    """
    if not by_lr and len(lrs := {r.get("lr") for r in rows}) > 1:
        raise ValueError(
            f"the runs hold several learning rates {sorted(lrs)}: pass by_lr=True for a row per learning rate, or "
            "use summarise_best_lr for the best one per (mode, T)"
        )
    return _summarise(rows, task, by_lr)


def _summarise(rows: list[dict[str, Any]], task: str, by_lr: bool) -> list[dict[str, Any]]:
    """:func:`summarise` without the check (:func:`summarise_best_lr` compares cells at different learning rates)."""
    key, _ = _metric(task)
    scale = 1.0 if task == "shakespeare" else 100.0

    def cell(r: dict[str, Any]) -> tuple:
        return (r["mode"], r["block_size"], r["lr"]) if by_lr else (r["mode"], r["block_size"])

    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(cell(r), []).append(r)
    out = []
    for c, rs in sorted(groups.items(), key=lambda kv: (kv[0][1], *kv[0][2:], MODES.index(kv[0][0]))):
        vals = [scale * r[key] for r in rs]
        s = {"mode": c[0], "block_size": c[1], **({"lr": c[2]} if by_lr else {})}
        s.update(
            n=len(vals),
            mean=statistics.fmean(vals),
            std=statistics.stdev(vals) if len(vals) > 1 else float("nan"),
            val_loss=statistics.fmean(r["val_loss"] for r in rs),
        )
        if task == "brackets":
            s["string_accuracy"] = statistics.fmean(100 * r["val_string_accuracy"] for r in rs)
        out.append(s)
    ref = {c[1:]: s["mean"] for c, s in zip(_cells(out, by_lr), out) if c[0] == "softmax"}
    # paired by seed: the same seed gives every mode the same data order and the same initial shared weights
    per_seed = {(*cell(r), r["seed"]): scale * r[key] for r in rows}
    lower_is_better = task == "shakespeare"
    for c, s in zip(_cells(out, by_lr), out):
        r = ref.get(c[1:])
        s["diff"] = s["mean"] - r if r is not None else float("nan")
        s["rel_diff_pct"] = 100 * (s["mean"] - r) / r if r else float("nan")
        pairs = [
            (v, per_seed[("softmax", *k[1:])])
            for k, v in per_seed.items()
            if k[:-1] == c and ("softmax", *k[1:]) in per_seed
        ]
        d = [100 * (v - b) / b if lower_is_better else v - b for v, b in pairs]
        s["paired_diff"] = statistics.fmean(d) if d else float("nan")
        s["paired_std"] = statistics.stdev(d) if len(d) > 1 else float("nan")
        s["better_than_softmax"] = f"{sum((v < b) if lower_is_better else (v > b) for v, b in pairs)}/{len(pairs)}"
    return out


def _cells(summ: list[dict[str, Any]], by_lr: bool) -> list[tuple]:
    return [(s["mode"], s["block_size"], s["lr"]) if by_lr else (s["mode"], s["block_size"]) for s in summ]


def summarise_best_lr(rows: list[dict[str, Any]], task: str) -> list[dict[str, Any]]:
    """The :func:`summarise` rows of each (mode, T) at its best learning rate: the same learning-rate budget for
    every mode, the way a per-mode learning-rate sweep compares them.

    The best learning rate of a (mode, T) has the best mean validation metric over seeds (lowest perplexity, highest
    accuracy) among its learning rates with the most finished seeds (a learning rate that lost seeds to divergence
    cannot win on its survivors); ties go to the lower mean validation loss, then to the smaller learning rate. The
    differences to softmax are to softmax at its own best learning rate, paired by seed.

    Returns:
        One row per (mode, T): ``mode``, ``block_size``, ``lr`` (the best), ``lrs_tried`` (learning rates with
        finished runs), then the :func:`summarise` columns.
    """
    per_lr = summarise(rows, task, by_lr=True)
    sign = 1.0 if task == "shakespeare" else -1.0  # sort key: smaller is better
    cells: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for s in per_lr:
        cells.setdefault((s["mode"], s["block_size"]), []).append(s)
    best: dict[tuple[str, int], tuple[float, int]] = {}
    for c, ss in cells.items():
        most = max(s["n"] for s in ss)
        pick = min((s for s in ss if s["n"] == most), key=lambda s: (sign * s["mean"], s["val_loss"], s["lr"]))
        best[c] = (pick["lr"], len(ss))
    chosen = [r for r in rows if best[(r["mode"], r["block_size"])][0] == r["lr"]]
    out = []
    for s in _summarise(chosen, task, by_lr=False):
        lr, tried = best[(s["mode"], s["block_size"])]
        out.append({"mode": s["mode"], "block_size": s["block_size"], "lr": lr, "lrs_tried": tried, **s})
    return out


def grid_lrs(out: str | Path, rows: list[dict[str, Any]] | None = None) -> list[float]:
    """The learning rates of the ablation in ``out``: those of its ``ablation.json`` and of ``rows`` (default: its
    finished runs, :func:`collect_runs`), sorted. More than one: the directory has a learning-rate axis."""
    marker = Path(out) / "ablation.json"
    lrs = set(load_json(marker).get("lrs", [])) if marker.is_file() else set()
    return sorted(lrs | {r["lr"] for r in (collect_runs(out) if rows is None else rows)})


def coupling_profile(
    out: str | Path, mode: str = "hj", *, lrs: dict[int, float] | None = None
) -> dict[int, list[tuple[int, float, float, int]]]:
    """Learned ``J`` averaged by key distance: ``{T: [(distance, mean, std over seeds, n_seeds), ...]}``.

    Args:
        out: the ablation directory.
        mode: the attention mode whose runs are read.
        lrs: ``{T: learning rate}``: only the runs at that learning rate for each T (e.g. the best one of
            :func:`summarise_best_lr`; a T not in it is left out). ``None``: every finished run.
    """
    per: dict[int, dict[int, list[float]]] = {}
    for d in sorted((Path(out) / "runs").glob(f"{mode}_T*_s*")):
        if not is_finished(d) or not (d / "couplings.json").is_file():
            continue
        c = load_json(d / "config.json")["run"]
        T = c["block_size"]
        if lrs is not None and lrs.get(T) != c.get("lr", _default_lr()):
            continue
        sums: dict[int, list[float]] = {}
        for J in load_json(d / "couplings.json")["J"]:
            if J is None:
                continue
            for head in J:
                for j in range(T):
                    for k in range(j + 1, T):
                        sums.setdefault(k - j, []).append(head[j][k])
        for dist, v in sums.items():
            per.setdefault(T, {}).setdefault(dist, []).append(statistics.fmean(v))
    return {
        T: [
            (dist, statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else float("nan"), len(v))
            for dist, v in sorted(dd.items())
        ]
        for T, dd in sorted(per.items())
    }


def _fmt(x: float, nd: int = 2) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def report(out: str | Path, task: str) -> list[dict[str, Any]]:
    """Write runs.csv, summary.csv/.md, couplings_by_distance.csv and the plots from the finished runs (with a
    learning-rate axis also summary_by_lr.csv and metric_vs_lr.png: see the module docstring); return the per-run
    rows (:func:`collect_runs`)."""
    out = Path(out)
    rows = collect_runs(out)
    if not rows:
        raise ValueError(f"no finished runs under {str(out / 'runs')!r}")
    by_lr = len(grid_lrs(out, rows)) > 1
    fields = sorted({k for r in rows for k in r}, key=lambda k: list(rows[0]).index(k) if k in rows[0] else 99)
    if not by_lr:
        fields.remove("lr")  # one learning rate: no lr column
    _write_csv(out / "runs.csv", fields, rows)
    per_lr = summarise(rows, task, by_lr=True) if by_lr else None
    summ = summarise_best_lr(rows, task) if by_lr else summarise(rows, task)
    _write_csv(out / "summary.csv", list(summ[0]), summ)
    if per_lr is not None:
        _write_csv(out / "summary_by_lr.csv", list(per_lr[0]), per_lr)
    _, label = _metric(task)
    prof = coupling_profile(out, lrs={s["block_size"]: s["lr"] for s in summ if s["mode"] == "hj"} if by_lr else None)
    with open(out / "couplings_by_distance.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["block_size", "distance", "mean_J", "std_over_seeds", "seeds"])
        for T, pts in prof.items():
            for p in pts:
                w.writerow([T, *p])
    (out / "summary.md").write_text(summary_markdown(summ, prof, task, by_lr=per_lr))
    plot_summary(out, summ, prof, task, label, by_lr=per_lr)
    return rows


def _write_csv(path: Path, fields: list[str], rows: list[dict[str, Any]]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def _table(summ: list[dict[str, Any]], task: str, *, lr: bool = False) -> list[str]:
    """The markdown table of :func:`summarise` rows (with an ``lr`` column after ``mode`` when ``lr``)."""
    lrh, lrs, lrc = (" lr |", " --- |", lambda s: f" {s['lr']:g} |") if lr else ("", "", lambda s: "")
    lines = []
    if task == "shakespeare":
        lines += [
            f"| T | mode |{lrh} val perplexity (mean ± std) | seeds | rel. diff to softmax | paired rel. diff (mean ± std) | better than softmax |",
            f"| --- | --- |{lrs} --- | --- | --- | --- | --- |",
        ]
        for s in summ:
            lines.append(
                f"| {s['block_size']} | {s['mode']} |{lrc(s)} {_fmt(s['mean'], 3)} ± {_fmt(s['std'], 3)} | {s['n']} | "
                f"{_fmt(s['rel_diff_pct'], 2)} % | {_fmt(s['paired_diff'], 2)} ± {_fmt(s['paired_std'], 2)} % | "
                f"{s['better_than_softmax']} |"
            )
    else:
        lines += [
            f"| T | mode |{lrh} per-bracket accuracy % (mean ± std) | whole-string % | seeds | diff to softmax (points) | rel. diff | "
            "paired diff (points, mean ± std) | better than softmax |",
            f"| --- | --- |{lrs} --- | --- | --- | --- | --- | --- | --- |",
        ]
        for s in summ:
            lines.append(
                f"| {s['block_size']} | {s['mode']} |{lrc(s)} {_fmt(s['mean'])} ± {_fmt(s['std'])} | {_fmt(s['string_accuracy'], 1)} | "
                f"{s['n']} | {_fmt(s['diff'])} | {_fmt(s['rel_diff_pct'], 2)} % | {_fmt(s['paired_diff'])} ± {_fmt(s['paired_std'])} | "
                f"{s['better_than_softmax']} |"
            )
    return lines


def summary_markdown(
    summ: list[dict[str, Any]],
    prof: dict[int, list[tuple[int, float, float, int]]],
    task: str,
    *,
    by_lr: list[dict[str, Any]] | None = None,
) -> str:
    """``summary.md``: the :func:`summarise` table and, when there are ``hj`` runs, the :func:`coupling_profile` one.

    With ``by_lr`` (the ``summarise(..., by_lr=True)`` rows), ``summ`` is the :func:`summarise_best_lr` table: it
    comes first, then the table per learning rate."""
    lines = []
    if by_lr is None:
        lines += _table(summ, task)
    else:
        metric = _metric(task)[1].split(" ")[0]
        lines += [
            f"Best learning rate per (mode, T): the best mean validation {metric} over seeds among the learning rates "
            "with the most finished seeds (ties: lower validation loss, then the smaller lr); differences to softmax "
            "at its own best learning rate, paired by seed.",
            "",
            *_table(summ, task, lr=True),
            "",
            "Per learning rate (differences to softmax at the same learning rate):",
            "",
            *_table(by_lr, task, lr=True),
        ]
    if prof:
        lines += [
            "",
            "Learned couplings of the `hj` runs, mean J by key distance |j - k| (mean over pairs, heads, layers; then over seeds"
            + ("; at the best learning rate per T" if by_lr is not None else "")
            + "):",
            "",
            "| T | " + " | ".join(f"d={d}" for d in range(1, max(prof))) + " |",
            "| --- |" + " --- |" * (max(prof) - 1),
        ]
        for T, pts in prof.items():
            vals = {d: m for d, m, _, _ in pts}
            lines.append(
                f"| {T} | " + " | ".join(_fmt(vals[d], 3) if d in vals else "" for d in range(1, max(prof))) + " |"
            )
    return "\n".join(lines) + "\n"
