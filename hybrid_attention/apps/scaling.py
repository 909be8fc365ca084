"""Intervals for the mixing comparisons of ``results/frontier``: scaling exponents over instances and fit windows,
and gap ratios (the coupling-strength crossover) over instances.

A fitted exponent ``k`` in ``gap ~ 2**(-k n)`` moves with the instances drawn (a bootstrap over instances measures
that) and with the sizes the line is fitted to (small sizes carry finite-size curvature, so dropping the smallest
or the largest sizes moves ``k``). :func:`exponent_ratio_interval` resamples both: every bootstrap replicate draws
the instances of every size with replacement (jointly for the two chains: instance ``i`` of both is one problem)
*and* one fit window uniformly among the contiguous runs of at least ``min_sizes`` sizes, and the interval is the
percentile interval of the replicates' ratios. The point estimate of every window is reported beside it.

:func:`gap_ratio_interval` is the crossover's statistic: the median gap of one chain over the largest median gap of
the others on the same instances, with a percentile interval from a joint bootstrap over instances (the best other
chain re-chosen in every replicate). :func:`crossover` reads a sweep of such intervals: the strengths where the
interval lies wholly above 1, wholly below 1, or contains 1 (a tie).

numpy only.

Example:
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> ns = [3, 4, 5, 6, 7]
    >>> slow = [2.0 ** (-0.9 * n) * rng.uniform(0.8, 1.2, 8) for n in ns]
    >>> fast = [2.0 ** (-0.3 * n) * rng.uniform(0.8, 1.2, 8) for n in ns]
    >>> r = exponent_ratio_interval(ns, slow, fast, boots=200)
    >>> bool(r["ci_low"] < 3.0 < r["ci_high"]), [w["sizes"] for w in r["windows"]]
    (True, [[3, 6], [3, 7], [4, 7]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["fit_windows", "exponent_ratio_interval", "gap_ratio_interval", "crossover"]

STATS = {"median": np.median, "mean": np.mean}


def fit_windows(ns: Any, min_sizes: int = 4) -> list[tuple[int, int]]:
    """Index ranges ``[i, j)`` of the contiguous runs of at least ``min_sizes`` sizes of ``ns`` (sorted).

    Raises:
        ValueError: ``min_sizes < 2`` or more than the sizes given.
    """
    S = len(ns)
    if min_sizes < 2 or min_sizes > S:
        raise ValueError(f"fit windows need 2 <= min_sizes <= {S} (the sizes given), got {min_sizes}")
    return [(i, j) for i in range(S) for j in range(i + min_sizes, S + 1)]


def _slope(ns: np.ndarray, per_size: list[np.ndarray], stat: str) -> float:
    y = np.log2([max(float(STATS[stat](g)), 1e-300) for g in per_size])
    return float(-np.polyfit(ns, y, 1)[0])


def _check(ns: Any, num: Any, den: Any, stat: str) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    ns = np.asarray(ns, dtype=np.float64)
    num = [np.asarray(g, dtype=np.float64) for g in num]
    den = [np.asarray(g, dtype=np.float64) for g in den]
    if stat not in STATS:
        raise ValueError(f"stat must be one of {sorted(STATS)}, got {stat!r}")
    if not (len(ns) == len(num) == len(den)):
        raise ValueError(f"need one gap array per size for both chains, got {len(ns)} sizes, {len(num)}, {len(den)}")
    if [len(g) for g in num] != [len(g) for g in den] or min(len(g) for g in num) < 1:
        raise ValueError(
            f"both chains need the same (>= 1) instances per size, got {[len(g) for g in num]} and {[len(g) for g in den]}"
        )
    if np.any(np.diff(ns) <= 0):
        raise ValueError(f"sizes must be increasing, got {ns.tolist()}")
    return ns, num, den


def exponent_ratio_interval(
    ns: Any,
    gaps_num: Any,
    gaps_den: Any,
    *,
    min_sizes: int = 4,
    boots: int = 2000,
    seed: int = 0,
    stat: str = "median",
    level: float = 0.95,
) -> dict[str, Any]:
    """``k_num / k_den`` of two chains' fitted exponents, with an interval over instances and fit windows.

    Args:
        ns: sizes ``(S,)``, increasing. gaps_num, gaps_den: per size a 1-D array of the instances' gaps (``(I_s,)``,
            instance ``i`` of both chains the same problem).
        min_sizes: fewest sizes in a fit window. boots: bootstrap replicates. stat: per-size statistic of the
            instances (``"median"`` or ``"mean"``). level: coverage of the percentile intervals.

    Returns:
        ``{"ratio"`` (all sizes), ``"ci_low", "ci_high"`` (instances and windows resampled), ``"ci_instances"``
        (``[low, high]``, instances only, all sizes), ``"windows"`` (``[{"sizes": [n_lo, n_hi], "ratio",
        "k_num", "k_den"}]``), ``"window_min", "window_max", "k_num", "k_den", "boots", "level", "min_sizes"}``.
    """
    ns, num, den = _check(ns, gaps_num, gaps_den, stat)
    wins = fit_windows(ns, min_sizes)
    rng = np.random.default_rng(seed)
    windows = []
    for i, j in wins:
        kn, kd = _slope(ns[i:j], num[i:j], stat), _slope(ns[i:j], den[i:j], stat)
        windows.append({"sizes": [int(ns[i]), int(ns[j - 1])], "ratio": kn / kd, "k_num": kn, "k_den": kd})
    both, inst = np.empty(boots), np.empty(boots)
    for b in range(boots):
        idx = [rng.integers(0, len(g), len(g)) for g in num]
        rn, rd = [g[k] for g, k in zip(num, idx)], [g[k] for g, k in zip(den, idx)]
        inst[b] = _slope(ns, rn, stat) / _slope(ns, rd, stat)
        i, j = wins[rng.integers(0, len(wins))]
        both[b] = _slope(ns[i:j], rn[i:j], stat) / _slope(ns[i:j], rd[i:j], stat)
    q = [50 * (1 - level), 50 * (1 + level)]
    kn, kd = _slope(ns, num, stat), _slope(ns, den, stat)
    lo, hi = np.percentile(both, q)
    ilo, ihi = np.percentile(inst, q)
    ratios = [w["ratio"] for w in windows]
    return {
        "ratio": kn / kd,
        "ci_low": float(lo),
        "ci_high": float(hi),
        "ci_instances": [float(ilo), float(ihi)],
        "windows": windows,
        "window_min": float(min(ratios)),
        "window_max": float(max(ratios)),
        "k_num": kn,
        "k_den": kd,
        "boots": boots,
        "level": level,
        "min_sizes": min_sizes,
    }


def gap_ratio_interval(
    gaps: np.ndarray | Any, others: dict[str, Any], *, boots: int = 2000, seed: int = 0, level: float = 0.95
) -> dict[str, Any]:
    """``median(gaps) / max_c median(others[c])`` on the same instances, with a percentile interval.

    Args:
        gaps: ``(I,)`` one chain's gaps; others: ``{chain: (I,) gaps}`` of the chains it is compared with (instance
            ``i`` the same problem everywhere). boots, seed, level: the joint bootstrap over instances (the best
            other chain is re-chosen in every replicate).

    Returns:
        ``{"ratio", "ci_low", "ci_high", "best"`` (the other chain of largest median gap), ``"instances", "level"}``.
    """
    g = np.asarray(gaps, dtype=np.float64)
    o = {c: np.asarray(v, dtype=np.float64) for c, v in others.items()}
    if not o or g.ndim != 1 or g.size < 1 or any(v.shape != g.shape for v in o.values()):
        raise ValueError(
            f"need (I,) gaps and at least one other chain of the same shape, got {g.shape} and "
            f"{ {c: v.shape for c, v in o.items()} }"
        )
    names = list(o)
    O = np.stack([o[c] for c in names])  # (chains, I)
    med = np.median(O, axis=1)
    best = int(np.argmax(med))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, g.size, (boots, g.size))
    reps = np.median(g[idx], axis=1) / np.median(O[:, idx], axis=2).max(0)
    lo, hi = np.percentile(reps, [50 * (1 - level), 50 * (1 + level)])
    return {
        "ratio": float(np.median(g) / med[best]),
        "ci_low": float(lo),
        "ci_high": float(hi),
        "best": names[best],
        "instances": int(g.size),
        "level": level,
    }


def crossover(points: list[tuple[float, dict[str, Any]]]) -> dict[str, Any]:
    """Where a sweep of :func:`gap_ratio_interval` results crosses 1.

    Args:
        points: ``[(strength, interval)]`` in increasing strength.

    Returns:
        ``{"below": [strengths whose interval lies below 1], "tie": [... contains 1], "above": [... above 1],
        "bracket": (the largest strength below, the smallest strength above) or None where there is none}``: the
        crossover lies within the bracket; a tie inside it is a strength the data cannot place on either side.
    """
    below = [s for s, r in points if r["ci_high"] < 1.0]
    above = [s for s, r in points if r["ci_low"] > 1.0]
    tie = [s for s, r in points if r["ci_low"] <= 1.0 <= r["ci_high"]]
    lo = max((s for s in below if not above or s < min(above)), default=None)
    hi = min(above, default=None)
    return {"below": below, "tie": tie, "above": above, "bracket": (lo, hi)}
