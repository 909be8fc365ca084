"""Markov-chain samplers for Ising problems of any size: heat-bath Gibbs chains and simulated annealing.

Both run many independent chains per problem, for a whole batch of problems at once, in torch. The chain
state is kept as ``s (B, n, C)`` (problem, spin, chain) so that a single-spin heat-bath update of spin ``j``
is one batched vector-matrix product for its local field ``l_j = h_j + sum_k J_jk s_k`` followed by
``s_j = +1`` with probability ``sigmoid(2 beta l_j)``. Spins are updated sequentially (a systematic sweep):
with dense all-to-all couplings no two spins are conditionally independent, so a checkerboard split would not
leave the Boltzmann distribution invariant. One sweep costs ``O(B C n**2)``.

Masked spins are dropped by decoupling them (zero field, zero couplings): they are free, the other spins
are distributed exactly as without them, and statistics report them as 0 (SPEC section 3).

Accuracy. Every read is by default the final state of its own chain (``num_chains = num_reads``), so reads are
independent and the shot tolerance ``z sqrt((1 - m**2) / N)`` applies with ``N = num_reads``. The documented
defaults (Gibbs: 256 burn-in sweeps; annealing: 128 ramp sweeps + 64 at the target beta) reach that tolerance
against exact enumeration for ``n <= 16``, ``beta <= 2`` with ``h ~ N(0, 1)`` and SK-scaled couplings
``J ~ N(0, 1/n)`` (``tests/test_classical.py``). Strongly coupled, frustrated problems at low temperature
mix slowly under single-spin dynamics; raise ``burn_in``/``num_sweeps`` there (or use annealing).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import torch

from hybrid_attention.ising import IsingProblem

from .base import Sampler, spawn_seeds
from .sampleset import SampleSet

__all__ = ["GibbsSampler", "AnnealingSampler", "run_chains", "flat_problem"]

logger = logging.getLogger(__name__)


def _positive_int(name: str, v: Any, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def flat_problem(problem: IsingProblem, dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(h (B, n), J (n, n) or (B, n, n), beta (B,))`` of the flattened problem, masked spins decoupled."""
    flat = problem.flatten()
    h, J = flat.dropped()
    beta = flat.beta_tensor()
    if dtype is not None:
        h, J, beta = h.to(dtype), J.to(dtype), beta.to(dtype)
    return h, J, beta


def _sweep(s: torch.Tensor, h: torch.Tensor, J: torch.Tensor, beta2: torch.Tensor, u: torch.Tensor) -> None:
    """One sequential heat-bath sweep in place. ``s (B, n, C)``, ``beta2 = 2 beta (B, 1)``, ``u (n, B, C)``."""
    n = s.shape[1]
    shared = J.ndim == 2
    for j in range(n):
        if shared:
            loc = torch.matmul(J[j], s)  # (B, C)
        else:
            loc = torch.bmm(J[:, j : j + 1, :], s).squeeze(1)
        p_up = torch.sigmoid(beta2 * (loc + h[:, j : j + 1]))
        s[:, j, :] = torch.where(u[j] < p_up, 1.0, -1.0)


def run_chains(h: torch.Tensor, J: torch.Tensor, betas: list[torch.Tensor], chains: int, *, record_every: int = 0,
               records: int = 1, generator: torch.Generator | None = None) -> torch.Tensor:
    """Run ``chains`` heat-bath chains per problem from uniformly random states.

    Args:
        h: ``(B, n)``; J: ``(n, n)`` or ``(B, n, n)`` (masked spins decoupled).
        betas: one ``(B,)`` inverse temperature per sweep, in order (constant for Gibbs, a ramp for annealing).
        chains: chains per problem.
        record_every: after the listed sweeps, run ``records - 1`` more blocks of ``record_every`` sweeps at the last
            beta, recording the state after each block (thinning). ``0`` records only the final state.
        records: states recorded per chain.
        generator: torch random generator.

    Returns:
        int8 spins ``(B, records * chains, n)``; read ``r * chains + c`` is chain ``c``'s ``r``-th record.
    """
    B, n = h.shape
    s = torch.randint(0, 2, (B, n, chains), generator=generator, dtype=torch.int8).to(h.dtype).mul_(2).sub_(1)
    out = []

    def sweep(beta: torch.Tensor) -> None:
        u = torch.rand((n, B, chains), generator=generator, dtype=h.dtype)
        _sweep(s, h, J, (2 * beta)[:, None], u)

    for beta in betas:
        sweep(beta)
    out.append(s.transpose(1, 2).to(torch.int8))
    for _ in range(records - 1):
        for _ in range(record_every):
            sweep(betas[-1] if betas else torch.zeros(B, dtype=h.dtype))
        out.append(s.transpose(1, 2).to(torch.int8))
    return torch.cat(out, dim=1)


class _ChainSampler(Sampler):
    """Shared machinery: chunking over problems, seeds, reads/chains bookkeeping, SampleSet assembly."""

    def __init__(self, *, num_reads: int = 256, dtype: torch.dtype = torch.float32, memory_limit: int = 64 << 20) -> None:
        super().__init__()
        self.default_num_reads = _positive_int("num_reads", num_reads)
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        self.dtype = dtype
        self.memory_limit = _positive_int("memory_limit", memory_limit)

    @property
    def properties(self) -> dict[str, Any]:
        return {"max_spins": None, "exact": False, "default_num_reads": self.default_num_reads, "pad_with_mask": True,
                "differentiable": False}

    def _betas(self, beta: torch.Tensor, opts: dict[str, Any]) -> list[torch.Tensor]:
        raise NotImplementedError

    def _resolve(self, options: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _sample(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> SampleSet:
        opts = self._resolve(options)
        reads = self.default_num_reads if num_reads is None else int(num_reads)
        chains = min(opts.get("num_chains") or reads, reads)
        records = -(-reads // chains)
        h, J, beta = flat_problem(problem, self.dtype)
        B, n = h.shape
        per = n * chains * (torch.finfo(self.dtype).bits // 8) * 4
        step = max(1, self.memory_limit // max(per, 1))
        starts = list(range(0, B, step))
        seeds = spawn_seeds(seed, len(starts))
        t0 = time.perf_counter()
        out = []
        for st, sd in zip(starts, seeds):
            gen = torch.Generator(device=h.device).manual_seed(sd)
            sl = slice(st, st + step)
            betas = self._betas(beta[sl], opts)
            Jc = J if J.ndim == 2 else J[sl]
            out.append(run_chains(h[sl], Jc, betas, chains, record_every=opts.get("thinning", 1), records=records,
                                  generator=gen)[:, :reads])
        spins = torch.cat(out).reshape(*problem.batch_shape, reads, n).cpu().numpy()
        info = {"backend": self.name, "num_reads": reads, "num_chains": chains, "records_per_chain": records,
                "seed": seed if isinstance(seed, (int, type(None))) else "generator", "chunk_seeds": seeds,
                "timing": {"run": time.perf_counter() - t0}, **opts}
        w = np.full(spins.shape[:-1], 1.0 / reads)
        return SampleSet(spins, w, problem, info)


class GibbsSampler(_ChainSampler):
    """Heat-bath Gibbs sampling at the problem's ``beta`` with many independent chains per problem.

    Args:
        burn_in: sweeps before the first recorded state (default 256; see the module docstring for accuracy).
        ramp: fraction of the burn-in spent warming up, beta rising linearly from 0 to the problem's beta (default
            0.5; the burn-in is discarded, so this only speeds up equilibration in rugged landscapes; 0 disables it).
        thinning: sweeps between recorded states of one chain when ``num_chains < num_reads``.
        num_chains: chains per problem; ``None`` (default) uses one chain per read (independent reads).
        num_reads: default reads per problem when ``sample(num_reads=None)``.
        dtype: float32 (default) or float64 for the chain arithmetic.
        memory_limit: bytes of chain state per chunk of problems.

    Per-call options ``burn_in``, ``thinning``, ``num_chains`` override the constructor values.

    Example:
        >>> import torch
        >>> from hybrid_attention import IsingProblem
        >>> ss = GibbsSampler().sample(IsingProblem(torch.tensor([[0.5]])), num_reads=4000, seed=0)
        >>> abs(float(ss.marginals()[0, 0]) - 0.4621) < 0.08   # tanh(0.5)
        True
    """

    name = "gibbs"
    parameters = {"burn_in": "sweeps before recording", "thinning": "sweeps between records of one chain",
                  "num_chains": "chains per problem (default: one per read)"}

    def __init__(self, *, burn_in: int = 256, thinning: int = 4, num_chains: int | None = None, ramp: float = 0.5,
                 **kw: Any) -> None:
        super().__init__(**kw)
        if isinstance(ramp, bool) or not isinstance(ramp, (int, float)) or not 0.0 <= ramp < 1.0:
            raise ValueError(f"ramp must be a fraction in [0, 1), got {ramp!r}")
        self.ramp = float(ramp)
        self.burn_in = _positive_int("burn_in", burn_in, 0)
        self.thinning = _positive_int("thinning", thinning)
        self.num_chains = None if num_chains is None else _positive_int("num_chains", num_chains)

    def _resolve(self, options: dict[str, Any]) -> dict[str, Any]:
        return {"burn_in": _positive_int("burn_in", options.get("burn_in", self.burn_in), 0), "ramp": self.ramp,
                "thinning": _positive_int("thinning", options.get("thinning", self.thinning)),
                "num_chains": None if options.get("num_chains", self.num_chains) is None
                else _positive_int("num_chains", options.get("num_chains", self.num_chains))}

    def _betas(self, beta: torch.Tensor, opts: dict[str, Any]) -> list[torch.Tensor]:
        K = max(opts["burn_in"], 1)
        R = int(K * opts["ramp"])  # the discarded burn-in may take any route to equilibrium: warm up from beta = 0
        return [beta * ((k + 1) / (R + 1)) for k in range(R)] + [beta] * (K - R)

    def __repr__(self) -> str:
        return f"GibbsSampler(burn_in={self.burn_in}, thinning={self.thinning}, num_chains={self.num_chains})"


class AnnealingSampler(_ChainSampler):
    """Simulated annealing: each chain starts uniformly random (beta = 0), ramps beta linearly up to the problem's
    ``beta`` over ``num_sweeps`` sweeps, then runs ``final_sweeps`` heat-bath sweeps at the target beta; the final
    states are the reads (samples at the target beta, not ground states).

    Args:
        num_sweeps: ramp sweeps (default 128).
        final_sweeps: sweeps at the target beta after the ramp (default 64).
        thinning, num_chains, num_reads, dtype, memory_limit: as for :class:`GibbsSampler`.
    """

    name = "anneal"
    parameters = {"num_sweeps": "ramp sweeps", "final_sweeps": "sweeps at the target beta",
                  "thinning": "sweeps between records of one chain", "num_chains": "chains per problem"}

    def __init__(self, *, num_sweeps: int = 128, final_sweeps: int = 64, thinning: int = 4, num_chains: int | None = None,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.num_sweeps = _positive_int("num_sweeps", num_sweeps)
        self.final_sweeps = _positive_int("final_sweeps", final_sweeps, 0)
        self.thinning = _positive_int("thinning", thinning)
        self.num_chains = None if num_chains is None else _positive_int("num_chains", num_chains)

    def _resolve(self, options: dict[str, Any]) -> dict[str, Any]:
        nc = options.get("num_chains", self.num_chains)
        return {"num_sweeps": _positive_int("num_sweeps", options.get("num_sweeps", self.num_sweeps)),
                "final_sweeps": _positive_int("final_sweeps", options.get("final_sweeps", self.final_sweeps), 0),
                "thinning": _positive_int("thinning", options.get("thinning", self.thinning)),
                "num_chains": None if nc is None else _positive_int("num_chains", nc)}

    def _betas(self, beta: torch.Tensor, opts: dict[str, Any]) -> list[torch.Tensor]:
        K = opts["num_sweeps"]
        ramp = [beta * ((k + 1) / K) for k in range(K)]
        return ramp + [beta] * opts["final_sweeps"]

    def __repr__(self) -> str:
        return f"AnnealingSampler(num_sweeps={self.num_sweeps}, final_sweeps={self.final_sweeps})"
