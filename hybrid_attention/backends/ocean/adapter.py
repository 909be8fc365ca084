"""Our samplers as ``dimod.Sampler`` objects: :class:`DimodAdapter` (the reverse of :class:`~.ocean.DimodSampler`).

Any registered sampler (by name, with constructor options) or any :class:`~hybrid_attention.sampler.Sampler`
instance answers ``sample(bqm)``, ``sample_ising(h, J)`` and ``sample_qubo(Q)`` with a ``dimod.SampleSet`` over the
model's own labels and vartype, energies included (offset too), so it drops into Ocean code and passes dimod's
``dimod.testing`` checks. The model is read by :meth:`IsingProblem.from_bqm
<hybrid_attention.ising.IsingProblem.from_bqm>` (dimod's sign flipped, BINARY converted with ``x = (1 + s) / 2``)
and sampled at the inverse temperature ``beta`` of ``p(s) ∝ exp(-beta E_dimod(s))``.

Needs the ``ocean`` extra (``pip install 'hybrid-attention[ocean]'``).

Example:
    >>> import dimod
    >>> sampler = DimodAdapter("exact")
    >>> ss = sampler.sample_ising({"a": -1.0}, {("a", "b"): -0.5}, num_reads=20, seed=1, beta=2.0)
    >>> sorted(ss.variables), len(ss), ss.vartype is dimod.SPIN
    (['a', 'b'], 20, True)
"""

from __future__ import annotations

from typing import Any

import dimod
import numpy as np

from hybrid_attention.checks import positive_real
from hybrid_attention.ising import IsingProblem
from hybrid_attention.sampler import Sampler

from ..registry import get_sampler
from .convert import sampleset_to_dimod

__all__ = ["DimodAdapter"]

#: per-call parameters of every adapter (beyond the wrapped sampler's own ``parameters``)
_OWN = {
    "num_reads": "reads per model (default: the wrapped sampler's default_num_reads, or 1024)",
    "seed": "int | numpy.random.Generator | None",
    "beta": "inverse temperature of p(s) ∝ exp(-beta E_dimod(s)) (default 1)",
}


class DimodAdapter(dimod.Sampler):
    """A hybrid-attention sampler behind dimod's ``Sampler`` API.

    Args:
        sampler: a registry name (``"exact"``, ``"gibbs"``, ``"statevector"``...) or a
            :class:`~hybrid_attention.sampler.Sampler` instance.
        **options: constructor options when ``sampler`` is a name (as :func:`get_sampler`).

    ``parameters`` lists ``num_reads``, ``seed``, ``beta`` and the wrapped sampler's own per-call options;
    ``properties`` are the wrapped sampler's ``properties`` plus ``"sampler"`` (its registry name).
    DQA samplers sample their circuit's output (approximately Boltzmann at their effective beta, see their
    docs), not exactly at ``beta``.
    """

    def __init__(self, sampler: str | Sampler = "exact", **options: Any) -> None:
        if isinstance(sampler, str):
            sampler = get_sampler(sampler, **options)
        elif options:
            raise TypeError(f"constructor options {sorted(options)} only apply to a sampler given by name")
        if not isinstance(sampler, Sampler):
            raise TypeError(
                f"sampler must be a registry name or a hybrid-attention Sampler, got {type(sampler).__name__}"
            )
        self.child = sampler
        self._parameters = {k: [] for k in (*_OWN, *sampler.parameters)}
        self._properties = {"sampler": sampler.name, **sampler.properties}

    @property
    def parameters(self) -> dict[str, list]:
        return self._parameters

    @property
    def properties(self) -> dict[str, Any]:
        return self._properties

    def sample(
        self,
        bqm: dimod.BinaryQuadraticModel,
        *,
        num_reads: int | None = None,
        seed: Any = None,
        beta: float = 1.0,
        **options: Any,
    ) -> dimod.SampleSet:
        """Sample ``bqm`` (SPIN or BINARY, any labels) at inverse temperature ``beta``.

        Returns:
            ``dimod.SampleSet`` of ``num_reads`` rows over ``bqm.variables`` in ``bqm.vartype``, with dimod
            energies (offset included); ``info`` holds the wrapped sampler's run facts (backend, seed...).

        Raises:
            TypeError: unknown options (the wrapped sampler's ``TypeError``), not a BQM. ValueError: ``beta <= 0``.
        """
        if not isinstance(bqm, dimod.BinaryQuadraticModel):
            raise TypeError(f"expected a dimod.BinaryQuadraticModel, got {type(bqm).__name__}")
        beta = positive_real(beta, "beta")
        if num_reads is None:
            num_reads = self.child.default_num_reads or 1024
        if bqm.num_variables == 0:  # nothing to sample: num_reads empty configurations at the offset
            self.child.validate(IsingProblem([0.0]), num_reads=num_reads, seed=seed, options=options)
            empty = np.zeros((num_reads, 0), dtype=np.int8)
            return dimod.SampleSet.from_samples_bqm((empty, []), bqm, info={"backend": self.child.name})
        problem = IsingProblem.from_bqm(bqm, beta=beta)
        ss = self.child.sample(problem, num_reads=num_reads, seed=seed, **options)
        return sampleset_to_dimod(ss, bqm=bqm)
