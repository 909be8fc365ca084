"""DQASchedule and the numpy reference refuse hostile values with a clear error before any work (hybrid_attention/circuits/schedule.py,
hybrid_attention/circuits/reference.py)."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from hybrid_attention.circuits import DQASchedule, dqa_probabilities, leading_order_beta, reference
from hybrid_attention.circuits.schedule import MIN_TAU


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(gamma=-1.0), ValueError, r"DQASchedule.gamma must be > 0, got -1.0"),
        (dict(gamma=0.0), ValueError, r"DQASchedule.gamma must be > 0, got 0.0"),
        (dict(energy_scale=0.0), ValueError, r"DQASchedule.energy_scale must be > 0, got 0.0"),
        (dict(energy_scale=-2), ValueError, r"DQASchedule.energy_scale must be > 0, got -2"),
        (dict(tau=5e-324), ValueError, r"DQASchedule.tau must be >= MIN_TAU = 1.49e-154 .*got 5e-324"),
        (dict(tau=0.0), ValueError, r"tau must be >= MIN_TAU.*got 0.0"),
        (dict(tau=-1.0), ValueError, r"tau must be >= MIN_TAU.*got -1.0"),
        (dict(tau=math.inf), ValueError, r"DQASchedule.tau must be a finite number, got inf"),
        (dict(field_scale=-1.0), ValueError, r"DQASchedule.field_scale must be >= 0, got -1.0"),
        (dict(gamma="1"), TypeError, r"DQASchedule.gamma must be a real number, got str '1'"),
        (dict(tau=True), TypeError, r"DQASchedule.tau must be a real number, got bool True"),
        (dict(steps=2.0), TypeError, r"DQASchedule.steps must be an integer >= 1, got float 2.0"),
        (dict(steps=0), ValueError, r"DQASchedule.steps must be an integer >= 1, got 0"),
    ],
)
def test_schedule_refuses_hostile_values(kwargs, exc, match):
    args = {"tau": 1.0, "steps": 4, **kwargs}
    with pytest.raises(exc, match=match):
        DQASchedule(**args)


def test_min_tau_is_where_the_output_temperature_stops_being_a_number():
    """At MIN_TAU the leading-order beta (~ tau**2) is still a positive normal float64; just below, tau**2 is
    subnormal, and at the denormal 5e-324 it is 0."""
    assert MIN_TAU == math.sqrt(sys.float_info.min)
    bh, bJ = leading_order_beta(DQASchedule(tau=MIN_TAU, steps=1))
    assert bh > 0 and bJ > 0
    assert (MIN_TAU / 2) ** 2 < sys.float_info.min and 5e-324**2 == 0.0
    with pytest.raises(ValueError, match="MIN_TAU"):
        DQASchedule(tau=MIN_TAU / 2, steps=1)
    # a legal short quench gives the uniform distribution
    p = dqa_probabilities(np.array([0.7, -0.3]), np.zeros((2, 2)), DQASchedule(tau=1e-100, steps=3))
    np.testing.assert_allclose(p, 0.25, atol=1e-15)


@pytest.mark.parametrize("bad", ["h", "J"])
def test_reference_refuses_non_finite_fields_before_any_work(bad, monkeypatch):
    h = np.array([[0.5, np.nan]]) if bad == "h" else np.array([[0.5, 0.1]])
    J = np.array([[0.0, np.inf], [np.inf, 0.0]]) if bad == "J" else np.zeros((2, 2))

    def work(*a, **k):
        raise AssertionError("the anneal started before the input was refused")

    monkeypatch.setattr(reference, "problem_energies", work)
    monkeypatch.setattr(reference, "apply_driver", work)
    with pytest.raises(ValueError, match=rf"{bad} must be finite, got a non-finite value (nan|inf) at index"):
        dqa_probabilities(h, J, DQASchedule(tau=1.0, steps=3))
    monkeypatch.undo()
    with pytest.raises(ValueError, match=rf"{bad} must be finite"):
        reference.problem_energies(h, J)
