"""apps.scaling: exponent-ratio intervals over instances and fit windows, gap-ratio intervals, the crossover."""

from __future__ import annotations

import numpy as np
import pytest

from hybrid_attention.apps.scaling import crossover, exponent_ratio_interval, fit_windows, gap_ratio_interval

NS = [3, 4, 5, 6, 7, 8]


def test_fit_windows_are_the_contiguous_runs() -> None:
    assert fit_windows(NS, 5) == [(0, 5), (0, 6), (1, 6)]
    assert len(fit_windows(NS, 2)) == 15  # all pairs i < j - 1 of 6 sizes: 5 + 4 + 3 + 2 + 1
    for bad in (1, 7):
        with pytest.raises(ValueError, match="min_sizes"):
            fit_windows(NS, bad)


def test_exact_power_laws_give_the_ratio_in_every_window_and_a_point_interval() -> None:
    # identical instances and exact power laws: every replicate and every window fits k exactly (float eps only)
    num = [np.full(6, 2.0 ** (-0.9 * n)) for n in NS]
    den = [np.full(6, 3.0 * 2.0 ** (-0.3 * n)) for n in NS]
    r = exponent_ratio_interval(NS, num, den, boots=200)
    eps = 1e-9  # polyfit of exact lines: round-off of a few ulps of log2 values of order 10
    assert abs(r["ratio"] - 3.0) < eps and abs(r["ci_low"] - 3.0) < eps and abs(r["ci_high"] - 3.0) < eps
    assert all(abs(w["ratio"] - 3.0) < eps for w in r["windows"])


def test_curvature_shows_up_in_the_windows_not_in_the_instances() -> None:
    # no instance noise, but the denominator's log-gap bends: the instance-only interval is a point, the window
    # interval spans the windows' ratios and nothing outside them
    num = [np.full(4, 2.0 ** (-1.0 * n)) for n in NS]
    den = [np.full(4, 2.0 ** (-0.3 * n - 0.02 * n * n)) for n in NS]
    r = exponent_ratio_interval(NS, num, den, boots=400, min_sizes=3)
    lo, hi = r["ci_instances"]
    assert hi - lo < 1e-9
    assert r["window_max"] - r["window_min"] > 0.1
    assert r["window_min"] - 1e-9 <= r["ci_low"] <= r["ci_high"] <= r["window_max"] + 1e-9
    assert r["ci_high"] - r["ci_low"] > 0.05


def test_instances_are_resampled_jointly() -> None:
    # two chains whose gaps differ by a constant factor on every instance have equal slopes in every replicate
    # only if a replicate draws the same instances for both (independent draws would give other medians)
    rng = np.random.default_rng(1)
    common = [2.0 ** (-0.5 * n) * rng.uniform(0.5, 2.0, 5) for n in NS]
    r = exponent_ratio_interval(NS, common, [0.5 * g for g in common], boots=300)
    assert abs(r["ci_low"] - 1) < 1e-9 and abs(r["ci_high"] - 1) < 1e-9


def test_exponent_ratio_interval_rejects_bad_input() -> None:
    g = [np.ones(3) for _ in NS]
    with pytest.raises(ValueError, match="same"):
        exponent_ratio_interval(NS, g, [np.ones(2) for _ in NS])
    with pytest.raises(ValueError, match="stat"):
        exponent_ratio_interval(NS, g, g, stat="mode")
    with pytest.raises(ValueError, match="increasing"):
        exponent_ratio_interval(NS[::-1], g, g)


def test_gap_ratio_interval_picks_the_best_other_chain() -> None:
    rng = np.random.default_rng(0)
    base = rng.uniform(0.05, 0.1, 16)
    r = gap_ratio_interval(2.0 * base, {"local": base, "uniform": 0.5 * base}, boots=300)
    assert r["best"] == "local"
    assert abs(r["ratio"] - 2.0) < 1e-12 and abs(r["ci_low"] - 2.0) < 1e-12 and abs(r["ci_high"] - 2.0) < 1e-12
    tie = gap_ratio_interval(base, {"local": base[::-1]}, boots=300)
    assert tie["ci_low"] <= 1.0 <= tie["ci_high"]
    with pytest.raises(ValueError, match="same shape"):
        gap_ratio_interval(base, {"local": base[:3]})


def test_crossover_brackets_between_the_last_interval_below_and_the_first_above() -> None:
    iv = lambda lo, hi: {"ci_low": lo, "ci_high": hi}  # noqa: E731
    pts = [(0.1, iv(0.4, 0.6)), (0.25, iv(0.7, 1.2)), (0.5, iv(1.6, 2.9)), (1.0, iv(3.0, 4.0))]
    c = crossover(pts)
    assert c["below"] == [0.1] and c["tie"] == [0.25] and c["above"] == [0.5, 1.0] and c["bracket"] == (0.1, 0.5)
    assert crossover([(0.1, iv(0.4, 0.6))])["bracket"] == (0.1, None)
