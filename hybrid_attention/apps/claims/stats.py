"""Statistics of paired seed-by-seed comparisons: t confidence intervals, paired tests with Holm's correction, a trend
test over T and the number of seeds a given power needs.

A *pair* is the same seed trained in two modes (the same seed fixes the data order and the shared initial weights),
so the comparison of mode A with mode B at one block size uses the per-seed differences ``d_s = A_s - B_s``.

* :func:`paired_ci`: mean difference with its two-sided ``level`` t interval ``mean ± t_{n-1} s / sqrt(n)`` and the
  paired t test's p-value (``H0: E d = 0``).
* :func:`holm`: Holm's step-down adjusted p-values (family-wise error control over the cells of a table).
* :func:`trend`: the least-squares slope of ``d`` against ``T`` per seed, then a one-sample t test on the seeds'
  slopes (``H0``: no trend). Seeds are the independent units; a seed needs at least two block sizes.
* :func:`seeds_needed`: the smallest number of seeds for which a two-sided paired t test at level ``alpha`` detects a
  true mean difference ``effect`` with the given power when the differences have standard deviation ``sd``
  (noncentral t).

Everything is plain floats; scipy is used for the t and noncentral t distributions.

Example:
    >>> r = paired_ci([1.0, 2.0, 3.0])
    >>> round(r.mean, 3), round(r.lo, 3), round(r.hi, 3), r.n
    (2.0, -0.484, 4.484, 3)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PairedResult", "TrendResult", "paired_ci", "holm", "trend", "seeds_needed"]


@dataclass(frozen=True)
class PairedResult:
    """A paired comparison: ``n`` differences, their ``mean`` and ``sd`` (ddof 1), the ``level`` interval
    ``[lo, hi]`` and the two-sided paired t test's ``p`` (nan for ``n < 2`` or a zero spread with zero mean)."""

    n: int
    mean: float
    sd: float
    lo: float
    hi: float
    p: float
    level: float = 0.95


@dataclass(frozen=True)
class TrendResult:
    """Per-seed least-squares slopes of the difference against T: their mean, ``level`` interval, p-value, count."""

    n: int
    slope: float
    lo: float
    hi: float
    p: float


def _values(d: Sequence[float], name: str) -> list[float]:
    v = [float(x) for x in d]
    if any(not math.isfinite(x) for x in v):
        raise ValueError(f"{name} must be finite numbers, got {list(d)!r}")
    return v


def paired_ci(diffs: Sequence[float], level: float = 0.95) -> PairedResult:
    """Mean of the paired differences with its t interval and the paired t test (module docstring).

    Raises:
        ValueError: no differences, a non-finite one, or ``level`` outside (0, 1).
    """
    from scipy import stats

    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    d = _values(diffs, "paired differences")
    n = len(d)
    if n == 0:
        raise ValueError("paired_ci needs at least one difference, got none")
    mean = math.fsum(d) / n
    if n < 2:
        return PairedResult(n, mean, math.nan, math.nan, math.nan, math.nan, level)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in d) / (n - 1))
    se = sd / math.sqrt(n)
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * se
    if se == 0:
        p = math.nan if mean == 0 else 0.0
    else:
        p = float(2 * stats.t.sf(abs(mean) / se, n - 1))
    return PairedResult(n, mean, sd, mean - half, mean + half, p, level)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order; nan entries stay nan and are not counted.

    Example:
        >>> [round(p, 3) for p in holm([0.01, 0.04, 0.03, 0.005])]
        [0.03, 0.06, 0.06, 0.02]
    """
    p = [float(x) for x in pvalues]
    idx = sorted((i for i, x in enumerate(p) if not math.isnan(x)), key=lambda i: p[i])
    m = len(idx)
    out = [math.nan] * len(p)
    running = 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def trend(per_seed: dict[int, dict[int, float]], level: float = 0.95) -> TrendResult:
    """Trend of a paired difference over T: ``per_seed = {seed: {T: difference}}`` (module docstring).

    Raises:
        ValueError: fewer than two seeds with at least two block sizes.
    """
    slopes = []
    for pts in per_seed.values():
        if len(pts) < 2:
            continue
        xs, ys = list(pts), [pts[t] for t in pts]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slopes.append(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx)
    if len(slopes) < 2:
        raise ValueError(f"a trend test needs at least two seeds with two or more block sizes, got {len(slopes)}")
    r = paired_ci(slopes, level)
    return TrendResult(r.n, r.mean, r.lo, r.hi, r.p)


def seeds_needed(effect: float, sd: float, *, alpha: float = 0.05, power: float = 0.8, n_max: int = 10_000) -> int:
    """Smallest ``n >= 2`` whose two-sided paired t test at ``alpha`` has at least ``power`` against a true mean
    difference ``effect`` with per-pair standard deviation ``sd``; ``n_max + 1`` if even ``n_max`` does not suffice.

    Raises:
        ValueError: ``sd`` not positive and finite, ``effect`` zero or non-finite.
    """
    from scipy import stats

    if not (math.isfinite(sd) and sd > 0):
        raise ValueError(f"sd must be a positive finite number, got {sd!r}")
    if not math.isfinite(effect) or effect == 0:
        raise ValueError(f"effect must be a nonzero finite number, got {effect!r}")
    delta = abs(effect) / sd

    def pw(n: int) -> float:
        df, nc = n - 1, delta * math.sqrt(n)
        c = stats.t.ppf(1 - alpha / 2, df)
        return float(stats.nct.sf(c, df, nc) + stats.nct.cdf(-c, df, nc))

    lo, hi = 2, 2
    while pw(hi) < power:
        if hi > n_max:
            return n_max + 1
        lo, hi = hi, hi * 2
    while lo < hi:  # smallest n in [lo, hi] with enough power (power grows with n)
        mid = (lo + hi) // 2
        if pw(mid) >= power:
            hi = mid
        else:
            lo = mid + 1
    return lo
