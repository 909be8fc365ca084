"""The aer sampler with an executor (a Dask LocalCluster of 2 single-threaded workers, or a thread pool): every chunk
is one task, and the SampleSet, marginals and probabilities are the same as without the executor; the output still
matches the independent numpy reference of the circuit within shot noise."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.circuits import DQASchedule

pytest.importorskip("qiskit_aer")
distributed = pytest.importorskip("distributed")

from hybrid_attention.backends.dqa.aer import AerSampler  # noqa: E402

SCHED = DQASchedule(tau=1.0, steps=6)


class CountingExecutor(ThreadPoolExecutor):
    """A thread pool that counts the tasks submitted to it."""

    def __init__(self):
        super().__init__(max_workers=2)
        self.tasks = 0

    def submit(self, *args, **kw):
        self.tasks += 1
        return super().submit(*args, **kw)


@pytest.fixture
def client(dask_cluster):
    return dask_cluster[1]


def problems(B=7, n=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    U = torch.randn(n, n, generator=g, dtype=torch.float64).triu(1)
    return IsingProblem(torch.randn(B, n, generator=g, dtype=torch.float64), U + U.T, beta=0.9)


@pytest.mark.parametrize("readout", ["probabilities", "shots"])
def test_dask_executor_gives_the_same_sampleset(client, readout):
    p = problems()
    ref = AerSampler(schedule=SCHED, chunk_size=3, readout=readout).sample(p, num_reads=200, seed=4)
    ss = AerSampler(schedule=SCHED, chunk_size=3, readout=readout, executor=client).sample(p, num_reads=200, seed=4)
    assert ss.spins.shape == (7, 200, 3) and ss.info["chunks"] == 3
    assert np.array_equal(ss.spins, ref.spins) and np.array_equal(ss.weights, ref.weights)
    assert ss.info["chunk_seeds"] == ref.info["chunk_seeds"]


def test_dask_executor_probabilities_and_marginals_match_the_reference(client):
    p = problems(B=5)
    s = AerSampler(schedule=SCHED, chunk_size=2, executor=client)
    P = s.probabilities(p).numpy()
    np.testing.assert_allclose(P, np.asarray(s.reference_probabilities(p)), atol=1e-10)
    np.testing.assert_array_equal(P, AerSampler(schedule=SCHED, chunk_size=2).probabilities(p).numpy())
    # sampled marginals within 5 standard errors of the exact circuit output
    N = 4000
    m = s.sample(p, num_reads=N, seed=1).marginals()
    states = 1 - 2 * ((np.arange(8)[:, None] >> np.arange(3)) & 1)
    m_ref = P @ states
    assert np.all(np.abs(m - m_ref) <= 5 * np.sqrt(np.clip(1 - m_ref**2, 1e-12, None) / N))


def test_any_futures_executor_runs_one_task_per_chunk():
    p = problems(B=7)
    ex = CountingExecutor()
    try:
        ss = AerSampler(schedule=SCHED, chunk_size=2, executor=ex).sample(p, num_reads=50, seed=2)
    finally:
        ex.shutdown()
    assert ex.tasks == 4
    ref = AerSampler(schedule=SCHED, chunk_size=2).sample(p, num_reads=50, seed=2)
    assert np.array_equal(ss.spins, ref.spins)


def test_bad_executor_is_refused_at_construction():
    with pytest.raises(TypeError, match="executor must be a distributed.Client"):
        AerSampler(schedule=SCHED, executor="tcp://127.0.0.1:8786")
