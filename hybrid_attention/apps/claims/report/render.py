"""Markdown of the claims report: the findings table with the verdict rules, and per study the cells, the paired
comparisons, the training budget, the bracket breakdowns and the pilot tables."""

from __future__ import annotations

from typing import Any

from .fmt import ci_short, fmt
from .load import Damaged
from .rules import rules_lines
from .tables import BREAKDOWN_GROUPS, REPORT_MODES, breakdown, group_name, plateau, seeds_text

__all__ = [
    "findings_markdown",
    "damaged_markdown",
    "study_markdown",
    "budget_markdown",
    "breakdown_markdown",
    "pilot_markdown",
]


def findings_markdown(found: list[dict[str, Any]]) -> list[str]:
    """The findings table and the verdict rules (lines of ``claims.md``)."""
    lines = [
        "| # | paper | ours (study: gain [interval at the level stated], seeds; the best checkpoint's beside) "
        "| verdict | why |",
        "| --- | --- | --- | --- | --- |",
    ]
    for f in found:
        lines.append(f"| {f['n']} | {f['paper']} | {f['ours']} | **{f['verdict']}** | {f['why']} |")
    return lines + ["", "Verdict rules:", "", *rules_lines(), ""]


def damaged_markdown(damaged: list[Damaged]) -> list[str]:
    """The "Damaged runs" section of ``claims.md`` (nothing when there are none)."""
    if not damaged:
        return []
    lines = [
        "## Damaged runs",
        "",
        f"{len(damaged)} finished run(s) whose files the report cannot use, left out of every statistic above and "
        "below:",
        "",
        "| run | what is wrong |",
        "| --- | --- |",
    ]
    return lines + [f"| {d.path} | {d.problem.replace('|', '/')} |" for d in damaged] + [""]


def _lr(c: dict[str, Any]) -> str:
    return ", ".join(f"{x:g}" for x in c["lr"]) + (" (edge)" if c["lr_at_edge"] else "")


def _interval(mean: float, lo: float, hi: float) -> str:
    return f"{fmt(mean, 3)} [{fmt(lo, 3)}, {fmt(hi, 3)}]"


def study_markdown(name: str, rows: list[dict[str, Any]], cells: list, comps: list) -> str:
    """A study's cells (mean metric per mode and T, last evaluation and best checkpoint) and paired comparisons."""
    shakespeare = rows[0]["task"] == "shakespeare"
    unit = "%" if shakespeare else "points"
    metric = "validation perplexity" if shakespeare else "per-bracket accuracy (%)"
    lines = [
        f"## {name}",
        "",
        f"{metric}: mean [95 % t interval] over seeds at the last evaluation (what the verdicts read) and at the best "
        "checkpoint (lowest validation loss); lr: the learning rate each (mode, T) used, chosen by its sweep; "
        "(edge): the sweep chose it on an edge of the grid it swept, so the best rate may lie beyond",
        "",
        "| T | mode | last evaluation [95 % CI] | best checkpoint [95 % CI] | seeds | lr |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in cells:
        last, best = _interval(c["mean"], c["lo"], c["hi"]), _interval(c["best_mean"], c["best_lo"], c["best_hi"])
        lines.append(f"| {c['block_size']} | {c['mode']} | {last} | {best} | {c['n']} | {_lr(c)} |")
    lines += [
        "",
        f"Paired gains ({unit}; positive: the first mode is better; `hj vs j0`: the trained hj model against itself "
        "with J = 0), 95 % t interval, paired t test, unadjusted (the findings' Holm families: claims.md):",
        "",
        "| T | comparison | gain, last evaluation [95 % CI] | gain, best checkpoint [95 % CI] | seeds | p |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in comps:
        r, b = c["res"], c["best"]
        best = _interval(b.mean, b.lo, b.hi) if b is not None else "-"
        lines.append(
            f"| {c['block_size']} | {c['mode']} vs {c['ref']} | {_interval(r.mean, r.lo, r.hi)} | {best} | {r.n} | "
            f"{fmt(r.p, 4)} |"
        )
    return "\n".join(lines) + "\n"


def budget_markdown(rows: list[dict[str, Any]]) -> str:
    """Whether a main study's step budget plateaus: per (T, mode), the runs that early stopping ended before the
    budget, their mean last step, and the change over the last quarter of the evaluations."""
    budget = max(r["max_steps"] for r in rows)
    lines = [
        "",
        f"Training budget (up to {budget} steps, early stopping on the validation loss): runs stopped early, the mean "
        "last step, and the change over the last quarter of the evaluations (mean over seeds; validation loss "
        "relative in %, the metric in its unit); near 0 means the run had plateaued.",
        "",
        "| T | mode | seeds | stopped early | mean last step | val loss change | metric change |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in plateau(rows):
        lines.append(
            f"| {p['block_size']} | {p['mode']} | {p['n']} | {p['stopped']} | {p['steps']:.0f} | "
            f"{fmt(p['loss_change_pct'])} % | {fmt(p['metric_change'], 3)} |"
        )
    return "\n".join(lines) + "\n"


def _breakdown_rows(b: list[dict[str, Any]], groups: list[str]) -> list[str]:
    """Per T and mode the group accuracies, and below each mode but softmax its paired gain over softmax."""
    lines = []
    for T in sorted({x["block_size"] for x in b}):
        for mode in (m for m in REPORT_MODES if any(x["mode"] == m and x["block_size"] == T for x in b)):
            cell = {x["group"]: x for x in b if x["mode"] == mode and x["block_size"] == T}
            lines.append(
                f"| {T} | {mode} | " + " | ".join(fmt(cell[g]["mean"], 1) if g in cell else "" for g in groups) + " |"
            )
            if mode != "softmax" and any(cell[g]["gain"] for g in groups if g in cell):
                lines.append(
                    f"| {T} | {mode} - softmax | "
                    + " | ".join(ci_short(cell[g]["gain"]) if g in cell and cell[g]["gain"] else "" for g in groups)
                    + " |"
                )
    return lines


def breakdown_markdown(rows: list[dict[str, Any]]) -> str:
    """Tables of :func:`.tables.breakdown` by match distance and nesting depth (bracket studies)."""
    lines = []
    for key, what in (("by_distance", "match distance"), ("by_depth", "nesting depth of the pair")):
        b = breakdown(rows, key)
        if not b:
            continue
        groups = [group_name(g) for g in BREAKDOWN_GROUPS[key] if any(x["group"] == group_name(g) for x in b)]
        lines += [
            "",
            f"Accuracy (%) by {what}: mean over seeds of each seed's accuracy in the group; below it, each mode's gain "
            f"over softmax in points, paired by seed [95 % t interval, unadjusted] ({seeds_text(rows)} seeds).",
            "",
            "| T | mode | " + " | ".join(groups) + " |",
            "| --- | --- |" + " --- |" * len(groups),
        ]
        lines += _breakdown_rows(b, groups)
    return "\n".join(lines) + ("\n" if lines else "")


def _pilot_depth(depth: list[dict[str, Any]]) -> list[str]:
    """PILOT: accuracy by nesting depth, pooled over seeds."""
    lines = ["", "PILOT: accuracy (%) by nesting depth of the pair, pooled over seeds:", ""]
    ds = sorted({int(k) for r in depth for k in r["by_depth"]})
    lines += ["| T | mode | " + " | ".join(f"d={d}" for d in ds) + " |", "| --- | --- |" + " --- |" * len(ds)]
    for T in sorted({r["block_size"] for r in depth}):
        for mode in REPORT_MODES:
            rs = [r for r in depth if r["mode"] == mode and r["block_size"] == T]
            if not rs:
                continue
            cells = []
            for d in ds:
                right = sum(r["by_depth"].get(str(d), [0, 0])[0] for r in rs)
                n = sum(r["by_depth"].get(str(d), [0, 0])[1] for r in rs)
                cells.append(fmt(100 * right / n, 1) if n else "")
            lines.append(f"| {T} | {mode} | " + " | ".join(cells) + " |")
    return lines


def pilot_markdown(rows: list[dict[str, Any]]) -> str:
    """A pilot study's plateau table and its accuracy by nesting depth."""
    lines = [
        "",
        "PILOT: change over the last quarter of the evaluations (mean over seeds): validation loss (relative, %) and "
        "the metric; near 0 means the budget has plateaued.",
        "",
        "| T | mode | seeds | val loss change | metric change |",
        "| --- | --- | --- | --- | --- |",
    ]
    for p in plateau(rows):
        lines.append(
            f"| {p['block_size']} | {p['mode']} | {p['n']} | {fmt(p['loss_change_pct'])} % | "
            f"{fmt(p['metric_change'], 3)} |"
        )
    depth = [r for r in rows if r["by_depth"]]
    if depth:
        lines += _pilot_depth(depth)
    return "\n".join(lines) + "\n"
