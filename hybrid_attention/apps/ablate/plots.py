"""Figures of the ablation: the metric against T per mode, the learned couplings by key distance, and (with a
learning-rate axis) the metric against the learning rate per mode and T.

matplotlib (Agg backend) is imported inside :func:`plot_summary` only; without it no plots are written.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from hybrid_attention.attention import MODES

__all__ = ["plot_summary", "draw_coupling_profile", "draw_metric_vs_lr"]

logger = logging.getLogger(__name__)


def plot_summary(
    out: Path,
    summ: list[dict[str, Any]],
    prof: dict,
    task: str,
    label: str,
    *,
    by_lr: list[dict[str, Any]] | None = None,
) -> None:
    """Write ``metric_vs_T.png`` (from :func:`~hybrid_attention.apps.ablate.report.summarise` rows) and
    ``couplings_by_distance.png`` (from :func:`~hybrid_attention.apps.ablate.report.coupling_profile`) to ``out``;
    with ``by_lr`` (``summarise(..., by_lr=True)`` rows; ``summ`` then holds the best learning rate per (mode, T))
    also ``metric_vs_lr.png``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed (pip install 'hybrid-attention[plots]'): no plots written")
        return
    Ts = sorted({s["block_size"] for s in summ})
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, mode in enumerate(MODES):
        pts = [s for s in summ if s["mode"] == mode]
        if not pts:
            continue
        color = f"C{i}"
        # small horizontal offsets keep overlapping error bars apart
        ax.errorbar(
            [s["block_size"] + 0.12 * (i - 1.5) for s in pts],
            [s["mean"] for s in pts],
            yerr=[0 if math.isnan(s["std"]) else s["std"] for s in pts],
            marker="o",
            capsize=3,
            label=mode,
            color=color,
        )
        if mode in ("hj", "h"):
            ax2.errorbar(
                [s["block_size"] + 0.12 * (i - 1.5) for s in pts],
                [s["paired_diff"] for s in pts],
                yerr=[0 if math.isnan(s["paired_std"]) else s["paired_std"] for s in pts],
                marker="o",
                capsize=3,
                label=mode,
                color=color,
            )
    ax.set_xticks(Ts)
    ax.set_xlabel("block size T")
    ax.set_ylabel(f"validation {label}")
    best = "" if by_lr is None else ", best lr per mode"
    ax.set_title(f"{task}{'' if 'noffn' not in out.name else ' (no FFN)'}: mean ± std over seeds{best}", fontsize=10)
    ax.legend()
    ax2.axhline(0, color="k", lw=0.8)
    ax2.set_xticks(Ts)
    ax2.set_xlabel("block size T")
    ax2.set_ylabel("rel. difference to softmax (%)" if task == "shakespeare" else "difference to softmax (points)")
    ax2.set_title(
        "paired by seed, mean ± std" + (" (below 0: better)" if task == "shakespeare" else " (above 0: better)"),
        fontsize=10,
    )
    if ax2.get_legend_handles_labels()[0]:  # no hj/h runs: nothing to label
        ax2.legend()
    fig.tight_layout()
    fig.savefig(out / "metric_vs_T.png", dpi=120)
    plt.close(fig)
    if by_lr is not None:
        Ts = sorted({s["block_size"] for s in by_lr})
        fig, axes = plt.subplots(1, len(Ts), figsize=(3.6 * len(Ts) + 0.6, 3.4), squeeze=False)
        for ax, T in zip(axes[0], Ts):
            draw_metric_vs_lr(ax, [s for s in by_lr if s["block_size"] == T], title=f"{task}, T = {T}")
        axes[0][0].set_ylabel(f"validation {label}")
        fig.tight_layout()
        fig.savefig(out / "metric_vs_lr.png", dpi=120)
        plt.close(fig)
    if prof:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        draw_coupling_profile(ax, prof, title=f"{task}: hj couplings by distance")
        fig.tight_layout()
        fig.savefig(out / "couplings_by_distance.png", dpi=120)
        plt.close(fig)


def draw_coupling_profile(ax: Any, prof: dict, *, title: str, fontsize: float | None = None) -> None:
    """Draw the mean learned ``J`` against key distance, one error-bar line per block size, on ``ax``.

    Args:
        ax: a matplotlib ``Axes``.
        prof: :func:`~hybrid_attention.apps.ablate.report.coupling_profile` output, ``{T: [(distance, mean, std, n)]}``.
        title: the axes title.
        fontsize: legend font size (matplotlib's default when None).
    """
    for T, pts in prof.items():
        ax.errorbar(
            [p[0] for p in pts],
            [p[1] for p in pts],
            yerr=[0 if math.isnan(p[2]) else p[2] for p in pts],
            marker="o",
            capsize=3,
            label=f"T={T}",
        )
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("key distance |j - k|")
    ax.set_ylabel("mean learned J")
    ax.set_title(title)
    ax.legend(fontsize=fontsize)


def draw_metric_vs_lr(ax: Any, rows: list[dict[str, Any]], *, title: str) -> None:
    """Draw the metric (mean ± std over seeds) against the learning rate (log axis), one line per mode, on ``ax``.

    Args:
        ax: a matplotlib ``Axes``.
        rows: ``summarise(..., by_lr=True)`` rows of one block size.
        title: the axes title.
    """
    for i, mode in enumerate(MODES):
        pts = sorted((s for s in rows if s["mode"] == mode), key=lambda s: s["lr"])
        if not pts:
            continue
        ax.errorbar(
            [s["lr"] * 1.04 ** (i - 1.5) for s in pts],  # small offsets keep overlapping error bars apart
            [s["mean"] for s in pts],
            yerr=[0 if math.isnan(s["std"]) else s["std"] for s in pts],
            marker="o",
            capsize=3,
            label=mode,
            color=f"C{i}",
        )
    from matplotlib.ticker import NullFormatter

    lrs = sorted({s["lr"] for s in rows})
    ax.set_xscale("log")
    ax.set_xlim(lrs[0] / 1.6, lrs[-1] * 1.6)
    ax.set_xticks(lrs, [f"{lr:g}" for lr in lrs])  # the grid's learning rates, not log-axis decades
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("peak learning rate")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
