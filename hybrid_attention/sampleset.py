"""SampleSet: what every sampler returns (spins, weights, energies, statistics, run info).

Close to dimod's ``SampleSet`` but batched: one SampleSet holds the reads of a whole batch of problems.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from hybrid_attention.ising import IsingProblem, spins_to_bits, spins_to_index

__all__ = ["SampleSet"]


@dataclass
class SampleSet:
    """Reads of a batch of Ising problems.

    Attributes:
        spins: int8 ±1 array ``(*batch, reads, n)``; column ``j`` is spin ``j``. Masked (dropped) spins are
            present as free ±1 values; :meth:`marginals` and :meth:`correlations` report them as 0.
        weights: float64 ``(*batch, reads)`` summing to 1 per problem: exact probabilities for enumerating or
            statevector samplers, ``1 / reads`` (or counts / shots) for samples.
        problem: the (detached) :class:`IsingProblem` these reads belong to.
        info: run facts: ``backend``, ``num_reads``/``shots``, ``seed``, ``depth``, ``job_ids``, ``timing``...
        exact: True when ``weights`` are exact output probabilities of the sampler (not shot frequencies).
    """

    spins: np.ndarray
    weights: np.ndarray
    problem: IsingProblem
    info: dict[str, Any] = field(default_factory=dict)
    exact: bool = False

    def __post_init__(self) -> None:
        self.spins = np.asarray(self.spins, dtype=np.int8)
        self.weights = np.asarray(self.weights, dtype=np.float64)
        bs = tuple(self.problem.batch_shape)
        if (
            self.spins.ndim != len(bs) + 2
            or self.spins.shape[: len(bs)] != bs
            or self.spins.shape[-1] != self.problem.n
        ):
            raise ValueError(
                f"spins must have shape (*batch, reads, n) = ({bs}, reads, {self.problem.n}), got {self.spins.shape}"
            )
        if self.weights.shape != self.spins.shape[:-1]:
            raise ValueError(f"weights must have shape {self.spins.shape[:-1]}, got {self.weights.shape}")

    # ------------------------------------------------------------------ shapes
    @property
    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.problem.batch_shape)

    @property
    def num_reads(self) -> int:
        return int(self.spins.shape[-2])

    @property
    def n(self) -> int:
        return int(self.spins.shape[-1])

    @property
    def energies(self) -> np.ndarray:
        """Energies ``E(s)`` of every read, ``(*batch, reads)`` float64 (computed on first use)."""
        if "_energies" not in self.info:
            s = torch.from_numpy(self.spins.astype(np.float64))
            p = self.problem.to(torch.float64)
            self.info["_energies"] = p.energy(s).numpy()
        return self.info["_energies"]

    def _mask(self) -> np.ndarray | None:
        m = self.problem.mask
        return None if m is None else m.cpu().numpy()

    # ------------------------------------------------------------------ statistics
    def marginals(self) -> np.ndarray:
        """Weighted ``<s_j>``, ``(*batch, n)``; 0 for masked spins."""
        m = np.einsum("...r,...rj->...j", self.weights, self.spins.astype(np.float64))
        mk = self._mask()
        return m if mk is None else m * mk

    def correlations(self) -> np.ndarray:
        """Weighted ``<s_j s_k>``, ``(*batch, n, n)``; rows/columns of masked spins are 0."""
        s = self.spins.astype(np.float64)
        c = np.einsum("...r,...rj,...rk->...jk", self.weights, s, s)
        mk = self._mask()
        return c if mk is None else c * mk[..., :, None] * mk[..., None, :]

    def probabilities(self) -> np.ndarray:
        """Empirical (or exact) distribution over the ``2**n`` configurations, ``(*batch, 2**n)``, indexed
        ``c = sum_j b_j 2**j`` like :func:`hybrid_attention.exact.probabilities`."""
        if self.n > 24:
            raise ValueError(f"probabilities() over 2**{self.n} configurations is too large; use marginals()")
        idx = spins_to_index(self.spins).reshape(-1, self.num_reads)
        w = self.weights.reshape(-1, self.num_reads)
        out = np.zeros((idx.shape[0], 1 << self.n))
        for r in range(idx.shape[0]):
            np.add.at(out[r], idx[r], w[r])
        return out.reshape(*self.batch_shape, 1 << self.n)

    def counts(self, index: tuple[int, ...] = ()) -> dict[str, float]:
        """Display form for one problem: ``{bitstring: weight}`` with qubit 0 rightmost (qiskit's order)."""
        sp = self.spins[index] if index else self.spins
        w = self.weights[index] if index else self.weights
        if sp.ndim != 2:
            raise ValueError(f"counts() needs one problem; pass index= for batch shape {self.batch_shape}")
        out: dict[str, float] = {}
        for bits, wt in zip(spins_to_bits(sp)[:, ::-1], w):
            key = "".join(map(str, bits))
            out[key] = out.get(key, 0.0) + float(wt)
        return out

    def __repr__(self) -> str:
        return (
            f"SampleSet(backend={self.info.get('backend')!r}, batch={self.batch_shape}, reads={self.num_reads}, "
            f"n={self.n}, exact={self.exact})"
        )
