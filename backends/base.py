"""The Sampler interface every backend implements (close to dimod's ``Sampler`` and qiskit's primitives).

``sample(problem, *, num_reads=None, seed=None, **options)`` and ``marginals(...)`` (same arguments) validate
first (problem type, finiteness is guaranteed by :class:`IsingProblem`, ``num_reads`` and ``seed`` by
:mod:`hybrid_attention.checks`, size against the backend's limit, unknown options, the estimated memory of the
result) and only then call the abstract ``_sample`` (and the ``_marginals`` hook). An empty batch (a batch shape
with a zero) never reaches a backend: it gets an empty :class:`SampleSet` / empty marginals of the right shapes
here, for every sampler, third-party ones included. Subclasses declare:

* ``name``: registry name;
* ``parameters``: ``{option: description}`` accepted per call (anything else raises ``TypeError``);
* ``properties``: static facts (``max_spins``, ``exact``, ``default_num_reads``, versions...).

``as_generator``, ``spawn_seeds`` and ``SeedLike`` are re-exported from :mod:`hybrid_attention.checks`, which owns them.
"""

from __future__ import annotations

import abc
import functools
import logging
from typing import Any

import numpy as np
import torch

from hybrid_attention import checks
from hybrid_attention.checks import SeedLike, as_generator, spawn_seeds
from hybrid_attention.ising import IsingProblem

from .sampleset import SampleSet

__all__ = ["Sampler", "SeedLike", "as_generator", "draw_states", "spawn_seeds", "state_bits"]

logger = logging.getLogger(__name__)

def draw_states(p: Any, shots: int, rng: np.random.Generator) -> np.ndarray:
    """Draw ``shots`` basis-state indices per row of a probability table (inverse-CDF sampling).

    Args:
        p: ``(B, 2**n)`` probabilities (numpy or torch, any float dtype; each row is renormalised in float64).
        shots: draws per row.
        rng: the generator (``B * shots`` uniforms are taken from it, row-major).

    Returns:
        ``(B, shots)`` int64 indices ``c = sum_j b_j 2**j``.
    """
    p = torch.as_tensor(p).detach().to("cpu", torch.float64)
    cdf = torch.cumsum(p, dim=-1)
    cdf = cdf / cdf[:, -1:]
    u = torch.from_numpy(rng.random((p.shape[0], int(shots))))
    return torch.searchsorted(cdf, u).clamp_(max=p.shape[-1] - 1).numpy()


@functools.lru_cache(maxsize=32)
def _bit_table(n: int) -> np.ndarray:
    table = ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1).astype(bool)
    table.flags.writeable = False
    return table


def state_bits(idx: np.ndarray, n: int) -> np.ndarray:
    """Bits of basis-state indices, ``idx (...)`` -> bool ``(..., n)`` with column ``j`` = bit ``j`` of
    ``c = sum_j b_j 2**j`` (a table lookup: ~10x cheaper than shifting the int64 indices)."""
    return _bit_table(n)[idx]


class Sampler(abc.ABC):
    """Base class: validates, then delegates to :meth:`_sample`. Use as a context manager to release
    resources (IBM sessions) with :meth:`close`."""

    name: str = "sampler"
    #: per-call options accepted by :meth:`sample` (beyond ``num_reads`` and ``seed``), with descriptions
    parameters: dict[str, str] = {}

    def __init__(self) -> None:
        self._closed = False

    @property
    def properties(self) -> dict[str, Any]:
        """Static facts: ``max_spins`` (int or None), ``exact`` (returns probabilities), ``default_num_reads``."""
        return {"max_spins": None, "exact": False, "default_num_reads": 1024}

    # ------------------------------------------------------------------ public API
    def sample(self, problem: IsingProblem, *, num_reads: int | None = None, seed: SeedLike = None,
               **options: Any) -> SampleSet:
        """Sample a batch of problems.

        Args:
            problem: an :class:`IsingProblem` with batch shape ``batch`` and ``n`` spins.
            num_reads: reads (shots) per problem, a positive int; ``None`` means the backend default (or, for
                samplers with ``properties['exact']``, the exact output distribution over all ``2**n`` states).
            seed: ``int | numpy.random.Generator | numpy.random.SeedSequence | None``; recorded in ``info['seed']``.
            **options: backend options listed in :attr:`parameters`.

        Returns:
            :class:`SampleSet` with spins ``(*batch, reads, n)`` (``reads = 0`` problems when ``batch`` is empty).

        Raises:
            TypeError: not an :class:`IsingProblem`, a non-integer ``num_reads``, a float or bool ``seed``, an
                unknown option.
            ValueError: ``num_reads < 1``, more spins than the backend's limit, an output of more than
                :data:`hybrid_attention.checks.MEMORY_BUDGET` bytes (estimated as ``batch * reads * (n + 8)``: int8
                spins and float64 weights).
        """
        problem = self.validate(problem, num_reads=num_reads, seed=seed, options=options)
        reads = self._output_reads(problem, num_reads)
        self._check_output_size(problem, reads)
        if problem.h.numel() == 0:
            exact = num_reads is None and bool(self.properties.get("exact"))
            return self._empty_sampleset(problem, reads, seed, exact=exact)
        return self._sample(problem.detach(), num_reads=num_reads, seed=seed, **options)

    def validate(self, problem: Any, *, num_reads: Any = None, seed: Any = None, options: dict | None = None) -> IsingProblem:
        """All checks that must happen before any compile, simulation or job submission."""
        if self._closed:
            raise RuntimeError(f"sampler {self.name!r} is closed")
        if not isinstance(problem, IsingProblem):
            raise TypeError(f"{self.name}: expected an IsingProblem, got {type(problem).__name__}")
        try:
            checks.check_num_reads(num_reads)
            checks.check_seed(seed)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{self.name}: {exc}") from None
        unknown = sorted(set(options or {}) - set(self.parameters))
        if unknown:
            raise TypeError(
                f"{self.name}.sample() got unknown option(s) {unknown}; accepted options: {sorted(self.parameters) or 'none'}"
            )
        limit = self.properties.get("max_spins")
        if limit is not None and problem.n > limit:
            raise ValueError(f"{self.name}: problem has n = {problem.n} spins, above this backend's limit of {limit}")
        return problem

    def marginals(self, problem: IsingProblem, *, num_reads: int | None = None, seed: SeedLike = None,
                  **options: Any) -> torch.Tensor:
        """``<s_j>`` of the sampler's output, ``(*batch, n)`` (float64 tensor; 0 for masked spins).

        Takes the arguments of :meth:`sample` on every sampler. ``num_reads=None`` gives the exact marginals of the
        sampler's output where the sampler computes them (exact enumeration, the statevector simulators, mean
        field; ``seed`` is then unused) and the weighted mean of the default number of reads otherwise; a given
        ``num_reads`` always gives the mean of that many reads. Subclasses with a cheaper route override
        :meth:`_marginals`, not this method. An empty batch gives an empty ``(*batch, n)`` tensor.
        """
        problem = self.validate(problem, num_reads=num_reads, seed=seed, options=options)
        if problem.h.numel() == 0:
            return torch.zeros(*problem.batch_shape, problem.n, dtype=torch.float64)
        return self._marginals(problem, num_reads=num_reads, seed=seed, **options)

    def _marginals(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> torch.Tensor:
        """Marginals of a validated, non-empty problem: by default the weighted mean of :meth:`sample`'s reads."""
        reads = self._output_reads(problem, num_reads)
        self._check_output_size(problem, reads)
        ss = self._sample(problem.detach(), num_reads=num_reads, seed=seed, **options)
        return torch.from_numpy(ss.marginals())

    # ------------------------------------------------------------------ shared helpers
    def _output_reads(self, problem: IsingProblem, num_reads: int | None) -> int:
        """Reads per problem of :meth:`sample`'s output: ``num_reads``, else ``2**n`` for exact-output samplers, else
        the backend's ``default_num_reads``."""
        if num_reads is not None:
            return int(num_reads)
        props = self.properties
        default = props.get("default_num_reads")
        if default is None or props.get("exact"):
            return 1 << problem.n
        return int(default)

    def _check_output_size(self, problem: IsingProblem, reads: int) -> None:
        """Refuse (``ValueError``) a SampleSet larger than the memory budget, before any work."""
        rows = problem.h.numel() // problem.n
        checks.check_memory(float(rows) * reads * (problem.n + 8),
                            f"{self.name}: a SampleSet of {rows} problem(s) x {reads} reads x n = {problem.n} spins "
                            "(batch * reads * (n + 8) bytes: int8 spins, float64 weights)",
                            hint="ask for fewer reads per call, or split the batch")

    def _empty_sampleset(self, problem: IsingProblem, reads: int, seed: Any, *, exact: bool) -> SampleSet:
        """The result for an empty batch: spins ``(*batch, reads, n)`` and weights ``(*batch, reads)`` with no rows."""
        bs, n = tuple(problem.batch_shape), problem.n
        info = {"backend": self.name, "num_reads": reads, "seed": checks.describe_seed(seed)}
        spins = np.zeros((*bs, reads, n), dtype=np.int8)
        return SampleSet(spins, np.zeros((*bs, reads)), problem.detach(), info, exact=exact)

    @abc.abstractmethod
    def _sample(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> SampleSet:
        """Backend work on a validated, detached problem."""

    # ------------------------------------------------------------------ resources
    def close(self) -> None:
        """Release resources (sessions, pools). Idempotent."""
        self._closed = True

    def __enter__(self) -> "Sampler":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
