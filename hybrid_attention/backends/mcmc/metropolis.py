"""Metropolis samplers with Layden et al.'s classical proposals: ``mh-local`` and ``mh-uniform``.

The classical baselines of quantum-enhanced MCMC (Layden et al., Nature 619, 282 (2023)): the one Metropolis chain
(:class:`~.chain.MetropolisChain`, which ``qemcmc`` runs with its quantum proposal: acceptance ``min(1, exp(-beta (E(s') - E(s))))``, chains, burn-in, thinning,
starts, persistent ``initial_state``, diagnostics in ``SampleSet.info``), with the quantum proposal replaced by

* ``mh-local`` (:class:`LocalMetropolisSampler`): flip one of the ``n`` spins, chosen uniformly
  (``Q[s, s^j] = 1/n``; masked spins are free and count among the ``n``);
* ``mh-uniform`` (:class:`UniformMetropolisSampler`): any of the ``2**n`` configurations, the current one included,
  uniformly (``Q[s, s'] = 2**-n``).

Both proposals are symmetric, so each chain's stationary distribution is exactly the Boltzmann distribution at the
problem's ``beta``; the exact transition matrices are :func:`.mcmc.metropolis_matrix` of :func:`.mcmc.local_proposal`
and :func:`.mcmc.uniform_proposal` (``tests/backends/test_metropolis.py`` checks the sampled chains against them).
One *move* is one proposal and one energy difference; ``info["proposals"]`` counts them (chains x moves per problem)
and ``info["circuit_executions"]`` is 0. The energies come from a table of all ``2**n`` configurations, so ``n`` is
limited like the ``qemcmc`` statevector engine's (16 by default).

Example:
    >>> import torch
    >>> from hybrid_attention import IsingProblem
    >>> ss = LocalMetropolisSampler().sample(IsingProblem(torch.tensor([[0.5, -0.3]])), num_reads=2000, seed=0)
    >>> ss.spins.shape, abs(float(ss.marginals()[0, 0]) - 0.4621) < 0.12   # tanh(0.5)
    ((1, 2000, 2), True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .chain import ChainSchedule, MetropolisChain

__all__ = ["MetropolisSampler", "LocalMetropolisSampler", "UniformMetropolisSampler", "PROPOSALS"]

#: the classical proposal kinds
PROPOSALS = ("local", "uniform")
#: the classical chains' default schedule: 512 moves of burn-in (a move flips at most one spin)
_DEFAULT_CHAIN = ChainSchedule(burn_in=512)


class _ClassicalProposals:
    """``propose(cur (N, C), gamma, t, rng) -> (N, C)`` for a classical proposal on ``n`` spins (gamma, t unused)."""

    def __init__(self, proposal: str, n: int) -> None:
        self.proposal, self.n = proposal, n

    def propose(self, cur: np.ndarray, gamma: float, t: float, rng: np.random.Generator) -> np.ndarray:
        if self.proposal == "local":
            return cur ^ (np.int64(1) << rng.integers(0, self.n, size=cur.shape))
        return rng.integers(0, 1 << self.n, size=cur.shape)


class MetropolisSampler(MetropolisChain):
    """Metropolis chains with a classical symmetric proposal (module docstring).

    Args:
        proposal: ``"local"`` (one uniformly chosen spin flipped) or ``"uniform"`` (a uniformly random configuration).
        chain: the :class:`~.chain.ChainSchedule` (default: burn-in 512 moves, thinning 1, random start, one chain
            per read; one move is one proposal, so for ``"local"`` a sweep of ``n`` spins is ``n`` moves). The
            registry also takes its fields as flat options (``get_sampler("mh-local", burn_in=64)``).
        num_reads, memory_limit, max_spins: as :class:`~.chain.MetropolisChain` (max_spins default 16).

    Per-call options: ``burn_in``, ``thinning``, ``num_chains``, ``start``, ``initial_state``.
    """

    name = "metropolis"

    def __init__(
        self,
        *,
        proposal: str = "local",
        chain: ChainSchedule = _DEFAULT_CHAIN,
        num_reads: int = 256,
        memory_limit: int = 64 << 20,
        max_spins: int | None = None,
    ) -> None:
        if proposal not in PROPOSALS:
            raise ValueError(f"metropolis: proposal must be one of {PROPOSALS}, got {proposal!r}")
        super().__init__(
            chain=chain,
            num_reads=num_reads,
            memory_limit=memory_limit,
            max_spins=16 if max_spins is None else max_spins,
        )
        self.proposal = proposal

    @property
    def properties(self) -> dict[str, Any]:
        return {**super().properties, "proposal": self.proposal}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(proposal={self.proposal!r}, burn_in={self.burn_in})"

    def _proposal_engine(self, E, h, J, mask, alpha, params, mode):  # noqa: ANN001, ANN202 (internal)
        return _ClassicalProposals(self.proposal, int(h.shape[-1]))


class _FixedProposalSampler(MetropolisSampler):
    """:class:`MetropolisSampler` with its proposal fixed by the class (``PROPOSAL``): the options of the registered
    ``mh-*`` samplers, without ``proposal``."""

    PROPOSAL = "local"

    def __init__(
        self,
        *,
        chain: ChainSchedule = _DEFAULT_CHAIN,
        num_reads: int = 256,
        memory_limit: int = 64 << 20,
        max_spins: int | None = None,
    ) -> None:
        super().__init__(
            proposal=self.PROPOSAL,
            chain=chain,
            num_reads=num_reads,
            memory_limit=memory_limit,
            max_spins=max_spins,
        )


class LocalMetropolisSampler(_FixedProposalSampler):
    """``mh-local``: :class:`MetropolisSampler` with ``proposal="local"`` (single-spin-flip Metropolis)."""

    name = "mh-local"
    PROPOSAL = "local"


class UniformMetropolisSampler(_FixedProposalSampler):
    """``mh-uniform``: :class:`MetropolisSampler` with ``proposal="uniform"`` (uniformly random configurations)."""

    name = "mh-uniform"
    PROPOSAL = "uniform"
