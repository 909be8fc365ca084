"""Markov-chain samplers for Ising problems of any size: heat-bath Gibbs chains and simulated annealing.

Both run many independent chains per problem, for a whole batch of problems at once, in torch: this module owns the
sampler classes (chunking, seeds, options, SampleSet assembly); the sweeps are the kernel of :mod:`.gibbs_kernel`
(:func:`~.gibbs_kernel.run_chains`) on a batch regrouped by coupling matrix (:class:`~hybrid_attention.grouping.Grouped`: a coupling
matrix shared by many problems, like one attention head's J, is never copied).

Kernels (``kernel=``): ``"compiled"`` is a numba loop over each problem's active spins with incremental local fields
(the default when numba is installed: ``pip install 'hybrid-attention[fast]'``); ``"torch"`` vectorises all chains of a
group in torch (the fallback, always available). Both run the same Markov chain; they draw different random numbers, so
one seed reproduces the samples of one kernel. ``python -m bench.classical`` compares them with dwave-samplers.

Masked spins are dropped by decoupling them (zero field, zero couplings): they are free, the other spins
are distributed exactly as without them, and statistics report them as 0 (docs/theory.md section 3).

Accuracy. Every read is by default the final state of its own chain (``num_chains = num_reads``), so reads are
independent and the shot tolerance ``z sqrt((1 - m**2) / N)`` applies with ``N = num_reads``. The documented
defaults (Gibbs: 256 burn-in sweeps; annealing: 128 ramp sweeps + 64 at the target beta) reach that tolerance
against exact enumeration for ``n <= 16``, ``beta <= 2`` with ``h ~ N(0, 1)`` and SK-scaled couplings
``J ~ N(0, 1/n)`` (``tests/backends/test_classical.py``). Strongly coupled, frustrated problems at low temperature
mix slowly under single-spin dynamics; raise ``burn_in``/``num_sweeps`` there (or use annealing).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import torch

from hybrid_attention.checks import check_memory, check_positive_int, describe_seed, spawn_seeds
from hybrid_attention.grouping import Grouped
from hybrid_attention.ising import IsingProblem
from hybrid_attention.sampler import Sampler, SamplerCapabilities
from hybrid_attention.sampleset import SampleSet

from .gibbs_kernel import numba_available, run_chains, run_chains_compiled

__all__ = ["GibbsSampler", "AnnealingSampler", "run_chains"]

logger = logging.getLogger(__name__)


#: bytes a torch tensor costs beyond its data (the Python object and its storage), for memory estimates
_TENSOR_OVERHEAD = 256


class _ChainSampler(Sampler):
    """Shared machinery: chunking over problems, seeds, reads/chains bookkeeping, SampleSet assembly."""

    capabilities = SamplerCapabilities(pad_with_mask=True)

    def __init__(
        self,
        *,
        num_reads: int = 256,
        dtype: torch.dtype = torch.float32,
        memory_limit: int = 64 << 20,
        kernel: str = "auto",
    ) -> None:
        super().__init__()
        self.default_num_reads = check_positive_int(num_reads, "num_reads")
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        self.dtype = dtype
        self.memory_limit = check_positive_int(memory_limit, "memory_limit")
        if kernel not in ("auto", "compiled", "torch"):
            raise ValueError(f"kernel must be 'auto', 'compiled' or 'torch', got {kernel!r}")
        if kernel == "compiled" and not numba_available():
            raise ImportError("kernel='compiled' needs numba: pip install numba (or use kernel='torch')")
        self.kernel = ("compiled" if numba_available() else "torch") if kernel == "auto" else kernel

    @property
    def properties(self) -> dict[str, Any]:
        props = super().properties
        props["kernel"] = self.kernel
        if self.kernel == "compiled":
            import numba

            props["versions"] = {"numba": numba.__version__}
        return props

    def _schedule(self, opts: dict[str, Any]) -> list[float]:
        """Sweep ``k`` runs at ``beta * schedule[k]``; recording sweeps at the last entry."""
        raise NotImplementedError

    def validate(self, problem: Any, *, num_reads: Any = None, seed: Any = None, options: dict | None = None):
        """The base checks, then the options and the memory of the sweep schedule (one inverse temperature per
        problem and sweep, built before the first sweep) against the memory budget."""
        problem = super().validate(problem, num_reads=num_reads, seed=seed, options=options)
        opts = {k: v for k, v in (options or {}).items() if k != "initial_state"}
        sweeps = self._sweeps(self._resolve(opts))
        rows = problem.h.numel() // max(problem.n, 1)
        check_memory(
            float(sweeps) * (rows * (torch.finfo(self.dtype).bits // 8) + _TENSOR_OVERHEAD),
            f"{self.name}: the schedule of {sweeps} sweeps x {rows} problem(s) (one inverse temperature per problem "
            f"and sweep, plus about {_TENSOR_OVERHEAD} bytes per sweep)",
            hint="use fewer sweeps (burn_in, num_sweeps, final_sweeps) or split the batch",
        )
        return problem

    def _sweeps(self, opts: dict[str, Any]) -> int:
        """Sweeps of the schedule (:meth:`_schedule`'s length at most) for resolved options ``opts``."""
        raise NotImplementedError

    def _resolve(self, options: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _sample(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> SampleSet:
        init = options.pop("initial_state", None)
        opts = self._resolve(options)
        reads = self.default_num_reads if num_reads is None else int(num_reads)
        if init is not None:
            init = self._check_initial_state(init, problem, reads, opts)
            opts = {**opts, "num_chains": init.shape[-2], "ramp": 0.0, "persistent": True}  # no ramp: continue them
        chains = min(opts.get("num_chains") or reads, reads)
        records = -(-reads // chains)
        factors = self._schedule(opts)
        t0 = time.perf_counter()
        kernel = "torch" if init is not None else self.kernel  # the compiled kernel starts from random states
        if kernel == "compiled":  # float64 throughout; the grouping only avoids copying a shared J
            gp = Grouped(problem, torch.float64, share_masked=True)
            seeds = spawn_seeds(seed, 1)
            kw = {"record_every": opts.get("thinning", 1), "records": records, "seed": seeds[0]}
            spins = run_chains_compiled(gp.h, gp.J, gp.mask, gp.beta, factors, chains, **kw)
        else:
            gp = Grouped(problem, self.dtype, share_masked=True)
            start = None if init is None else gp.group(torch.from_numpy(init))
            spins, seeds = self._torch_chains(gp, factors, chains, records, opts, seed, start)
        final = spins[:, :, -chains:]  # the last record: where every chain stopped
        spins = spins[:, :, :reads]
        spins = gp.ungroup(spins).cpu().numpy()
        info = {
            "backend": self.name,
            "kernel": kernel,
            "num_reads": reads,
            "num_chains": chains,
            "records_per_chain": records,
            "seed": describe_seed(seed),
            "chunk_seeds": seeds,
            "timing": {"run": time.perf_counter() - t0},
            **opts,
        }
        if init is not None:
            info["final_state"] = gp.ungroup(final).cpu().numpy()
        w = np.full(spins.shape[:-1], 1.0 / reads)
        return SampleSet(spins, w, problem, info)

    def _check_initial_state(self, init: Any, problem: IsingProblem, reads: int, opts: dict[str, Any]) -> np.ndarray:
        """``initial_state`` as int8 ±1 ``(*batch, chains, n)``, checked against the problem and ``num_reads``."""
        init = np.asarray(init)
        bs, n = tuple(problem.batch_shape), problem.n
        if init.ndim != len(bs) + 2 or init.shape[: len(bs)] != bs or init.shape[-1] != n:
            raise ValueError(
                f"{self.name}: initial_state must be ±1 spins of shape (*batch, chains, n) = {(*bs, 'chains', n)}, "
                f"got {init.shape}"
            )
        if not (np.abs(init) == 1).all():  # +-1 only (np.isin is ~30x slower on a step's chains)
            raise ValueError(f"{self.name}: initial_state must hold only -1 and +1")
        C = init.shape[-2]
        if opts.get("num_chains") not in (None, C) or reads < C:
            raise ValueError(
                f"{self.name}: initial_state holds {C} chains per problem; num_reads = {reads} must be at least that "
                f"and num_chains (if given) equal to it, got num_chains = {opts.get('num_chains')}"
            )
        return init.astype(np.int8)

    def _torch_chains(
        self,
        gp: Grouped,
        factors: list[float],
        chains: int,
        records: int,
        opts: dict[str, Any],
        seed: Any,
        start: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, list[int]]:
        """The torch kernel over chunks of problems (``memory_limit``), one seed per chunk; ``start``: grouped
        ``(G, R, chains, n)`` initial states or None."""
        G, R, n = gp.G, gp.R, gp.n
        per = n * chains * (torch.finfo(self.dtype).bits // 8) * 4
        step_r = max(1, self.memory_limit // per)
        step_g = max(1, step_r // R) if step_r >= R else 1
        blocks = [(g, r) for g in range(0, G, step_g) for r in range(0, R, step_r)]
        seeds = spawn_seeds(seed, len(blocks))
        rows = []
        for g0 in range(0, G, step_g):
            cols = []
            for r0 in range(0, R, step_r):
                gen = torch.Generator(device=gp.h.device).manual_seed(seeds[blocks.index((g0, r0))])
                gs, rs = slice(g0, g0 + step_g), slice(r0, r0 + step_r)
                beta = gp.beta[gs, rs]
                mask = None if gp.mask is None else gp.mask[gs, rs]
                cols.append(
                    run_chains(
                        gp.h[gs, rs],
                        gp.J[gs],
                        mask,
                        [beta * f for f in factors],
                        chains,
                        record_every=opts.get("thinning", 1),
                        records=records,
                        generator=gen,
                        initial_state=None if start is None else start[gs, rs],
                        record_beta=beta,
                    )
                )
            rows.append(torch.cat(cols, dim=1))
        return torch.cat(rows, dim=0), seeds


class GibbsSampler(_ChainSampler):
    """Heat-bath Gibbs sampling at the problem's ``beta`` with many independent chains per problem.

    Args:
        burn_in: sweeps before the first recorded state (default 256; see the module docstring for accuracy).
        ramp: fraction of the burn-in spent warming up, beta rising linearly from 0 to the problem's beta (default
            0.5; the burn-in is discarded, so this only speeds up equilibration in rugged landscapes; 0 disables it).
        thinning: sweeps between recorded states of one chain when ``num_chains < num_reads``.
        num_chains: chains per problem; ``None`` (default) uses one chain per read (independent reads).
        num_reads: default reads per problem when ``sample(num_reads=None)``.
        dtype: float32 (default) or float64 for the torch kernel's arithmetic (the compiled kernel uses float64).
        memory_limit: bytes of chain state per chunk of problems (torch kernel).
        kernel: ``"auto"`` (default: ``"compiled"`` when numba is installed, else ``"torch"``), ``"compiled"`` (an
            ImportError without numba) or ``"torch"``; ``info["kernel"]`` records the one used.

    Per-call options ``burn_in``, ``thinning``, ``num_chains`` override the constructor values. ``initial_state``
    (``(*batch, chains, n)`` ±1) starts the chains there instead of at random, with every burn-in sweep at the
    target beta (no ramp), and ``info["final_state"]`` (same shape) is where they stopped: persistent chains
    (``Sampling(..., chains=PersistentChains(C))``) continue them from call to call. It runs the torch kernel.

    Example:
        >>> import torch
        >>> from hybrid_attention import IsingProblem
        >>> ss = GibbsSampler().sample(IsingProblem(torch.tensor([[0.5]])), num_reads=4000, seed=0)
        >>> abs(float(ss.marginals()[0, 0]) - 0.4621) < 0.08   # tanh(0.5)
        True
    """

    name = "gibbs"
    capabilities = SamplerCapabilities(pad_with_mask=True, markov_chain=True)
    parameters = {
        "burn_in": "sweeps before recording",
        "thinning": "sweeps between records of one chain",
        "num_chains": "chains per problem (default: one per read)",
        "initial_state": "(*batch, chains, n) ±1 configurations the chains start from (persistent chains; no ramp)",
    }

    def __init__(
        self, *, burn_in: int = 256, thinning: int = 4, num_chains: int | None = None, ramp: float = 0.5, **kw: Any
    ) -> None:
        super().__init__(**kw)
        if isinstance(ramp, bool) or not isinstance(ramp, (int, float)) or not 0.0 <= ramp < 1.0:
            raise ValueError(f"ramp must be a fraction in [0, 1), got {ramp!r}")
        self.ramp = float(ramp)
        self.burn_in = check_positive_int(burn_in, "burn_in", minimum=0)
        self.thinning = check_positive_int(thinning, "thinning")
        self.num_chains = None if num_chains is None else check_positive_int(num_chains, "num_chains")

    def _resolve(self, options: dict[str, Any]) -> dict[str, Any]:
        return {
            "burn_in": check_positive_int(options.get("burn_in", self.burn_in), "burn_in", minimum=0),
            "ramp": self.ramp,
            "thinning": check_positive_int(options.get("thinning", self.thinning), "thinning"),
            "num_chains": None
            if options.get("num_chains", self.num_chains) is None
            else check_positive_int(options.get("num_chains", self.num_chains), "num_chains"),
        }

    def _schedule(self, opts: dict[str, Any]) -> list[float]:
        K = opts["burn_in"] if opts.get("persistent") else max(opts["burn_in"], 1)  # continued chains: 0 is fine
        R = int(K * opts["ramp"])  # the discarded burn-in may take any route to equilibrium: warm up from beta = 0
        return [(k + 1) / (R + 1) for k in range(R)] + [1.0] * (K - R)

    def _sweeps(self, opts: dict[str, Any]) -> int:
        return max(opts["burn_in"], 1)

    def __repr__(self) -> str:
        return f"GibbsSampler(burn_in={self.burn_in}, thinning={self.thinning}, num_chains={self.num_chains})"


class AnnealingSampler(_ChainSampler):
    """Simulated annealing: each chain starts uniformly random (beta = 0), ramps beta linearly up to the problem's
    ``beta`` over ``num_sweeps`` sweeps, then runs ``final_sweeps`` heat-bath sweeps at the target beta; the final
    states are the reads (samples at the target beta, not ground states).

    Args:
        num_sweeps: ramp sweeps (default 128).
        final_sweeps: sweeps at the target beta after the ramp (default 64).
        thinning, num_chains, num_reads, dtype, memory_limit, kernel: as for :class:`GibbsSampler`.
    """

    name = "anneal"
    parameters = {
        "num_sweeps": "ramp sweeps",
        "final_sweeps": "sweeps at the target beta",
        "thinning": "sweeps between records of one chain",
        "num_chains": "chains per problem",
    }

    def __init__(
        self,
        *,
        num_sweeps: int = 128,
        final_sweeps: int = 64,
        thinning: int = 4,
        num_chains: int | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        self.num_sweeps = check_positive_int(num_sweeps, "num_sweeps")
        self.final_sweeps = check_positive_int(final_sweeps, "final_sweeps", minimum=0)
        self.thinning = check_positive_int(thinning, "thinning")
        self.num_chains = None if num_chains is None else check_positive_int(num_chains, "num_chains")

    def _resolve(self, options: dict[str, Any]) -> dict[str, Any]:
        nc = options.get("num_chains", self.num_chains)
        return {
            "num_sweeps": check_positive_int(options.get("num_sweeps", self.num_sweeps), "num_sweeps"),
            "final_sweeps": check_positive_int(
                options.get("final_sweeps", self.final_sweeps), "final_sweeps", minimum=0
            ),
            "thinning": check_positive_int(options.get("thinning", self.thinning), "thinning"),
            "num_chains": None if nc is None else check_positive_int(nc, "num_chains"),
        }

    def _schedule(self, opts: dict[str, Any]) -> list[float]:
        K = opts["num_sweeps"]
        return [(k + 1) / K for k in range(K)] + [1.0] * opts["final_sweeps"]

    def _sweeps(self, opts: dict[str, Any]) -> int:
        return opts["num_sweeps"] + opts["final_sweeps"]

    def __repr__(self) -> str:
        return f"AnnealingSampler(num_sweeps={self.num_sweeps}, final_sweeps={self.final_sweeps})"
