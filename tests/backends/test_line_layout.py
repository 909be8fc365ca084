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
