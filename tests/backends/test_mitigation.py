"""Error suppression and mitigation: readout mitigation (mthree) of the aer and ibm samplers on a fake backend against
an exact oracle (the density-matrix output of the same ISA circuit under the device's noise model without its
read-out errors), and its effect on the distance to the noiseless circuit; project-side twirling (aer) and the
runtime's twirling / dynamical decoupling options (ibm); bad settings refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends import get_sampler
from hybrid_attention.circuits import DQASchedule

pytest.importorskip("qiskit_aer")
pytest.importorskip("qiskit_ibm_runtime")
pytest.importorskip("mthree")

from hybrid_attention.backends.ibm.mitigation import assignment_matrices, mitigated_probabilities  # noqa: E402
from hybrid_attention.backends.ibm.sampler import fake_backend  # noqa: E402

Z = 5.0
SCHED = DQASchedule(tau=1.0, steps=2)
N = 20000


def problems(n=3, batch=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = 1.5 * torch.randn(batch, n, generator=g, dtype=torch.float64)
    U = 0.5 * torch.randn(n, n, generator=g, dtype=torch.float64).triu(1)
    return IsingProblem(h, U + U.T)


def spins_table(n):
    return 1 - 2 * ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1)


def readout_free_marginals(isa, values, backend):
    """Exact marginals of the ISA circuit under ``backend``'s noise model without read-out errors (density matrix)."""
    from qiskit_aer import AerSimulator
    from qiskit_aer.noise import NoiseModel

    nm = NoiseModel.from_backend(backend, readout_error=False)
    sim = AerSimulator(method="density_matrix", noise_model=nm)
    circ = isa.remove_final_measurements(inplace=False)
    from hybrid_attention.backends.ibm.mitigation import measured_qubits

    qubits = measured_qubits(isa)
    circ.save_probabilities(qubits, label="p")
    params = list(isa.parameters)
    binds = [{p: values[:, i] for i, p in enumerate(params)}]
    res = sim.run(circ, parameter_binds=binds, shots=1).result()
    P = np.stack([np.asarray(res.data(i)["p"]) for i in range(len(values))])  # index: qubits[j] -> bit j
    return P @ spins_table(len(qubits))


def test_assignment_and_mitigation_invert_a_known_readout_channel():
    """A product read-out channel applied to an exact distribution is undone (within the shots' noise)."""
    rng = np.random.default_rng(0)
    n, shots = 3, 200000
    p_true = rng.dirichlet(np.ones(1 << n))
    e0, e1 = np.array([0.02, 0.05, 0.03]), np.array([0.04, 0.08, 0.06])  # P(1|0), P(0|1) per bit
    idx = rng.choice(1 << n, size=shots, p=p_true)
    b = ((idx[:, None] >> np.arange(n)) & 1).astype(bool)
    flip = np.where(b, rng.random(b.shape) < e1, rng.random(b.shape) < e0)
    noisy = b ^ flip
    zeros = rng.random((shots, n)) < e0
    ones = ~(rng.random((shots, n)) < e1)
    mats = assignment_matrices(zeros, ones)
    assert np.allclose([m[1, 0] for m in mats], e0, atol=5 * np.sqrt(e0 / shots))
    probs, neg = mitigated_probabilities(noisy[None], mats)
    m_true, m_mit, m_raw = p_true @ spins_table(n), probs[0] @ spins_table(n), (1 - 2 * noisy).mean(0)
    tol = Z * np.sqrt(1 / shots) / (1 - e0 - e1) * 2
    assert np.all(np.abs(m_mit - m_true) <= tol) and np.any(np.abs(m_raw - m_true) > tol)
    assert probs.shape == (1, 8) and np.isclose(probs.sum(), 1) and (probs >= 0).all() and neg[0] >= 0


@pytest.mark.parametrize("route", ["aer", "ibm"])
def test_readout_mitigation_recovers_the_readout_free_output_and_moves_toward_the_ideal(route):
    backend = fake_backend("fake_manila")
    p = problems()
    if route == "aer":
        raw = get_sampler("aer", schedule=SCHED, noise_backend=backend, method="density_matrix")
        mit = get_sampler(
            "aer", schedule=SCHED, noise_backend=backend, method="density_matrix", readout_mitigation=True
        )
        isa = raw.circuit_for(raw._template(p.flatten()))
    else:
        raw = get_sampler("ibm", backend="fake_manila", schedule=SCHED)
        mit = get_sampler("ibm", backend="fake_manila", schedule=SCHED, readout_mitigation=True)
        isa = raw.isa_circuit(raw._template(p.flatten()))
    r = raw.sample(p, num_reads=N, seed=1)
    m = mit.sample(p, num_reads=N, seed=2)
    assert m.spins.shape == (6, 8, 3) and np.allclose(m.weights.sum(-1), 1) and (m.weights >= 0).all()
    assert m.info["mitigation_calibrated_in_this_call"] and m.info["mitigation_calibration_shots"] == 8192
    m_ro = readout_free_marginals(isa, raw._chunk_values(raw._template(p.flatten()), p.flatten()), backend)
    m_raw, m_mit = np.asarray(r.marginals()), np.asarray(m.marginals())
    # shot noise of a marginal, inflated by the inverse read-out contrast; plus the calibration's own noise
    contrast = 0.85  # 1 - e0 - e1 is above 0.9 on every qubit of fake_manila; 0.85 bounds it from below
    sd = np.sqrt(np.clip(1 - m_ro**2, 0, None) / N) / contrast + 2 * np.sqrt(0.05 / 8192)
    assert np.all(np.abs(m_mit - m_ro) <= Z * sd), np.max(np.abs(m_mit - m_ro) / sd)
    assert np.any(np.abs(m_raw - m_ro) > Z * sd)  # the read-out error is visible without mitigation
    ideal = raw.reference_probabilities(p) @ spins_table(3)
    d_raw, d_mit = np.abs(m_raw - ideal).mean(), np.abs(m_mit - ideal).mean()
    assert d_mit < d_raw - Z * np.sqrt(2) * sd.mean() / np.sqrt(sd.size), (d_raw, d_mit)
    again = mit.sample(p, num_reads=100, seed=3)  # the calibration is kept per measured qubit set
    assert not again.info["mitigation_calibrated_in_this_call"]


def test_mitigation_calibration_is_in_the_estimate_and_the_ledger(tmp_path):
    p = problems(batch=2)
    s = get_sampler(
        "ibm",
        backend="fake_manila",
        schedule=SCHED,
        readout_mitigation=True,
        calibration_shots=1000,
        ledger=tmp_path / "l.jsonl",
    )
    plain = get_sampler("ibm", backend="fake_manila", schedule=SCHED).estimate(p, 500)
    est = s.estimate(p, 500)
    assert est["calibration"]["circuits"] == 2 and est["calibration"]["shots"] == 2000
    assert est["jobs"] == plain["jobs"] + 2 and est["shots"] == plain["shots"] + 2000
    assert est["qpu_seconds"] > plain["qpu_seconds"]
    s.sample(p, num_reads=500, seed=0)
    import json

    rows = [json.loads(x) for x in (tmp_path / "l.jsonl").read_text().splitlines()]
    assert [r["shots"] for r in rows if r["event"] == "submitted"] == [1000, 1000, 500]
    assert s.estimate(p, 500)["jobs"] == plain["jobs"]  # calibrated now: no further calibration cost


def test_project_side_twirling_keeps_the_noiseless_output_and_runs_on_a_noisy_model():
    """Twirled copies equal the circuit as unitaries: on a noiseless simulator with the device's target the output
    is unchanged within shot noise; with noise it runs and splits the shots."""
    p = problems(batch=3)
    s = get_sampler("aer", schedule=SCHED, noise_backend=fake_backend("fake_manila"), twirling=4)
    s.backend_options.pop("noise_model")  # the same ISA circuits, no noise
    ss = s.sample(p, num_reads=N, seed=0)
    ideal = s.reference_probabilities(p) @ spins_table(3)
    m = np.asarray(ss.marginals())
    assert np.all(np.abs(m - ideal) <= Z * np.sqrt((1 - ideal**2) / N) + 1e-9)
    assert s.properties["twirling"] == 4
    noisy = get_sampler("aer", schedule=SCHED, noise_backend=fake_backend("fake_manila"), twirling=3)
    assert noisy.sample(p, num_reads=10, seed=0).spins.shape == (3, 10, 3)
    with pytest.raises(ValueError, match="need noise_backend"):
        get_sampler("aer", schedule=SCHED, twirling=2)
    with pytest.raises(ValueError, match="need noise_backend"):
        get_sampler("aer", schedule=SCHED, readout_mitigation=True)


def test_runtime_suppression_options_leave_the_noiseless_output_unchanged():
    """Dynamical decoupling and gate/measurement twirling (applied by the client-side runtime Sampler, in local mode
    too) change the circuit, not its ideal output: on an ideal simulator with the device's target the marginals stay
    within shot noise of the exact circuit output."""
    from qiskit_aer import AerSimulator

    quiet = AerSimulator.from_backend(fake_backend("fake_manila"), noise_model=None)
    s = get_sampler("ibm", backend=quiet, schedule=SCHED, dynamical_decoupling="XY4", twirling=True)
    assert s.sampler_options["dynamical_decoupling"] == {"enable": True, "sequence_type": "XY4"}
    assert s.sampler_options["twirling"] == {"enable_gates": True, "enable_measure": True}
    assert s.properties["twirling"] and s.properties["dynamical_decoupling"] == "XY4"
    p = problems(batch=2)
    ss = s.sample(p, num_reads=N, seed=0)
    ideal = s.reference_probabilities(p) @ spins_table(3)
    assert np.all(np.abs(np.asarray(ss.marginals()) - ideal) <= Z * np.sqrt((1 - ideal**2) / N) + 1e-9)
    noisy = get_sampler("ibm", backend="fake_manila", schedule=SCHED, dynamical_decoupling="XX", twirling=True)
    assert noisy.sample(p, num_reads=64, seed=0).spins.shape == (2, 64, 3)
    with pytest.raises(ValueError, match="dynamical_decoupling must be"):
        get_sampler("ibm", backend="fake_manila", dynamical_decoupling="XZ")
    with pytest.raises(ValueError, match="give twirling once"):
        get_sampler("ibm", backend="fake_manila", twirling=True, sampler_options={"twirling": {"enable_gates": True}})
    with pytest.raises(TypeError, match="readout_mitigation"):
        get_sampler("ibm", backend="fake_manila", readout_mitigation="yes")
