"""Figures and the text table of a fidelity report (:mod:`hybrid_attention.apps.fidelity`).

matplotlib (Agg backend) is imported inside :func:`write_plots` only.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

__all__ = [
    "series",
    "path_getter",
    "write_plots",
    "plot_seconds",
    "summary_table",
    "base_rows",
    "frontier_series",
    "plot_frontier",
    "band_rows",
    "band_table",
    "write_band_plots",
]

logger = logging.getLogger(__name__)

AXIS_LABEL = {
    "n": "spins n",
    "shots": "shots",
    "tau": "anneal time tau",
    "steps": "Trotter steps K",
    "budget": "work per chain (moves / sweeps)",
}
COST_LABEL = {
    "evaluations": "model evaluations (total)",
    "wall_s": "wall seconds on this machine",
    "qpu_seconds": "projected QPU seconds (backends.qpu_cost model)",
}


def frontier_series(report: dict[str, Any], n: int, cost: str = "evaluations") -> dict[str, list[tuple]]:
    """Per sampler, the ``(cost, error, pareto)`` of its points at size ``n`` sorted by cost (points without that
    cost, e.g. ``qpu_seconds`` of a classical sampler, left out); error as
    :func:`hybrid_attention.apps.fidelity.cost.error_of`."""
    from .cost import error_of

    out: dict[str, list[tuple]] = {}
    for r in report["points"].values():
        c = r.get("cost", {}).get(cost)
        if r["point"]["n"] != n or c is None:
            continue
        flag = r.get("pareto_wall" if cost == "wall_s" else "pareto", False)
        out.setdefault(r["point"]["sampler"], []).append((c, error_of(r), flag))
    return {k: sorted(v) for k, v in out.items()}


def plot_frontier(report: dict[str, Any], n: int, ax: Any, cost: str = "evaluations") -> None:
    """Error (attention-weight TV, mean over problems) against ``cost`` at size ``n`` on a matplotlib ``ax``, one
    line per sampler, Pareto points ringed."""
    for i, (name, pts) in enumerate(sorted(frontier_series(report, n, cost).items())):
        x = [max(c, 1e-9) for c, _, _ in pts]
        y = [e for _, e, _ in pts]
        ax.plot(x, y, "o-", color=f"C{i % 10}", label=name, ms=4)
        px = [max(c, 1e-9) for c, _, f in pts if f]
        py = [e for _, e, f in pts if f]
        ax.plot(px, py, "o", mfc="none", mec="k", ms=9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(COST_LABEL[cost])
    ax.set_ylabel("attention-weight TV (mean over problems)")
    ax.grid(alpha=0.3)


def _on_base(pt: dict[str, Any], base: dict[str, Any], free: str | None) -> bool:
    return all(pt.get(ax) is None or ax == free or pt.get(ax) == base[ax] for ax in base)


def series(report: dict[str, Any], axis: str, sampler: str, getter: Any) -> tuple[list, list]:
    """``(x, y)`` of one sampler along ``axis`` with the other axes at the base point; ``getter(result)`` picks y
    (``None`` results are left out)."""
    base = report["config"]["base"]
    pts = [
        r
        for r in report["points"].values()
        if r["point"]["sampler"] == sampler and r["point"][axis] is not None and _on_base(r["point"], base, axis)
    ]
    pts.sort(key=lambda r: r["point"][axis])
    xs, ys = [], []
    for r in pts:
        y = getter(r)
        if y is not None:
            xs.append(r["point"][axis])
            ys.append(y)
    return xs, ys


def path_getter(*path: str) -> Any:
    """A function that reads ``result[path[0]][path[1]]...`` from a point result (``None`` if absent)."""

    def f(r: dict[str, Any]) -> Any:
        for p in path:
            if not isinstance(r, dict) or p not in r:
                return None
            r = r[p]
        return r

    return f


def _pyplot(warn: bool = True) -> Any:
    """matplotlib's pyplot on the Agg backend, or ``None`` (with a one-line warning, if ``warn``) when it is not
    installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if warn:
            logger.warning("matplotlib is not installed (pip install 'hybrid-attention[plots]'): no plots written")
        return None
    return plt


def plot_seconds(cfg: dict[str, Any]) -> float:
    """The projected seconds of :func:`write_plots` for a report of configuration ``cfg``: pyplot imported (paid
    here, once, with a first figure that loads fonts and the backend), then one figure like the real ones (two
    panels, a few lines, legend, saved as PNG to memory) timed and counted once per figure the report will get (each
    swept axis, and the cost figure). 0 without matplotlib."""
    import time

    plt = _pyplot(warn=False)  # write_plots says it, once
    if plt is None:
        return 0.0
    figures = sum(len(cfg[axis]) > 1 for axis in ("shots", "steps", "tau", "n")) + 1
    _probe_figure(plt)  # the first figure loads fonts and the backend: once, not per figure
    t0 = time.perf_counter()
    _probe_figure(plt)
    return (time.perf_counter() - t0) * figures


def _probe_figure(plt: Any) -> None:
    import io

    fig, axs = plt.subplots(1, 2, figsize=(9.2, 4.6))
    for a in axs:
        for i in range(4):
            a.plot([1, 2, 3], [i, i + 1, i + 3], "o-", label=f"s{i}")
        a.set_xscale("log")
        a.set_yscale("log")
        a.grid(alpha=0.3)
    fig.suptitle("probe", fontsize=9)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    fig.legend(*axs[0].get_legend_handles_labels(), loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.savefig(io.BytesIO(), format="png", dpi=110)
    plt.close(fig)


def write_plots(report: dict[str, Any], out: str | Path) -> list[str]:
    """One PNG per swept axis (``fidelity_vs_<axis>.png``): total variation to the exact Boltzmann target (solid)
    and to the ideal circuit output (dashed, DQA samplers), the shot-noise floor (dotted), the largest marginal
    error, and along ``tau`` the effective inverse temperatures of the anneal. Returns the file names (none, with a
    one-line warning, when matplotlib, the optional ``plots`` extra, is not installed)."""
    plt = _pyplot()
    if plt is None:
        return []
    out = Path(out)
    cfg = report["config"]
    samplers = list(dict.fromkeys(r["point"]["sampler"] for r in report["points"].values()))
    files = []
    for axis in ("shots", "steps", "tau", "n"):
        if len(cfg[axis]) < 2:
            continue
        has = [s for s in samplers if len(series(report, axis, s, path_getter("target", "tv", "mean"))[0]) > 1]
        if not has:
            continue
        ncol = 3 if axis == "tau" else 2
        fig, axs = plt.subplots(1, ncol, figsize=(4.6 * ncol, 4.6))
        for i, s in enumerate(has):
            col = f"C{i}"
            x, y = series(report, axis, s, path_getter("target", "tv", "mean"))
            axs[0].plot(x, y, "o-", color=col, label=s)
            x, y = series(report, axis, s, path_getter("circuit", "tv", "mean"))
            if x:
                axs[0].plot(x, y, "s--", color=col, alpha=0.7, label=f"{s} vs ideal circuit")
            x, y = series(report, axis, s, path_getter("target", "marginal_max", "mean"))
            axs[1].plot(x, y, "o-", color=col, label=s)
        x, y = series(report, axis, has[0], path_getter("shot_noise_tv"))
        if x:  # what exact samples at the point's shots would score: the floor of every sampled error
            axs[0].plot(x, y, "k:", label="shot-noise floor (exact samples)")
            dqa = [s for s in has if series(report, axis, s, path_getter("circuit", "shot_noise_tv"))[0]]
            if dqa:
                x, y = series(report, axis, dqa[0], path_getter("circuit", "shot_noise_tv"))
                axs[0].plot(x, y, color="grey", ls="-.", label="shot-noise floor of the ideal circuit output")
        axs[0].set_ylabel("total variation (mean over problems)")
        axs[1].set_ylabel("max |m - m_exact| (mean over problems)")
        handles, labels = axs[0].get_legend_handles_labels()
        if axis == "tau":
            dqa = [s for s in has if series(report, axis, s, path_getter("fit", "beta_h", "median"))[0]]
            if dqa:
                for key, mk in (("beta_h", "o-"), ("beta_J", "s-")):
                    x, y = series(report, axis, dqa[0], path_getter("fit", key, "median"))
                    axs[2].plot(x, y, mk, label=f"{key} (fit to ideal output)")
                x, y = series(report, axis, dqa[0], path_getter("fit", "r", "median"))
                axs[2].plot(x, y, "k^:", label="fit r")
                axs[2].set_yscale("log")
                axs[2].set_ylabel("effective inverse temperature (median)")
                axs[2].legend(fontsize=7)
        for a in axs:
            a.set_xlabel(AXIS_LABEL[axis])
            if axis in ("shots", "steps", "tau"):
                a.set_xscale("log")
                a.minorticks_off()
            a.set_xticks(cfg[axis], [f"{v:g}" for v in cfg[axis]])
            a.grid(alpha=0.3)
        if axis == "shots":
            axs[0].set_yscale("log")
            axs[1].set_yscale("log")
        base = ", ".join(f"{k}={v}" for k, v in cfg["base"].items() if k != axis)
        fig.suptitle(
            f"sampler fidelity vs {AXIS_LABEL[axis]} ({cfg['ensemble']} ensemble, {cfg['problems']} problems; {base})",
            fontsize=9,
        )
        fig.tight_layout(rect=(0, 0.16, 1, 1))
        fig.legend(handles, labels, loc="lower center", ncol=min(5, len(labels)), fontsize=7, frameon=False)
        name = f"fidelity_vs_{axis}.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        files.append(name)
    if any("cost" in r for r in report["points"].values()):
        n = cfg["base"]["n"]
        fig, axs = plt.subplots(1, 2, figsize=(10, 4.6))
        plot_frontier(report, n, axs[0], "evaluations")
        plot_frontier(report, n, axs[1], "wall_s")
        axs[0].legend(fontsize=7)
        fig.suptitle(f"error vs cost at n = {n} (ringed: Pareto frontier; {cfg['ensemble']} ensemble)", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / "fidelity_vs_cost.png", dpi=110)
        plt.close(fig)
        files.append("fidelity_vs_cost.png")
    return files


def base_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per sampler at the base point: the headline numbers of the report."""
    base = report["config"]["base"]
    rows = []
    for r in report["points"].values():
        pt = r["point"]
        if not _on_base(pt, base, None):
            continue
        t = r["target"]
        rows.append(
            {
                "sampler": pt["sampler"],
                "n": pt["n"],
                "shots": pt["shots"],
                "tau": pt["tau"],
                "steps": pt["steps"],
                "tv": t["tv"]["mean"],
                "kl_pq": t["kl_pq"]["mean"],
                "fidelity": t["fidelity"]["mean"],
                "marginal_max": t["marginal_max"]["mean"],
                "attention_tv": t["attention_tv"]["mean"],
                "tv_circuit": path_getter("circuit", "tv", "mean")(r),
                "beta_h": path_getter("fit", "beta_h", "median")(r),
                "beta_J": path_getter("fit", "beta_J", "median")(r),
                "seconds": r["seconds"],
                "budget": pt.get("budget"),
                "estimator": r.get("estimator", "reads"),
                "error": _error(r),
                "evaluations": path_getter("cost", "evaluations")(r),
                "qpu_seconds": path_getter("cost", "qpu_seconds")(r),
                "pareto": r.get("pareto"),
            }
        )
    return rows


def _error(r: dict[str, Any]) -> float | None:
    from .cost import error_of

    try:
        return error_of(r)
    except KeyError:
        return None


def summary_table(report: dict[str, Any]) -> str:
    """Markdown table of :func:`base_rows`."""
    f = lambda v, d=4: "-" if v is None else (f"{v:.{d}g}" if isinstance(v, float) else str(v))  # noqa: E731
    head = (
        "| sampler | n | shots | tau | K | TV | KL(p‖exact) | fidelity | max marg. err | attention TV | TV vs ideal circuit "
        "| beta_h | beta_J | budget | estimator | attention TV (estimator) | evaluations | QPU s (projected) | Pareto "
        "| s |"
    )
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in base_rows(report):
        lines.append(
            "| "
            + " | ".join(
                f(r[k])
                for k in (
                    "sampler",
                    "n",
                    "shots",
                    "tau",
                    "steps",
                    "tv",
                    "kl_pq",
                    "fidelity",
                    "marginal_max",
                    "attention_tv",
                    "tv_circuit",
                    "beta_h",
                    "beta_J",
                    "budget",
                    "estimator",
                    "error",
                    "evaluations",
                    "qpu_seconds",
                    "pareto",
                )
            )
            + f" | {r['seconds']:.2f} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------- banded (device-scale) sweeps
def band_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per point of a banded report whose axes other than ``n`` are at the base point, by ``n`` then
    sampler: marginal errors (mean over problems) against the exact banded marginals, next to the shot-noise floor."""
    base = report["config"]["base"]
    order = {s: i for i, s in enumerate(report["config"]["samplers"])}
    rows = []
    for r in report["points"].values():
        pt = r["point"]
        if not _on_base(pt, base, "n"):
            continue
        est = r.get("target_conditional") if r.get("estimator") == "conditional" else None
        rows.append(
            {
                "sampler": pt["sampler"],
                "n": pt["n"],
                "band": r.get("band"),
                "shots": pt["shots"],
                "tau": pt["tau"],
                "steps": pt["steps"],
                "max_err": r["target"]["marginal_max"]["mean"],
                "max_floor": path_getter("shot_noise", "max")(r),
                "mean_err": r["target"]["marginal_mean"]["mean"],
                "mean_floor": path_getter("shot_noise", "mean")(r),
                "within": r.get("within_tolerance"),
                "est_max": None if est is None else est["marginal_max"]["mean"],
                "est_mean": None if est is None else est["marginal_mean"]["mean"],
                "beta_h": path_getter("fit", "beta_h")(r),
                "beta_J": path_getter("fit", "beta_J")(r),
                "fit_rmse": path_getter("fit", "rmse")(r),
                "seconds": r["seconds"],
            }
        )
    rows.sort(key=lambda x: (x["n"], order.get(x["sampler"], len(order))))
    return rows


def band_table(report: dict[str, Any]) -> str:
    """Markdown table of :func:`band_rows`: ``error (floor)`` pairs, the floor being what exact samples give."""
    f = lambda v, d=3: "-" if v is None else (f"{v:.{d}g}" if isinstance(v, float) else str(v))  # noqa: E731
    pair = lambda e, fl: f(e) if fl is None else f"{f(e)} ({f(fl, 2)})"  # noqa: E731
    head = (
        "| sampler | n | W | shots | tau | K | max abs(m - m_exact) (floor) | mean abs(m - m_exact) (floor) "
        "| within 5 sigma | estimator max / mean | beta_h / beta_J (fit) | fit rmse | s |"
    )
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in band_rows(report):
        est = "-" if r["est_max"] is None else f"{f(r['est_max'])} / {f(r['est_mean'])}"
        fit = "-" if r["beta_h"] is None else f"{f(r['beta_h'])} / {f(r['beta_J'])}"
        cells = [
            r["sampler"],
            f(r["n"]),
            f(r["band"]),
            f(r["shots"]),
            f(r["tau"]),
            f(r["steps"]),
            pair(r["max_err"], r["max_floor"]),
            pair(r["mean_err"], r["mean_floor"]),
            f(r["within"], 2),
            est,
            fit,
            f(r["fit_rmse"]),
            f"{r['seconds']:.2f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_band_plots(report: dict[str, Any], out: str | Path) -> list[str]:
    """``fidelity_vs_n.png`` (and ``fidelity_vs_shots.png`` when shots are swept) of a banded report: the largest and
    the mean marginal error against the exact banded marginals per sampler, the shot-noise floor dotted (no files
    without matplotlib, as :func:`write_plots`)."""
    plt = _pyplot()
    if plt is None:
        return []
    cfg = report["config"]
    samplers = list(dict.fromkeys(r["point"]["sampler"] for r in report["points"].values()))
    files = []
    for axis in ("n", "shots"):
        if len(cfg[axis]) < 2:
            continue
        fig, axs = plt.subplots(1, 2, figsize=(9.2, 4.4))
        for i, name in enumerate(samplers):
            for a, key in zip(axs, ("marginal_max", "marginal_mean")):
                x, y = series(report, axis, name, path_getter("target", key, "mean"))
                if len(x) > 1:
                    a.plot(x, y, "o-", color=f"C{i % 10}", label=name)
        for a, key in zip(axs, ("max", "mean")):
            x, y = [], []
            for name in samplers:
                x, y = series(report, axis, name, path_getter("shot_noise", key))
                if len(x) > 1:
                    break
            if len(x) > 1:
                a.plot(x, y, "k:", label="shot-noise floor (exact samples)")
            a.set_xlabel(AXIS_LABEL[axis])
            a.set_yscale("log")
            a.grid(alpha=0.3)
            if axis == "shots":
                a.set_xscale("log")
        axs[0].set_ylabel("max_j |m_j - m_exact,j| (mean over problems)")
        axs[1].set_ylabel("mean_j |m_j - m_exact,j| (mean over problems)")
        axs[1].legend(fontsize=7)
        fig.suptitle(f"marginals vs exact transfer matrix, band {cfg['band']} ({cfg['problems']} problems)", fontsize=9)
        fig.tight_layout()
        name = f"fidelity_vs_{axis}.png"
        fig.savefig(Path(out) / name, dpi=110)
        plt.close(fig)
        files.append(name)
    return files
