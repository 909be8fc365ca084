"""One conformance suite for every registered, importable sampler (problem ladder: one spin, a pair, a frustrated
triangle, a masked spin). DQA samplers are compared with the reference circuit output, exact and classical samplers
with exact Boltzmann enumeration; tolerances come from the number of reads (z * sqrt((1 - m^2) / N), z = 5)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem, exact
from hybrid_attention.backends import SAMPLERS, available_samplers, get_sampler
from hybrid_attention.circuits import DQASchedule, dqa_probabilities

Z = 5.0
N = 3000
SCHED = DQASchedule(tau=1.5, steps=10)
DQA = {"statevector", "aer", "pennylane", "ibm"}
#: deterministic approximations: exact only where spins are independent
APPROXIMATE = {"meanfield"}

AVAILABLE = available_samplers()


def make(name):
    if name == "ibm":
        from qiskit_aer import AerSimulator

        return get_sampler("ibm", backend=AerSimulator(), schedule=SCHED)  # local mode, ideal simulator
    if name in DQA:
        return get_sampler(name, schedule=SCHED)
    return get_sampler(name)


def t(x):
    return torch.tensor(x, dtype=torch.float64)


LADDER = {
    "one spin": IsingProblem(t([[0.8], [-0.4]])),
    "pair": IsingProblem(t([0.3, -0.5]), t([[0.0, 0.9], [0.9, 0.0]]), beta=1.2),
    "frustrated triangle": IsingProblem(t([0.2, 0.0, -0.1]), t([[0, -1.0, -1.0], [-1.0, 0, -1.0], [-1.0, -1.0, 0]])),
    "masked spin": IsingProblem(t([0.5, 2.0, -0.7]), t([[0, 0.6, 0.4], [0.6, 0, 1.5], [0.4, 1.5, 0]]), mask=torch.tensor([True, False, True])),
}
INDEPENDENT = {"one spin"}


def expected(name, problem):
    """Exact Boltzmann marginals, or the ideal DQA circuit's output marginals for DQA samplers."""
    if name not in DQA:
        return exact.marginals(problem).numpy()
    h, J = problem.dropped()
    b = float(problem.beta)
    J = np.broadcast_to(J.numpy(), (*problem.batch_shape, problem.n, problem.n))
    p = dqa_probabilities(b * h.numpy(), b * J, SCHED)
    S = 1 - 2 * ((np.arange(1 << problem.n)[:, None] >> np.arange(problem.n)) & 1)
    m = p @ S
    return m if problem.mask is None else m * problem.mask.numpy()


@pytest.fixture(scope="module", params=sorted(SAMPLERS))
def sampler(request):
    name = request.param
    if not AVAILABLE.get(name):
        pytest.skip(f"sampler {name!r} is not importable here")
    s = make(name)
    yield name, s
    s.close()


@pytest.mark.parametrize("rung", list(LADDER))
def test_ladder(sampler, rung):
    name, s = sampler
    problem = LADDER[rung]
    ss = s.sample(problem, num_reads=N, seed=7)
    # structure
    assert ss.spins.dtype == np.int8 and set(np.unique(ss.spins)) <= {-1, 1}
    assert ss.spins.shape[: len(problem.batch_shape)] == tuple(problem.batch_shape) and ss.spins.shape[-1] == problem.n
    assert np.allclose(ss.weights.sum(-1), 1.0)
    m = ss.marginals()
    assert m.shape == (*problem.batch_shape, problem.n) and np.all(np.abs(m) <= 1 + 1e-12)
    if problem.mask is not None:
        assert np.all(m[..., ~problem.mask.numpy()] == 0)
    # values
    m_ref = expected(name, problem)
    if name in APPROXIMATE and rung not in INDEPENDENT:
        return  # mean field is an approximation for coupled spins (its own tests bound its error)
    reads = ss.num_reads if not ss.exact else np.inf
    tol = Z * np.sqrt(np.clip(1 - m_ref**2, 0, None) / reads) + (1e-5 if ss.exact or name in APPROXIMATE else 1e-12)
    assert np.all(np.abs(m - m_ref) <= tol), (m, m_ref, tol)


def test_masked_equals_removed(sampler):
    """Dropping a spin leaves the others distributed as if it were absent (for exact Boltzmann and for DQA)."""
    name, s = sampler
    masked = LADDER["masked spin"]
    removed = IsingProblem(t([0.5, -0.7]), t([[0, 0.4], [0.4, 0]]))
    assert np.allclose(expected(name, masked)[[0, 2]], expected(name, removed), atol=1e-12)


def test_marginals_method_and_flip_symmetry(sampler):
    name, s = sampler
    problem = LADDER["pair"]
    m = s.marginals(problem) if s.properties.get("exact") or name in APPROXIMATE else s.marginals(problem, num_reads=N, seed=1)
    assert isinstance(m, torch.Tensor) and tuple(m.shape) == (2,)
    flipped = IsingProblem(-problem.h, problem.J, beta=problem.beta)
    mf = s.marginals(flipped) if s.properties.get("exact") or name in APPROXIMATE else s.marginals(flipped, num_reads=N, seed=2)
    tol = 2 * Z * np.sqrt(1.0 / N) if not (s.properties.get("exact") or name in APPROXIMATE) else 1e-5
    assert np.all(np.abs(m.numpy() + mf.numpy()) <= tol)  # E(s; h) = E(-s; -h): flipping h flips m


def test_rejects_unknown_option_and_bad_problem(sampler):
    name, s = sampler
    with pytest.raises(TypeError, match="unknown option"):
        s.sample(LADDER["pair"], num_reads=10, no_such_option=1)
    with pytest.raises(TypeError):
        s.sample({"h": [1.0]}, num_reads=10)
    assert "max_spins" in s.properties and "exact" in s.properties


# ---------------------------------------------------------------------- issue #10: hostile input, every sampler
EMPTY = IsingProblem(torch.zeros(0, 3, dtype=torch.float64), t([[0, 0.5, 0.0], [0.5, 0, -0.3], [0.0, -0.3, 0]]))


@pytest.mark.parametrize("num_reads", [None, 7])
def test_empty_batch_gives_empty_results(sampler, num_reads):
    """B = 0 returns empty results of the right shapes (the Sampler base class handles it for every backend)."""
    name, s = sampler
    ss = s.sample(EMPTY, num_reads=num_reads, seed=0)
    reads = ss.num_reads
    if num_reads is not None:
        assert reads == num_reads
    assert ss.spins.shape == (0, reads, 3) and ss.spins.dtype == np.int8 and ss.weights.shape == (0, reads)
    assert ss.marginals().shape == (0, 3) and ss.correlations().shape == (0, 3, 3) and ss.energies.shape == (0, reads)
    m = s.marginals(EMPTY, num_reads=num_reads, seed=0)
    assert isinstance(m, torch.Tensor) and tuple(m.shape) == (0, 3)
    nested = IsingProblem(torch.zeros(2, 0, 3))
    assert s.sample(nested, num_reads=5, seed=0).spins.shape == (2, 0, 5, 3)
    assert tuple(s.marginals(nested).shape) == (2, 0, 3)


def test_marginals_accept_num_reads_and_seed(sampler):
    """One rule for per-call options: marginals takes num_reads and seed on every sampler (given reads sample)."""
    name, s = sampler
    problem = LADDER["pair"]
    m1 = s.marginals(problem, num_reads=N, seed=3)
    m2 = s.marginals(problem, num_reads=N, seed=3)
    assert tuple(m1.shape) == (2,) and torch.equal(m1, m2)  # reproducible with a seed
    assert s.marginals(problem, seed=np.random.SeedSequence(5), num_reads=50).shape == (2,)
    m_ref = expected(name, problem)
    if name not in APPROXIMATE:
        tol = Z * np.sqrt(np.clip(1 - m_ref**2, 0, None) / N) + 1e-5
        assert np.all(np.abs(m1.numpy() - m_ref) <= tol)
    if s.properties.get("exact"):  # exact-output samplers: num_reads=None is the exact output, seed unused
        torch.testing.assert_close(s.marginals(problem, seed=1), s.marginals(problem))
        assert np.abs(s.marginals(problem).numpy() - m_ref).max() < 1e-5


@pytest.mark.parametrize("seed", [1.9, True, 2.0, "1", np.float64(3.0)])
def test_rejects_float_and_bool_seeds(sampler, seed):
    name, s = sampler
    for call in (s.sample, s.marginals):
        with pytest.raises(TypeError, match=r"seed must be an int, a numpy.random.Generator.*got (float|bool|str)"):
            call(LADDER["pair"], num_reads=10, seed=seed)


@pytest.mark.parametrize("num_reads, exc", [(0, ValueError), (-3, ValueError), (True, TypeError), (2.0, TypeError),
                                            ("9", TypeError)])
def test_rejects_bad_num_reads(sampler, num_reads, exc):
    name, s = sampler
    for call in (s.sample, s.marginals):
        with pytest.raises(exc, match="num_reads must be an integer >= 1"):
            call(LADDER["pair"], num_reads=num_reads)


def test_refuses_huge_num_reads_before_allocating(sampler):
    name, s = sampler
    with pytest.raises(ValueError, match=r"needs an estimated .*TiB, above the memory budget"):
        s.sample(LADDER["one spin"], num_reads=10**12, seed=0)
    with pytest.raises(ValueError, match="memory budget"):
        s.marginals(LADDER["one spin"], num_reads=10**12, seed=0)
