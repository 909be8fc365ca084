"""The exact sampler: enumeration as a backend (the reference every conformance test compares with)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from hybrid_attention import exact as _exact
from hybrid_attention.checks import as_generator, describe_seed
from hybrid_attention.ising import IsingProblem
from hybrid_attention.sampler import Sampler, SamplerCapabilities
from hybrid_attention.sampleset import SampleSet

__all__ = ["ExactSampler"]


class ExactSampler(Sampler):
    """Exact Boltzmann distribution by enumeration (like dimod's ``ExactSolver``).

    ``num_reads=None`` returns all ``2**n`` configurations with their exact probabilities as weights
    (``SampleSet.exact`` is True); ``num_reads=N`` draws ``N`` exact samples with weights ``1/N``.

    Args:
        max_spins: enumeration limit (default :data:`hybrid_attention.exact.MAX_SPINS`).
    """

    name = "exact"
    capabilities = SamplerCapabilities(differentiable=True, exact_output=True)
    parameters: dict[str, str] = {}
    default_num_reads = None

    def __init__(self, *, max_spins: int | None = None) -> None:
        super().__init__()
        self.max_spins = _exact.MAX_SPINS if max_spins is None else int(max_spins)

    def _sample(self, problem: IsingProblem, *, num_reads: int | None, seed: Any) -> SampleSet:
        n = problem.n
        info: dict[str, Any] = {"backend": self.name, "seed": describe_seed(seed)}
        if num_reads is None:
            p = _exact.probabilities(problem.to(torch.float64), max_spins=self.max_spins).numpy()
            S = _exact.enumerate_states(n, dtype=torch.float64).numpy().astype(np.int8)
            spins = np.broadcast_to(S, (*problem.batch_shape, 1 << n, n)).copy()
            info["num_reads"] = 1 << n
            return SampleSet(spins, p, problem, info, exact=True)
        rng = as_generator(seed)
        spins = _exact.sample(problem, int(num_reads), rng, max_spins=self.max_spins).numpy()
        w = np.full(spins.shape[:-1], 1.0 / num_reads)
        info["num_reads"] = int(num_reads)
        return SampleSet(spins, w, problem, info)

    def _marginals(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> torch.Tensor:
        """Exact marginals straight from enumeration (no SampleSet), float64; the mean of ``num_reads`` exact samples
        when ``num_reads`` is given."""
        if num_reads is not None:
            return super()._marginals(problem, num_reads=num_reads, seed=seed, **options)
        return _exact.marginals(problem.detach().to(torch.float64), max_spins=self.max_spins)

    def differentiable_marginals(self, problem: IsingProblem) -> torch.Tensor:
        """Exact marginals ``(*batch, n)`` keeping the autograd graph of ``problem`` (used by
        :func:`hybrid_attention.bridge.attention_marginals`: exact gradients w.r.t. ``h``, ``J``, ``beta``)."""
        self.validate(problem)
        return _exact.marginals(problem, max_spins=self.max_spins)
