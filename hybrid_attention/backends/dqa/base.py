"""The DQA base shared by every sampler of the Trotterized anneal: statevector, aer, pennylane, ibm.

:class:`DQASampler` owns what they have in common:

* the :class:`~hybrid_attention.circuits.schedule.DQASchedule` (default :data:`DEFAULT_SCHEDULE`), checked once;
* ``capabilities.dqa`` and :meth:`DQASampler.effective_beta`, the leading-order inverse temperatures
  ``(beta_h, beta_J)`` of the output (:mod:`hybrid_attention.circuits.temperature`), which the bridge uses for its
  Boltzmann-surrogate gradients;
* the ideal circuit's exact output: :meth:`DQASampler.reference_probabilities` (the numpy reference of
  :mod:`hybrid_attention.circuits.reference`), and the read-outs of any exact output table ``p (B, 2**n)``:
  :func:`hybrid_attention.exact.table_marginals`, :meth:`DQASampler._exact_sampleset` (all states weighted by ``p``) and
  :meth:`DQASampler._shots_sampleset` (``num_reads`` shots drawn from ``p``).

Every DQA program encodes ``beta * H_P``: the problem's ``beta`` scales ``h`` and ``J`` inside the circuit. The
circuit machinery (templates, bindings, chunks, transpilation) is the subclass
:class:`~hybrid_attention.backends.dqa.circuit.CircuitSampler`; the native simulator is
:class:`~hybrid_attention.backends.dqa.statevector.StatevectorSampler`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from hybrid_attention.checks import as_generator
from hybrid_attention.circuits.reference import dqa_probabilities
from hybrid_attention.circuits.schedule import DQASchedule
from hybrid_attention.circuits.temperature import leading_order_beta
from hybrid_attention.exact import draw_states, enumerate_states, table_marginals
from hybrid_attention.ising import IsingProblem, index_to_spins
from hybrid_attention.sampler import Sampler, SamplerCapabilities
from hybrid_attention.sampleset import SampleSet

__all__ = ["DQASampler", "DEFAULT_SCHEDULE"]

#: used when a DQA sampler is built without ``schedule=`` (short quench: nearly Boltzmann, beta_h ~ 0.13)
DEFAULT_SCHEDULE = DQASchedule(tau=1.0, steps=20)


class DQASampler(Sampler):
    """Base class of the DQA samplers: a schedule, its effective temperature, and the exact output's read-outs.

    Args:
        schedule: the :class:`DQASchedule` (default :data:`DEFAULT_SCHEDULE`).
    """

    capabilities = SamplerCapabilities(dqa=True, approximate=True, needs_circuit=True)

    def __init__(self, schedule: DQASchedule | None = None) -> None:
        super().__init__()
        schedule = DEFAULT_SCHEDULE if schedule is None else schedule
        if not isinstance(schedule, DQASchedule):
            raise TypeError(f"{self.name}: schedule must be a DQASchedule, got {type(schedule).__name__}")
        self.schedule = schedule

    @property
    def properties(self) -> dict[str, Any]:
        bh, bJ = leading_order_beta(self.schedule)
        return {**super().properties, "schedule": self.schedule, "effective_beta": {"h": bh, "J": bJ}}

    def effective_beta(self, beta: Any = 1.0) -> tuple[Any, Any]:
        """Leading-order ``(beta_h, beta_J)`` of the output for a problem at inverse temperature ``beta``
        (the bridge uses these for its Boltzmann-surrogate gradients)."""
        bh, bJ = leading_order_beta(self.schedule)
        return beta * bh, beta * bJ

    def reference_probabilities(self, problem: IsingProblem) -> np.ndarray:
        """Exact output distribution of the ideal circuit (numpy reference), ``(*batch, 2**n)``."""
        h, J = problem.dropped()
        beta = problem.beta_tensor().detach().double().numpy()
        h = h.detach().double().numpy() * beta[..., None]
        J = np.broadcast_to(J.detach().double().numpy(), (*problem.batch_shape, problem.n, problem.n))
        return dqa_probabilities(h, J * beta[..., None, None], self.schedule)

    # ------------------------------------------------------------------ read-outs of an exact output table
    @staticmethod
    def _masked_marginals(p: torch.Tensor, problem: IsingProblem) -> torch.Tensor:
        """``<s_j>`` ``(*batch, n)`` of output probabilities ``p (B, 2**n)``; 0 on masked spins."""
        m = table_marginals(p).reshape(*problem.batch_shape, problem.n)
        if problem.mask is not None:
            m = m * problem.mask.reshape(m.shape).to(m.device, m.dtype)
        return m

    def _exact_sampleset(self, problem: IsingProblem, p: torch.Tensor, info: dict[str, Any]) -> SampleSet:
        """Every configuration weighted by its output probability: ``p (B, 2**n)`` float64 -> exact SampleSet."""
        n = problem.n
        S = enumerate_states(n, dtype=torch.float64).numpy().astype(np.int8)
        spins = np.broadcast_to(S, (*problem.batch_shape, 1 << n, n)).copy()
        info["num_reads"] = 1 << n
        return SampleSet(spins, p.reshape(*problem.batch_shape, 1 << n).numpy(), problem, info, exact=True)

    def _shots_sampleset(
        self, problem: IsingProblem, p: torch.Tensor, num_reads: int, seed: Any, info: dict[str, Any]
    ) -> SampleSet:
        """``num_reads`` shots per problem drawn from ``p (B, 2**n)`` with the generator of ``seed``."""
        n, bs = problem.n, tuple(problem.batch_shape)
        idx = draw_states(p, int(num_reads), as_generator(seed))
        spins = index_to_spins(idx, n)
        w = np.full(spins.shape[:-1], 1.0 / num_reads)
        info["num_reads"] = int(num_reads)
        return SampleSet(spins.reshape(*bs, int(num_reads), n), w.reshape(*bs, int(num_reads)), problem, info)
