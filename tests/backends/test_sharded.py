"""The sharded sampler: bitwise-identical SampleSets for any number of Dask workers and any shard size, equal to the
unsharded sampler where its semantics allow (exact output; one problem per call with its spawned seed); bad input
refused before any task. The clusters are LocalClusters of single-threaded worker processes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends import get_sampler
from hybrid_attention.checks import spawn_seeds

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def clients(dask_cluster):
    """``{workers: Client}``: the shared 2-worker cluster and a 1-worker cluster of this module."""
    one = distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=40
    )
    client = distributed.Client(one)
    yield {1: client, 2: dask_cluster[1]}
    client.close()
    one.close()


def problems(batch=(3, 4), n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(*batch, n, generator=g, dtype=torch.float64)
    U = torch.randn(n, n, generator=g, dtype=torch.float64).triu(1)
    mask = torch.ones(*batch, n, dtype=torch.bool)
    mask.view(-1, n)[1, -1] = False  # one masked spin travels with its shard
    return IsingProblem(h, U + U.T, beta=0.8, mask=mask)


def same(a, b):
    assert a.spins.dtype == b.spins.dtype == np.int8 and a.spins.shape == b.spins.shape
    assert np.array_equal(a.spins, b.spins) and np.array_equal(a.weights, b.weights) and a.exact == b.exact


# the torch kernel: workers need not compile numba kernels first (the result is bitwise the same for a given kernel)
@pytest.mark.parametrize(
    ("inner", "options"),
    [("gibbs", {"kernel": "torch"}), ("exact", {}), ("anneal", {"num_sweeps": 20, "kernel": "torch"})],
)
def test_bitwise_identical_for_one_and_two_workers_and_any_shard_size(clients, inner, options):
    p = problems()
    ref = get_sampler("sharded", sampler=inner, sampler_options=options, shard_size=12).sample(p, num_reads=50, seed=11)
    assert ref.spins.shape == (3, 4, 50, 4) and ref.info["shards"] == 1
    for workers, shard in [(1, 5), (2, 1), (2, 3), (2, 12)]:
        s = get_sampler("sharded", sampler=inner, sampler_options=options, client=clients[workers], shard_size=shard)
        ss = s.sample(p, num_reads=50, seed=11)
        same(ss, ref)
        assert ss.info["shards"] == -(-12 // shard) and ss.info["workers"] == workers
        assert ss.info["problem_seeds"] == spawn_seeds(11, 12)


def test_equals_the_unsharded_sampler_one_problem_per_seed(clients):
    """Problem i of the flattened batch is sampled alone with seed spawn_seeds(seed, B)[i]."""
    p = problems()
    opts = {"kernel": "torch"}
    s = get_sampler("sharded", sampler="gibbs", sampler_options=opts, client=clients[2], shard_size=5)
    ss = s.sample(p, num_reads=40, seed=3)
    inner = get_sampler("gibbs", **opts)
    flat, seeds = p.flatten(), spawn_seeds(3, 12)
    stacked = np.concatenate([inner.sample(flat[i : i + 1], num_reads=40, seed=seeds[i]).spins for i in range(12)])
    assert np.array_equal(ss.spins.reshape(12, 40, 4), stacked)


def test_exact_output_equals_the_unsharded_sampler(clients):
    """Same states, same probabilities to float64 rounding (the unsharded enumeration is vectorised over the whole
    batch, the sharded one over one problem at a time: the last bits of a sum may differ)."""
    p = problems()
    ref = get_sampler("exact").sample(p)
    ss = get_sampler("sharded", sampler="exact", client=clients[2], shard_size=5).sample(p)
    assert ss.exact and np.array_equal(ss.spins, ref.spins)
    np.testing.assert_allclose(ss.weights, ref.weights, rtol=1e-12, atol=0)
    np.testing.assert_allclose(
        get_sampler("sharded", sampler="exact", client=clients[2], shard_size=5).marginals(p).numpy(),
        get_sampler("exact").marginals(p).numpy(),
        rtol=0,
        atol=1e-12,
    )


def test_dqa_inner_sampler_matches_its_reference_output(clients):
    """A DQA sampler on the workers: shot marginals within 5 standard errors of the ideal circuit output."""
    from hybrid_attention.circuits import DQASchedule

    sched = DQASchedule(tau=1.0, steps=8)
    p = problems(batch=(6,), n=3, seed=4)
    s = get_sampler("sharded", sampler="statevector", sampler_options={"schedule": sched}, client=clients[2])
    assert s.capabilities.dqa and s.schedule == sched
    N = 4000
    m = s.sample(p, num_reads=N, seed=5).marginals()
    P = np.asarray(s.reference_probabilities(p))
    states = 1 - 2 * ((np.arange(8)[:, None] >> np.arange(3)) & 1)
    m_ref = P @ states
    m_ref = m_ref * p.mask.numpy()  # a masked spin's marginal is 0
    tol = 5 * np.sqrt(np.clip(1 - m_ref**2, 1e-12, None) / N)
    assert np.all(np.abs(m - m_ref) <= tol)


def test_a_scheduler_address_opens_a_client_of_its_own(dask_cluster):
    """How a command line reaches a cluster (``--sampler-option client=tcp://...``); close() closes that client."""
    p = problems()
    with get_sampler("sharded", sampler="exact", client=dask_cluster[0].scheduler_address, shard_size=5) as s:
        ss = s.sample(p, num_reads=30, seed=2)
        assert ss.info["workers"] == 2
    assert s.client.status == "closed" and dask_cluster[1].status == "running"
    ref = get_sampler("sharded", sampler="exact", shard_size=12).sample(p, num_reads=30, seed=2)
    same(ss, ref)


def test_bad_settings_are_refused_before_any_task():
    with pytest.raises(TypeError, match="client must be a distributed.Client"):
        get_sampler("sharded", client=object())
    with pytest.raises(ValueError, match="cannot be 'sharded'"):
        get_sampler("sharded", sampler="sharded")
    with pytest.raises(ValueError, match="unknown sampler"):
        get_sampler("sharded", sampler="nope")
    with pytest.raises(TypeError, match="does not accept"):
        get_sampler("sharded", sampler="gibbs", sampler_options={"bogus": 1})
    with pytest.raises(ValueError, match="shard_size"):
        get_sampler("sharded", shard_size=0)
