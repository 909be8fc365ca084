"""The plots of a study (matplotlib, optional: the ``plots`` extra): the metric and the gain
over softmax against T, bracket accuracy by match distance, and the learned couplings by key distance."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from .tables import BREAKDOWN_GROUPS, REPORT_MODES, breakdown, coupling_by_distance, group_name

__all__ = ["write_plots", "write_long_context_plot"]

logger = logging.getLogger(__name__)


def _yerr(pts: list[dict[str, Any]]) -> list[list[float]]:
    """Asymmetric error bars from ``mean``/``lo``/``hi`` (0 where the interval is undefined)."""
    return [
        [p["mean"] - p["lo"] if math.isfinite(p["lo"]) else 0.0 for p in pts],
        [p["hi"] - p["mean"] if math.isfinite(p["hi"]) else 0.0 for p in pts],
    ]


def write_plots(out: Path, name: str, rows: list, cells: list, comps: list) -> None:
    """``metric_vs_T.png``, ``accuracy_by_distance.png`` (bracket studies) and ``couplings_by_distance.png`` (studies
    with hj or bias runs) of the study ``name`` into ``out``; a warning and nothing without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed (pip install 'hybrid-attention[plots]'): no plots written")
        return
    _metric_vs_T(plt, out, name, rows, cells, comps)
    _accuracy_by_distance(plt, out, name, rows)
    _couplings(plt, out, name, rows)


def _metric_vs_T(plt: Any, out: Path, name: str, rows: list, cells: list, comps: list) -> None:
    shakespeare = rows[0]["task"] == "shakespeare"
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for i, mode in enumerate(REPORT_MODES):
        pts = [c for c in cells if c["mode"] == mode]
        if not pts:
            continue
        x = [c["block_size"] for c in pts]
        ax.errorbar(x, [c["mean"] for c in pts], yerr=_yerr(pts), marker="o", capsize=3, color=f"C{i}", label=mode)
        ax.fill_between(x, [c["lo"] for c in pts], [c["hi"] for c in pts], color=f"C{i}", alpha=0.2)
        cs = [c for c in comps if c["mode"] == mode and c["ref"] == "softmax"]
        if cs:
            x = [c["block_size"] for c in cs]
            pts2 = [{"mean": c["res"].mean, "lo": c["res"].lo, "hi": c["res"].hi} for c in cs]
            ax2.errorbar(
                x, [p["mean"] for p in pts2], yerr=_yerr(pts2), marker="o", capsize=3, color=f"C{i}",
                label=f"{mode} vs softmax",
            )  # fmt: skip
            ax2.fill_between(x, [c["res"].lo for c in cs], [c["res"].hi for c in cs], color=f"C{i}", alpha=0.2)
    ax.set_xlabel("block size T")
    ax.set_ylabel("validation perplexity" if shakespeare else "per-bracket accuracy (%)")
    ax.set_title(f"{name}: mean and 95 % CI over seeds", fontsize=10)
    ax.legend(fontsize=8)
    ax2.axhline(0, color="k", lw=0.8)
    ax2.set_xlabel("block size T")
    ax2.set_ylabel("gain over softmax (%, perplexity)" if shakespeare else "gain over softmax (points)")
    ax2.set_title("paired by seed, 95 % CI (above 0: better than softmax)", fontsize=10)
    if ax2.get_legend_handles_labels()[0]:
        ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "metric_vs_T.png", dpi=110)
    plt.close(fig)


def _accuracy_by_distance(plt: Any, out: Path, name: str, rows: list) -> None:
    b = breakdown(rows, "by_distance")
    if not b:
        return
    Tb = sorted({x["block_size"] for x in b})
    fig, axes = plt.subplots(1, len(Tb), figsize=(3.6 * len(Tb), 3.2), squeeze=False, sharey=True)
    for ax, T in zip(axes[0], Tb):
        groups = [group_name(g) for g in BREAKDOWN_GROUPS["by_distance"]]
        groups = [g for g in groups if any(x["group"] == g and x["block_size"] == T for x in b)]
        for i, mode in enumerate(REPORT_MODES):
            pts = {x["group"]: x["mean"] for x in b if x["mode"] == mode and x["block_size"] == T}
            if pts:
                xs = [k for k, g in enumerate(groups) if g in pts]
                ax.plot(xs, [pts[groups[k]] for k in xs], marker="o", color=f"C{i}", label=mode)
        ax.set_xticks(range(len(groups)), groups)
        ax.set_title(f"T = {T}", fontsize=10)
        ax.set_xlabel("match distance")
    axes[0][0].set_ylabel("accuracy (%), mean over seeds")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(f"{name}: accuracy by match distance (tables with intervals: summary.md)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "accuracy_by_distance.png", dpi=110)
    plt.close(fig)


def _couplings(plt: Any, out: Path, name: str, rows: list) -> None:
    Ts = sorted({r["block_size"] for r in rows if r["mode"] in ("hj", "bias")})
    if not Ts:
        return
    fig, axes = plt.subplots(1, len(Ts), figsize=(3.6 * len(Ts), 3.2), squeeze=False)
    for ax, T in zip(axes[0], Ts):
        for i, mode in ((1, "hj"), (4, "bias")):
            prof = coupling_by_distance(rows, mode, T)
            if prof:
                x = [p["distance"] + (0.1 if mode == "bias" else 0) for p in prof]
                label = "hj: J" if mode == "hj" else "bias control: B"
                y = [p["mean"] for p in prof]
                ax.errorbar(x, y, yerr=_yerr(prof), marker="o", capsize=2, color=f"C{i}", label=label)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_title(f"T = {T}", fontsize=10)
        ax.set_xlabel("key distance |j - k|")
    axes[0][0].set_ylabel("mean learned value (95 % CI)")
    if axes[0][0].get_legend_handles_labels()[0]:
        axes[0][0].legend(fontsize=8)
    fig.suptitle(f"{name}: learned couplings J (hj)\nand the control's positional bias B, by distance", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "couplings_by_distance.png", dpi=110)
    plt.close(fig)


def write_long_context_plot(path: Path, points: list[dict[str, Any]], margin: float, full_seeds: int = 10) -> bool:
    """The long-context study's gain over softmax against T (one panel per task; hj, h and bias with 95 % CI;
    ``points`` from ``experiments.long_context.analysis.gain_points``; the band +-``margin`` shaded) to ``path``. A point with fewer
    than ``full_seeds`` pairs (a pilot) is drawn hollow, joined by a dotted line, and its T is labelled with its
    seed count. Returns whether it was written (not without matplotlib, or without points)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed (pip install 'hybrid-attention[plots]'): no plot written")
        return False
    tasks = sorted({p["task"] for p in points})
    if not tasks:
        return False
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.5 * len(tasks), 3.8), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        Ts = sorted({p["T"] for p in points if p["task"] == task})
        for i, mode in enumerate(("hj", "h", "bias")):
            pts = sorted((p for p in points if p["task"] == task and p["mode"] == mode), key=lambda p: p["T"])
            if not pts:
                continue
            xs = [p["T"] * (1 + 0.04 * (i - 1)) for p in pts]  # side by side at each T
            ys = [p["res"].mean for p in pts]
            full = [p["res"].n >= full_seeds for p in pts]
            for keep, style in ((True, {"label": mode}), (False, {"mfc": "white", "ls": "none"})):
                sel = [k for k, f in enumerate(full) if f == keep]
                if sel:
                    ci = [{"mean": ys[k], "lo": pts[k]["res"].lo, "hi": pts[k]["res"].hi} for k in sel]
                    ax.errorbar([xs[k] for k in sel], [ys[k] for k in sel], yerr=_yerr(ci), marker="o", capsize=3,
                                color=f"C{i}", **style)  # fmt: skip
            for k in range(1, len(pts)):  # into or between pilots: dotted
                if not (full[k - 1] and full[k]):
                    ax.plot(xs[k - 1 : k + 1], ys[k - 1 : k + 1], ls=":", color=f"C{i}")
        ax.axhspan(-margin, margin, color="0.85", zorder=0)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        few = {p["T"]: p["res"].n for p in points if p["task"] == task and p["res"].n < full_seeds}
        ax.set_xticks(Ts, [f"{T}\n(pilot, {few[T]} seeds)" if T in few else str(T) for T in Ts])
        ax.set_xlabel("context length T")
        ax.set_ylabel("gain over softmax (% perplexity)" if task == "shakespeare" else "gain over softmax (points)")
        ax.set_title(task, fontsize=10)
        ax.legend(fontsize=8)
    fig.suptitle(
        f"paired by seed, 95 % CI ({full_seeds} seeds; hollow: a pilot); above 0: better than softmax; shaded: the "
        "practical margin",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
