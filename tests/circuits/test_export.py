"""Exports (hybrid_attention/circuits/export.py): SparsePauliOp and qml.Hamiltonian against the dense diagonal Ising Hamiltonian from
exact enumeration; the standard-gates OpenQASM 3 text against our circuit's statevector through qiskit.qasm3.loads and
PennyLane's from_qasm3 (1e-10)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.circuits import CircuitOptions, DQASchedule, dqa_circuit, dqa_state
from hybrid_attention.circuits.export import ising_terms, to_qasm3, to_qml_hamiltonian, to_sparse_pauli_op
from hybrid_attention.ising import index_to_spins


def random_problem(seed, n=4, beta=1.0, mask=None):
    rng = np.random.default_rng(seed)
    U = np.triu(rng.normal(size=(n, n)), 1)
    return IsingProblem(torch.from_numpy(rng.normal(size=n)), torch.from_numpy(U + U.T), beta=beta, mask=mask)


def dense_diagonal(problem):
    """``E(s(c))`` for every basis index ``c = sum_j b_j 2**j``: the diagonal of ``H_P`` by enumeration."""
    S = torch.from_numpy(index_to_spins(np.arange(1 << problem.n), problem.n).astype(np.float64))
    return problem.to(torch.float64).energy(S).numpy()


def reference_state(problem):
    """The independent numpy statevector of the circuit (which encodes ``beta * H_P`` with masked spins dropped)."""
    h, J = problem.dropped()
    return dqa_state(float(problem.beta) * h.numpy(), float(problem.beta) * J.numpy(), SCHED)


PROBLEMS = {
    "random": random_problem(0),
    "masked": random_problem(1, mask=torch.tensor([True, False, True, True])),
    "zero": IsingProblem(torch.zeros(3, dtype=torch.float64)),
}


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_sparse_pauli_op_is_the_dense_ising_hamiltonian(name):
    pytest.importorskip("qiskit")
    p = PROBLEMS[name]
    M = to_sparse_pauli_op(p).to_matrix()
    np.testing.assert_allclose(M, np.diag(dense_diagonal(p)), atol=1e-12)  # qiskit: qubit 0 least significant


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_qml_hamiltonian_is_the_dense_ising_hamiltonian(name):
    qml = pytest.importorskip("pennylane")
    from hybrid_attention.circuits.pennylane_dqa import to_little_endian

    p = PROBLEMS[name]
    M = qml.matrix(to_qml_hamiltonian(p), wire_order=range(p.n))  # wire 0 most significant
    d = to_little_endian(np.real(np.diag(M)), p.n)
    np.testing.assert_allclose(d, dense_diagonal(p), atol=1e-12)
    np.testing.assert_allclose(M, np.diag(np.diag(M)), atol=1e-12)


def test_terms_skip_masked_spins_and_follow_the_physics_sign():
    fields, couplings = ising_terms(PROBLEMS["masked"])
    assert all(1 not in (j,) for j, _ in fields) and all(1 not in (j, k) for j, k, _ in couplings)
    p = IsingProblem(torch.tensor([0.5, 0.0]), torch.tensor([[0.0, 2.0], [2.0, 0.0]]))
    assert ising_terms(p) == ([(0, -0.5)], [(0, 1, -2.0)])
    with pytest.raises(ValueError, match="one problem instance"):
        ising_terms(IsingProblem(torch.zeros(2, 3)))


SCHED = DQASchedule(tau=1.2, steps=4)


@pytest.mark.parametrize("fold", [False, True])
def test_qasm3_uses_standard_gates_and_round_trips_through_qiskit(fold):
    pytest.importorskip("qiskit_qasm3_import")
    from qiskit import qasm3
    from qiskit.quantum_info import Statevector

    p = random_problem(2, beta=0.6, mask=torch.tensor([True, True, False, True]))
    opts = CircuitOptions(fold_rzz=fold)
    text = to_qasm3(p, SCHED, measure=False, options=opts)
    assert "rzz" not in text and "gate " not in text and 'include "stdgates.inc";' in text
    psi = Statevector(qasm3.loads(text)).data
    np.testing.assert_allclose(psi, Statevector(dqa_circuit(p, SCHED, measure=False, options=opts)).data, atol=1e-10)
    np.testing.assert_allclose(psi, reference_state(p), atol=1e-10)  # and the independent numpy reference
    measured = qasm3.loads(to_qasm3(p, SCHED))
    assert measured.num_clbits == 4 and measured.count_ops()["measure"] == 4


def test_qasm3_round_trips_through_pennylane():
    qml = pytest.importorskip("pennylane")
    pytest.importorskip("openqasm3")
    if not hasattr(qml, "from_qasm3"):
        pytest.skip("this PennyLane has no from_qasm3")
    from hybrid_attention.circuits.pennylane_dqa import to_little_endian

    p = random_problem(3, beta=0.8)
    f = qml.from_qasm3(to_qasm3(p, SCHED, measure=False, include=False))
    g = qml.map_wires(f, {f"q[{j}]": j for j in range(p.n)})

    @qml.qnode(qml.device("default.qubit", wires=p.n))
    def state():
        g()
        return qml.state()

    np.testing.assert_allclose(to_little_endian(state(), p.n), reference_state(p), atol=1e-10)


def test_qasm3_refuses_batches_and_non_problems():
    with pytest.raises(ValueError, match="one problem instance"):
        to_qasm3(IsingProblem(torch.zeros(2, 3)), SCHED)
    with pytest.raises(TypeError, match="IsingProblem"):
        to_qasm3({"h": [1.0]}, SCHED)
