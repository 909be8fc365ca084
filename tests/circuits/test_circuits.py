"""DQA circuits: the numpy reference against brute force, every emitter against the reference (1e-10 TV),
bit order, templates, folded RZZ, coupling maps, QASM export, masks."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.circuits import (
    CircuitOptions,
    DQASchedule,
    dqa_circuit,
    dqa_probabilities,
    dqa_qasm3,
    dqa_state,
    dqa_template,
    template_for,
)
from hybrid_attention.circuits.reference import problem_energies

qiskit = pytest.importorskip("qiskit")
from qiskit.quantum_info import Statevector  # noqa: E402


def tv(p, q):
    return 0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum(-1)


def random_problem(rng, n, batch=(), beta=1.0, mask=None):
    h = rng.normal(size=(*batch, n))
    U = np.triu(rng.normal(size=(*batch, n, n)), 1)
    J = U + np.swapaxes(U, -1, -2)
    return IsingProblem(torch.from_numpy(h), torch.from_numpy(J), beta=beta, mask=mask)


def random_schedule(rng):
    return DQASchedule(
        tau=float(rng.uniform(0.2, 3.0)),
        steps=int(rng.integers(1, 12)),
        gamma=float(rng.uniform(0.5, 1.5)),
        energy_scale=float(rng.uniform(0.5, 2.0)),
        shape=str(rng.choice(["linear", "sin2"])),
        order=int(rng.integers(1, 3)),
        field_scale=float(rng.choice([1.0, 2.0])),
        coupling_scale=float(rng.uniform(0.5, 1.5)),
    )


def ref_of(problem, schedule):
    h, J = problem.dropped()
    b = float(problem.beta)
    return dqa_probabilities(b * h.numpy(), b * J.numpy(), schedule)


# ---------------------------------------------------------------------- the reference itself
def brute_force(h, J, schedule):
    """Dense matrix exponentials of H_P and H_D per slice (scipy expm): a second, naive implementation."""
    n = len(h)
    X = np.array([[0, 1], [1, 0]], dtype=complex)
    HD = np.zeros((1 << n, 1 << n), dtype=complex)
    for q in range(n):  # qubit q is bit q: kron order puts qubit n-1 first
        ops = [np.eye(2)] * n
        ops[n - 1 - q] = X
        term = ops[0]
        for o in ops[1:]:
            term = np.kron(term, o)
        HD -= term
    HP = np.diag(problem_energies(schedule.field_scale * h, schedule.coupling_scale * J))
    psi = np.full(1 << n, 2 ** (-n / 2), dtype=complex)
    for bk, ak in zip(*schedule.coefficients()):
        if schedule.order == 2:
            psi = scipy.linalg.expm(-1j * ak / 2 * HD) @ psi
        psi = scipy.linalg.expm(-1j * bk * HP) @ psi
        psi = scipy.linalg.expm(-1j * (ak / 2 if schedule.order == 2 else ak) * HD) @ psi
    return np.abs(psi) ** 2


@pytest.mark.parametrize("n", [1, 2, 3])
def test_reference_matches_dense_brute_force(n):
    rng = np.random.default_rng(n)
    for _ in range(3):
        p = random_problem(rng, n)
        s = random_schedule(rng)
        assert tv(ref_of(p, s), brute_force(p.h.numpy(), p.J.numpy(), s)) < 1e-12


def test_reference_closed_forms():
    s = DQASchedule(tau=1.0, steps=10)
    # zero problem: |+> is an eigenstate of the driver, output uniform
    assert np.allclose(dqa_probabilities(np.zeros(3), np.zeros((3, 3)), s), 1 / 8, atol=1e-14)
    # J = 0 factorises into single-spin distributions
    h = np.array([0.3, -1.1, 0.7])
    p = dqa_probabilities(h, np.zeros((3, 3)), s)
    singles = [dqa_probabilities(h[j : j + 1], np.zeros((1, 1)), s) for j in range(3)]
    c = np.arange(8)
    prod = np.prod([singles[j][(c >> j) & 1] for j in range(3)], axis=0)
    assert np.abs(p - prod).max() < 1e-14
    # a positive field favours s = +1 (bit 0), and the energies follow docs/theory.md sign
    assert p.sum() == pytest.approx(1.0, abs=1e-14)
    assert singles[0][0] > singles[0][1] and singles[1][0] < singles[1][1]
    assert problem_energies(np.array([1.0, 0.0]), np.array([[0, 2.0], [2.0, 0]]))[0] == -3.0
    # norm is preserved
    psi = dqa_state(h, np.zeros((3, 3)), s)
    assert np.linalg.norm(psi) == pytest.approx(1.0, abs=1e-13)


def test_reference_batches_and_validates():
    rng = np.random.default_rng(0)
    p = random_problem(rng, 3, batch=(2, 4))
    s = DQASchedule(tau=1.2, steps=5)
    out = ref_of(p, s)
    assert out.shape == (2, 4, 8)
    assert np.allclose(out[1, 2], ref_of(p[1, 2], s), atol=1e-14)
    with pytest.raises(TypeError):
        dqa_probabilities(np.zeros(2), np.zeros((2, 2)), {"tau": 1})
    with pytest.raises(ValueError):
        dqa_probabilities(np.zeros(2), np.zeros((3, 3)), s)


# ---------------------------------------------------------------------- qiskit emitter
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_qiskit_circuit_matches_reference(n):
    rng = np.random.default_rng(100 + n)
    for trial in range(3):
        s = random_schedule(rng)
        p = random_problem(rng, n, beta=float(rng.uniform(0.5, 2.0)))
        ref = ref_of(p, s)
        sv = Statevector(dqa_circuit(p, s, measure=False)).probabilities()
        assert tv(sv, ref) < 1e-10
        if trial == 0:  # folded RZZ (valid when all angles fit) gives the same distribution
            small = IsingProblem(p.h, p.J * 0.1)
            s2 = DQASchedule(tau=1.0, steps=8, order=s.order)
            folded = dqa_circuit(small, s2, measure=False, options=CircuitOptions(fold_rzz=True))
            assert tv(Statevector(folded).probabilities(), ref_of(small, s2)) < 1e-10


def test_qiskit_template_bindings_batch():
    rng = np.random.default_rng(7)
    p = random_problem(rng, 4, batch=(5,))
    s = DQASchedule(tau=1.5, steps=6)
    tmpl = template_for(p, s)
    assert tmpl is template_for(p, s)  # cached per (n, pattern, schedule, options)
    assert tmpl.circuit.num_parameters == tmpl.num_parameters == 6 * (4 + 6)
    vals = tmpl.bindings(p)
    assert vals.shape == (5, 60) and tmpl.values(p).shape == (5, 10)
    ref = ref_of(p, s)
    for i in range(5):
        qc = tmpl.bind(vals[i]).remove_final_measurements(inplace=False)
        assert tv(Statevector(qc).probabilities(), ref[i]) < 1e-10
    # a problem with couplings outside the template's edges is rejected
    sparse = dqa_template(4, ((0, 1),), s)
    with pytest.raises(ValueError, match="not in this template"):
        sparse.bindings(p)
    with pytest.raises(ValueError, match="n = 4"):
        template_for(random_problem(rng, 3), s).bindings(p)


def test_bit_order_one_spin_flipped():
    """Gauge flip s_j -> -s_j (negate h_j and J_j*) must map index c to c XOR 2**j, in every emitter."""
    rng = np.random.default_rng(3)
    p = random_problem(rng, 4)
    s = DQASchedule(tau=2.0, steps=10)
    j = 1
    sign = torch.ones(4, dtype=torch.float64)
    sign[j] = -1
    flipped = IsingProblem(p.h * sign, p.J * sign[:, None] * sign[None, :])
    c = np.arange(16)
    pq = Statevector(dqa_circuit(p, s, measure=False)).probabilities()
    pf = Statevector(dqa_circuit(flipped, s, measure=False)).probabilities()
    assert np.abs(pf - pq[c ^ (1 << j)]).max() < 1e-12
    assert np.abs(pq - pq[c ^ (1 << j)]).max() > 1e-3  # the test has teeth: not symmetric by itself
    # a strong field on spin 0 alone: qubit 0 is the rightmost bit of qiskit's keys
    one = IsingProblem(torch.tensor([3.0, 0.0, 0.0], dtype=torch.float64))
    probs = Statevector(dqa_circuit(one, DQASchedule(tau=2.0, steps=20), measure=False)).probabilities_dict()
    p_bit0_is_1 = sum(v for k, v in probs.items() if k[-1] == "1")
    ref = ref_of(one, DQASchedule(tau=2.0, steps=20))
    assert p_bit0_is_1 == pytest.approx(ref[1::2].sum(), abs=1e-12)
    assert p_bit0_is_1 < 0.45


def test_measured_bits_little_endian_on_aer():
    pytest.importorskip("qiskit_aer")
    from qiskit_aer.primitives import SamplerV2

    p = IsingProblem(torch.tensor([-4.0, 0.0, 4.0], dtype=torch.float64))
    s = DQASchedule(tau=3.0, steps=30)
    res = SamplerV2(seed=1).run([dqa_circuit(p, s)], shots=4000).result()
    spins = 1 - 2 * res[0].data.meas.to_bool_array(order="little").astype(int)
    m = spins.mean(0)
    ref = ref_of(p, s)
    S = 1 - 2 * ((np.arange(8)[:, None] >> np.arange(3)) & 1)
    mref = ref @ S
    assert np.all(np.abs(m - mref) <= 5 * np.sqrt((1 - mref**2) / 4000) + 1e-9)
    assert mref[0] < -0.2 and mref[2] > 0.2


def test_masked_spin_is_a_decoupled_qubit():
    rng = np.random.default_rng(11)
    full = random_problem(rng, 4)
    mask = torch.tensor([True, False, True, True])
    p = IsingProblem(full.h, full.J, mask=mask)
    s = DQASchedule(tau=1.7, steps=9)
    probs = Statevector(dqa_circuit(p, s, measure=False)).probabilities().reshape(2, 2, 2, 2)  # axes q3 q2 q1 q0
    kept = [0, 2, 3]
    sub = IsingProblem(full.h[kept], full.J[kept][:, kept])
    ref_sub = ref_of(sub, s).reshape(2, 2, 2)  # axes q3' q2' q1' = spins 3, 2, 0
    assert np.abs(probs.sum(axis=2) - ref_sub).max() < 1e-10  # other spins as if spin 1 were removed
    assert np.abs(probs.sum(axis=(0, 1, 3)) - 0.5).max() < 1e-12  # the dropped qubit is uniform (marginal 0)


def test_fold_rzz_angles_and_limits():
    p = IsingProblem(torch.tensor([0.2, -0.4]), torch.tensor([[0.0, 0.9], [0.9, 0.0]]))
    s = DQASchedule(tau=1.0, steps=5)
    qc = dqa_circuit(p, s, options=CircuitOptions(fold_rzz=True))
    angles = [float(inst.operation.params[0]) for inst in qc.data if inst.operation.name == "rzz"]
    assert len(angles) == 2 * 5 and all(-1e-12 <= a <= math.pi / 2 + 1e-12 for a in angles)
    big = IsingProblem(torch.tensor([0.0, 0.0]), torch.tensor([[0.0, 50.0], [50.0, 0.0]]))
    with pytest.raises(ValueError, match="pi/2"):
        dqa_circuit(big, s, options=CircuitOptions(fold_rzz=True))


def test_coupling_map_restriction():
    triangle = IsingProblem(torch.zeros(3), torch.tensor([[0.0, 1, 1], [1, 0, 1], [1, 1, 0]]))
    s = DQASchedule(tau=1.0, steps=3)
    line = CircuitOptions(coupling_map=((0, 1), (1, 2)))
    with pytest.raises(ValueError, match=r"\(0, 2\)"):
        dqa_circuit(triangle, s, options=line)
    dropped = dqa_circuit(triangle, s, options=CircuitOptions(coupling_map=((0, 1), (1, 2)), on_missing="drop"))
    pairs = {tuple(sorted(q._index for q in inst.qubits)) for inst in dropped.data if inst.operation.name == "rzz"}
    assert pairs == {(0, 1), (1, 2)}
    ok = dqa_circuit(triangle, s, options=CircuitOptions(coupling_map=((0, 1), (1, 2), (0, 2))))
    assert ok.count_ops()["rzz"] == 9
    # a layout moves spins onto physical qubits: spins 0, 1, 2 on a path 5-6-7 with 5-7 missing
    with pytest.raises(ValueError, match="layout"):
        dqa_circuit(triangle, s, options=CircuitOptions(coupling_map=((5, 6), (6, 7)), layout=(5, 6, 7)))


def test_coupling_map_from_backend():
    fp = pytest.importorskip("qiskit_ibm_runtime.fake_provider")
    from hybrid_attention.circuits.program import resolve_coupling_map

    edges = resolve_coupling_map(fp.FakeManilaV2())
    assert (0, 1) in edges and (0, 2) not in edges and all(a < b for a, b in edges)


def test_qasm3_export():
    p = IsingProblem(torch.tensor([0.5, -0.3]), torch.tensor([[0.0, 0.8], [0.8, 0.0]]))
    text = dqa_qasm3(p, DQASchedule(tau=1.0, steps=2))
    assert text.startswith("OPENQASM 3") and "rzz(" in text and "measure" in text and "rx(" in text


def test_dqa_circuit_bad_input():
    s = DQASchedule(tau=1.0, steps=2)
    with pytest.raises(ValueError, match="one problem instance"):
        dqa_circuit(IsingProblem(torch.zeros(3, 2)), s)
    with pytest.raises(TypeError):
        dqa_circuit({"h": [1.0]}, s)
    with pytest.raises(ValueError, match="on_missing"):
        CircuitOptions(on_missing="ignore")
    with pytest.raises(TypeError):
        dqa_template(2, (), "schedule")


# ---------------------------------------------------------------------- PennyLane emitter
@pytest.mark.parametrize("device", ["default.qubit", "lightning.qubit"])
def test_pennylane_matches_reference(device):
    pytest.importorskip("pennylane")
    from hybrid_attention.circuits.pennylane_dqa import dqa_qnode, to_little_endian

    rng = np.random.default_rng(55)
    for n in range(1, 7):
        s = random_schedule(rng)
        p = random_problem(rng, n, batch=(3,), beta=0.9)
        tmpl = template_for(p, s)
        measurement = "probs" if device == "default.qubit" else "state"
        out = []
        for i in range(3):  # lightning: one problem at a time; default.qubit: broadcast below
            q = dqa_qnode(n, tmpl.edges, s, device=device, measurement=measurement)
            r = np.asarray(q(tmpl.values(p)[i]))
            out.append(r if measurement == "probs" else np.abs(r) ** 2)
        probs = to_little_endian(np.stack(out), n)
        assert np.all(tv(probs, ref_of(p, s)) < 1e-10)
        if device == "default.qubit":  # broadcasting over the batch: one tape
            bq = dqa_qnode(n, tmpl.edges, s, device=device, measurement="probs")
            assert np.all(tv(to_little_endian(bq(tmpl.values(p)), n), ref_of(p, s)) < 1e-10)


# ---------------------------------------------------------------------- size bound before building
def test_huge_trotter_programs_refused_before_building(monkeypatch):
    from hybrid_attention.circuits import program, qiskit_dqa

    def no_build(*a, **k):
        raise AssertionError("the circuit was built: the request should have been refused first")

    monkeypatch.setattr(qiskit_dqa.DQATemplate, "bind", no_build)
    p = IsingProblem(torch.tensor([0.5, -0.3]), torch.tensor([[0.0, 0.8], [0.8, 0.0]]))
    with pytest.raises(ValueError, match=r"estimated 5,000,004 gates .*GiB.*MAX_GATES"):
        dqa_circuit(p, DQASchedule(tau=1.0, steps=10**6))
    with pytest.raises(ValueError, match="MAX_GATES"):
        qiskit_dqa.dqa_template(2, ((0, 1),), DQASchedule(tau=1.0, steps=10**6))
    monkeypatch.setattr(program, "MAX_GATES", 10)  # the limit is read on every check
    with pytest.raises(ValueError, match="MAX_GATES = 10"):
        qiskit_dqa.dqa_template(2, ((0, 1),), DQASchedule(tau=1.0, steps=3))


def test_gate_count_matches_the_circuit():
    from hybrid_attention.circuits.program import count_gates
    from hybrid_attention.circuits.qiskit_dqa import dqa_template

    for order, fold in ((1, False), (2, False), (1, True)):
        sched = DQASchedule(tau=1.0, steps=3, order=order)
        tmpl = dqa_template(3, ((0, 1), (1, 2)), sched, CircuitOptions(fold_rzz=fold))
        assert count_gates(3, 2, sched, fold_rzz=fold) == sum(tmpl.circuit.count_ops().values())


def test_pennylane_program_size_bound():
    pytest.importorskip("pennylane")
    from hybrid_attention.circuits.pennylane_dqa import dqa_qnode

    qn = dqa_qnode(2, ((0, 1),), DQASchedule(tau=1.0, steps=10**6), measurement="probs")
    with pytest.raises(ValueError, match="MAX_GATES"):
        qn(np.array([0.1, 0.2, 0.3]))
