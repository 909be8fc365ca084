"""Finding 8, sampler-trained models against exact training: the quantum-training experiment's ``summary.json``
(``experiments/quantum_training/run.py``; every model evaluated with exact marginals), its cells, the finding's text
and verdict, and its section of ``claims.md`` (the rule: :data:`.rules.RULES`, "competitive")."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from ..stats import paired_ci
from .fmt import ci, fmt
from .rules import ACCURACY_MARGIN, PAPER, PERPLEXITY_MARGIN
from .tables import gain
from .verdicts import verdict_competitive

__all__ = [
    "VARIANT_LABELS",
    "BESIDE",
    "sampler_training_path",
    "load_sampler_training",
    "sampler_training_cells",
    "moves_gain",
    "finding8",
    "sampler_training_markdown",
]

#: what each variant of the quantum-training experiment trained on (the finding's verdict is ``dqa-shots``'s)
VARIANT_LABELS = {
    "dqa-shots": "DQA measurement shots (the paper's setting)",
    "dqa-rb": "8 DQA measurement shots, Rao-Blackwellised",
    "qemcmc": "quantum-enhanced MCMC reads, Rao-Blackwellised",
    "qemcmc-k0": "control: qemcmc with zero moves (the mean-field start and the estimator alone)",
    "qemcmc-reads": "quantum-enhanced MCMC reads, plain spin averages",
    "qemcmc-long": "quantum-enhanced MCMC, mean-field start, 8 moves, Rao-Blackwellised",
    "qemcmc-chain": "quantum-enhanced MCMC, mean-field start, 8 chains x 4 reads past burn-in, Rao-Blackwellised",
    "qemcmc-persistent": "quantum-enhanced MCMC, persistent chains, Rao-Blackwellised",
    "gibbs": "classical Gibbs samples, Rao-Blackwellised",
    "gibbs-chain": "classical Gibbs samples, 32 reads, Rao-Blackwellised",
    "exact-j0": "control: exact training with J fixed at 0",
    "softmax": "softmax attention (no sampler; reference, not sampler-trained)",
}
#: what the quantum moves add: ``qemcmc`` against its zero-move control, paired by seed
MOVES = ("qemcmc", "qemcmc-k0")
#: reported beside ``dqa-shots`` in the findings table
BESIDE = ("qemcmc", "gibbs", "dqa-rb")
_TASKS = {"brackets": ("val_accuracy", 100.0), "shakespeare": ("val_perplexity", 1.0)}
_COMMAND = (
    "nice -n 5 python -m experiments.quantum_training.run --task brackets --block-size 8 12 --seeds 0 1 2 "
    "(and --task shakespeare)"
)


def sampler_training_path(root: str | Path, quantum_training: str | Path | None) -> Path:
    """``quantum_training``, or by default ``<root>/../quantum_training/summary.json`` (normalised; may be absent).

    Raises:
        FileNotFoundError: ``quantum_training`` given but not a file.
    """
    if quantum_training is not None:
        if not Path(quantum_training).is_file():
            raise FileNotFoundError(f"quantum_training: expected a summary.json file, got {str(quantum_training)!r}")
        return Path(quantum_training)
    return Path(os.path.normpath(Path(root) / ".." / "quantum_training" / "summary.json"))


def _checked_row(r: Any, where: str) -> dict[str, Any]:
    """One row of ``summary.json`` with ``metric`` added.

    Raises:
        ValueError: see :func:`load_sampler_training`.
    """
    if not isinstance(r, dict) or r.get("task") not in _TASKS:
        got = r.get("task") if isinstance(r, dict) else r
        raise ValueError(f"{where}: expected a row with task in {sorted(_TASKS)}, got {got!r}")
    key, scale = _TASKS[r["task"]]
    for k, typ in (("block_size", int), ("seed", int), ("variant", str)):
        if not isinstance(r.get(k), typ) or isinstance(r.get(k), bool):
            raise ValueError(f"{where}: expected {k} of type {typ.__name__}, got {r.get(k)!r}")
    v = r.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{where} ({r['task']}): expected a finite {key}, got {v!r}")
    return {**r, "metric": scale * float(v)}


def load_sampler_training(path: str | Path) -> list[dict[str, Any]] | None:
    """The rows of the quantum-training ``summary.json`` (``experiments/quantum_training/run.py``), validated, with
    ``metric`` added (perplexity, or accuracy in %); ``None`` when the file does not exist.

    Raises:
        ValueError: not JSON, not a list of rows, a row without ``task`` (brackets | shakespeare), ``block_size``,
            ``variant``, ``seed`` or a finite value of its task's metric, or two rows for one (task, T, variant,
            seed).
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        rows = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{str(path)!r} is not valid JSON ({exc}); if it is being written, run again") from exc
    if not isinstance(rows, list):
        raise ValueError(f"{str(path)!r}: expected a list of rows, got {type(rows).__name__}")
    out, seen = [], set()
    for i, r in enumerate(rows):
        where = f"{str(path)!r} row {i}"
        row = _checked_row(r, where)
        ident = (r["task"], r["block_size"], r["variant"], r["seed"])
        if ident in seen:
            raise ValueError(f"{where}: a second row for task, T, variant, seed = {ident}")
        seen.add(ident)
        out.append(row)
    return out


def _settings(rows: list[dict[str, Any]]) -> str:
    flat = []
    for r in rows:
        s = dict(r.get("settings") or {})
        s.update(s.pop("sampler_options", None) or {})
        flat.append(", ".join(f"{k} {v}" for k, v in sorted(s.items())) or "(none)")
    return flat[0] if len(set(flat)) == 1 else "settings differ between seeds: " + " / ".join(sorted(set(flat)))


def sampler_training_cells(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (task, T) and variant other than ``exact``: ``{"task", "block_size", "variant", "n" (paired seeds),
    "unpaired" (the variant's seeds without an exact run), "res" (the paired gain over exact, a
    :class:`PairedResult`, or None), "verdict", "why", "settings"}`` (the "competitive" rule)."""
    order = {v: i for i, v in enumerate(VARIANT_LABELS)}
    cells = []
    for task, T in sorted({(r["task"], r["block_size"]) for r in rows}):
        sel = [r for r in rows if r["task"] == task and r["block_size"] == T]
        ref = {r["seed"]: r["metric"] for r in sel if r["variant"] == "exact"}
        shakespeare = task == "shakespeare"
        margin, unit = (PERPLEXITY_MARGIN, "%") if shakespeare else (ACCURACY_MARGIN, "points")
        for v in sorted({r["variant"] for r in sel} - {"exact"}, key=lambda v: (order.get(v, len(order)), v)):
            rs = sorted((r for r in sel if r["variant"] == v), key=lambda r: r["seed"])
            d = [gain(r["metric"], ref[r["seed"]], shakespeare) for r in rs if r["seed"] in ref]
            res = paired_ci(d) if d else None
            verdict, why = verdict_competitive(res, margin, unit)
            cells.append(
                {
                    "task": task,
                    "block_size": T,
                    "variant": v,
                    "n": len(d),
                    "unpaired": len(rs) - len(d),
                    "res": res,
                    "unit": unit,
                    "verdict": verdict,
                    "why": why,
                    "settings": _settings([r for r in rs if r["seed"] in ref] or rs),  # the seeds used
                }
            )
    return cells


def moves_gain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (task, T) where ``qemcmc`` and ``qemcmc-k0`` (zero moves) both ran: ``{"task", "block_size", "res" (the gain
    of qemcmc over qemcmc-k0 paired by seed, 95 % t interval), "unit"}``; what the quantum moves add."""
    out = []
    for task, T in sorted({(r["task"], r["block_size"]) for r in rows}):
        by = {
            v: {r["seed"]: r["metric"] for r in rows if (r["task"], r["block_size"], r["variant"]) == (task, T, v)}
            for v in MOVES
        }
        seeds = sorted(set(by[MOVES[0]]) & set(by[MOVES[1]]))
        if seeds:
            d = [gain(by[MOVES[0]][s], by[MOVES[1]][s], task == "shakespeare") for s in seeds]
            out.append(
                {"task": task, "block_size": T, "res": paired_ci(d), "unit": "%" if task == "shakespeare" else "points"}
            )
    return out


def _moves_markdown(rows: list[dict[str, Any]]) -> list[str]:
    """What the quantum moves add (qemcmc over qemcmc-k0), or why it is not measured."""
    ran = {r["variant"] for r in rows}
    if MOVES[0] not in ran:
        return []
    mg = moves_gain(rows)
    if not mg:
        missing = (
            f"{MOVES[1]} (zero moves) has not run with the seeds of {MOVES[0]}: what the quantum moves add over the "
            "mean-field start and the estimator is not measured yet."
        )
        return ["", missing, ""]
    lines = [
        "",
        f"What the quantum moves add: the gain of {MOVES[0]} over {MOVES[1]} (the same sampler with zero moves), "
        "paired by seed, 95 % t interval (positive: the moves help).",
        "",
        "| task | T | paired seeds | gain [95 % CI] |",
        "| --- | --- | --- | --- |",
    ]
    for m in mg:
        r = m["res"]
        lines.append(
            f"| {m['task']} | {m['block_size']} | {r.n} | {fmt(r.mean, 3)} [{fmt(r.lo, 3)}, {fmt(r.hi, 3)}] "
            f"{m['unit']} |"
        )
    return lines + [""]


def _tally(cells: list[dict[str, Any]], short: bool = False) -> str:
    k = {v: sum(c["verdict"] == v for c in cells) for v in ("competitive", "not competitive", "inconclusive")}
    if short:
        return f"{k['competitive']}/{len(cells)} cells competitive, {k['not competitive']} not"
    return (
        f"competitive in {k['competitive']} of {len(cells)} (task, T) cells, not competitive in "
        f"{k['not competitive']}, inconclusive in {k['inconclusive']}"
    )


def _gain_text(c: dict[str, Any]) -> str:
    r = c["res"]
    return f"{fmt(r.mean)} {c['unit']} (n = 1)" if r.n < 2 else f"{ci(r)} {c['unit']}"


def finding8(path: Path, rows: list[dict[str, Any]] | None) -> tuple[str, tuple[str, str]]:
    """Finding 8's ``ours`` text and ``(verdict, why)``."""
    if rows is None:
        return f"no sampler-trained runs ({path} does not exist; made by {_COMMAND})", ("not tested here", "")
    cells = sampler_training_cells(rows)
    dqa = [c for c in cells if c["variant"] == "dqa-shots" and c["res"] is not None]
    if not dqa:
        return f"no dqa-shots run paired with an exact run in {path}", ("not run", "no paired dqa-shots runs")
    ours = "dqa-shots gain over exact: " + "; ".join(f"{c['task']} T = {c['block_size']}: {_gain_text(c)}" for c in dqa)
    beside = []
    for v, what in zip(BESIDE, ("quantum MCMC", "classical", "DQA shots, Rao-Blackwellised")):
        cs = [c for c in cells if c["variant"] == v and c["res"] is not None]
        if cs:
            beside.append(f"{v} ({what}) {_tally(cs, short=True)}")
    if beside:
        ours += ". Beside it, not in the verdict: " + "; ".join(beside)
    mg = moves_gain(rows)
    if mg:
        ours += f". What the quantum moves add ({MOVES[0]} over {MOVES[1]}, paired by seed): " + "; ".join(
            f"{m['task']} T = {m['block_size']}: {_gain_text(m)}" for m in mg
        )
    ours += " (every cell: the finding-8 table)"
    why = f"dqa-shots {_tally(dqa)} (margins {PERPLEXITY_MARGIN:g} % perplexity, {ACCURACY_MARGIN:g} accuracy point)"
    missing = sorted(set(_TASKS) - {c["task"] for c in dqa})
    if any(c["verdict"] == "not competitive" for c in dqa):
        return ours, ("refuted", why)
    if all(c["verdict"] == "competitive" for c in dqa) and not missing:
        return ours, ("reproduced", why)
    return ours, ("inconclusive", why + (f"; no {' or '.join(missing)} run yet" if missing else ""))


def sampler_training_markdown(path: Path, rows: list[dict[str, Any]] | None) -> str:
    """The finding-8 section of ``claims.md``: the verdict and, per (task, T) and variant, the paired gain."""
    ours, (verdict, why) = finding8(path, rows)
    lines = [
        "## Finding 8: sampler-trained against exact training",
        "",
        f"{PAPER[8]}. Verdict: **{verdict}**" + (f" ({why})." if why else "."),
        "",
    ]
    if rows is None:
        return "\n".join(lines + [f"{path} does not exist (made by {_COMMAND}).", ""]) + "\n"
    lines += [
        f"From {path}: the gain of each variant over exact training, paired by seed (positive: the variant better; "
        f"Shakespeare: relative perplexity in %, brackets: accuracy points), every model evaluated with exact "
        f"marginals; 95 % t interval, no multiplicity adjustment; margins {PERPLEXITY_MARGIN:g} % and "
        f"{ACCURACY_MARGIN:g} point. The finding's verdict is dqa-shots'; the other rows show whether training on "
        "samples can be competitive at all.",
        "",
        "| task | T | variant | trained on | paired seeds | gain vs exact [95 % CI] | verdict | why | settings |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in sampler_training_cells(rows):
        r = c["res"]
        g = f"{fmt(r.mean, 3)} [{fmt(r.lo, 3)}, {fmt(r.hi, 3)}] {c['unit']}" if r is not None else "-"
        why = c["why"] + (f"; {c['unpaired']} seed(s) without an exact run, not used" if c["unpaired"] else "")
        lines.append(
            f"| {c['task']} | {c['block_size']} | {c['variant']} | {VARIANT_LABELS.get(c['variant'], '')} | {c['n']} "
            f"| {g} | {c['verdict']} | {why} | {c['settings'] or '-'} |"
        )
    return "\n".join(lines + _moves_markdown(rows)) + "\n"
