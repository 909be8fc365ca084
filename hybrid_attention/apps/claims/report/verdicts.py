"""One verdict function per kind of rule (:data:`.rules.KINDS`; the rules' text: :data:`.rules.RULES`). Each returns
``(verdict, why)``.

A contrast ``c`` is a dict with ``"res"`` (a :class:`~hybrid_attention.apps.claims.stats.PairedResult`: the paired
gain, positive: the first mode better, its interval at the family's Bonferroni level), ``"p_holm"`` (its
Holm-adjusted p within its family), ``"alpha"`` (the family's Bonferroni level ``ALPHA / m``) and ``"block_size"``.
"""

from __future__ import annotations

import math
from typing import Any

from ..stats import PairedResult, seeds_needed
from .fmt import fmt
from .rules import ALPHA, EQUIVALENCE_MARGIN

__all__ = [
    "significant",
    "need",
    "ceiling",
    "verdict_gain",
    "verdict_comparable",
    "worse_cell",
    "verdict_worse",
    "verdict_couplings",
    "verdict_competitive",
]


def significant(c: dict[str, Any]) -> bool:
    """Whether the contrast's Holm-adjusted p is below :data:`.rules.ALPHA`."""
    return not math.isnan(c["p_holm"]) and c["p_holm"] < ALPHA


def need(effect: float, res: PairedResult, alpha: float = ALPHA) -> str:
    """The seeds a paired t test at level ``alpha`` needs for 80 % power against ``effect`` at ``res``'s spread."""
    if res.n < 2 or not (math.isfinite(res.sd) and res.sd > 0):
        return "spread unknown (fewer than two seeds or zero spread)"
    n = seeds_needed(effect, res.sd, alpha=alpha)
    return (
        f"about {n} seeds for 80 % power against {effect:g} at alpha {alpha:.3g} and the observed spread "
        f"(sd {res.sd:.3g})"
    )


def ceiling(claimed: float, ref_mean: float) -> str | None:
    """Why a claimed accuracy gain cannot be tested: more than the reference leaves (``100 - ref_mean`` points);
    ``None`` when it can."""
    room = 100.0 - ref_mean
    if not math.isfinite(ref_mean) or claimed <= room:
        return None
    return (
        f"ceiling: softmax reaches {ref_mean:.2f} % accuracy, leaving {room:.2f} points, less than the claimed "
        f"{claimed:g}"
    )


def _test(c: dict[str, Any], claimed: float) -> tuple[str, str]:
    """The gain rule without the ceiling."""
    res, sig = c["res"], significant(c) and c["res"].mean > 0
    if sig and res.hi >= claimed:
        return "reproduced", f"significant gain (Holm p = {c['p_holm']:.3g}); the interval reaches {claimed:g}"
    if sig:
        return "reproduced in direction, smaller", f"significant (Holm p = {c['p_holm']:.3g}) but below {claimed:g}"
    if res.hi < claimed:
        return "refuted", f"no significant gain (Holm p = {fmt(c['p_holm'], 3)}) and the interval excludes {claimed:g}"
    return "inconclusive", need(claimed, res, c["alpha"])


def verdict_gain(c: dict[str, Any] | None, claimed: float, *, ref_mean: float | None = None) -> tuple[str, str]:
    """A claimed gain (findings 2, 6, 7); ``ref_mean``: softmax's mean accuracy (brackets), for the ceiling."""
    if c is None:
        return "not run", "no paired runs"
    verdict, why = _test(c, claimed)
    top = ceiling(claimed, ref_mean) if ref_mean is not None else None
    if top is not None:
        return "not testable (ceiling)", f"{top}; by the gain rule alone: {verdict} ({why})"
    return verdict, why


def verdict_comparable(c: dict[str, Any] | None) -> tuple[str, str]:
    """The "comparable" rule (finding 1)."""
    if c is None:
        return "not run", "no paired runs"
    res, m = c["res"], EQUIVALENCE_MARGIN
    if -m <= res.lo and res.hi <= m:
        return "reproduced", f"the interval lies inside ±{m:g} %"
    if significant(c) and (res.lo > m or res.hi < -m):
        return "refuted", f"significant difference beyond ±{m:g} % (Holm p = {c['p_holm']:.3g})"
    return "inconclusive", f"the interval is not inside ±{m:g} %; {need(m, res, c['alpha'])}"


def worse_cell(res: PairedResult | None) -> str:
    """One block size of the "worse" rule: ``worse`` (interval below -margin), ``not worse`` (above it),
    ``undecided`` or ``no runs``."""
    m = EQUIVALENCE_MARGIN
    if res is None:
        return "no runs"
    if res.hi < -m:
        return "worse"
    if res.lo > -m:
        return "not worse"
    return "undecided"


def verdict_worse(cells: dict[int, PairedResult | None]) -> tuple[str, str]:
    """The "worse" rule (findings 3, 4) over ``{T: paired gain or None}``, every block size of the finding."""
    if not any(r is not None for r in cells.values()):
        return "not run", "no paired runs"
    by: dict[str, list[int]] = {}
    for T, res in cells.items():
        by.setdefault(worse_cell(res), []).append(T)
    why = "; ".join(
        f"{k} at " + ", ".join(f"T = {T}" for T in by[k])
        for k in ("worse", "not worse", "undecided", "no runs")
        if k in by
    )
    why += f" (margin -{EQUIVALENCE_MARGIN:g} %)"
    if "not worse" in by:
        return "refuted", why
    if set(by) == {"worse"}:
        return "reproduced", why
    return "inconclusive", why


def verdict_couplings(prof: list[dict[str, Any]]) -> tuple[str, str]:
    """Couplings by key distance (finding 5), ``prof`` from :func:`.tables.coupling_by_distance`."""
    if not prof:
        return "not run", "no hj couplings"
    near = [p for p in prof if 2 <= p["distance"] <= 4]
    far = [p for p in prof if p["distance"] >= 6]
    if not near or not far:
        return "not testable", "the block size has no distance >= 6"
    pos = lambda p: p["lo"] > 0  # noqa: E731
    neg = lambda p: p["hi"] < 0  # noqa: E731
    if all(pos(p) for p in near) and all(neg(p) for p in far):
        return "reproduced", "every distance 2-4 significantly positive, every distance >= 6 significantly negative"
    if any(neg(p) for p in near) or any(pos(p) for p in far):
        return "refuted", "some distance has a significant coupling of the opposite sign"
    return "inconclusive", (
        f"{sum(pos(p) for p in near)}/{len(near)} of distances 2-4 significantly positive, "
        f"{sum(neg(p) for p in far)}/{len(far)} of distances >= 6 significantly negative"
    )


def verdict_competitive(res: PairedResult | None, margin: float, unit: str) -> tuple[str, str]:
    """One (task, T, variant) cell of finding 8: the paired gain over exact training against ``-margin``."""
    if res is None:
        return "not paired", "no seed of exact to pair with"
    if res.n >= 2 and res.lo >= -margin:
        return "competitive", f"the interval lies above -{margin:g} {unit}"
    if res.n >= 2 and res.hi < -margin:
        return "not competitive", f"the interval lies below -{margin:g} {unit}"
    if res.n < 2 or not (math.isfinite(res.sd) and res.sd > 0):
        return "inconclusive", "one seed: no interval" if res.n < 2 else "zero spread"
    n = seeds_needed(margin, res.sd)
    return "inconclusive", (
        f"the interval crosses -{margin:g} {unit}; about {n} seeds would show it within the margin with 80 % power "
        f"if it were as good as exact (sd {res.sd:.3g})"
    )
