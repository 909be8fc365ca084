"""The second long-context study's report (results/long_context_2/PROTOCOL.md, "Contrasts and decision rules"),
from the committed run directories of ``experiments/long_context_2/plan.py``.

    python -m experiments.long_context_2.report            # writes results/long_context_2/report.md and gain_vs_T.png
    python -m experiments.long_context_2.report --print    # prints it instead

Rules, as the protocol states them:

* a cell (task, T, arm) holds seeds 0-2 at the arm's chosen rate (the sweep's runs) and seeds 3-9 (primary) or 3-4
  (secondary) at that rate; the metric is the last evaluation (a diverged run: its last evaluation before the
  divergence, counted beside the seeds); the best checkpoint's metric is shown beside it;
* strongest baseline per (task, T): among ``softmax``, ``softmax-2L`` and ``bias``, the best mean metric;
* gain: relative perplexity in % ((baseline - hj) / baseline x 100) or accuracy points; positive means hj better;
  95 % paired t intervals; Holm within a task's family of its 6 primary contrasts (3 hj arms x T = 64, 128);
* verdict: **hj better** (Holm p < 0.05, gain > 0), **hj worse** (Holm p < 0.05, gain < 0), **no practical gain**
  (the interval at the family's Bonferroni level, 0.05 / 6, lies below +0.5), else **undecided**; an accuracy task
  whose strongest baseline is at the ceiling (mean >= 99.5 %) is **untestable**; an MQAR cell whose every arm's mean
  accuracy at its chosen rate over the sweep seeds lies within 2 points of chance (100 / pairs %) is **untestable
  (every arm at chance)** (change 5's floor rule; its main seeds are not run, and at T = 128 the sweep first runs
  seed 0 alone: ``plan.at_floor``); a cell short of its seeds is **pending**;
* thesis per task: **supported** when some hj arm is "better" at T = 128 and its gain at T = 128 exceeds its gain at
  T = 64 (Welch 95 % interval of the difference above 0); **refuted** when every hj arm at both T is "worse" or "no
  practical gain"; otherwise **inconclusive** (**pending** while a primary cell is pending; **untestable** when a
  primary cell of the task is at chance).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from experiments import REPO
from experiments.long_context.analysis import welch_interval as welch
from hybrid_attention.apps.claims.report.load import Damaged, read_run, warn
from hybrid_attention.apps.claims.report.tables import gain
from hybrid_attention.apps.claims.runner import Study, chosen_lr, sweep_grid, sweep_losses
from hybrid_attention.apps.claims.stats import PairedResult, holm, paired_ci, seeds_needed

from . import plan

OUT = REPO / "results" / "long_context_2"
FIGURE = "gain_vs_T.png"
BASELINES = ("softmax", "softmax-2L", "bias")
HJ_ARMS = ("hj-band4", "hj-band8", "hj-full")
MARGIN = 0.5
CEILING = 99.5
FLOOR_VERDICT = "untestable (every arm at chance)"
ALPHA = 0.05
FAMILY_SIZE = 6  # per task: 3 hj arms x T = 64, 128 (PROTOCOL.md "Families")


def _run_dir(root: Path, study: Study, arm: str, T: int, lr: float, seed: int) -> Path:
    kind = "sweep" if study.sweep is not None and seed in study.sweep.seeds else "runs"
    return root / study.name / kind / f"{arm}_T{T}_lr{lr:g}_s{seed}"


def arm_rows(root: Path, study: Study, arm: str, T: int) -> tuple[list[dict[str, Any]], list[Damaged], float | None]:
    """The rows of one cell (module docstring), the damaged runs left out, and the cell's rate (``None`` while its
    sweep is unfinished)."""
    if study.sweep is None:
        lr = float(study.mode_base.get(arm, {}).get("lr", study.base.get("lr", 0.0)))
        seeds = study.seeds
    else:
        lr = chosen_lr(study, arm, root, T)
        seeds = (*study.sweep.seeds, *study.seeds)
    if lr is None:
        return [], [], None
    rows, damaged = [], []
    for seed in seeds:
        d = _run_dir(root, study, arm, T, lr, seed)
        try:
            row = read_run(d, diverged=True)
        except ValueError as exc:
            damaged.append(Damaged(d, str(exc)))
            continue
        if row is not None:
            rows.append({**row, "mode": arm, "seed": seed})
    return rows, damaged, lr


def _higher_better(task: str) -> bool:
    return task != "shakespeare"


def _mean(rows: list[dict[str, Any]], key: str = "metric") -> float:
    v = [r[key] for r in rows if not math.isnan(r[key])]
    return statistics.fmean(v) if v else math.nan


def _gains(a: list[dict], b: list[dict], task: str, key: str = "metric", seeds: tuple[int, ...] | None = None):
    x = {r["seed"]: r[key] for r in a if not math.isnan(r[key])}
    y = {r["seed"]: r[key] for r in b if not math.isnan(r[key])}
    common = sorted(set(x) & set(y) & (set(seeds) if seeds is not None else set(x)))
    return {s: gain(x[s], y[s], task == "shakespeare") for s in common}


def cell_table(root: Path, studies: dict[str, Study], task: str, T: int, full: int) -> dict[str, Any]:
    """Everything of one (task, T): per arm its rows and rate, the strongest baseline and each hj arm's contrast."""
    staged = studies[f"{task}_T{T}"]
    study = staged.resolve(root)  # the floor rule's stage, read once; at_floor of it is the rule's answer
    floor = plan.at_floor(study, root) if staged.stage is not None else None
    if floor:  # every arm at chance: the cell is its sweep's seeds (PROTOCOL.md change 5)
        full = len(study.sweep.seeds)
    arms, damaged = {}, []
    for arm in study.modes:
        rows, bad, lr = arm_rows(root, study, arm, T)
        arms[arm], damaged = {"rows": rows, "lr": lr}, damaged + bad
    means = {a: _mean(arms[a]["rows"]) for a in BASELINES if arms.get(a, {}).get("rows")}
    base = None
    if len(means) == len(BASELINES) and all(len(arms[a]["rows"]) >= full for a in BASELINES):
        pick = max if _higher_better(task) else min
        base = pick(BASELINES, key=lambda a: means[a])
    contrasts = {}
    for arm in HJ_ARMS:
        if base is None or not arms.get(arm, {}).get("rows"):
            continue
        g = _gains(arms[arm]["rows"], arms[base]["rows"], task)
        later = _gains(arms[arm]["rows"], arms[base]["rows"], task, seeds=tuple(range(3, 10)))
        best = _gains(arms[arm]["rows"], arms[base]["rows"], task, key="best_metric")
        contrasts[arm] = {
            "gains": g,
            "res": paired_ci(list(g.values())) if g else None,
            "later": paired_ci(list(later.values())) if len(later) >= 2 else None,
            "best": paired_ci(list(best.values())) if len(best) >= 2 else None,
            "full": len(g) >= full,
        }
    return {"task": task, "T": T, "arms": arms, "base": base, "means": means, "contrasts": contrasts,
            "damaged": damaged, "floor": floor}  # fmt: skip


def decide(cells: list[dict[str, Any]]) -> None:
    """Holm within the task's family and each contrast's verdict, in place (module docstring)."""
    family = [
        (c, arm)
        for c in cells
        if not c.get("floor")
        for arm, x in c["contrasts"].items()
        if x["full"] and x["res"].n >= 2
    ]
    adj = holm([c["contrasts"][arm]["res"].p for c, arm in family]) if family else []
    for (c, arm), p in zip(family, adj):
        x = c["contrasts"][arm]
        x["p_holm"] = p
        x["bonferroni"] = paired_ci(list(x["gains"].values()), level=1 - ALPHA / FAMILY_SIZE)
    for c in cells:
        for x in c["contrasts"].values():
            if c.get("floor"):
                x["verdict"] = FLOOR_VERDICT
            elif _higher_better(c["task"]) and c["means"][c["base"]] >= CEILING:
                x["verdict"] = "untestable (baseline at the ceiling)"
            elif "p_holm" not in x:
                x["verdict"] = f"pending ({x['res'].n if x['res'] else 0} seeds)"
            elif not math.isnan(x["p_holm"]) and x["p_holm"] < ALPHA:
                x["verdict"] = "hj better" if x["res"].mean > 0 else "hj worse"
            elif x["bonferroni"].hi < MARGIN:
                x["verdict"] = "no practical gain"
            else:
                x["verdict"] = "undecided"


def thesis(cells: list[dict[str, Any]]) -> tuple[str, str]:
    """The thesis verdict of one task's cells (T = 64 and 128) and its reason."""
    by_T = {c["T"]: c for c in cells}
    low = [c for c in cells if c.get("floor")]
    if low:
        where = " and ".join(f"T = {c['T']} (chance {plan.chance(c['task'], c['T']):g} %)" for c in low)
        return FLOOR_VERDICT, f"every arm within {plan.FLOOR_POINTS:g} points of chance at {where}"
    if set(by_T) != {64, 128} or any(
        arm not in by_T[T]["contrasts"] or by_T[T]["contrasts"][arm]["verdict"].startswith("pending")
        for T in (64, 128)
        for arm in HJ_ARMS
    ):
        return "pending", "a primary cell has not finished"
    v = {(arm, T): by_T[T]["contrasts"][arm]["verdict"] for arm in HJ_ARMS for T in (64, 128)}
    if all(x in ("hj worse", "no practical gain") for x in v.values()):
        return "refuted", "every hj arm at T = 64 and 128 is worse or without practical gain"
    for arm in HJ_ARMS:
        if v[arm, 128] == "hj better":
            g128 = list(by_T[128]["contrasts"][arm]["gains"].values())
            g64 = list(by_T[64]["contrasts"][arm]["gains"].values())
            d, lo, hi = welch(g128, g64)
            if lo > 0:
                return "supported", f"{arm} better at T = 128, gain minus T = 64's: {d:+.2f} [{lo:+.2f}, {hi:+.2f}]"
    return "inconclusive", "; ".join(f"{a} T = {T}: {x}" for (a, T), x in sorted(v.items()))


def _fmt(res: PairedResult | None, unit: str) -> str:
    if res is None:
        return "-"
    if res.n < 2:
        return f"{res.mean:+.2f} {unit} ({res.n} seed)"
    return f"{res.mean:+.2f} {unit} [{res.lo:+.2f}, {res.hi:+.2f}]"


def _metric_name(task: str) -> str:
    return "perplexity" if task == "shakespeare" else "accuracy (%)"


def report(root: Path = OUT, studies: dict[str, Study] | None = None, figure: str | None = None) -> tuple[str, list]:
    """The report's markdown and the damaged runs left out."""
    studies = plan.STUDIES if studies is None else studies
    lines = [
        "# Long-context study, round 2: report",
        "",
        "Regenerate: `python -m experiments.long_context_2.report` (reads `results/long_context_2/<task>_T<T>/`;",
        "rules: `PROTOCOL.md`; budget: `budget.md`). Gain: relative perplexity in % (Tiny Shakespeare) or accuracy",
        "points (MQAR, runs, brackets) of an hj arm over the strongest baseline (the best of softmax, softmax-2L and",
        "bias at that task and T), positive means hj is better; 95 % paired t intervals by seed; Holm within each",
        f'task\'s family of {FAMILY_SIZE} primary contrasts; "no practical gain": the interval at the Bonferroni level',
        f"(0.05 / {FAMILY_SIZE}) lies below +{MARGIN}; an MQAR cell whose every arm is within {plan.FLOOR_POINTS:g} points of",
        "chance (100 / pairs %) at its chosen rate over the sweep seeds is untestable, its main seeds not run (change 5).",
        "Engines: " + "; ".join(f"`{a}` {plan.ENGINES[a]}" for a in (*HJ_ARMS, "h", "hj-band4-mf")) + ".",
        "",
    ]
    damaged: list[Damaged] = []
    families = {"primary": ("shakespeare", "mqar"), "secondary tasks": ("runs", "brackets")}
    theses = []
    for family, tasks in families.items():
        full = 10 if family == "primary" else 5
        lines += [f"## {family.capitalize()}: hj arms against the strongest baseline", ""]
        for task in tasks:
            lines += [  # a header per task: the arm means below each task's rows would end one shared table
                "| task | T | baseline (mean) | arm | engine | seeds | arm mean | gain [95 % CI] | seeds 3-9 "
                "| best ckpt | Holm p | Bonferroni | verdict |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            ]
            unit = "%" if task == "shakespeare" else "pt"
            cells = [cell_table(root, studies, task, T, full) for T in plan.BLOCK_SIZES if f"{task}_T{T}" in studies]
            decide(cells)
            for c in cells:
                damaged += c["damaged"]
                if c["base"] is None:
                    lines.append(f"| {task} | {c['T']} | pending | | | | | | | | | | |")
                    continue
                for arm, x in c["contrasts"].items():
                    rows = c["arms"][arm]["rows"]
                    div = sum(r["diverged"] for r in rows)
                    bon = x.get("bonferroni")
                    need = ""
                    if x["verdict"] == "undecided" and x["res"].sd > 0:
                        need = f" (about {seeds_needed(MARGIN, x['res'].sd, alpha=ALPHA / FAMILY_SIZE)} seeds)"
                    lines.append(
                        f"| {task} | {c['T']} | {c['base']} ({c['means'][c['base']]:.4g}) | {arm} | {plan.ENGINES[arm]} "
                        f"| {len(rows)}{f' ({div} diverged)' if div else ''} | {_mean(rows):.4g} | {_fmt(x['res'], unit)} "
                        f"| {_fmt(x['later'], unit)} | {_fmt(x['best'], unit)} "
                        f"| {x['p_holm']:.3g} | [{bon.lo:+.2f}, {bon.hi:+.2f}] | {x['verdict']}{need} |"
                        if bon is not None
                        else f"| {task} | {c['T']} | {c['base']} ({c['means'][c['base']]:.4g}) | {arm} | {plan.ENGINES[arm]} "
                        f"| {len(rows)} | "
                        f"{_mean(rows):.4g} | {_fmt(x['res'], unit)} | | | | | {x['verdict']} |"
                    )
            if family == "primary":
                theses.append((task, *thesis(cells)))
            lines += [""]
            lines += _arm_means(cells, task)
        lines += [""]
    lines += ["## The thesis, per primary task", "", "| task | verdict | why |", "| --- | --- | --- |"]
    lines += [f"| {t} | {v} | {why} |" for t, v, why in theses]
    if figure:
        lines += ["", f"![gain of each hj arm over the strongest baseline against T]({figure})"]
    lines += ["", *_secondary(root, studies), "", *_rates(root, studies)]
    if damaged:
        lines += ["", "## Damaged runs (left out)", ""] + [f"- `{d.path}`: {d.problem}" for d in damaged]
    return "\n".join(lines) + "\n", damaged


def _arm_means(cells: list[dict[str, Any]], task: str) -> list[str]:
    out = [f"{task}: every arm's mean {_metric_name(task)} (seeds; chosen rate)", ""]
    for c in cells:
        parts = [
            f"{arm} {_mean(v['rows']):.4g} ({len(v['rows'])}; {v['lr']:g})" for arm, v in c["arms"].items() if v["rows"]
        ]
        floor = ""
        if c["floor"] is not None or plan.chance(task, c["T"]) is not None and parts:
            state = {True: "every arm at chance", False: "some arm beyond it", None: "pending"}[c["floor"]]
            floor = f" (chance {plan.chance(task, c['T']):g} %; floor rule: {state})"
        out.append(f"- T = {c['T']}: " + (", ".join(parts) or "no finished cell yet") + floor)
    return out + [""]


def _secondary(root: Path, studies: dict[str, Study]) -> list[str]:
    """Secondary contrasts (not part of the verdicts): each hj arm against each baseline, against h and mta, the
    engine control, and each hj arm against itself with J = 0."""
    out = [
        "## Secondary contrasts (not part of the verdicts)",
        "",
        "| task | T | contrast | seeds | gain [95 % CI] |",
        "| --- | --- | --- | --- | --- |",
    ]
    for task in ("shakespeare", "mqar"):
        unit = "%" if task == "shakespeare" else "pt"
        for T in plan.BLOCK_SIZES:
            prim, sec = studies.get(f"{task}_T{T}"), studies.get(f"{task}_T{T}_secondary")
            if prim is None:
                continue
            prim = prim.resolve(root)
            rows = {arm: arm_rows(root, prim, arm, T)[0] for arm in prim.modes}
            if sec is not None:
                rows.update({arm: arm_rows(root, sec, arm, T)[0] for arm in sec.modes})
            pairs = [(a, b) for a in HJ_ARMS for b in (*BASELINES, "h", "mta")] + [("hj-band4-mf", "hj-band4")]
            for a, b in pairs:
                g = _gains(rows.get(a, []), rows.get(b, []), task)
                if len(g) >= 2:
                    out.append(f"| {task} | {T} | {a} vs {b} | {len(g)} | {_fmt(paired_ci(list(g.values())), unit)} |")
            for a in HJ_ARMS:
                j0 = [gain(r["metric"], r["j0_metric"], task == "shakespeare") for r in rows.get(a, [])
                      if not math.isnan(r["j0_metric"])]  # fmt: skip
                if len(j0) >= 2:
                    out.append(f"| {task} | {T} | {a} vs itself with J = 0 | {len(j0)} | {_fmt(paired_ci(j0), unit)} |")
    return out


def _rates(root: Path, studies: dict[str, Study]) -> list[str]:
    out = [
        "## Learning rates",
        "",
        "Per arm, task and T, swept on seeds 0-2 (MQAR at T = 128 first on seed 0 alone, at the starting grid: change 5):",
        "the mean final validation loss per rate (bold: chosen; edge: the chosen rate lies on an edge of the swept grid",
        "after its extensions).",
        "",
        "| study | arm | rates: mean final validation loss | chosen |",
        "| --- | --- | --- | --- |",
    ]
    for name, st in studies.items():
        st = st.resolve(root)
        if st.sweep is None:
            continue
        T = st.block_sizes[0]
        for arm in st.modes:
            grid, best = sweep_grid(st, arm, T, root)
            cells = []
            for lr in grid:
                got = sweep_losses(st, arm, T, lr, root)
                if all(x is None for x in got):
                    continue
                v = None if any(x is None for x in got) else statistics.fmean(got)
                text = "pending" if v is None else ("diverged" if math.isinf(v) else f"{v:.4f}")
                cells.append(f"**{lr:g}: {text}**" if lr == best else f"{lr:g}: {text}")
            if not cells:
                continue
            edge = best is not None and best in (grid[0], grid[-1])
            chosen = "pending" if best is None else f"{best:g}" + (" (edge)" if edge else "")
            out.append(f"| {name} | {arm} | {', '.join(cells)} | {chosen} |")
    return out


def gain_plot(path: Path, root: Path = OUT, studies: dict[str, Study] | None = None) -> bool:
    """Each hj arm's gain over the strongest baseline against T, one panel per primary task (95 % CI)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    studies = plan.STUDIES if studies is None else studies
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), squeeze=False)
    drawn = False
    for ax, task in zip(axes[0], ("shakespeare", "mqar")):
        cells = [cell_table(root, studies, task, T, 10) for T in plan.BLOCK_SIZES if f"{task}_T{T}" in studies]
        for i, arm in enumerate(HJ_ARMS):  # a cell at chance has no contrast to draw (PROTOCOL.md change 5)
            pts = [(c["T"], c["contrasts"][arm]["res"]) for c in cells if arm in c["contrasts"] and not c["floor"]]
            pts = [(T, r) for T, r in pts if r is not None and r.n >= 2]
            if not pts:
                continue
            xs = [T * (1 + 0.04 * (i - 1)) for T, _ in pts]
            ax.errorbar(xs, [r.mean for _, r in pts], yerr=[[r.mean - r.lo for _, r in pts], [r.hi - r.mean for _, r in pts]],
                        marker="o", capsize=3, label=arm, color=f"C{i}")  # fmt: skip
            drawn = True
        ax.axhspan(-MARGIN, MARGIN, color="0.85", zorder=0)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(plan.BLOCK_SIZES), [str(T) for T in plan.BLOCK_SIZES])
        ax.set_xlabel("context length T")
        ax.set_ylabel(
            "gain over the strongest baseline (" + ("% perplexity" if task == "shakespeare" else "points") + ")"
        )
        low = [str(c["T"]) for c in cells if c["floor"]]
        ax.set_title(task + (f" (T = {', '.join(low)}: every arm at chance, untestable)" if low else ""), fontsize=10)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    if drawn:
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    plt.close(fig)
    return drawn


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=OUT)
    p.add_argument("--print", action="store_true", help="print the report instead of writing report.md")
    args = p.parse_args(argv)
    figure = None
    if not args.print and gain_plot(args.root / FIGURE, args.root):
        figure = FIGURE
    text, damaged = report(args.root, figure=figure)
    warn(damaged)
    if args.print:
        print(text)
    else:
        (args.root / "report.md").write_text(text)
        print(f"wrote {args.root / 'report.md'}" + (f" and {args.root / FIGURE}" if figure else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
