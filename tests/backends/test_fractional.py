"""Fractional RZZ on a fake Heron backend (offline): the target, the transpiled DQA circuit against its statevector."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("qiskit_ibm_runtime")
pytest.importorskip("qiskit_aer")

from hybrid_attention.backends.ibm.fractional import (  # noqa: E402
    two_qubit_count,
    two_qubit_depth,
    with_fractional_gates,
)
from hybrid_attention.backends.ibm.sampler import fake_backend, has_fractional_rzz  # noqa: E402


@pytest.fixture(scope="module")
def torino():
    return fake_backend("fake_torino")


@pytest.fixture(scope="module")
def fractional(torino):
    return with_fractional_gates(torino)


def test_fractional_target_copies_cz_and_sx_properties(torino, fractional):
    t, f = torino.target, fractional.target
    assert has_fractional_rzz(fractional) and not has_fractional_rzz(torino)
    assert "rzz" not in t.operation_names  # the original is left alone
    assert set(f["rzz"]) == set(t["cz"]) and set(f["rx"]) == set(t["sx"])
    for q, p in t["cz"].items():
        assert f["rzz"][q].error == p.error and f["rzz"][q].duration == p.duration
    assert f.supported_angle_bound("rzz", [math.pi / 2]) and not f.supported_angle_bound("rzz", [-0.01])
    assert fake_backend("fake_torino_fractional").name == "fake_torino_fractional"


def test_fractional_needs_a_cz_fake_backend():
    with pytest.raises(ValueError, match="CZ"):
        with_fractional_gates(fake_backend("fake_sherbrooke"))
    with pytest.raises(TypeError, match="fake backend"):
        with_fractional_gates(object())
    with pytest.raises(ValueError, match="already"):
        with_fractional_gates(with_fractional_gates(fake_backend("fake_torino")))


@pytest.mark.parametrize("fold", [False, True])
def test_transpiled_dqa_chain_matches_its_statevector(torino, fractional, fold):
    from qiskit.quantum_info import Statevector
    from qiskit_aer import AerSimulator

    from hybrid_attention.apps.device_gates import chain_problems, transpile_dqa
    from hybrid_attention.backends.ibm.mitigation import measured_qubits
    from hybrid_attention.circuits import CircuitOptions, DQASchedule
    from hybrid_attention.circuits.qiskit_dqa import dqa_circuit

    n, steps = 4, 3
    prob = chain_problems(n, 1, seed=2)
    circ = dqa_circuit(prob[0], DQASchedule(tau=1.0, steps=steps), options=CircuitOptions(fold_rzz=fold))
    ideal = Statevector(circ.remove_final_measurements(inplace=False)).probabilities()
    for backend, per in ((fractional, 2 if fold else 1), (torino, 4 if fold else 2)):
        isa = transpile_dqa(circ, backend, "line")
        assert two_qubit_count(isa) == steps * (n - 1) * per  # a line: no SWAP; RZZ native or two CZ each
        assert two_qubit_depth(isa) >= 2 * steps  # a chain's couplings need two layers per step
        for ins in isa.data:
            if ins.operation.name == "rzz":
                assert 0 <= float(ins.operation.params[0]) <= math.pi / 2
        qubits = measured_qubits(isa)
        sim = isa.remove_final_measurements(inplace=False)
        sim.save_probabilities(qubits, label="p")
        p = np.asarray(AerSimulator(method="statevector").run(sim, shots=1).result().data(0)["p"])
        # exact simulations of equal circuits: agreement to float64 round-off over ~100 gates
        np.testing.assert_allclose(p, ideal, atol=1e-10)
