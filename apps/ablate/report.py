"""The ablation's results: reading its run directories, the summary statistics and the tables it writes."""

from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path
from typing import Any

from hybrid_attention.attention import MODES

from .plots import plot_summary

__all__ = [
    "load_json",
    "is_finished",
    "divergence",
    "diverged_runs",
    "collect_runs",
    "summarise",
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


def collect_runs(out: str | Path) -> list[dict[str, Any]]:
    """One row per finished run under ``out/runs``: ``mode``, ``block_size``, ``seed``, ``steps``, ``elapsed_s``,
    ``val_loss`` and the task's metrics (``val_perplexity`` or ``val_accuracy``, ``val_string_accuracy``)."""
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


def summarise(rows: list[dict[str, Any]], task: str) -> list[dict[str, Any]]:
    """Mean, std (ddof=1) and count per (mode, T); difference to softmax at the same T."""
    key, _ = _metric(task)
    scale = 1.0 if task == "shakespeare" else 100.0
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["mode"], r["block_size"]), []).append(r)
    out = []
    for (mode, T), rs in sorted(groups.items(), key=lambda kv: (kv[0][1], MODES.index(kv[0][0]))):
        vals = [scale * r[key] for r in rs]
        s = {
            "mode": mode,
            "block_size": T,
            "n": len(vals),
            "mean": statistics.fmean(vals),
            "std": statistics.stdev(vals) if len(vals) > 1 else float("nan"),
            "val_loss": statistics.fmean(r["val_loss"] for r in rs),
        }
        if task == "brackets":
            s["string_accuracy"] = statistics.fmean(100 * r["val_string_accuracy"] for r in rs)
        out.append(s)
    ref = {s["block_size"]: s["mean"] for s in out if s["mode"] == "softmax"}
    # paired by seed: the same seed gives every mode the same data order and the same initial shared weights
    per_seed = {(r["mode"], r["block_size"], r["seed"]): scale * r[key] for r in rows}
    lower_is_better = task == "shakespeare"
    for s in out:
        r = ref.get(s["block_size"])
        s["diff"] = s["mean"] - r if r is not None else float("nan")
        s["rel_diff_pct"] = 100 * (s["mean"] - r) / r if r else float("nan")
        pairs = [
            (v, per_seed[("softmax", T, seed)])
            for (mode, T, seed), v in per_seed.items()
            if mode == s["mode"] and T == s["block_size"] and ("softmax", T, seed) in per_seed
        ]
        d = [100 * (v - b) / b if lower_is_better else v - b for v, b in pairs]
        s["paired_diff"] = statistics.fmean(d) if d else float("nan")
        s["paired_std"] = statistics.stdev(d) if len(d) > 1 else float("nan")
        s["better_than_softmax"] = f"{sum((v < b) if lower_is_better else (v > b) for v, b in pairs)}/{len(pairs)}"
    return out


def coupling_profile(out: str | Path, mode: str = "hj") -> dict[int, list[tuple[int, float, float, int]]]:
    """Learned ``J`` averaged by key distance: ``{T: [(distance, mean, std over seeds, n_seeds), ...]}``."""
    per: dict[int, dict[int, list[float]]] = {}
    for d in sorted((Path(out) / "runs").glob(f"{mode}_T*_s*")):
        if not is_finished(d) or not (d / "couplings.json").is_file():
            continue
        T = load_json(d / "config.json")["run"]["block_size"]
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
    """Write runs.csv, summary.csv/.md, couplings_by_distance.csv and the plots from the finished runs; return the
    per-run rows (:func:`collect_runs`)."""
    out = Path(out)
    rows = collect_runs(out)
    if not rows:
        raise ValueError(f"no finished runs under {str(out / 'runs')!r}")
    fields = sorted({k for r in rows for k in r}, key=lambda k: list(rows[0]).index(k) if k in rows[0] else 99)
    with open(out / "runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    summ = summarise(rows, task)
    with open(out / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summ[0]))
        w.writeheader()
        w.writerows(summ)
    _, label = _metric(task)
    prof = coupling_profile(out)
    with open(out / "couplings_by_distance.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["block_size", "distance", "mean_J", "std_over_seeds", "seeds"])
        for T, pts in prof.items():
            for p in pts:
                w.writerow([T, *p])
    (out / "summary.md").write_text(summary_markdown(summ, prof, task))
    plot_summary(out, summ, prof, task, label)
    return rows


def summary_markdown(
    summ: list[dict[str, Any]], prof: dict[int, list[tuple[int, float, float, int]]], task: str
) -> str:
    """``summary.md``: the :func:`summarise` table and, when there are ``hj`` runs, the :func:`coupling_profile` one."""
    lines = []
    if task == "shakespeare":
        lines += [
            "| T | mode | val perplexity (mean ± std) | seeds | rel. diff to softmax | paired rel. diff (mean ± std) | better than softmax |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for s in summ:
            lines.append(
                f"| {s['block_size']} | {s['mode']} | {_fmt(s['mean'], 3)} ± {_fmt(s['std'], 3)} | {s['n']} | "
                f"{_fmt(s['rel_diff_pct'], 2)} % | {_fmt(s['paired_diff'], 2)} ± {_fmt(s['paired_std'], 2)} % | "
                f"{s['better_than_softmax']} |"
            )
    else:
        lines += [
            "| T | mode | per-bracket accuracy % (mean ± std) | whole-string % | seeds | diff to softmax (points) | rel. diff | "
            "paired diff (points, mean ± std) | better than softmax |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for s in summ:
            lines.append(
                f"| {s['block_size']} | {s['mode']} | {_fmt(s['mean'])} ± {_fmt(s['std'])} | {_fmt(s['string_accuracy'], 1)} | "
                f"{s['n']} | {_fmt(s['diff'])} | {_fmt(s['rel_diff_pct'], 2)} % | {_fmt(s['paired_diff'])} ± {_fmt(s['paired_std'])} | "
                f"{s['better_than_softmax']} |"
            )
    if prof:
        lines += [
            "",
            "Learned couplings of the `hj` runs, mean J by key distance |j - k| (mean over pairs, heads, layers; then over seeds):",
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
