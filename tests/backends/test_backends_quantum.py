"""DQA circuit samplers (aer, pennylane) against the ideal circuit output, and their faults (size limits, missing
extras, unknown options), all offline; the IBM sampler is tested in ``test_ibm.py``."""

from __future__ import annotations

import builtins
import sys

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends import get_sampler
from hybrid_attention.circuits import DQASchedule

pytest.importorskip("qiskit_aer")

Z = 5.0
SCHED = DQASchedule(tau=1.5, steps=8)


def problems(n=3, batch=6, seed=0, mask=None):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(batch, n, generator=g, dtype=torch.float64)
    U = torch.randn(n, n, generator=g, dtype=torch.float64).triu(1)
    return IsingProblem(1.5 * h, U + U.T, mask=mask)


def ideal_marginals(sampler, problem):
    p = sampler.reference_probabilities(problem)
    n = problem.n
    S = 1 - 2 * ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1)
    m = p @ S
    if problem.mask is not None:
        m = m * problem.mask.numpy()
    return m


def assert_within_shot_noise(m, m_ref, shots, extra=0.0):
    tol = Z * np.sqrt(np.clip(1 - m_ref**2, 0, None) / shots) + extra + 1e-12
    assert np.all(np.abs(m - m_ref) <= tol), np.max(np.abs(m - m_ref) - tol)


# ---------------------------------------------------------------------- aer
@pytest.mark.parametrize(
    "method,readout", [("statevector", "auto"), ("statevector", "shots"), ("matrix_product_state", "auto")]
)
def test_aer_matches_ideal_output(method, readout):
    s = get_sampler("aer", schedule=SCHED, method=method, chunk_size=4, readout=readout)
    assert s.reads_probabilities(3) == (method == "statevector" and readout == "auto")
    p = problems()
    ss = s.sample(p, num_reads=2000, seed=1)
    assert ss.spins.shape == (6, 2000, 3) and ss.spins.dtype == np.int8
    assert ss.info["chunks"] == 2 and len(ss.info["chunk_seeds"]) == 2
    assert_within_shot_noise(ss.marginals(), ideal_marginals(s, p), 2000)
    # seeds reproduce, different seeds differ
    again = s.sample(p, num_reads=2000, seed=1)
    assert np.array_equal(again.spins, ss.spins)
    assert not np.array_equal(s.sample(p, num_reads=2000, seed=2).spins, ss.spins)


def test_aer_batch_shape_mask_and_marginals_method():
    mask = torch.tensor([[True, False, True]] * 4).reshape(2, 2, 3)
    g = torch.Generator().manual_seed(3)
    p = IsingProblem(
        torch.randn(2, 2, 3, generator=g, dtype=torch.float64),
        torch.tensor([[0, 0.5, -0.8], [0.5, 0, 0.3], [-0.8, 0.3, 0]], dtype=torch.float64),
        mask=mask,
        beta=1.3,
    )
    s = get_sampler("aer", schedule=SCHED)
    ss = s.sample(p, num_reads=3000, seed=0)
    assert ss.spins.shape == (2, 2, 3000, 3)
    m = ss.marginals()
    assert np.all(m[..., 1] == 0)
    assert_within_shot_noise(m, ideal_marginals(s, p), 3000)
    mm = s.marginals(p, num_reads=3000, seed=0)
    assert isinstance(mm, torch.Tensor) and mm.shape == (2, 2, 3) and np.allclose(mm.numpy(), m)
    props = s.properties
    assert props["max_spins"] >= 20 and props["exact"] is False and props["dqa"] is True


@pytest.mark.parametrize("n", [1, 2, 4, 5])
def test_aer_probabilities_readout_is_the_exact_circuit_output(n):
    """readout='probabilities': Aer's output distribution equals the numpy reference of the same program (bit
    order included), exact marginals need no shots, and masked spins (decoupled qubits) read 0."""
    mask = torch.ones(5, n, dtype=torch.bool)
    mask[1, 0] = False
    p = problems(n=n, batch=5, seed=10 + n, mask=mask)
    s = get_sampler("aer", schedule=DQASchedule(tau=2.0, steps=6), readout="probabilities", chunk_size=2)
    probs = s.probabilities(p)
    assert probs.shape == (5, 1 << n) and probs.dtype == torch.float64
    assert np.abs(probs.numpy() - s.reference_probabilities(p)).sum(-1).max() < 1e-10
    m = s.marginals(p)
    assert m.shape == (5, n) and m[1, 0] == 0
    assert np.abs(m.numpy() - ideal_marginals(s, p)).max() < 1e-10
    # the shots drawn from those probabilities are within shot noise of them, and seeds reproduce
    ss = s.sample(p, num_reads=3000, seed=4)
    assert_within_shot_noise(ss.marginals(), m.numpy(), 3000)
    assert np.array_equal(s.sample(p, num_reads=3000, seed=4).spins, ss.spins)
    assert ss.info["readout"] == "probabilities" and s.properties["readout"] == "probabilities"


def test_aer_readout_validation():
    with pytest.raises(ValueError, match="readout must be one of"):
        get_sampler("aer", readout="statevector")
    with pytest.raises(ValueError, match="readout='shots'"):
        get_sampler("aer", readout="probabilities", method="matrix_product_state")
    fp = pytest.importorskip("qiskit_ibm_runtime.fake_provider")
    with pytest.raises(ValueError, match="ideal"):
        get_sampler("aer", readout="probabilities", noise_backend=fp.FakeManilaV2())
    noisy = get_sampler("aer", noise_backend=fp.FakeManilaV2())
    assert not noisy.reads_probabilities(2)  # auto: noise acts at measurement, so shots
    with pytest.raises(ValueError, match="need readout='probabilities'"):
        noisy.probabilities(problems(n=2, batch=1))
    with pytest.raises(ValueError, match="need readout='probabilities'"):
        get_sampler("aer", readout="shots").probabilities(problems(n=2, batch=1))
    auto = get_sampler("aer")
    assert auto.reads_probabilities(16) and not auto.reads_probabilities(17)


def test_aer_failed_simulation_names_the_problem():
    from types import SimpleNamespace

    s = get_sampler("aer", schedule=SCHED, readout="probabilities")
    bad = SimpleNamespace(success=False, status="ERROR: insufficient memory")
    ok = SimpleNamespace(success=True, status="DONE")
    s._simulator = SimpleNamespace(
        run=lambda *a, **k: SimpleNamespace(result=lambda: SimpleNamespace(results=[ok, bad, ok]))
    )
    with pytest.raises(RuntimeError, match="problem 1 of the chunk failed: ERROR: insufficient memory"):
        s.sample(problems(batch=3), num_reads=10, seed=0)


def test_aer_noisy_fake_backend_is_close_to_ideal():
    fp = pytest.importorskip("qiskit_ibm_runtime.fake_provider")
    sched = DQASchedule(tau=1.5, steps=3)
    s = get_sampler("aer", schedule=sched, noise_backend=fp.FakeManilaV2(), method="density_matrix")
    p = problems(n=2, batch=2, seed=5)
    ss = s.sample(p, num_reads=4000, seed=0)
    m_ref = ideal_marginals(s, p)
    # noise-aware: a few two-qubit gates (~1 % error) and readout (~3 %) contract marginals by at most ~15 %
    assert_within_shot_noise(ss.marginals(), m_ref, 4000, extra=0.15 * np.abs(m_ref).max() + 0.03)
    assert ss.info["depth"] > 0
    with pytest.raises(ValueError, match="limit of 5"):
        s.sample(problems(n=6, batch=1), num_reads=10)


def test_aer_validation():
    s = get_sampler("aer", schedule=SCHED)
    with pytest.raises(TypeError, match="unknown option"):
        s.sample(problems(), num_reads=10, shots=5)
    with pytest.raises(ValueError, match="limit"):
        s.sample(IsingProblem(torch.zeros(1, s.properties["max_spins"] + 1)), num_reads=10)
    with pytest.raises(ValueError, match="method"):
        get_sampler("aer", method="stabilizer_magic")
    with pytest.raises(TypeError, match="schedule"):
        get_sampler("aer", schedule={"tau": 1.0})
    with pytest.raises(TypeError, match="noise_backend"):
        get_sampler("aer", noise_backend="FakeTorino")
    with pytest.raises(ValueError, match="num_reads"):
        s.sample(problems(), num_reads=0)


def test_missing_extra_gives_install_hint(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "qiskit_aer" or name.startswith("qiskit_aer."):
            raise ModuleNotFoundError(f"No module named {name!r}", name="qiskit_aer")
        return real_import(name, *args, **kwargs)

    for mod in [m for m in sys.modules if m == "hybrid_attention.backends.dqa.aer" or m.startswith("qiskit_aer")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r"pip install 'hybrid-attention\[aer\]'"):
        get_sampler("aer")


# ---------------------------------------------------------------------- pennylane
@pytest.mark.parametrize("device", ["lightning.qubit", "default.qubit"])
def test_pennylane_matches_ideal_output(device):
    pytest.importorskip("pennylane")
    s = get_sampler("pennylane", device=device, schedule=SCHED, chunk_size=4)
    p = problems(seed=2)
    ss = s.sample(p, num_reads=2000, seed=3)
    assert ss.spins.shape == (6, 2000, 3)
    assert_within_shot_noise(ss.marginals(), ideal_marginals(s, p), 2000)
    assert np.array_equal(s.sample(p, num_reads=50, seed=3).spins, s.sample(p, num_reads=50, seed=3).spins)
    one = s.sample(p[:1], num_reads=50, seed=0)  # a single problem (no broadcasting) works too
    assert one.spins.shape == (1, 50, 3)


def test_pennylane_validation():
    pytest.importorskip("pennylane")
    from hybrid_attention.circuits import CircuitOptions

    with pytest.raises(ValueError, match="cannot create device"):
        get_sampler("pennylane", device="no.such.device")
    with pytest.raises(ValueError, match="hardware options"):
        get_sampler("pennylane", options=CircuitOptions(fold_rzz=True))
    s = get_sampler("pennylane", device="default.qubit", max_qubits=4)
    with pytest.raises(ValueError, match="limit of 4"):
        s.sample(IsingProblem(torch.zeros(5)), num_reads=10)


# ---------------------------------------------------------------------- ibm: tests/backends/test_ibm.py


# ---------------------------------------------------------------------- size bounds before allocating
@pytest.fixture
def budget_8gib(monkeypatch):
    from hybrid_attention import checks

    monkeypatch.setattr(checks, "MEMORY_BUDGET", 8 << 30)


def _no_simulation(*a, **k):
    raise AssertionError("a simulation was started: the request should have been refused before allocating")


def test_aer_refuses_a_16_gib_statevector_before_allocating(budget_8gib, monkeypatch):
    from hybrid_attention.backends.dqa.aer import AerSampler

    monkeypatch.setattr(AerSampler, "_run_chunks", _no_simulation)
    monkeypatch.setattr(AerSampler, "_probabilities_chunk", _no_simulation)
    s = get_sampler("aer", schedule=DQASchedule(tau=1.0, steps=2))
    p = IsingProblem(torch.zeros(1, 30))
    for call in (lambda: s.sample(p, num_reads=10, seed=0), lambda: s.marginals(p), lambda: s.probabilities(p)):
        with pytest.raises(
            ValueError,
            match=r"aer: simulating n = 30 qubits \(statevector: 16 \* 2\*\*30 .*"
            r"needs an estimated 16 GiB",
        ):
            call()
    dm = get_sampler("aer", method="density_matrix", schedule=DQASchedule(tau=1.0, steps=2))
    with pytest.raises(ValueError, match=r"density matrix.*16 GiB"):
        dm.sample(IsingProblem(torch.zeros(1, 15)), num_reads=10)


def test_pennylane_refuses_huge_states(budget_8gib):
    pytest.importorskip("pennylane")
    s = get_sampler("pennylane", device="default.qubit", max_qubits=40)
    with pytest.raises(ValueError, match=r"pennylane: simulating n = 32 qubits .*64 GiB"):
        s.sample(IsingProblem(torch.zeros(1, 32)), num_reads=10)
