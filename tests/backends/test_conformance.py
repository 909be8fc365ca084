"""One conformance suite for every registered, importable sampler: a thin parametrisation of the shipped
:mod:`hybrid_attention.backends.testing` (problem ladder: one spin, a pair, a frustrated triangle, a masked spin).
DQA samplers are compared with the reference circuit output, exact and classical samplers with exact Boltzmann
enumeration; tolerances come from the number of reads (z * sqrt((1 - m^2) / N), z = 5)."""

from __future__ import annotations

import pytest

from hybrid_attention.backends import SAMPLERS, available_samplers, get_sampler
from hybrid_attention.backends import testing as conformance
from hybrid_attention.backends.registry import is_dqa, sampler_class
from hybrid_attention.circuits import DQASchedule

N = 3000
SCHED = DQASchedule(tau=1.5, steps=10)

AVAILABLE = available_samplers()


def make(name):
    if name == "ibm":
        from qiskit_aer import AerSimulator

        return get_sampler("ibm", backend=AerSimulator(), schedule=SCHED)  # local mode, ideal simulator
    if is_dqa(name):
        return get_sampler(name, schedule=SCHED)
    return get_sampler(name)


@pytest.fixture(scope="module", params=sorted(SAMPLERS))
def sampler(request):
    name = request.param
    if not AVAILABLE.get(name):
        pytest.skip(f"sampler {name!r} is not importable here")
    s = make(name)
    yield name, s
    s.close()


def test_capabilities_are_declared_by_the_class(sampler):
    """Each sampler's capabilities are its class's (``sharded`` is a wrapper: its inner sampler's), and the registry
    reads them from there."""
    name, s = sampler
    if name != "sharded":
        assert s.capabilities is sampler_class(name).capabilities
    assert is_dqa(name) == sampler_class(name).capabilities.dqa
    assert s.capabilities.approximate or not s.capabilities.dqa  # a DQA output is only approximately Boltzmann


@pytest.mark.parametrize("rung", list(conformance.problem_ladder()))
def test_ladder(sampler, rung):
    name, s = sampler
    conformance.assert_ladder_rung(
        s,
        conformance.problem_ladder()[rung],
        num_reads=N,
        seed=7,
        independent=rung in conformance.INDEPENDENT,
    )


def test_masked_equals_removed(sampler):
    conformance.assert_masked_equals_removed(sampler[1])


def test_marginals_method_and_flip_symmetry(sampler):
    name, s = sampler
    conformance.assert_flip_symmetry(s, num_reads=N)


def test_rejects_unknown_option_and_bad_problem(sampler):
    conformance.assert_rejects_bad_input(sampler[1])


# ---------------------------------------------------------------------- hostile input, every sampler
@pytest.mark.parametrize("num_reads", [None, 7])
def test_empty_batch_gives_empty_results(sampler, num_reads):
    """B = 0 returns empty results of the right shapes (the Sampler base class handles it for every backend)."""
    conformance.assert_empty_batch(sampler[1], num_reads)


def test_marginals_accept_num_reads_and_seed(sampler):
    """One rule for per-call options: marginals takes num_reads and seed on every sampler (given reads sample)."""
    name, s = sampler
    conformance.assert_marginals_num_reads_and_seed(s, num_reads=N)


@pytest.mark.parametrize("seed", conformance.BAD_SEEDS)
def test_rejects_float_and_bool_seeds(sampler, seed):
    conformance.assert_rejects_seed(sampler[1], seed)


@pytest.mark.parametrize("num_reads, exc", conformance.BAD_NUM_READS)
def test_rejects_bad_num_reads(sampler, num_reads, exc):
    conformance.assert_rejects_num_reads(sampler[1], num_reads, exc)


def test_refuses_huge_num_reads_before_allocating(sampler):
    conformance.assert_refuses_huge_num_reads(sampler[1])


def test_the_whole_suite_runs_on_a_third_party_style_sampler():
    """``assert_sampler_conforms`` is the one call a sampler author makes (here on the exact sampler)."""
    conformance.assert_sampler_conforms(get_sampler("exact"), num_reads=N, seed=7)


def test_the_suite_catches_a_wrong_sampler():
    """A sampler that returns the wrong distribution (fields ignored) fails the ladder."""
    import numpy as np

    from hybrid_attention.sampler import Sampler
    from hybrid_attention.sampleset import SampleSet

    class Uniform(Sampler):
        name = "uniform"

        def _sample(self, problem, *, num_reads, seed):
            reads = num_reads or 1024
            rng = np.random.default_rng(0)
            spins = rng.choice(np.array([-1, 1], dtype=np.int8), size=(*problem.batch_shape, reads, problem.n))
            return SampleSet(spins, np.full(spins.shape[:-1], 1.0 / reads), problem, {"backend": self.name})

    with pytest.raises(AssertionError, match="differ from the expected"):
        conformance.assert_ladder_rung(Uniform(), conformance.problem_ladder()["one spin"], num_reads=N, seed=0)
