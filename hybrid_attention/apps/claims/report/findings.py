"""Applying the rules (:mod:`.rules`) to the runs: the Holm families of the findings' primary contrasts
(:func:`family_table`) and per finding of the paper our number with its interval and seeds, the best checkpoint's
beside it, and a verdict (:func:`findings`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..costs import FIELD_MODE
from ..stats import holm, trend
from . import load as _load
from .fmt import fmt
from .rules import ALPHA, FAMILIES, FINDINGS, Finding, family_contrasts
from .sampler_training import finding8, load_sampler_training, sampler_training_path
from .tables import compare, coupling_by_distance, reference_mean
from .verdicts import verdict_comparable, verdict_couplings, verdict_gain, verdict_worse

__all__ = ["findings", "findings_from", "family_table", "study_of", "contrast", "trend_text"]

Data = dict[str, list[dict[str, Any]]]


def findings(root: str | Path, quantum_training: str | Path | None = None) -> list[dict[str, Any]]:
    """Per finding of the paper (1-8): ``{"n", "paper", "study", "ours", "verdict", "why", "contrasts"}`` from the
    studies under ``root`` (``contrasts``: the :func:`contrast` dicts it read); finding 8 from the quantum-training
    ``summary.json`` at ``quantum_training`` (default ``<root>/../quantum_training/summary.json``; absent there: not
    tested).

    Raises:
        FileNotFoundError: ``quantum_training`` given but not a file.
        ValueError: a malformed ``summary.json`` (:func:`.sampler_training.load_sampler_training`).
    """
    path = sampler_training_path(root, quantum_training)
    return findings_from(_load.all_rows(root)[0], path, load_sampler_training(path))


def study_of(f: Finding, data: Data) -> str | None:
    """The study ``f`` reads: the first of ``f.studies`` with finished runs (else the first, without runs)."""
    return next((s for s in f.studies if data.get(s)), f.studies[0] if f.studies else None)


def contrast(rows: list[dict[str, Any]], f: Finding, T: int, alpha: float) -> dict[str, Any]:
    """``f``'s contrast at ``T``: ``{"finding", "block_size", "mode", "ref", "res" (last evaluation) and "best" (best
    checkpoint), paired gains with intervals at level ``1 - alpha`` or ``None``, "p" (unadjusted; 1 without runs),
    "alpha", "level", "ref_mean" (the reference's mean metric over the paired seeds)}``."""
    res = compare(rows, f.mode, f.ref, T, level=1 - alpha)
    return {
        "finding": f.n,
        "block_size": T,
        "mode": f.mode,
        "ref": f.ref,
        "res": res,
        "best": compare(rows, f.mode, f.ref, T, metric="best_metric", level=1 - alpha),
        "p": res.p if res is not None and not math.isnan(res.p) else 1.0,
        "alpha": alpha,
        "level": 1 - alpha,
        "ref_mean": reference_mean(rows, f.mode, f.ref, T),
    }


def family_table(family: str, data: Data) -> list[dict[str, Any]]:
    """The contrasts of a Holm family (:func:`.rules.family_contrasts`; every one, with runs or not, so that ``m`` is
    the family's size) at the Bonferroni level ``ALPHA / m``, each with ``p_holm`` adjusted within the family."""
    fc = family_contrasts(family)
    alpha = ALPHA / len(fc)
    cs = [contrast(data.get(study_of(f, data), []), f, T, alpha) for f, T in fc]
    for c, p in zip(cs, holm([c["p"] for c in cs])):
        c["p_holm"] = p
    return cs


def _effect(c: dict[str, Any], unit: str) -> str:
    """``"mean [lo, hi] unit (level CI, n = k, best checkpoint mean [lo, hi])"``."""
    r, b = c["res"], c["best"]
    if r is None:
        return "no paired runs"
    text = f"{fmt(r.mean)} [{fmt(r.lo)}, {fmt(r.hi)}] {unit} ({100 * c['level']:.4g} % CI, n = {r.n}"
    if b is not None:
        text += f", best checkpoint {fmt(b.mean)} [{fmt(b.lo)}, {fmt(b.hi)}]"
    return text + ")"


def _per_T(cs: list[dict[str, Any]], unit: str = "%") -> str:
    return "; ".join(f"T = {c['block_size']}: {_effect(c, unit)}" for c in cs)


def _worse(cs: list[dict[str, Any]]) -> tuple[str, str]:
    return verdict_worse({c["block_size"]: c["res"] for c in cs})


def _own_family(rows: list[dict[str, Any]], f: Finding) -> list[dict[str, Any]]:
    """A finding outside the families (4): its contrast at every block size with runs, Bonferroni over them."""
    Ts = sorted(
        {r["block_size"] for r in rows if r["mode"] == f.mode} & {r["block_size"] for r in rows if r["mode"] == f.ref}
    )
    return [contrast(rows, f, T, ALPHA / len(Ts)) for T in Ts]


def _finding4(f: Finding, data: Data) -> tuple[str, tuple[str, str], list]:
    """J-only poor: the paper's J-only decides; J-only with a field (``<study>_jfield*``) is shown beside it."""
    base_rows = data.get(f.studies[0], [])
    cs = _own_family(base_rows, f)
    ours, (verdict, why) = _per_T(cs) or "n/a", _worse(cs)
    field = Finding(f.n, f.paper, f.kind, None, f.studies, FIELD_MODE, f.ref, None)
    for fs in sorted(s for s in data if _load.field_base(s) == f.studies[0]):
        own = data[fs]
        eps = ", ".join(f"{e:g}" for e in sorted({r["j_field"] for r in own}))
        fcs = _own_family(_load.with_references(fs, own, base_rows), field)
        if fcs:
            ours += f". Beside it, not in the verdict: J-only with a field ε = {eps} (J learns): " + _per_T(fcs)
            fv = _worse(fcs)
            why += f"; with a field ε = {eps}: {fv[0]} ({fv[1]})"
    return ours, (verdict, why), cs


def _finding5(f: Finding, rows: list[dict[str, Any]]) -> tuple[str, tuple[str, str], list]:
    """Couplings by distance: the largest block size with hj runs decides; the others (T > 6) are shown beside."""
    Ts = sorted({r["block_size"] for r in rows if r["mode"] == f.mode})
    prof = coupling_by_distance(rows, f.mode, Ts[-1]) if Ts else []
    ours = ", ".join(f"d={p['distance']}: {fmt(p['mean'], 3)}" for p in prof) or "n/a"
    verdict, why = verdict_couplings(prof)
    others = [(T, verdict_couplings(coupling_by_distance(rows, f.mode, T))[0]) for T in Ts[:-1] if T > 6]
    if others:
        why += "; by the same rule at " + ", ".join(f"T = {T}: {v}" for T, v in others)
    return (f"T = {Ts[-1]}: " + ours) if Ts else ours, (verdict, why), []


def _primary(f: Finding, data: Data, cs: list[dict[str, Any]]) -> tuple[str, tuple[str, str], list]:
    """Findings 1-3, 6, 7 from their family's contrasts ``cs``."""
    study = study_of(f, data)
    rows = data.get(study, [])
    shakespeare = any(r["task"] == "shakespeare" for r in rows) or study.startswith("shakespeare")
    unit = "%" if shakespeare else "points"
    if f.kind == "worse":
        return f"{study}: " + _per_T(cs, unit), _worse(cs), cs
    c = cs[0] if cs[0]["res"] is not None else None
    where = f"{study}: gain at T = {cs[0]['block_size']}: "
    if f.kind == "comparable":
        return where + _effect(cs[0], unit), verdict_comparable(c), cs
    verdict = verdict_gain(c, f.claimed, ref_mean=None if shakespeare else cs[0]["ref_mean"])
    if f.n == 6:  # the gap grows with T
        tr = trend_text(rows)
        return where + _effect(cs[0], unit) + "; " + tr[0], (verdict[0], verdict[1] + "; trend: " + tr[1]), cs
    return where + _effect(cs[0], unit), verdict, cs


def findings_from(data: Data, qt_path: Path, qt_rows: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The findings from ``data`` (``{study: rows}``, :func:`.load.all_rows`) and finding 8's ``summary.json``."""
    fams = {name: family_table(name, data) for name in FAMILIES}
    out = []
    for f in FINDINGS:
        if f.family is not None:
            ours, verdict, cs = _primary(f, data, [c for c in fams[f.family] if c["finding"] == f.n])
        elif f.kind == "worse":
            ours, verdict, cs = _finding4(f, data)
        elif f.kind == "couplings":
            ours, verdict, cs = _finding5(f, data.get(f.studies[0], []))
        else:
            ours, verdict = finding8(qt_path, qt_rows)
            cs = []
        out.append(
            {"n": f.n, "paper": f.paper, "study": study_of(f, data), "ours": ours, "verdict": verdict[0],
             "why": verdict[1], "contrasts": cs}
        )  # fmt: skip
    return out


def trend_text(rows: list[dict[str, Any]]) -> tuple[str, str]:
    """The per-seed trend of the hj-over-softmax gain over T (points per unit T): ``(numbers, what it says)``."""
    per: dict[int, dict[int, float]] = {}
    idx = {(r["mode"], r["block_size"], r["seed"]): r["metric"] for r in rows}
    for (mode, T, s), v in idx.items():
        if mode == "hj" and ("softmax", T, s) in idx:
            per.setdefault(s, {})[T] = v - idx[("softmax", T, s)]
    try:
        t = trend(per)
    except ValueError as exc:
        return "trend: n/a", str(exc)
    text = f"slope {fmt(t.slope, 3)} [{fmt(t.lo, 3)}, {fmt(t.hi, 3)}] points per unit T (n = {t.n}, p = {fmt(t.p, 3)})"
    grows = "the gap grows with T" if t.lo > 0 else ("the gap shrinks with T" if t.hi < 0 else "no significant trend")
    return text, grows
