"""The numbers of a study's tables, from the rows of :func:`.load.collect`: per (mode, T) cells, paired comparisons
(:func:`compare`, :func:`study_table`), whether the step budget plateaus (:func:`plateau`) and bracket accuracy by
match distance or nesting depth (:func:`breakdown`).

Shakespeare compares validation perplexity as the relative difference ``100 (A - B) / B`` in % (below 0: A better);
brackets compare per-closing-bracket accuracy in points (above 0: A better). "Gain" is the difference signed so that
positive means the first mode is better (:func:`gain`). Every comparison is paired by seed.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any

from hybrid_attention.attention import ALL_MODES

from ..costs import FIELD_MODE
from ..stats import PairedResult, paired_ci

__all__ = [
    "REPORT_MODES",
    "COMPARISONS",
    "BREAKDOWN_GROUPS",
    "gain",
    "compare",
    "reference_mean",
    "find",
    "study_table",
    "plateau",
    "group_name",
    "breakdown",
    "seeds_text",
    "coupling_by_distance",
]

#: the modes of the report, in table order: the attention modes and J-only with a field
#: modes in report order (rows, plot colours C0, C1, ...); a mode added later goes at the end, so that every earlier
#: report regenerates with the same rows and colours
REPORT_MODES = (*(m for m in ALL_MODES if m != "mta"), FIELD_MODE, "mta")
#: the comparisons of a study's table: (mode, reference)
COMPARISONS = (
    ("hj", "softmax"),
    ("h", "softmax"),
    ("j", "softmax"),
    ("bias", "softmax"),
    ("hj", "bias"),
    ("hj", "j0"),
    (FIELD_MODE, "softmax"),
    (FIELD_MODE, "j"),
)
#: the groups of the accuracy breakdowns: (first, last) inclusive, ``None``: no upper end
BREAKDOWN_GROUPS = {
    "by_distance": ((1, 1), (2, 3), (4, 7), (8, 15), (16, None)),
    "by_depth": ((1, 1), (2, 2), (3, 3), (4, 5), (6, None)),
}


def gain(a: float, b: float, shakespeare: bool) -> float:
    """Positive: ``a`` better than ``b`` (relative % perplexity drop, or accuracy points)."""
    return 100 * (b - a) / b if shakespeare else a - b


def compare(
    rows: list[dict[str, Any]], mode: str, ref: str, T: int, *, metric: str = "metric", level: float = 0.95
) -> PairedResult | None:
    """Paired gain of ``mode`` over ``ref`` at ``T`` over the seeds both have, with its ``level`` t interval;
    ``metric``: ``"metric"`` (the last evaluation's) or ``"best_metric"`` (the best checkpoint's; runs without one
    are left out). ``ref = "j0"``: the same ``mode`` runs evaluated with J = 0 (last evaluation only). ``None``
    without a pair."""
    shakespeare = any(r["task"] == "shakespeare" for r in rows)
    a = {r["seed"]: r for r in rows if r["mode"] == mode and r["block_size"] == T and math.isfinite(r[metric])}
    if ref == "j0":
        if metric != "metric":
            return None
        d = [gain(r["metric"], r["j0_metric"], shakespeare) for r in a.values() if math.isfinite(r["j0_metric"])]
    else:
        b = {r["seed"]: r for r in rows if r["mode"] == ref and r["block_size"] == T and math.isfinite(r[metric])}
        d = [gain(a[s][metric], b[s][metric], shakespeare) for s in sorted(set(a) & set(b))]
    return paired_ci(d, level) if d else None


def reference_mean(rows: list[dict[str, Any]], mode: str, ref: str, T: int) -> float:
    """The mean metric of ``ref`` at ``T`` over the seeds that ``mode`` also has (nan without a pair): what a
    claimed gain of ``mode`` over ``ref`` starts from (the ceiling of an accuracy gain is 100 minus it)."""
    seeds = {r["seed"] for r in rows if r["mode"] == mode and r["block_size"] == T}
    v = [r["metric"] for r in rows if r["mode"] == ref and r["block_size"] == T and r["seed"] in seeds]
    return statistics.fmean(v) if v else math.nan


def find(comps: list[dict[str, Any]], mode: str, ref: str, T: int) -> dict[str, Any] | None:
    """The comparison of ``mode`` against ``ref`` at ``T`` in ``comps`` (:func:`study_table`), else ``None``."""
    return next((c for c in comps if c["mode"] == mode and c["ref"] == ref and c["block_size"] == T), None)


def _cell(rows: list[dict[str, Any]], mode: str, T: int) -> dict[str, Any] | None:
    """One (mode, T) cell: the mean metric (last evaluation) and the best checkpoint's with their t intervals,
    the seeds, the learning rate(s) and whether the sweep chose a rate on an edge of its grid."""
    rs = [r for r in rows if r["mode"] == mode and r["block_size"] == T]
    if not rs:
        return None
    last = paired_ci([r["metric"] for r in rs])
    v = [r["best_metric"] for r in rs if math.isfinite(r["best_metric"])]
    best = paired_ci(v) if v else None
    return {
        "block_size": T,
        "mode": mode,
        "n": last.n,
        "mean": last.mean,
        "lo": last.lo,
        "hi": last.hi,
        "best_mean": best.mean if best else math.nan,
        "best_lo": best.lo if best else math.nan,
        "best_hi": best.hi if best else math.nan,
        "lr": sorted({r["lr"] for r in rs}),
        "lr_at_edge": any(r.get("lr_at_edge") for r in rs),
    }


def study_table(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(cells, comparisons)``: per (mode, T) a :func:`_cell`; per comparison of :data:`COMPARISONS` and T the
    paired gain (``res``: last evaluation, ``best``: best checkpoint or ``None``) with its 95 % t interval and the
    unadjusted p (the findings' Holm families are adjusted in :mod:`.findings`, not here)."""
    Ts = sorted({r["block_size"] for r in rows})
    cells = [c for T in Ts for mode in REPORT_MODES if (c := _cell(rows, mode, T)) is not None]
    comps = []
    for T in Ts:
        for mode, ref in COMPARISONS:
            res = compare(rows, mode, ref, T)
            if res is not None:
                best = compare(rows, mode, ref, T, metric="best_metric")
                comps.append({"block_size": T, "mode": mode, "ref": ref, "res": res, "best": best})
    return cells, comps


def _last_quarter(r: dict[str, Any]) -> tuple[float, float, bool, int] | None:
    """A run's validation-loss change (relative, %) and metric change over the last quarter of its evaluations, with
    whether it stopped early and its last step; ``None`` with fewer than 4 evaluations."""
    ev = r["evals"]
    if len(ev) < 4:
        return None
    a = ev[len(ev) - 1 - len(ev) // 4]
    b = ev[-1]
    key = "val_perplexity" if "val_perplexity" in b else "val_accuracy"
    scale = 1.0 if key == "val_perplexity" else 100.0
    return (
        100 * (b["val_loss"] - a["val_loss"]) / a["val_loss"],
        scale * (b[key] - a[key]),
        bool(r.get("stopped_early")),
        int(r["last_step"]),
    )


def plateau(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (mode, T): the mean over seeds of the validation-loss change over the last quarter of the evaluations
    (relative, %; near 0: plateaued) and of the metric's change over the same stretch, with the runs stopped early by
    ``patience`` (``stopped``) and the mean of the last step (``steps``). Runs with fewer than 4 evaluations are
    left out."""
    groups: dict[tuple[str, int], list[tuple[float, float, bool, int]]] = {}
    for r in rows:
        x = _last_quarter(r)
        if x is not None:
            groups.setdefault((r["mode"], r["block_size"]), []).append(x)
    return [
        {
            "mode": mode,
            "block_size": T,
            "n": len(v),
            "loss_change_pct": statistics.fmean(x[0] for x in v),
            "metric_change": statistics.fmean(x[1] for x in v),
            "stopped": sum(x[2] for x in v),
            "steps": statistics.fmean(x[3] for x in v),
        }
        for (mode, T), v in sorted(groups.items(), key=lambda kv: (kv[0][1], REPORT_MODES.index(kv[0][0])))
    ]


def group_name(g: tuple[int, int | None]) -> str:
    """``"1"``, ``"2-3"`` or ``"16+"``."""
    lo, hi = g
    return str(lo) if hi == lo else (f"{lo}+" if hi is None else f"{lo}-{hi}")


def _group_accuracies(r: dict[str, Any], key: str) -> dict[tuple, float]:
    """A run's accuracy (%) per group of :data:`BREAKDOWN_GROUPS` ``[key]`` that some closing bracket falls into."""
    accs = {}
    for g in BREAKDOWN_GROUPS[key]:
        right = n = 0
        for k, (a, b) in r[key].items():
            if int(k) >= g[0] and (g[1] is None or int(k) <= g[1]):
                right, n = right + a, n + b
        if n:
            accs[g] = 100.0 * right / n
    return accs


def breakdown(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Bracket accuracy by match distance (``key = "by_distance"``) or nesting depth (``"by_depth"``), grouped by
    :data:`BREAKDOWN_GROUPS`: per (T, mode, group) the mean over seeds of each seed's accuracy in the group (%) and
    the number of seeds ``n``, and the gain over softmax paired by seed (a ``PairedResult`` in points; ``None`` for
    softmax or without pairs). Groups no closing bracket falls into are left out."""
    out = []
    for T in sorted({r["block_size"] for r in rows if r.get(key)}):
        per: dict[str, dict[int, dict[tuple, float]]] = {}
        for r in rows:
            if r["block_size"] == T and r.get(key):
                per.setdefault(r["mode"], {})[r["seed"]] = _group_accuracies(r, key)
        ref = per.get("softmax", {})
        for mode in (m for m in REPORT_MODES if m in per):
            for g in BREAKDOWN_GROUPS[key]:
                v = [a[g] for a in per[mode].values() if g in a]
                if not v:
                    continue
                d = [a[g] - ref[sd][g] for sd, a in per[mode].items() if g in a and g in ref.get(sd, {})]
                paired = paired_ci(d) if d and mode != "softmax" else None
                ci = paired_ci(v)
                out.append(
                    {"block_size": T, "mode": mode, "group": group_name(g), "mean": ci.mean, "n": ci.n, "gain": paired}
                )
    return out


def seeds_text(rows: list[dict[str, Any]]) -> str:
    """The number of seeds per (mode, T) cell: ``"6"``, or its range ``"4-6"``."""
    n = sorted(set(Counter((r["mode"], r["block_size"]) for r in rows).values()))
    return str(n[0]) if len(n) == 1 else f"{n[0]}-{n[-1]}"


def coupling_by_distance(rows: list[dict[str, Any]], mode: str, T: int) -> list[dict[str, Any]]:
    """Learned ``J`` (or the control's bias) by key distance at ``T`` over the runs of ``mode``: per distance the mean
    over seeds of each run's mean over pairs, heads and layers (``couplings`` of :func:`.load.read_run`), with its
    95 % interval (``paired_ci`` of the seeds' values)."""
    per: dict[int, list[float]] = {}
    for r in rows:
        if r["mode"] == mode and r["block_size"] == T and r["couplings"]:
            for dist, v in r["couplings"].items():
                per.setdefault(dist, []).append(v)
    out = []
    for dist in sorted(per):
        res = paired_ci(per[dist])
        out.append({"distance": dist, "n": res.n, "mean": res.mean, "lo": res.lo, "hi": res.hi, "p": res.p})
    return out
