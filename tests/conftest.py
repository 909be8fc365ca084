"""Shared fixtures: a float64 brute-force Ising oracle (itertools over configurations) and random problems."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import settings

# No per-example deadline: a shared or slower CI machine must not turn timing into failures. Set HYPOTHESIS_PROFILE=ci
# for a derandomised run (the same examples on every machine).
settings.register_profile("default", deadline=None, print_blob=True)
settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

REPO = Path(__file__).resolve().parents[1]
SHAKESPEARE = Path(os.environ.get("HYBRID_ATTENTION_DATA", REPO.parent / "shared" / "data" / "tinyshakespeare.txt"))


def brute_force(h, J, beta=1.0, mask=None):
    """Float64 brute force for ONE problem: returns (logZ, m (n,), C (n, n)), masked spins dropped (0 rows)."""
    h = np.asarray(h, dtype=np.float64)
    J = np.asarray(J, dtype=np.float64)
    n = h.shape[0]
    act = [j for j in range(n) if mask is None or bool(mask[j])]
    logw, states = [], []
    for conf in itertools.product([1.0, -1.0], repeat=len(act)):
        s = np.zeros(n)
        s[act] = conf
        e = -(h @ s) - sum(J[j, k] * s[j] * s[k] for j in range(n) for k in range(j + 1, n))
        logw.append(-beta * e)
        states.append(s)
    logw = np.array(logw)
    states = np.array(states)
    mx = logw.max()
    w = np.exp(logw - mx)
    Z = w.sum()
    p = w / Z
    m = p @ states
    C = np.einsum("c,cj,ck->jk", p, states, states)
    return mx + np.log(Z), m, C


def random_couplings(rng, n, scale=1.0, batch=()):
    J = rng.normal(scale=scale, size=(*batch, n, n))
    J = np.triu(J, 1)
    return J + np.swapaxes(J, -1, -2)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(scope="session")
def shakespeare_path() -> Path:
    if not SHAKESPEARE.exists():
        pytest.skip(f"Tiny Shakespeare not found at {SHAKESPEARE}")
    return SHAKESPEARE


def to_t(x, dtype=torch.float64):
    return torch.as_tensor(np.asarray(x), dtype=dtype)


@pytest.fixture
def one_thread():
    """Small tensors: one thread is fastest and does not fight other processes for the cores."""
    from hybrid_attention.backends.parallel import intra_op_threads

    with intra_op_threads(1):
        yield


@pytest.fixture(scope="session")
def dask_cluster():
    """``(LocalCluster, Client)``: 2 single-threaded worker processes shared by the Dask tests (started on first
    use, skipped without ``distributed``); tests must not kill or rescale its workers."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=40
    )
    client = distributed.Client(cluster)
    yield cluster, client
    client.close()
    cluster.close()
