"""The long-context study's report (``results/long_context/PROTOCOL.md``, "Contrasts and decision rules"): per task
and context length the primary contrast hj against softmax with its verdict, the thesis per task, the secondary
contrasts (hj against h, against bias, and against itself with J = 0) and the step-budget table.

Input: the run directories of ``experiments/long_context/plan.py``'s studies under one root, ``ROOT/<study>/runs``,
read by :func:`.load.scan`. The studies are the tasks (``shakespeare``, ``brackets``, ``runs``) at T = 32 and 64, and
``shakespeare_T128`` (Tiny Shakespeare at T = 128: a pilot of 3 seeds unless the full design ran).

Rules, as the protocol states them:

* gain: relative perplexity in % for Tiny Shakespeare (``(softmax - hj) / softmax x 100``), accuracy points for
  brackets and runs; positive means hj is better; 95 % t interval, paired by seed;
* the Holm family: every primary contrast that ran in full (:data:`FULL_SEEDS` seeds on both sides);
* per (task, T): **hj better** (Holm-adjusted p < 0.05, gain > 0), **hj worse** (adjusted p < 0.05, gain < 0), **no
  practical gain** (the upper bound of the interval at the family's Bonferroni level below +0.5), otherwise
  **undecided**; brackets at a T where softmax's mean accuracy is 99.5 % or more: **not testable (ceiling)**; a cell
  whose engine is limited (no candidate passed its task, or its final model failed the engine check): the verdict
  with "(engine-limited)"; one with no converged validation reference: with "(engine unvalidated)";
* thesis per task: **supported** when hj is better at T = 64 (and at T = 128 where Tiny Shakespeare ran in full) and
  its gain at T = 64 exceeds its gain at T = 32 (Welch interval of the difference above 0); **refuted** when every T
  of the task gives "no practical gain" or "hj worse"; otherwise **inconclusive**; no T that ran in full: **not run**.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from hybrid_attention.apps.claims.report.load import Damaged, scan
from hybrid_attention.apps.claims.report.tables import gain, plateau
from hybrid_attention.apps.claims.runner import Study, sweep_grid, sweep_losses
from hybrid_attention.apps.claims.stats import PairedResult, holm, paired_ci, seeds_needed

__all__ = [
    "TASK_STUDIES",
    "FULL_SEEDS",
    "MARGIN",
    "CEILING",
    "primary_contrasts",
    "cell_verdict",
    "thesis",
    "welch_interval",
    "sweep_summary",
    "load_studies",
    "gain_points",
    "long_context_report",
    "write_long_context_report",
]

#: study directory -> task; every study's block sizes are read from its runs
TASK_STUDIES = {"shakespeare": "shakespeare", "brackets": "brackets", "runs": "runs", "shakespeare_T128": "shakespeare"}
#: seeds per cell of the full design
FULL_SEEDS = 10
#: the practical margin: % perplexity or accuracy points
MARGIN = 0.5
#: brackets: softmax's mean accuracy (%) at or above which a T is not testable
CEILING = 99.5
ALPHA = 0.05
#: how closely retraining reproduces a run's perplexity (not bitwise: float kernels differ between machines)
REPRODUCIBILITY_PCT = 0.3
SECONDARY = (("hj", "h"), ("hj", "bias"))


def _per_seed(rows: list[dict[str, Any]], mode: str, T: int, key: str = "metric") -> dict[int, float]:
    return {r["seed"]: r[key] for r in rows if r["mode"] == mode and r["block_size"] == T and not math.isnan(r[key])}


def _gains(rows: list[dict[str, Any]], mode: str, ref: str, T: int, task: str, key: str = "metric") -> dict[int, float]:
    a, b = _per_seed(rows, mode, T, key), _per_seed(rows, ref, T, key)
    return {s: gain(a[s], b[s], task == "shakespeare") for s in sorted(set(a) & set(b))}


def primary_contrasts(rows_by_study: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every (task, T) with hj and softmax runs: per-seed gains, the paired result, whether it ran in full, softmax's
    mean metric, and (for the family) the Holm-adjusted p and the Bonferroni-level interval."""
    out = []
    for study, rows in rows_by_study.items():
        task = TASK_STUDIES[study]
        for T in sorted({r["block_size"] for r in rows}):
            g = _gains(rows, "hj", "softmax", T, task)
            if not g:
                continue
            soft = list(_per_seed(rows, "softmax", T).values())
            out.append(
                {
                    "study": study,
                    "task": task,
                    "T": T,
                    "gains": g,
                    "res": paired_ci(list(g.values())),
                    "full": len(g) >= FULL_SEEDS,
                    "softmax_mean": statistics.fmean(soft),
                }
            )
    family = [c for c in out if c["full"]]
    adj = holm([c["res"].p for c in family])
    m = max(len(family), 1)
    for c, p in zip(family, adj):
        c["p_holm"] = p
        c["bonferroni"] = paired_ci(list(c["gains"].values()), level=1 - ALPHA / m)
        c["family_size"] = m
    return out


def _running(c: dict[str, Any]) -> bool:
    """Whether fewer of a cell's seeds have finished than its study plans (``c["planned"]``)."""
    return bool(c.get("planned")) and c["res"].n < c["planned"]


def _seed_count(c: dict[str, Any]) -> str:
    """``"3 seeds"``, or ``"1 of 3 seeds so far"`` while a cell's planned seeds are running."""
    n = c["res"].n
    return f"{n} of {c['planned']} seeds so far" if _running(c) else f"{n} seed{'s' if n != 1 else ''}"


def cell_verdict(c: dict[str, Any], mark: str = "") -> str:
    """The verdict of one primary contrast (module docstring); ``mark`` ("engine-limited", "engine unvalidated")
    follows it in parentheses."""
    if c["task"] == "brackets" and c["softmax_mean"] >= CEILING:
        v = "not testable (ceiling)"
    elif not c["full"]:
        v = f"pilot ({_seed_count(c)}): no verdict"
    else:
        res, p = c["res"], c["p_holm"]
        if not math.isnan(p) and p < ALPHA:
            v = "hj better" if res.mean > 0 else "hj worse"
        elif c["bonferroni"].hi < MARGIN:
            v = "no practical gain"
        else:
            v = "undecided"
    return v + (f" ({mark})" if mark else "")


def welch_interval(a: list[float], b: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean difference ``mean(a) - mean(b)`` with its Welch ``level`` interval: ``(diff, lo, hi)``."""
    from scipy import stats

    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"a Welch interval needs two values on each side, got {len(a)} and {len(b)}")
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    d = statistics.fmean(a) - statistics.fmean(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return d, d, d
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return d, d - half, d + half


def thesis(task: str, cells: list[dict[str, Any]], verdicts: dict[tuple[str, int], str]) -> tuple[str, str]:
    """The thesis verdict of one task and its reason (module docstring)."""
    full = {c["T"]: c for c in cells if c["task"] == task and c["full"]}
    if not full:
        return "not run", "no context length of this task ran in full"
    v = {T: verdicts[task, T] for T in full}
    if all(x.startswith(("no practical gain", "hj worse")) for x in v.values()):
        return "refuted", "every context length: " + ", ".join(f"T = {T} {x}" for T, x in sorted(v.items()))
    need = [64] + ([128] if task == "shakespeare" and 128 in full else [])
    if all(T in v and v[T].startswith("hj better") for T in need) and 32 in full:
        d, lo, hi = welch_interval(list(full[64]["gains"].values()), list(full[32]["gains"].values()))
        if lo > 0:
            return "supported", f"hj better at T = 64; gain at T = 64 minus T = 32: {d:+.2f} [{lo:+.2f}, {hi:+.2f}]"
        return (
            "inconclusive",
            f"hj better at T = 64, but its gain does not grow from T = 32: {d:+.2f} [{lo:+.2f}, {hi:+.2f}]",
        )
    return "inconclusive", ", ".join(f"T = {T} {x}" for T, x in sorted(v.items()))


def sweep_summary(study: Study, root: str | Path) -> list[dict[str, Any]]:
    """Per (T, mode) of a study's learning-rate sweep, as the runner decides it (:func:`.runner.sweep_grid`): the
    rates swept so far with their mean final validation loss over the sweep seeds (``inf`` when a seed diverged,
    ``None`` while a seed is unfinished), the chosen rate (``None`` until known) and whether it lies on an edge of
    the grid."""
    if study.sweep is None:
        return []
    out = []
    for T in study.sweep.block_sizes(study.block_sizes):
        for mode in study.modes:
            grid, best = sweep_grid(study, mode, T, root)
            losses = {}
            for lr in grid:
                got = sweep_losses(study, mode, T, lr, root)
                losses[lr] = None if any(x is None for x in got) else statistics.fmean(got)  # type: ignore[arg-type]
            out.append(
                {
                    "T": T,
                    "mode": mode,
                    "losses": losses,
                    "chosen": best,
                    "edge": best is not None and best in (grid[0], grid[-1]),
                }
            )
    return out


def _sweep_cell(losses: dict[float, float | None], chosen: float | None) -> str:
    parts = []
    for lr, v in losses.items():
        text = "pending" if v is None else ("diverged" if math.isinf(v) else f"{v:.4f}")
        parts.append(f"**{lr:g}: {text}**" if lr == chosen else f"{lr:g}: {text}")
    return ", ".join(parts)


def _fmt(res: PairedResult, unit: str) -> str:
    if res.n < 2:
        return f"{res.mean:+.2f} {unit} (1 seed)"
    return f"{res.mean:+.2f} {unit} [{res.lo:+.2f}, {res.hi:+.2f}]"


def load_studies(root: str | Path) -> tuple[dict[str, list[dict[str, Any]]], list[Damaged]]:
    """The rows of the finished runs, and of the diverged ones at their last evaluation (PROTOCOL.md change 6), per
    study directory of :data:`TASK_STUDIES` under ``root`` (:func:`.load.scan`), and the damaged runs left out."""
    root = Path(root)
    rows_by_study: dict[str, list[dict[str, Any]]] = {}
    damaged: list[Damaged] = []
    for study in TASK_STUDIES:
        if (root / study / "runs").is_dir():
            rows, bad = scan(root, study, diverged=True)  # PROTOCOL.md change 6: diverged runs count
            rows_by_study[study], damaged = rows, damaged + bad
    return rows_by_study, damaged


def gain_points(rows_by_study: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per task, mode (hj, h, bias) and T with runs of the mode and of softmax: the paired gain over softmax
    (``{"task", "mode", "T", "res"}``, ``res`` a :class:`~..stats.PairedResult`), for the plot against T."""
    out = []
    for study, rows in rows_by_study.items():
        task = TASK_STUDIES[study]
        for T in sorted({r["block_size"] for r in rows}):
            for mode in ("hj", "h", "bias"):
                g = _gains(rows, mode, "softmax", T, task)
                if g:
                    out.append({"task": task, "mode": mode, "T": T, "res": paired_ci(list(g.values()))})
    return out


def long_context_report(
    root: str | Path,
    engine_marks: dict[tuple[str, int], str] | None = None,
    engine_note: str = "",
    studies: dict[str, Study] | None = None,
    figure: str | None = None,
) -> tuple[str, list[Damaged]]:
    """The report's markdown and the damaged runs left out. ``engine_marks``: per (task, T) the engine's standing
    that follows the verdict ("engine-limited": no candidate passed, or the final hj model failed the engine check;
    "engine unvalidated": no validated model of that (task, T) had a converged reference; PROTOCOL.md changes 1 and
    4); ``engine_note``: markdown placed before the contrasts (the engine decision and the validation's summary);
    ``studies``: the plan's studies by directory name, whose learning-rate sweeps get a table (the rate each mode
    and T chose, flagged when it lies on an edge of its grid); ``figure``: the file name of the gain plot
    (:func:`.plots.write_long_context_plot`) to show under the primary contrasts."""
    root = Path(root)
    rows_by_study, damaged = load_studies(root)
    cells = primary_contrasts(rows_by_study)
    for c in cells:  # the seeds each cell's study plans (a pilot still running says so)
        c["planned"] = max(
            (len(st.seeds) for st in (studies or {}).values()
             if st.base.get("task") == c["task"] and c["T"] in st.block_sizes),
            default=None,
        )  # fmt: skip
    marks = engine_marks or {}
    verdicts = {(c["task"], c["T"]): cell_verdict(c, marks.get((c["task"], c["T"]), "")) for c in cells}
    m = max((c.get("family_size", 0) for c in cells), default=0)
    lines = [
        "# Long-context study: report",
        "",
        "Regenerate: `python -m experiments.long_context.report` (reads `results/long_context/<study>/runs/`; rules:",
        "`PROTOCOL.md`). Gain: relative perplexity in % (Tiny Shakespeare) or accuracy points (brackets, runs); positive",
        f"means hj is better. Intervals: 95 % paired t; Holm family: the {m} primary contrasts that ran in full",
        f'({FULL_SEEDS} seeds); "no practical gain": the interval at the family\'s Bonferroni level lies below '
        f"+{MARGIN}. Metric: the last evaluation (the verdicts); the best checkpoint's is shown beside it. Retraining",
        f"reproduces a run's perplexity to about {REPRODUCIBILITY_PCT} %, not bitwise (float kernels differ between "
        "machines). A run whose training diverged counts at its last evaluation before the divergence and is counted "
        "beside the seeds (PROTOCOL.md change 6).",
        "",
        *([engine_note.rstrip(), ""] if engine_note else []),
        "## Primary contrasts: hj against softmax",
        "",
        "| task | context | seeds | softmax | hj | gain [95 % CI] | gain, best checkpoint | Holm p | Bonferroni interval "
        "| verdict | seeds needed |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cells:
        rows = rows_by_study[c["study"]]
        unit = "%" if c["task"] == "shakespeare" else "pt"
        hj = list(_per_seed(rows, "hj", c["T"]).values())
        bon = c.get("bonferroni")
        need = "-"
        v = verdicts[c["task"], c["T"]]
        if v.startswith("undecided") and c["res"].sd > 0:
            need = str(seeds_needed(MARGIN, c["res"].sd, alpha=ALPHA / max(m, 1)))
        holm_p = f"{c['p_holm']:.3g}" if "p_holm" in c else "-"
        bon_text = f"[{bon.lo:+.2f}, {bon.hi:+.2f}]" if bon is not None else "-"
        best = _gains(rows, "hj", "softmax", c["T"], c["task"], key="best_metric")
        best_text = _fmt(paired_ci(list(best.values())), unit) if best else "-"
        div = {
            mode: sum(r["diverged"] for r in rows if r["mode"] == mode and r["block_size"] == c["T"])
            for mode in ("hj", "softmax")
        }
        div_text = ", ".join(f"{n} {mode} diverged" for mode, n in div.items() if n)
        lines.append(
            f"| {c['task']} | T = {c['T']} | {c['res'].n}{f' ({div_text})' if div_text else ''} | {c['softmax_mean']:.4g} | {statistics.fmean(hj):.4g} | "
            f"{_fmt(c['res'], unit)} | {best_text} | {holm_p} | {bon_text} | {v} | {need} |"
        )
    t128 = [c for c in cells if c["task"] == "shakespeare" and c["T"] == 128]
    if t128:
        full_called = verdicts.get(("shakespeare", 64), "").startswith("hj better")
        design = "the full design" if t128[0]["full"] else f"the pilot ({_seed_count(t128[0])} per mode)"
        lines += [
            "",
            f"T = 128 (Tiny Shakespeare) {'is running' if _running(t128[0]) else 'ran'} as {design}; the protocol "
            "calls for "
            + (
                'the full design (T = 64 is "hj better").'
                if full_called
                else 'the pilot (the T = 64 primary contrast is not "hj better").'
            ),
        ]
    if figure:
        lines += [
            "",
            f"![Gain over softmax against T, per task: hj, h and bias, 95 % CI, the margin shaded]({figure})",
        ]
    lines += ["", "## The thesis, per task", "", "| task | verdict | why |", "| --- | --- | --- |"]
    for task in sorted({c["task"] for c in cells}):
        t, why = thesis(task, cells, verdicts)
        lines.append(f"| {task} | {t} | {why} |")
    lines += [
        "",
        "## Secondary contrasts (not part of the verdicts)",
        "",
        "| task | context | contrast | seeds | gain [95 % CI] |",
        "| --- | --- | --- | --- | --- |",
    ]
    for study, rows in rows_by_study.items():
        task = TASK_STUDIES[study]
        unit = "%" if task == "shakespeare" else "pt"
        for T in sorted({r["block_size"] for r in rows}):
            for mode, ref in SECONDARY:
                g = _gains(rows, mode, ref, T, task)
                if g:
                    lines.append(
                        f"| {task} | T = {T} | {mode} vs {ref} | {len(g)} | {_fmt(paired_ci(list(g.values())), unit)} |"
                    )
            j0 = [gain(r["metric"], r["j0_metric"], task == "shakespeare")
                  for r in rows if r["mode"] == "hj" and r["block_size"] == T and not math.isnan(r["j0_metric"])]  # fmt: skip
            if j0:
                lines.append(
                    f"| {task} | T = {T} | hj vs itself with J = 0 | {len(j0)} | {_fmt(paired_ci(j0), unit)} |"
                )
    if studies:
        lines += [
            "",
            "## Learning rates",
            "",
            "Swept per mode and T on the sweep seeds; per rate the mean final validation loss (bold: the rate the "
            'main runs use; "edge": the chosen rate lies on an edge of the swept grid, so the optimum may lie beyond '
            "it).",
            "",
            "| task | context | mode | rates: mean final validation loss | chosen |",
            "| --- | --- | --- | --- | --- |",
        ]
        for name, st in studies.items():
            if name not in TASK_STUDIES:
                continue
            for r in sweep_summary(st, root):
                chosen = "pending" if r["chosen"] is None else f"{r['chosen']:g}" + (" (edge)" if r["edge"] else "")
                lines.append(
                    f"| {TASK_STUDIES[name]} | T = {r['T']} | {r['mode']} | {_sweep_cell(r['losses'], r['chosen'])} "
                    f"| {chosen} |"
                )
    lines += [
        "",
        "## Step budget",
        "",
        "| task | context | mode | runs | stopped early | mean last step | loss change, last quarter (%) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for study, rows in rows_by_study.items():
        for p in plateau(rows):
            lines.append(
                f"| {TASK_STUDIES[study]} | T = {p['block_size']} | {p['mode']} | {p['n']} | {p['stopped']} | "
                f"{p['steps']:.0f} | {p['loss_change_pct']:+.2f} |"
            )
    if damaged:
        lines += ["", "## Damaged runs (left out)", ""] + [f"- `{d.path}`: {d.problem}" for d in damaged]
    return "\n".join(lines) + "\n", damaged


def write_long_context_report(root: str | Path, out: str | Path | None = None, **kw: Any) -> Path:
    """Write :func:`long_context_report` to ``out`` (default ``<root>/report.md``); returns the path."""
    text, _ = long_context_report(root, **kw)
    path = Path(out) if out is not None else Path(root) / "report.md"
    path.write_text(text)
    return path
