"""The Sampler interface every backend implements (close to dimod's ``Sampler`` and qiskit's primitives).

``sample(problem, *, num_reads=None, seed=None, **options)`` validates first (problem type, finiteness
is guaranteed by :class:`IsingProblem`, size against the backend's limit, unknown options) and only then
calls the one abstract method ``_sample``. Subclasses declare:

* ``name``: registry name;
* ``parameters``: ``{option: description}`` accepted per call (anything else raises ``TypeError``);
* ``properties``: static facts (``max_spins``, ``exact``, ``default_num_reads``, versions...).
"""

from __future__ import annotations

import abc
import functools
import logging
from typing import Any

import numpy as np
import torch

from hybrid_attention.ising import IsingProblem

from .sampleset import SampleSet

__all__ = ["Sampler", "SeedLike", "as_generator", "draw_states", "spawn_seeds", "state_bits"]

logger = logging.getLogger(__name__)

SeedLike = "int | numpy.random.Generator | None"


def as_generator(seed: Any) -> np.random.Generator:
    """``int | Generator | None`` to a ``numpy.random.Generator`` (never touches global state)."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return np.random.default_rng(seed)
    raise TypeError(f"seed must be an int, a numpy.random.Generator or None, got {type(seed).__name__}")


def spawn_seeds(seed: Any, k: int) -> list[int]:
    """``k`` independent 32-bit seeds for chunks (for simulators that take integer seeds), from ``seed``."""
    if isinstance(seed, np.random.Generator):
        return [int(x) for x in seed.integers(0, 2**31 - 1, size=k)]
    ss = np.random.SeedSequence(seed)
    return [int(c.generate_state(1)[0] & 0x7FFFFFFF) for c in ss.spawn(k)]


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
    def sample(self, problem: IsingProblem, *, num_reads: int | None = None, seed: Any = None, **options: Any) -> SampleSet:
        """Sample a batch of problems.

        Args:
            problem: an :class:`IsingProblem` with batch shape ``batch`` and ``n`` spins.
            num_reads: reads (shots) per problem; ``None`` means the backend default (or, for samplers with
                ``properties['exact']``, the exact output distribution over all ``2**n`` states).
            seed: ``int | numpy.random.Generator | None``; recorded in ``info['seed']``.
            **options: backend options listed in :attr:`parameters`.

        Returns:
            :class:`SampleSet` with spins ``(*batch, reads, n)``.
        """
        problem = self.validate(problem, num_reads=num_reads, seed=seed, options=options)
        return self._sample(problem.detach(), num_reads=num_reads, seed=seed, **options)

    def validate(self, problem: Any, *, num_reads: Any = None, seed: Any = None, options: dict | None = None) -> IsingProblem:
        """All checks that must happen before any compile, simulation or job submission."""
        if self._closed:
            raise RuntimeError(f"sampler {self.name!r} is closed")
        if not isinstance(problem, IsingProblem):
            raise TypeError(f"{self.name}: expected an IsingProblem, got {type(problem).__name__}")
        if num_reads is not None and (isinstance(num_reads, bool) or not isinstance(num_reads, (int, np.integer)) or num_reads < 1):
            raise ValueError(f"{self.name}: num_reads must be a positive integer or None, got {num_reads!r}")
        if seed is not None and not isinstance(seed, (int, np.integer, np.random.Generator)) or isinstance(seed, bool):
            raise TypeError(f"{self.name}: seed must be an int, a numpy.random.Generator or None, got {type(seed).__name__}")
        unknown = sorted(set(options or {}) - set(self.parameters))
        if unknown:
            raise TypeError(
                f"{self.name}.sample() got unknown option(s) {unknown}; accepted options: {sorted(self.parameters) or 'none'}"
            )
        limit = self.properties.get("max_spins")
        if limit is not None and problem.n > limit:
            raise ValueError(f"{self.name}: problem has n = {problem.n} spins, above this backend's limit of {limit}")
        return problem

    def marginals(self, problem: IsingProblem, **kwargs: Any) -> torch.Tensor:
        """``<s_j>`` of the sampler's output, ``(*batch, n)`` (float64 tensor; 0 for masked spins).

        Exact output marginals where the sampler computes probabilities, the weighted mean of its samples
        otherwise. Subclasses with a cheaper route override this.
        """
        ss = self.sample(problem, **kwargs)
        return torch.from_numpy(ss.marginals())

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
