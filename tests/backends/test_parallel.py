"""Coarse-grained chunk threads (:mod:`hybrid_attention.backends.parallel`) and the statevector sampler on them: the
same probabilities and shots as one thread, the shots the inverse CDF of those probabilities, torch's thread count
restored."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends import parallel
from hybrid_attention.backends.dqa.statevector import StatevectorSampler
from hybrid_attention.backends.parallel import MIN_CHUNK_WORK, chunk_workers, intra_op_threads, run_chunks
from hybrid_attention.circuits import DQASchedule
from hybrid_attention.exact import draw_states, inverse_cdf
from hybrid_attention.ising import bits_to_spins, index_to_bits, index_to_spins


def _problems(n: int, batch: int, seed: int = 0) -> IsingProblem:
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(batch, n, generator=g, dtype=torch.float64)
    U = torch.randn(batch, n, n, generator=g, dtype=torch.float64).triu(1)
    return IsingProblem(h, U + U.transpose(-1, -2))


def test_chunk_workers_follow_the_work_and_the_budget():
    big = 10 * MIN_CHUNK_WORK
    assert chunk_workers(4, big, budget=2) == 2
    assert chunk_workers(1, big, budget=2) == 1  # one chunk: nothing to share
    assert chunk_workers(4, MIN_CHUNK_WORK / 2, budget=2) == 1  # too small to repay a thread
    assert chunk_workers(4, big, budget=1) == 1
    assert chunk_workers(3, big, budget=8) == 3


def test_run_chunks_keeps_order_and_restores_threads():
    before = torch.get_num_threads()
    seen = run_chunks(lambda k: (k, torch.get_num_threads()), [(k,) for k in range(7)], 2)
    assert [k for k, _ in seen] == list(range(7))
    assert all(t == 1 for _, t in seen)  # one intra-op thread per chunk thread
    assert torch.get_num_threads() == before
    with intra_op_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or not 2 <= len(os.sched_getaffinity(0)) <= 16,
    reason="needs Linux and 2-16 CPUs",
)
def test_pool_threads_are_pinned_to_distinct_cpus_of_the_affinity_set():
    """As many chunks as CPUs, waiting for each other (so every pool thread runs one): each reports one CPU, all
    different, together the process's affinity set; the calling thread's affinity is unchanged."""
    before = os.sched_getaffinity(0)
    k = len(before)
    together = threading.Barrier(k, timeout=30)

    def where(_: int) -> frozenset:
        together.wait()
        return frozenset(os.sched_getaffinity(0))

    seen = run_chunks(where, [(i,) for i in range(k)], k)
    assert all(len(c) == 1 for c in seen) and frozenset().union(*seen) == before
    assert os.sched_getaffinity(0) == before


def test_pinning_only_when_the_workers_are_as_many_as_the_cpus(monkeypatch):
    """Pinning needs the switch on, os.sched_setaffinity, and exactly one worker per CPU of the affinity set (more
    CPUs than workers: unpinned, so that several processes do not pin to the same CPUs)."""
    monkeypatch.setattr(parallel, "PIN_WORKERS", False)
    assert parallel._pinned_cpus(2) is None
    monkeypatch.setattr(parallel, "PIN_WORKERS", True)
    if not hasattr(os, "sched_setaffinity"):
        assert parallel._pinned_cpus(2) is None
        return
    cpus = sorted(os.sched_getaffinity(0))
    assert parallel._pinned_cpus(len(cpus)) == cpus
    assert parallel._pinned_cpus(len(cpus) + 1) is None
    if len(cpus) > 1:
        assert parallel._pinned_cpus(len(cpus) - 1) is None


def test_inverse_cdf_rows_equal_draw_states():
    rng = np.random.default_rng(3)
    p = rng.random((5, 16))
    p[1, :8] = 0.0  # empty bins are never drawn
    u = np.random.default_rng(4).random((5, 40))
    whole = draw_states(p, 40, np.random.default_rng(4))
    assert np.array_equal(whole, inverse_cdf(p, u))
    assert np.array_equal(whole[2:4], inverse_cdf(p[2:4], u[2:4]))  # row by row
    assert (whole[1] >= 8).all()


def test_index_to_spins_table_equals_bits():
    c = np.random.default_rng(0).integers(0, 1 << 11, size=(3, 50))
    s = index_to_spins(c, 11)
    assert s.dtype == np.int8 and s.shape == (3, 50, 11)
    assert np.array_equal(s, bits_to_spins(index_to_bits(c, 11)))
    assert np.array_equal(index_to_spins(c, 20), bits_to_spins(index_to_bits(c, 20)))  # above the table size


@pytest.fixture
def two_threads():
    """A torch thread budget of 2 for the test, whatever earlier tests left (``train`` sets its own count)."""
    with intra_op_threads(2):
        yield


def test_statevector_threads_equal_one_thread(two_threads):
    """Threads change where chunks run, not what they compute: each chunk runs the same single-threaded kernels, so
    probabilities and shots are bitwise those of one thread (determinism within one process)."""
    sv = StatevectorSampler(DQASchedule(tau=1.0, steps=6), cache_limit=64 << 10)  # small chunks: several per call
    prob = _problems(10, 40)
    work = 40 * 1024 * 6 * 10 * 16 / 4  # the sampler's estimate: problems x amplitudes x slices x driver work
    assert chunk_workers(len(range(0, 40, sv._subchunk(10, torch.device("cpu")))), work) >= 2  # the threads run
    p_par = sv.probabilities(prob)
    s_par = sv.sample(prob, num_reads=300, seed=7)
    with intra_op_threads(1):
        p_one = sv.probabilities(prob)
        s_one = sv.sample(prob, num_reads=300, seed=7)
    assert torch.equal(p_par, p_one)
    assert np.array_equal(s_par.spins, s_one.spins)


def test_statevector_shots_are_the_inverse_cdf_of_its_probabilities():
    """The shots drawn chunk by chunk are the inverse CDF of the exact output at the generator's uniforms, as the
    table-then-draw path (``draw_states``) gives them."""
    sv = StatevectorSampler(DQASchedule(tau=1.0, steps=6), cache_limit=64 << 10)
    prob = _problems(6, 30, seed=1)
    with torch.no_grad():
        p = sv._probabilities(prob).to(torch.float64)
    ref = draw_states(p / p.sum(-1, keepdim=True), 200, np.random.default_rng(11))
    ss = sv.sample(prob, num_reads=200, seed=11)
    assert np.array_equal(ss.spins, index_to_spins(ref, 6))


@pytest.mark.parametrize("B", [1, 5, 7, 30, 64, 65, 130])
def test_statevector_chunks_are_even_and_within_the_cache_limit(B):
    """The chunks cover the batch in order, hold at most the cache limit's rows, differ by at most one row, and are an
    even number when there are several (two threads share them evenly); they do not depend on the thread count."""
    sv = StatevectorSampler(DQASchedule(tau=1.0, steps=4), cache_limit=64 << 10)
    cpu = torch.device("cpu")
    limit = sv._subchunk(10, cpu)  # 2 rows of 2**10 amplitudes
    spans, checkpointed = sv._spans(B, 10, cpu, False)
    rows = [s.stop - s.start for s in spans]
    assert not checkpointed and spans[0].start == 0 and spans[-1].stop == B
    assert all(a.stop == b.start for a, b in zip(spans, spans[1:]))
    assert max(rows) <= limit and max(rows) - min(rows) <= 1
    assert len(spans) == 1 or len(spans) % 2 == 0 or len(spans) == B
    with intra_op_threads(1):
        assert sv._spans(B, 10, cpu, False) == (spans, checkpointed)


def test_statevector_shots_of_uneven_chunks_and_a_batch_shape(two_threads):
    """Each chunk writes its shots' spins into its rows of the result: with chunks of unequal size (7 problems in 4
    chunks) and a (7,) or (1, 7) batch, the spins are the inverse CDF of the exact output at the generator's uniforms."""
    sv = StatevectorSampler(DQASchedule(tau=1.0, steps=6), cache_limit=2 * 2048)  # 2 rows of 2**6 per chunk
    prob = _problems(6, 7, seed=2)
    assert [s.stop - s.start for s in sv._spans(7, 6, torch.device("cpu"), False)[0]] == [2, 2, 2, 1]
    with torch.no_grad():
        p = sv._probabilities(prob).to(torch.float64)
    ref = index_to_spins(draw_states(p / p.sum(-1, keepdim=True), 50, np.random.default_rng(3)), 6)
    # exact equality: the same chunk kernels and uniforms in one process (determinism, not a float comparison)
    assert np.array_equal(sv.sample(prob, num_reads=50, seed=3).spins, ref)
    wide = IsingProblem(prob.h[None], prob.J[None])
    ss = sv.sample(wide, num_reads=50, seed=3)
    assert ss.spins.shape == (1, 7, 50, 6) and np.array_equal(ss.spins[0], ref)
    assert np.allclose(ss.weights, 1 / 50)
