"""line_layout: a connected path of the coupling map; band 1 transpiles with zero SWAPs on it."""

from __future__ import annotations

import pytest

pytest.importorskip("qiskit_ibm_runtime")

from bench.banded_circuits import transpile_counts  # noqa: E402
from hybrid_attention.backends.ibm.line_layout import is_line, line_layout  # noqa: E402


def test_band1_zero_swaps_on_torino_line():
    from qiskit_ibm_runtime.fake_provider import FakeTorino

    backend = FakeTorino()
    line = line_layout(backend, 16)
    assert len(line) == 16 and is_line(line, backend)
    r = transpile_counts(backend, 16, 1, steps=4)
    assert r["swaps"] == 0
    assert r["two_qubit"] == 4 * 15 * 2  # steps x (n - 1) x two CZ per RZZ


def test_bad_n():
    from qiskit_ibm_runtime.fake_provider import FakeTorino

    with pytest.raises(ValueError):
        line_layout(FakeTorino(), 0)


def test_idle_cost_closed_form():
    import math

    from hybrid_attention.backends.ibm.line_layout import idle_cost

    assert idle_cost(1e-4, 1e-4, 0.0) == 0.0
    # a fully relaxed qubit: average fidelity 1/2 (float exp underflows to 0 at t = 1e3 T)
    assert abs(idle_cost(1e-4, 1e-4, 1e-1) - math.log(2.0)) < 1e-12
    t1, t2, t = 2e-4, 1e-4, 1e-6
    assert abs(idle_cost(t1, t2, t) - -math.log((3 + math.exp(-t / t1) + 2 * math.exp(-t / t2)) / 6)) < 1e-15
    # short times: -log F ~ t / (6 T1) + t / (3 T2) to first order; the next order is relatively ~ t / T2 = 1e-2
    assert abs(idle_cost(t1, t2, t) / (t / (6 * t1) + t / (3 * t2)) - 1) < 1e-2
    assert idle_cost(None, None, 1.0) == 0.0  # no T1 / T2 reported: no decay charged


def test_duration_adds_decoherence_and_is_checked():
    from qiskit_ibm_runtime.fake_provider import FakeTorino

    from hybrid_attention.backends.ibm.line_layout import idle_cost, qubit_graph

    backend = FakeTorino()
    _, r0 = qubit_graph(backend)
    _, r1 = qubit_graph(backend, duration=2e-5)
    qp = backend.target.qubit_properties
    for q in (0, 50, 100):
        assert abs(r1[q] - r0[q] - idle_cost(qp[q].t1, qp[q].t2, 2e-5)) < 1e-12
    line = line_layout(backend, 8, duration=2e-5)
    assert is_line(line, backend)
    for bad in (-1.0, float("nan"), "1"):
        with pytest.raises(ValueError, match="duration"):
            line_layout(backend, 8, duration=bad)
