"""Applying the rules (:mod:`.rules`) to the runs: per finding of the paper, our number with its interval and seeds
and a verdict (:func:`findings`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..costs import FIELD_MODE
from ..stats import trend
from . import load as _load
from .fmt import ci, fmt
from .rules import FINDINGS, Finding
from .sampler_training import finding8, load_sampler_training, sampler_training_path
from .tables import coupling_by_distance, find, study_table
from .verdicts import verdict_comparable, verdict_couplings, verdict_gain, verdict_worse

__all__ = ["findings", "findings_from", "trend_text"]

_BY_N = {f.n: f for f in FINDINGS}


def findings(root: str | Path, quantum_training: str | Path | None = None) -> list[dict[str, Any]]:
    """Per finding of the paper (1-8): ``{"n", "paper", "ours", "verdict", "why"}`` from the studies under ``root``;
    finding 8 from the quantum-training ``summary.json`` at ``quantum_training`` (default
    ``<root>/../quantum_training/summary.json``; absent there: not tested).

    Raises:
        FileNotFoundError: ``quantum_training`` given but not a file.
        ValueError: a malformed ``summary.json`` (:func:`.sampler_training.load_sampler_training`).
    """
    path = sampler_training_path(root, quantum_training)
    return findings_from(_load.all_rows(root)[0], path, load_sampler_training(path))


def _cells(comps: list[dict[str, Any]], f: Finding) -> list[dict[str, Any]]:
    """The comparisons of ``comps`` that are ``f``'s contrast, in table order."""
    return [
        c
        for c in comps
        if c["mode"] == f.mode and c["ref"] == f.ref and (f.block_sizes is None or c["block_size"] in f.block_sizes)
    ]


def _per_T(cs: list[dict[str, Any]]) -> str:
    return "; ".join(f"T = {c['block_size']}: {ci(c['res'])} %" for c in cs)


def _finding4(f: Finding, data: dict[str, list[dict[str, Any]]], comps: list) -> tuple[str, str, str]:
    """J-only poor: the paper's J-only decides; J-only with a field (``<study>_jfield*``) is shown beside it."""
    cs = _cells(comps, f)
    ours = _per_T(cs) or "n/a"
    verdict, why = verdict_worse(cs)
    base_rows = data.get(f.study, [])
    for fs in sorted(s for s in data if _load.field_base(s) == f.study):
        own = data[fs]
        eps = ", ".join(f"{e:g}" for e in sorted({r["j_field"] for r in own}))
        table = study_table(_load.with_references(fs, own, base_rows))[1]
        fcs = [c for c in table if c["mode"] == FIELD_MODE and c["ref"] == f.ref]
        if fcs:
            ours += f". Beside it, not in the verdict: J-only with a field ε = {eps} (J learns): " + _per_T(fcs)
            fv = verdict_worse(fcs)
            why += f"; with a field ε = {eps}: {fv[0]} ({fv[1]})"
    return ours, verdict, why


def _finding5(f: Finding, rows: list[dict[str, Any]], comps: list) -> tuple[str, str, str]:
    """Couplings by distance: the largest block size with hj runs decides; the others (T > 6) are shown beside."""
    Ts = sorted({c["block_size"] for c in comps if c["mode"] == f.mode})
    prof = coupling_by_distance(rows, f.mode, Ts[-1]) if Ts else []
    ours = ", ".join(f"d={p['distance']}: {fmt(p['mean'], 3)}" for p in prof) or "n/a"
    verdict, why = verdict_couplings(prof)
    others = [(T, verdict_couplings(coupling_by_distance(rows, f.mode, T))[0]) for T in Ts[:-1] if T > 6]
    if others:
        why += "; by the same rule at " + ", ".join(f"T = {T}: {v}" for T, v in others)
    return (f"T = {Ts[-1]}: " + ours) if Ts else ours, verdict, why


def findings_from(
    data: dict[str, list[dict[str, Any]]], qt_path: Path, qt_rows: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """The findings from ``data`` (``{study: rows}``, :func:`.load.all_rows`) and finding 8's ``summary.json``."""
    tabs = {f.study: study_table(data.get(f.study, []))[1] for f in FINDINGS if f.study}
    out = []

    def add(n: int, ours: str, verdict: tuple[str, str]) -> None:
        out.append({"n": n, "paper": _BY_N[n].paper, "ours": ours, "verdict": verdict[0], "why": verdict[1]})

    f1, f2, f3, f4, f5, f6, f7 = (_BY_N[n] for n in range(1, 8))
    c = find(tabs[f1.study], f1.mode, f1.ref, f1.block_sizes[0])
    add(1, f"gain {ci(c['res'])} %" if c else "n/a", verdict_comparable(c))
    c = find(tabs[f2.study], f2.mode, f2.ref, f2.block_sizes[0])
    add(2, f"gain {ci(c['res'])} %" if c else "n/a", verdict_gain(c, f2.claimed))
    cs = _cells(tabs[f3.study], f3)
    add(3, _per_T(cs) or "n/a", verdict_worse(cs))
    ours, verdict, why = _finding4(f4, data, tabs[f4.study])
    add(4, ours, (verdict, why))
    ours, verdict, why = _finding5(f5, data.get(f5.study, []), tabs[f5.study])
    add(5, ours, (verdict, why))
    c = find(tabs[f6.study], f6.mode, f6.ref, f6.block_sizes[0])
    v = verdict_gain(c, f6.claimed)
    tr = trend_text(data.get(f6.study, []))
    add(6, (f"gain at T = 16: {ci(c['res'])} points; " if c else "") + tr[0], (v[0], v[1] + "; trend: " + tr[1]))
    c = find(tabs[f7.study], f7.mode, f7.ref, f7.block_sizes[0])
    add(7, f"gain at T = 16 without FFN: {ci(c['res'])} points" if c else "n/a", verdict_gain(c, f7.claimed))
    ours, v = finding8(qt_path, qt_rows)
    add(8, ours, v)
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
