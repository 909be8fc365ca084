"""apps.device_gates and noise_study.exact_noisy_distribution on a small fake backend (offline)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("qiskit_ibm_runtime")
pytest.importorskip("qiskit_aer")

from hybrid_attention.apps.device_gates import LAYOUTS, chain_problems, dqa_point, transpile_dqa  # noqa: E402
from hybrid_attention.backends.ibm.sampler import fake_backend  # noqa: E402


def test_chain_problems_are_chains_and_prefix_stable():
    a, b = chain_problems(5, 2, seed=1), chain_problems(5, 3, seed=1)
    assert np.array_equal(a.h.numpy(), b.h[:2].numpy()) and np.array_equal(a.J.numpy(), b.J[:2].numpy())
    J = b.J.numpy()
    off = np.abs(np.subtract.outer(np.arange(5), np.arange(5))) != 1
    assert np.all(J[:, off] == 0) and np.all(J == np.swapaxes(J, 1, 2)) and np.all(J[:, ~off] != 0)


def test_exact_noisy_distribution_matches_sampled_histogram():
    from qiskit_aer import AerSimulator
    from qiskit_aer.noise import NoiseModel

    from hybrid_attention.apps.noise_study import exact_noisy_distribution
    from hybrid_attention.circuits import DQASchedule
    from hybrid_attention.circuits.qiskit_dqa import dqa_circuit

    backend = fake_backend("fake_manila")
    circ = dqa_circuit(chain_problems(3, 1, seed=0)[0], DQASchedule(tau=1.0, steps=4))
    isa = transpile_dqa(circ, backend, "line")
    p = exact_noisy_distribution(isa, backend)
    shots = 20000
    counts = AerSimulator(noise_model=NoiseModel.from_backend(backend), seed_simulator=3).run(isa, shots=shots)
    counts = counts.result().get_counts()
    hist = np.zeros(8)
    for key, c in counts.items():
        hist[int(key.replace(" ", ""), 2)] += c / shots  # clbit j is bit j of the integer (qiskit little-endian)
    # every probability within 5 binomial standard errors of the sampled frequency
    se = np.sqrt(np.maximum(p * (1 - p), 1e-12) / shots)
    assert np.all(np.abs(hist - p) < 5 * se + 1e-9), (hist, p)
    # and the noise is visible: the read-out and gate errors move the output away from the ideal statevector
    from qiskit.quantum_info import Statevector

    ideal = Statevector(circ.remove_final_measurements(inplace=False)).probabilities()
    assert 0.5 * np.abs(p - ideal).sum() > 5 * 0.5 * np.sqrt(ideal * (1 - ideal) / shots).sum()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_dqa_point_fields(layout):
    r = dqa_point(chain_problems(3, 1, seed=0), fake_backend("fake_manila"), layout=layout)
    assert r["n"] == 3 and len(set(r["qubits"])) == 3 and r["layout"] == layout
    assert r["two_qubit_gates"] >= 20 * 2 * 2  # 20 steps x 2 couplings x 2 CX per RZZ at least (SWAPs add more)
    assert 0 < r["tv_circuit"] < 1 and 0 < r["floor_4096"] < 0.1 and r["duration_s"] > 0


def test_transpile_dqa_rejects_an_unknown_layout():
    with pytest.raises(ValueError, match="layout"):
        transpile_dqa(None, None, "best")
