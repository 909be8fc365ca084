"""Markov-chain samplers for Ising problems of any size: heat-bath Gibbs chains and simulated annealing.

Both run many independent chains per problem, for a whole batch of problems at once, in torch. The chain
state is kept as ``s (G, n, R, C)`` (coupling group, spin, problem, chain; see :class:`Grouped`: a coupling
matrix shared by many problems, like one attention head's J, is never copied). A single-spin heat-bath update
sets ``s_j = +1`` with probability ``sigmoid(2 beta l_j)``, ``l_j = h_j + sum_k J_jk s_k``; local fields
of blocks of spins come from one GEMM each (see :func:`_sweep`). Spins are updated sequentially (a systematic sweep):
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

from hybrid_attention.checks import check_positive_int, describe_seed, spawn_seeds
from hybrid_attention.ising import IsingProblem
from hybrid_attention.sampler import Sampler, SamplerCapabilities
from hybrid_attention.sampleset import SampleSet

__all__ = ["GibbsSampler", "AnnealingSampler", "run_chains", "Grouped"]

logger = logging.getLogger(__name__)


def _positive_int(name: str, v: Any, lo: int = 1) -> int:
    """An integer option ``>= lo`` (:func:`hybrid_attention.checks.check_positive_int`)."""
    return check_positive_int(v, name, minimum=lo)


class Grouped:
    """A batch of problems regrouped by distinct coupling matrix, so shared couplings are never copied.

    The bridge hands over ``J`` expanded (stride 0) over the batch and queries, with one matrix per head; the chains
    and the mean-field iteration then work on ``G`` coupling matrices and ``R`` problems per matrix:

    Attributes:
        h: ``(G, R, n)`` fields (masked spins zeroed); J: ``(G, n, n)``; beta: ``(G, R)``;
        mask: ``(G, R, n)`` float 0/1 or ``None``. Masked spins are dropped by keeping them at 0 inside the
        algorithms (so they never enter a local field), which is exactly the decoupled problem.
    """

    def __init__(self, problem: IsingProblem, dtype: torch.dtype | None = None, *, share_masked: bool = False) -> None:
        bs, n = tuple(problem.batch_shape), problem.n
        self.order: torch.Tensor | None = None  # set by _share_masked: row order of the regrouped problems
        J = problem.J
        if J.ndim == 2:
            keep: list[int] = []
        else:
            J = torch.broadcast_to(J, (*bs, n, n))
            keep = [d for d in range(len(bs)) if bs[d] > 1 and J.stride(d) != 0]
            J = J[tuple(slice(None) if d in keep else slice(0, 1) for d in range(len(bs)))]
        rest = [d for d in range(len(bs)) if d not in keep]
        self.perm = keep + rest
        self.shape = [bs[d] for d in self.perm]
        self.G = int(np.prod([bs[d] for d in keep])) if keep else 1
        dt = dtype or problem.dtype
        self.J = J.reshape(self.G, n, n).to(dt)
        self.h = self._group(problem.h.to(dt))
        self.beta = self._group(problem.beta_tensor().to(dt)[..., None])[..., 0]
        self.mask = None if problem.mask is None else self._group(problem.mask.to(dt))
        if self.mask is not None:
            self.h = self.h * self.mask
        self.R, self.n = self.h.shape[1], n
        if share_masked and self.mask is not None and self.R == 1 and self.G > 1:
            self._share_masked()

    def _share_masked(self) -> None:
        """Regroup problems whose couplings are one shared matrix with their masked spins decoupled.

        The bridge hands over causal prefixes as ``(problems, n, n)`` couplings already dropped
        (``J * m m^T``), which makes every problem its own group (``R = 1``): thousands of tiny GEMMs. Chains hold
        masked spins at 0, so only the active block of ``J`` matters, and a problem whose ``J`` equals
        ``J_ref * m m^T`` for an unmasked reference problem ``J_ref`` can run on ``J_ref`` exactly (the same
        Markov chain). References are the distinct ``J`` of the fully unmasked problems; the regrouping is used
        only when every problem matches one and all groups have the same size (else nothing changes). Not for
        differentiable use: the shared matrix is one problem's ``J``.
        """
        m = self.mask[:, 0]  # (P, n)
        full = (m != 0).all(-1)
        if not bool(full.any()):
            return
        refs = torch.unique(self.J[full].reshape(int(full.sum()), -1), dim=0).reshape(-1, self.n, self.n)
        if len(refs) > 64:
            return
        K = len(refs)
        if self.G % K:
            return
        hits = torch.stack([(self.J == ref * m[:, :, None] * m[:, None, :]).flatten(1).all(-1) for ref in refs])  # (K, P)
        nhit = hits.sum(0)
        if bool((nhit == 0).any()):
            return
        group = torch.where(nhit == 1, hits.to(torch.uint8).argmax(0), -1)
        counts = torch.bincount(group[group >= 0], minlength=K).tolist()
        for p_ in (nhit > 1).nonzero().flatten().tolist():  # fits several (e.g. one active spin): fill the groups evenly
            free = [r for r in range(K) if hits[r, p_] and counts[r] < self.G // K]
            if not free:
                return
            group[p_] = free[0]
            counts[free[0]] += 1
        if any(c != self.G // K for c in counts):
            return
        order = torch.argsort(group, stable=True)
        Gn = K
        self.order, self.J = order, refs
        self.h = self.h[order].reshape(Gn, -1, self.n)
        self.beta = self.beta[order].reshape(Gn, -1)
        self.mask = self.mask[order].reshape(Gn, -1, self.n)
        self.G, self.R = Gn, self.h.shape[1]

    def _group(self, x: torch.Tensor) -> torch.Tensor:
        """``(*batch, k)`` to ``(G, R, k)``."""
        x = torch.broadcast_to(x, (*[self.shape[self.perm.index(d)] for d in range(len(self.perm))], x.shape[-1]))
        x = x.permute(*self.perm, x.ndim - 1)
        return x.reshape(self.G, -1, x.shape[-1])

    def ungroup(self, x: torch.Tensor) -> torch.Tensor:
        """``(G, R, *tail)`` back to ``(*batch, *tail)``."""
        tail = tuple(x.shape[2:])
        if self.order is not None:  # undo _share_masked's regrouping
            flat = x.reshape(-1, *tail)
            x = torch.empty_like(flat)
            x[self.order] = flat
        x = x.reshape(*self.shape, *tail)
        if not self.perm:
            return x
        inv = [0] * len(self.perm)
        for i, d in enumerate(self.perm):
            inv[d] = i
        return x.permute(*inv, *range(len(self.perm), x.ndim))


def _sweep(s: torch.Tensor, h: torch.Tensor, J: torch.Tensor, mask: torch.Tensor | None, beta2: torch.Tensor,
           rows: list[int] | None = None, generator: torch.Generator | None = None) -> None:
    """One sequential heat-bath sweep in place (spins updated one at a time, in order ``0..n-1``).

    ``s (G, n, R, C)`` (masked spins held at 0), ``h (G, R, n)``, ``J (G, n, n)``, ``mask (G, R, n)`` or None,
    ``beta2 = 2 beta (G, R, 1)``. ``rows``: when given, spin ``j`` is active in exactly the first ``rows[j]``
    problems of every group (see :func:`_active_rows`) and only those are updated (``mask`` is then not needed).

    Memory traffic, not arithmetic, bounds a sweep: the local fields of a block of ``b ~ sqrt(2n)`` spins are
    computed with one GEMM from the current state, then kept exact through the block's sequential updates by
    rank-one corrections ``l_k += J_kj (s_j' - s_j)``, so the chain state is read ``n / b`` times per sweep
    instead of ``n`` (the same Markov chain as the plain sequential sweep, up to float rounding).
    """
    G, n, R, C = s.shape
    flat = s.view(G, n, R * C)
    b = max(1, int(round((2 * n) ** 0.5)))
    for a in range(0, n, b):
        e = min(a + b, n)
        ra = R if rows is None else max(rows[a:e])
        if ra == 0:
            continue
        L = torch.bmm(J[:, a:e, :], flat[:, :, : ra * C])  # (G, e - a, ra*C): sum_k J_jk s_k (masked s_k = 0)
        for j in range(a, e):
            r = R if rows is None else rows[j]
            if r == 0:
                continue
            u = torch.rand((G, r, C), generator=generator, dtype=s.dtype)
            p_up = torch.sigmoid(beta2[:, :r] * (L[:, j - a, : r * C].view(G, r, C) + h[:, :r, j : j + 1]))
            new = torch.where(u < p_up, 1.0, -1.0)
            if mask is not None and rows is None:
                new = new * mask[:, :, j : j + 1]
            if j + 1 < e:
                delta = (new - s[:, j, :r]).view(G, 1, r * C)
                L[:, j - a + 1 :, : r * C] += J[:, j + 1 : e, j : j + 1] * delta
            s[:, j, :r] = new


def _active_rows(mask: torch.Tensor) -> tuple[torch.Tensor, list[int]] | None:
    """Row order under which every spin's active problems are a leading block, the same in every group.

    Causal prefixes (``n = T`` with query ``i`` seeing spins ``0..i``) have this form once sorted by their number of
    active spins; a sweep then touches only active problems (about half the work at ``T = 64``).

    Returns:
        ``(order (G, R), rows)`` with ``rows[j]`` the number of leading (reordered) problems in which spin ``j`` is
        active, or ``None`` when the masks are not nested that way (the sweep then masks instead).
    """
    act = mask != 0
    order = torch.argsort(act.sum(-1), dim=1, descending=True, stable=True)  # (G, R)
    srt = torch.gather(act, 1, order[..., None].expand_as(act))
    cnt = srt.sum(1)  # (G, n)
    if bool((cnt != cnt[:1]).any()):
        return None
    lead = torch.arange(act.shape[1])[None, :, None] < cnt[:, None, :]
    if not torch.equal(srt, lead):
        return None
    return order, cnt[0].tolist()


def run_chains(h: torch.Tensor, J: torch.Tensor, mask: torch.Tensor | None, betas: list[torch.Tensor], chains: int, *,
               record_every: int = 0, records: int = 1, generator: torch.Generator | None = None) -> torch.Tensor:
    """Run ``chains`` heat-bath chains per problem from uniformly random states.

    Args:
        h: ``(G, R, n)``; J: ``(G, n, n)``; mask: ``(G, R, n)`` 0/1 or None (see :class:`Grouped`).
        betas: one ``(G, R)`` inverse temperature per sweep, in order (constant for Gibbs, a ramp for annealing).
        chains: chains per problem.
        record_every: sweeps (at the last beta) between recorded states of a chain (thinning).
        records: states recorded per chain (the first after all of ``betas``).
        generator: torch random generator.

    Returns:
        int8 spins ``(G, R, records * chains, n)``; read ``r * chains + c`` is chain ``c``'s ``r``-th record.
        Masked spins are drawn uniformly (they are free in the dropped problem).
    """
    G, R, n = h.shape
    order, rows = None, None
    if mask is not None:
        found = _active_rows(mask)
        if found is not None:  # nested masks (causal prefixes): sort the problems, sweep active ones only
            order, rows = found
            take = lambda x: torch.gather(x, 1, order.view(G, R, *[1] * (x.ndim - 2)).expand_as(x))  # noqa: E731
            h, mask, betas = take(h), take(mask), [take(bt) for bt in betas]
    s = torch.randint(0, 2, (G, n, R, chains), generator=generator).to(h.dtype).mul_(2).sub_(1)
    mk = None if mask is None else mask.permute(0, 2, 1)[..., None]  # (G, n, R, 1)
    if mk is not None:
        s.mul_(mk)

    def sweep(beta: torch.Tensor) -> None:
        _sweep(s, h, J, mask, (2 * beta)[..., None], rows, generator)

    def record() -> torch.Tensor:
        out = s.permute(0, 2, 3, 1)  # (G, R, C, n)
        if mk is not None:
            free = torch.randint(0, 2, out.shape, generator=generator).to(h.dtype).mul_(2).sub_(1)
            out = torch.where(out == 0, free, out)
        return out.to(torch.int8)

    for beta in betas:
        sweep(beta)
    out = [record()]
    for _ in range(records - 1):
        for _ in range(record_every):
            sweep(betas[-1])
        out.append(record())
    spins = torch.cat(out, dim=2)
    if order is not None:  # back to the caller's problem order
        spins = torch.empty_like(spins).scatter_(1, order.view(G, R, 1, 1).expand_as(spins), spins)
    return spins


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
    def capabilities(self) -> SamplerCapabilities:
        return SamplerCapabilities(pad_with_mask=True)

    def _betas(self, beta: torch.Tensor, opts: dict[str, Any]) -> list[torch.Tensor]:
        raise NotImplementedError

    def _resolve(self, options: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _sample(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> SampleSet:
        opts = self._resolve(options)
        reads = self.default_num_reads if num_reads is None else int(num_reads)
        chains = min(opts.get("num_chains") or reads, reads)
        records = -(-reads // chains)
        gp = Grouped(problem, self.dtype, share_masked=True)
        G, R, n = gp.G, gp.R, gp.n
        per = n * chains * (torch.finfo(self.dtype).bits // 8) * 4
        step_r = max(1, self.memory_limit // per)
        step_g = max(1, step_r // R) if step_r >= R else 1
        blocks = [(g, r) for g in range(0, G, step_g) for r in range(0, R, step_r)]
        seeds = spawn_seeds(seed, len(blocks))
        t0 = time.perf_counter()
        rows = []
        for g0 in range(0, G, step_g):
            cols = []
            for r0 in range(0, R, step_r):
                gen = torch.Generator(device=gp.h.device).manual_seed(seeds[blocks.index((g0, r0))])
                gs, rs = slice(g0, g0 + step_g), slice(r0, r0 + step_r)
                betas = self._betas(gp.beta[gs, rs], opts)
                mask = None if gp.mask is None else gp.mask[gs, rs]
                cols.append(run_chains(gp.h[gs, rs], gp.J[gs], mask, betas, chains, record_every=opts.get("thinning", 1),
                                       records=records, generator=gen)[:, :, :reads])
            rows.append(torch.cat(cols, dim=1))
        spins = gp.ungroup(torch.cat(rows, dim=0)).cpu().numpy()
        info = {"backend": self.name, "num_reads": reads, "num_chains": chains, "records_per_chain": records,
                "seed": describe_seed(seed), "chunk_seeds": seeds,
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
