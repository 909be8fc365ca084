"""A sampler wrapper that shards a batch of problems across Dask workers: :class:`ShardedSampler`.

Any registered sampler (by name and constructor options) runs on the workers; the batch is cut into shards of
``shard_size`` problems, one task per shard. Each problem ``i`` of the flattened batch is sampled on its own with
the seed ``spawn_seeds(seed, B)[i]`` (:func:`hybrid_attention.checks.spawn_seeds`), so its reads depend only on the
problem and that seed: the :class:`SampleSet` is bitwise identical for any number of workers and any
``shard_size``, and equal to stacking ``inner.sample(problem[i:i+1], seed=seeds[i])`` over ``i``. For an
exact-output sampler at ``num_reads=None`` it is the unsharded sampler's result (the same states; probabilities equal
to float64 rounding, since the unsharded call vectorises over the whole batch).

``client=None`` runs the shards in this process (the reference the distributed runs are compared with, and what
the conformance suite checks); a ``distributed.Client`` runs them on its cluster, where each worker process builds
the inner sampler once and keeps it for later shards. Nothing here imports Dask.

Example:
    >>> import torch
    >>> from hybrid_attention import IsingProblem
    >>> from hybrid_attention.backends import get_sampler
    >>> s = get_sampler("sharded", sampler="gibbs", shard_size=2)  # client=None: shards run here
    >>> p = IsingProblem(torch.randn(5, 3))
    >>> ss = s.sample(p, num_reads=64, seed=3)
    >>> ss.spins.shape, ss.info["shards"]
    ((5, 64, 3), 3)
    >>> bool((get_sampler("sharded", sampler="gibbs", shard_size=5).sample(p, num_reads=64, seed=3).spins == ss.spins).all())
    True
"""

from __future__ import annotations

import pickle
import time
from typing import Any

import numpy as np

from hybrid_attention.checks import check_positive_int, describe_seed, spawn_seeds
from hybrid_attention.ising import IsingProblem
from hybrid_attention.sampler import Sampler, SamplerCapabilities
from hybrid_attention.sampleset import SampleSet

__all__ = ["ShardedSampler", "sample_shard"]

#: per worker process: (sampler name, pickled options) -> the inner sampler built there
_WORKER_SAMPLERS: dict[tuple[str, bytes], Sampler] = {}


def _inner(name: str, blob: bytes) -> Sampler:
    key = (name, blob)
    if key not in _WORKER_SAMPLERS:
        from .registry import get_sampler

        _WORKER_SAMPLERS[key] = get_sampler(name, **pickle.loads(blob))
    return _WORKER_SAMPLERS[key]


def sample_shard(
    sampler: Sampler | tuple[str, bytes],
    problem: IsingProblem,
    seeds: list[Any],
    num_reads: int | None,
    options: dict[str, Any],
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Sample each problem of a flat shard ``(C,)`` on its own with its seed: ``(spins (C, reads, n) int8,
    weights (C, reads) float64, exact)``. ``sampler``: an instance, or ``(name, pickled options)`` (built once per
    worker process)."""
    s = _inner(*sampler) if isinstance(sampler, tuple) else sampler
    spins, weights, exact = [], [], []
    for i in range(problem.batch_shape[0]):
        ss = s.sample(problem[i : i + 1], num_reads=num_reads, seed=seeds[i], **options)
        spins.append(ss.spins)
        weights.append(ss.weights)
        exact.append(bool(ss.exact))
    return np.concatenate(spins), np.concatenate(weights), all(exact)


class ShardedSampler(Sampler):
    """Shard a batch across Dask workers (or run the shards here), one seed per problem.

    Args:
        sampler: registry name of the inner sampler (any registered one).
        sampler_options: its constructor options (picklable: they travel to the workers).
        client: a ``distributed.Client`` (or anything with ``submit(fn, *args) -> future`` and
            ``gather(futures)``); or a scheduler address such as ``"tcp://host:8786"``, to which the sampler opens
            a client of its own (closed by :meth:`close`; this is how a command line reaches a cluster, e.g.
            ``hybrid-attention train --sampler sharded --sampler-option client=tcp://host:8786``); ``None``: run
            the shards in this process.
        shard_size: problems per task.

    The capabilities (``exact_output``, ``dqa``, ``approximate``, ``needs_circuit``; not ``differentiable``: the
    shards return samples), ``max_spins``, per-call ``parameters`` and ``default_num_reads``
    are the inner sampler's; a DQA inner sampler's ``schedule``, ``effective_beta`` and
    ``reference_probabilities`` are available here too. ``info`` records ``sampler``, ``problem_seeds``,
    ``shards`` and ``workers``.
    """

    name = "sharded"

    def __init__(
        self,
        *,
        sampler: str = "exact",
        sampler_options: dict[str, Any] | None = None,
        client: Any = None,
        shard_size: int = 64,
    ) -> None:
        super().__init__()
        from .registry import get_sampler

        if sampler == self.name:
            raise ValueError("sharded: the inner sampler cannot be 'sharded' itself")
        opts = dict(sampler_options or {})
        self.inner_name = sampler
        self.inner = get_sampler(sampler, **opts)  # validates name and options here, before any task
        self.shard_size = check_positive_int(shard_size, "sharded: shard_size")
        self._own_client = isinstance(client, str)
        if self._own_client:
            if not client.strip():
                raise ValueError("sharded: client must be a scheduler address such as 'tcp://host:8786', got ''")
            try:
                from distributed import Client
            except ImportError as exc:
                raise ImportError(
                    "sharded: a scheduler address needs the 'distributed' package; run: "
                    "pip install 'hybrid-attention[dask]'"
                ) from exc
            client = Client(client, timeout=30)
        elif client is not None and not (hasattr(client, "submit") and hasattr(client, "gather")):
            raise TypeError(
                f"sharded: client must be a distributed.Client (submit, gather), got {type(client).__name__}"
            )
        self.client = client
        try:
            self._blob = pickle.dumps(opts)
        except Exception as exc:  # noqa: BLE001 - any pickling failure means the options cannot reach a worker
            raise TypeError(f"sharded: sampler_options must be picklable to reach the workers ({exc})") from exc
        self.parameters = dict(self.inner.parameters)
        self.default_num_reads = self.inner.default_num_reads
        c = self.inner.capabilities  # a wrapper: its instance declares what its inner sampler's output is
        self.capabilities = SamplerCapabilities(
            exact_output=c.exact_output, dqa=c.dqa, approximate=c.approximate, needs_circuit=c.needs_circuit
        )

    @property
    def max_spins(self) -> int | None:  # type: ignore[override]
        return self.inner.max_spins

    # a DQA inner sampler's read-outs, for the bridge and the conformance suite (capabilities.dqa)
    @property
    def schedule(self) -> Any:
        return self.inner.schedule

    def effective_beta(self, *args: Any, **kw: Any) -> Any:
        return self.inner.effective_beta(*args, **kw)

    def reference_probabilities(self, problem: IsingProblem) -> Any:
        return self.inner.reference_probabilities(problem)

    def _sample(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> SampleSet:
        flat = problem.flatten()
        B = flat.batch_shape[0]
        seeds = spawn_seeds(seed, B)
        bounds = [(a, min(a + self.shard_size, B)) for a in range(0, B, self.shard_size)]
        t0 = time.perf_counter()
        if self.client is None:
            parts = [sample_shard(self.inner, flat[a:b], seeds[a:b], num_reads, options) for a, b in bounds]
            workers = 0
        else:
            spec = (self.inner_name, self._blob)
            futures = [
                self.client.submit(sample_shard, spec, flat[a:b], seeds[a:b], num_reads, options, pure=False)
                for a, b in bounds
            ]
            parts = self.client.gather(futures)
            workers = len(self.client.nthreads()) if hasattr(self.client, "nthreads") else None
        spins = np.concatenate([p[0] for p in parts])
        weights = np.concatenate([p[1] for p in parts])
        reads = spins.shape[1]
        info = {
            "backend": self.name,
            "sampler": self.inner_name,
            "num_reads": reads,
            "seed": describe_seed(seed),
            "problem_seeds": seeds,
            "shards": len(bounds),
            "shard_size": self.shard_size,
            "workers": workers,
            "timing": {"run": time.perf_counter() - t0},
        }
        return SampleSet(
            spins.reshape(*problem.batch_shape, reads, problem.n),
            weights.reshape(*problem.batch_shape, reads),
            problem,
            info,
            exact=all(p[2] for p in parts),
        )

    def close(self) -> None:
        """Close the inner sampler, and the client if this sampler opened it (a client passed in belongs to the caller
        and stays open)."""
        if self._own_client and self.client is not None:
            self.client.close()
        self.inner.close()
        super().close()

    def __repr__(self) -> str:
        where = "local" if self.client is None else "dask"
        return f"ShardedSampler(sampler={self.inner_name!r}, shard_size={self.shard_size}, {where})"
