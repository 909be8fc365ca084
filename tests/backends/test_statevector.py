"""The batched statevector DQA simulator against independent references (dense expm, the numpy reference,
qiskit ``Statevector`` of the emitted circuit), finite-difference gradients, masks, shots and validation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.linalg
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends import get_sampler
from hybrid_attention.backends.dqa.statevector import StatevectorSampler, configuration_energies
from hybrid_attention.circuits import DQASchedule
from tests.conftest import random_couplings

TOL = {torch.complex64: 1e-6, torch.complex128: 1e-12}


def tv(p, q):
    return 0.5 * np.abs(np.asarray(p, dtype=np.float64) - np.asarray(q, dtype=np.float64)).sum(-1).max()


def dense_dqa(h, J, beta, schedule):
    """Independent dense reference: 2**n x 2**n matrices and scipy's expm of each Trotter factor (n <= 4)."""
    n = len(h)
    X = np.array([[0.0, 1.0], [1.0, 0.0]])
    HD = np.zeros((1 << n, 1 << n))
    for q in range(n):  # qubit q is bit q: the rightmost Kronecker factor is qubit 0
        ops = [X if k == q else np.eye(2) for k in reversed(range(n))]
        HD -= _kron_all(ops)
    E = np.zeros(1 << n)
    for c in range(1 << n):
        s = np.array([1 - 2 * ((c >> j) & 1) for j in range(n)], dtype=float)
        E[c] = -sum(h[j] * s[j] for j in range(n)) - sum(
            J[j, k] * s[j] * s[k] for j in range(n) for k in range(j + 1, n)
        )
    fs, cs = getattr(schedule, "field_scale", 1.0), getattr(schedule, "coupling_scale", 1.0)
    if fs != 1.0 or cs != 1.0:
        raise NotImplementedError
    HP = np.diag(beta * E)
    psi = np.full(1 << n, 2.0 ** (-n / 2), dtype=complex)
    b, a = schedule.coefficients()
    for bk, ak in zip(b, a):
        if schedule.order == 2:
            psi = scipy.linalg.expm(-0.5j * ak * HD) @ psi
            psi = scipy.linalg.expm(-1j * bk * HP) @ psi
            psi = scipy.linalg.expm(-0.5j * ak * HD) @ psi
        else:
            psi = scipy.linalg.expm(-1j * ak * HD) @ scipy.linalg.expm(-1j * bk * HP) @ psi
    return np.abs(psi) ** 2


def _kron_all(ops):
    out = np.ones((1, 1))
    for o in ops:
        out = np.kron(out, o)
    return out


def problem(rng, n, batch=(3,), beta=1.0, shared=False, scale=1.0):
    h = rng.normal(size=(*batch, n))
    J = random_couplings(rng, n, scale=scale, batch=() if shared else batch)
    return IsingProblem(torch.tensor(h), torch.tensor(J), beta=beta)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("n,order", [(1, 1), (2, 2), (3, 1), (4, 1), (4, 2)])
def test_matches_dense_expm(rng, n, order, dtype):
    sch = DQASchedule(tau=1.7, steps=13, gamma=0.9, energy_scale=1.3, order=order)
    pr = problem(rng, n, batch=(2,), beta=0.8)
    p = StatevectorSampler(sch, dtype=dtype).probabilities(pr).numpy()
    for i in range(2):
        ref = dense_dqa(pr.h[i].numpy(), pr.J[i].numpy(), 0.8, sch)
        assert tv(p[i], ref) < TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("shared", [False, True])
def test_matches_numpy_reference(rng, dtype, shared):
    reference = pytest.importorskip("hybrid_attention.circuits.reference")
    sch = DQASchedule(tau=2.0, steps=30, order=1)
    for n in (1, 3, 6, 8):
        pr = problem(rng, n, batch=(2, 3), beta=1.0, shared=shared)
        J = np.broadcast_to(pr.J.numpy(), (2, 3, n, n))
        ref = reference.dqa_probabilities(pr.h.numpy(), J, sch)
        p = StatevectorSampler(sch, dtype=dtype, group=3).probabilities(pr).numpy()
        assert p.shape == (2, 3, 1 << n)
        assert tv(p, ref) < TOL[dtype]


def test_schedule_scales_match_reference(rng):
    reference = pytest.importorskip("hybrid_attention.circuits.reference")
    import dataclasses

    base = DQASchedule(tau=1.0, steps=10)
    if not hasattr(base, "field_scale"):
        pytest.skip("schedule has no field_scale")
    sch = dataclasses.replace(base, field_scale=2.0)
    pr = problem(rng, 5)
    ref = reference.dqa_probabilities(pr.h.numpy(), pr.J.numpy(), sch)
    p = StatevectorSampler(sch, dtype=torch.complex128).probabilities(pr).numpy()
    assert tv(p, ref) < 1e-12


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_matches_qiskit_statevector(rng, dtype):
    qd = pytest.importorskip("hybrid_attention.circuits.qiskit_dqa")
    from qiskit.quantum_info import Statevector

    sch = DQASchedule(tau=1.5, steps=8)
    for n in (1, 2, 4, 5):
        pr = problem(rng, n, batch=(1,), beta=0.7)
        qc = qd.dqa_circuit(pr[0], sch, measure=False)
        ref = Statevector(qc).probabilities()  # qiskit's little-endian index = ours
        p = StatevectorSampler(sch, dtype=dtype).probabilities(pr).numpy()[0]
        assert tv(p, ref) < TOL[dtype]


def test_larger_complex64_accuracy(rng):
    """complex64 stays within 1e-6 TV of complex128 at the benchmark's size and depth."""
    sch = DQASchedule(tau=2.0, steps=20)
    pr = problem(rng, 12, batch=(4,), scale=0.5)
    p64 = StatevectorSampler(sch, dtype=torch.complex64).probabilities(pr).numpy()
    p128 = StatevectorSampler(sch, dtype=torch.complex128).probabilities(pr).numpy()
    assert tv(p64, p128) < 1e-6


def test_energy_table_matches_ising(rng):
    pr = problem(rng, 6, batch=(4,))
    E = configuration_energies(pr.h, pr.J)
    S = torch.tensor(list(itertools.product([1.0, -1.0], repeat=6)), dtype=torch.float64)
    idx = ((1 - S) / 2 * (2 ** torch.arange(6))).sum(-1).long()
    ref = pr.energy(S[None].expand(4, -1, -1))
    assert torch.allclose(E[:, idx], ref, atol=1e-12)


def test_gradients_match_finite_differences(rng):
    n = 4
    sch = DQASchedule(tau=1.5, steps=10)
    sv = StatevectorSampler(sch, dtype=torch.complex128)
    h = torch.tensor(rng.normal(size=(2, n)), requires_grad=True)
    iu = torch.triu_indices(n, n, offset=1)
    v = torch.tensor(rng.normal(size=iu.shape[1]), requires_grad=True)  # J_jk for j < k
    beta = torch.tensor([0.9, 1.2], dtype=torch.float64, requires_grad=True)

    def f(h, v, beta):
        U = torch.zeros(n, n, dtype=torch.float64).index_put((iu[0], iu[1]), v)
        return sv.differentiable_marginals(IsingProblem(h, U + U.T, beta=beta))

    assert torch.autograd.gradcheck(f, (h, v, beta), eps=1e-6, atol=1e-7, rtol=1e-5)


def test_chunked_gradients_equal_unchunked(rng):
    sch = DQASchedule(tau=1.0, steps=6)
    pr = problem(rng, 5, batch=(7,))
    g = torch.tensor(rng.normal(size=(7, 5)))
    grads = []
    probs = []
    # (memory, cache) limits: one chunk; checkpointed memory chunks; cache-sized sub-chunks (no checkpointing)
    for memory, cache in ((1 << 30, 1 << 30), (1 << 12, 1 << 30), (1 << 30, 1 << 11)):
        s = StatevectorSampler(sch, dtype=torch.complex128, memory_limit=memory, cache_limit=cache)
        assert s._subchunk(5, torch.device("cpu")) == max(1, cache // s._bytes_per_problem(5))
        h = pr.h.clone().requires_grad_(True)
        J = pr.J.clone().requires_grad_(True)
        m = s.differentiable_marginals(IsingProblem(h, J))
        (m * g).sum().backward()
        grads.append((m.detach(), h.grad, J.grad))
        probs.append(s.probabilities(pr))
    for other in grads[1:]:
        for a, b in zip(grads[0], other):
            assert torch.allclose(a, b, atol=1e-13)
    for other in probs[1:]:
        assert torch.allclose(probs[0], other, atol=1e-15)


def test_masked_spin_is_dropped(rng):
    sch = DQASchedule(tau=2.0, steps=15)
    sv = StatevectorSampler(sch, dtype=torch.complex128)
    pr = problem(rng, 5, batch=(1,))
    keep = [0, 2, 3]
    mask = torch.tensor([[True, False, True, True, False]])
    m_mask = sv.marginals(IsingProblem(pr.h, pr.J, mask=mask))
    m_small = sv.marginals(IsingProblem(pr.h[:, keep], pr.J[0][keep][:, keep][None]))
    assert torch.allclose(m_mask[:, keep], m_small, atol=1e-12)
    assert (m_mask[:, [1, 4]] == 0).all()


def test_quench_limit_and_field_sign(rng):
    pr = problem(rng, 4)
    p = StatevectorSampler(DQASchedule(tau=1e-6, steps=3), dtype=torch.complex128).probabilities(pr).numpy()
    assert np.allclose(p, 1 / 16, atol=1e-9)
    one = IsingProblem(torch.tensor([[0.8], [-0.8]], dtype=torch.float64))
    m = StatevectorSampler(DQASchedule(tau=1.0, steps=20)).marginals(one)
    assert m[0, 0] > 0 and torch.allclose(m[0], -m[1], atol=1e-6)


def test_shots_within_tolerance(rng):
    sv = StatevectorSampler(DQASchedule(tau=2.5, steps=20))
    pr = problem(rng, 6, batch=(4,))
    N = 4000
    ss = sv.sample(pr, num_reads=N, seed=3)
    assert ss.spins.shape == (4, N, 6) and not ss.exact
    m = sv.marginals(pr).numpy()
    assert np.all(np.abs(ss.marginals() - m) <= 5 * np.sqrt((1 - m**2) / N) + 1e-9)
    ex = sv.sample(pr)
    assert ex.exact and ex.spins.shape == (4, 64, 6)
    assert np.allclose(ex.marginals(), m, atol=1e-6)
    assert np.array_equal(sv.sample(pr, num_reads=10, seed=5).spins, sv.sample(pr, num_reads=10, seed=5).spins)


def test_validation_and_registry():
    sv = get_sampler("statevector", schedule=DQASchedule(tau=1.0, steps=5))
    assert isinstance(sv, StatevectorSampler) and sv.properties["exact"]
    with pytest.raises(ValueError, match="limit"):
        sv.sample(IsingProblem(torch.zeros(1, 21)))
    with pytest.raises(TypeError, match="unknown option"):
        sv.sample(IsingProblem(torch.zeros(1, 2)), shots=3)
    with pytest.raises(ValueError, match="complex64"):
        StatevectorSampler(dtype=torch.float32)
    with pytest.raises(TypeError, match="DQASchedule"):
        StatevectorSampler(schedule=1.0)
    with pytest.raises(ValueError, match="cache_limit must be an integer >= 1, got 0"):
        StatevectorSampler(cache_limit=0)


# ---------------------------------------------------------------------- hostile input
@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_a_cuda_device_without_cuda_is_refused_naming_what_is_available():
    with pytest.raises(
        ValueError, match=r"statevector: device 'cuda' is not available on this machine; available: \['cpu'"
    ):
        get_sampler("statevector", device="cuda")


def test_a_device_the_machine_lacks_is_refused_at_construction():
    with pytest.raises(ValueError, match=r"statevector: device 'cuda:99' is not available.*available: \['cpu'"):
        StatevectorSampler(device="cuda:99")
    with pytest.raises(ValueError, match="statevector: device 'gpu' is not a torch device"):
        StatevectorSampler(device="gpu")
    with pytest.raises(TypeError, match="statevector: device must be a str, a torch.device or a device index"):
        StatevectorSampler(device=1.5)
    sv = StatevectorSampler(DQASchedule(tau=1.0, steps=3), device="cpu")
    assert sv.device == torch.device("cpu") and sv.marginals(IsingProblem(torch.zeros(1, 2))).shape == (1, 2)


def test_refuses_huge_problems_before_allocating(monkeypatch):
    from hybrid_attention import checks

    monkeypatch.setattr(checks, "MEMORY_BUDGET", 8 << 30)

    def no_run(*a, **k):
        raise AssertionError("the simulation started: the request should have been refused before allocating")

    monkeypatch.setattr(StatevectorSampler, "_run", no_run)
    sv = StatevectorSampler(DQASchedule(tau=1.0, steps=2), max_spins=40)
    p = IsingProblem(torch.zeros(1, 30))
    for call in (
        lambda: sv.sample(p, num_reads=4),
        lambda: sv.marginals(p),
        lambda: sv.probabilities(p),
        lambda: sv.differentiable_marginals(p),
    ):
        with pytest.raises(ValueError, match=r"statevector: one problem of n = 30 spins .*needs an estimated 32 GiB"):
            call()
    # with autograd every layer's state is kept: a long schedule is refused even at moderate n
    long = StatevectorSampler(DQASchedule(tau=1.0, steps=10**6))
    hg = torch.zeros(1, 16, requires_grad=True)
    with pytest.raises(ValueError, match="layers kept for autograd"):
        long.differentiable_marginals(IsingProblem(hg))


def test_empty_batch_direct_methods():
    sv = StatevectorSampler(DQASchedule(tau=1.0, steps=3))
    p = IsingProblem(torch.zeros(0, 3))
    assert tuple(sv.probabilities(p).shape) == (0, 8)
    assert tuple(sv.differentiable_marginals(p).shape) == (0, 3)
    assert sv.sample(p).spins.shape == (0, 8, 3)
