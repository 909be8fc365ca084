"""The PennyLane sampler with a ``qml.device`` object: the object's own shots against the ideal circuit
output (z = 5 shot-noise tolerances from the shipped conformance checks), and the refusals (a seed the object would
ignore, too few wires, device_kwargs with an object)."""

from __future__ import annotations

import pytest
import torch

qml = pytest.importorskip("pennylane")

from hybrid_attention import IsingProblem  # noqa: E402
from hybrid_attention.backends import get_sampler  # noqa: E402
from hybrid_attention.backends import testing as conformance  # noqa: E402
from hybrid_attention.circuits import DQASchedule  # noqa: E402

SCHED = DQASchedule(tau=1.5, steps=10)


@pytest.mark.parametrize("rung", ["pair", "frustrated triangle", "masked spin"])
def test_device_object_matches_the_ideal_circuit_output(rung):
    s = get_sampler("pennylane", device=qml.device("default.qubit", seed=42), schedule=SCHED)
    assert s.properties["device"] == "default.qubit"
    conformance.assert_ladder_rung(s, conformance.problem_ladder()[rung], num_reads=3000, seed=None)


def test_device_object_refusals():
    p = IsingProblem(torch.zeros(2, 3))
    s = get_sampler("pennylane", device=qml.device("default.qubit", seed=1), schedule=SCHED)
    with pytest.raises(ValueError, match="own random state"):
        s.sample(p, num_reads=10, seed=3)
    small = get_sampler("pennylane", device=qml.device("default.qubit", wires=2), schedule=SCHED)
    with pytest.raises(ValueError, match=r"do not include the problem's wires 0..2"):
        small.sample(p, num_reads=10)
    with pytest.raises(TypeError, match="device_kwargs only apply"):
        get_sampler("pennylane", device=qml.device("default.qubit"), device_kwargs={"c_dtype": "complex64"})
    with pytest.raises(TypeError, match="device name or a qml.device object"):
        get_sampler("pennylane", device=3)
