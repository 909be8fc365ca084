"""The heat-bath Gibbs kernels: sequential single-spin sweeps over many chains of a grouped batch.

Two implementations of the same Markov chain (systematic-scan heat bath from uniformly random states), chosen by the
samplers of :mod:`.gibbs`:

* :func:`run_chains_compiled` (default when ``numba`` is installed: ``pip install numba``): one compiled loop per
  problem and chain over the problem's active spins only, with local fields kept exact by rank-one updates on
  each flip (``O(n)`` per flip, ``O(1)`` per rejected update) and one SplitMix64 random stream per problem
  (seeded from the call's seed through numpy, never global state), so results are reproducible for a given seed.
* :func:`run_chains` (pure torch fallback, below): all chains and problems of a group vectorised, one GEMM per block
  of spins.

The two draw different random numbers, so equal seeds give equal samples only within one implementation.

Torch implementation. The chain state is kept as ``s (G, n, R, C)`` (coupling group, spin, problem, chain; see
:class:`~hybrid_attention.grouping.Grouped`). A single-spin heat-bath update sets ``s_j = +1`` with probability
``sigmoid(2 beta l_j)``, ``l_j = h_j + sum_k J_jk s_k``; the local fields of a block of spins come from one GEMM
(:func:`_sweep`). Spins are updated sequentially (a systematic sweep): with dense all-to-all couplings no two spins are
conditionally independent, so a checkerboard split would not leave the Boltzmann distribution invariant. One sweep
costs ``O(B C n**2)``. Causally nested masks are swept on their active problems only (:func:`_active_rows`).

:func:`run_chains` and :func:`run_chains_compiled` are the entry points of the samplers of :mod:`.gibbs` (Gibbs
chains and simulated annealing differ only in their beta per sweep). Speed against dwave-samplers' simulated annealing
and between the two kernels: ``python -m bench.classical`` (``results/bench/classical.md``): the compiled kernel is
about 10x faster than the torch one on single small problems and 1.1-1.3x on the bridge's causal prefix batches.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["run_chains", "run_chains_compiled", "numba_available"]


def _sweep(
    s: torch.Tensor,
    h: torch.Tensor,
    J: torch.Tensor,
    mask: torch.Tensor | None,
    beta2: torch.Tensor,
    rows: list[int] | None = None,
    generator: torch.Generator | None = None,
) -> None:
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


def run_chains(
    h: torch.Tensor,
    J: torch.Tensor,
    mask: torch.Tensor | None,
    betas: list[torch.Tensor],
    chains: int,
    *,
    record_every: int = 0,
    records: int = 1,
    generator: torch.Generator | None = None,
    initial_state: torch.Tensor | None = None,
    record_beta: torch.Tensor | None = None,
) -> torch.Tensor:
    """Run ``chains`` heat-bath chains per problem from uniformly random states (or from ``initial_state``).

    Args:
        h: ``(G, R, n)``; J: ``(G, n, n)``; mask: ``(G, R, n)`` 0/1 or None (see :class:`~hybrid_attention.grouping.Grouped`).
        betas: one ``(G, R)`` inverse temperature per sweep, in order (constant for Gibbs, a ramp for annealing).
        chains: chains per problem.
        record_every: sweeps (at the last beta) between recorded states of a chain (thinning).
        records: states recorded per chain (the first after all of ``betas``).
        generator: torch random generator.
        initial_state: ``(G, R, chains, n)`` ±1 states the chains start from (persistent chains), or None.
        record_beta: ``(G, R)`` inverse temperature of the sweeps between records (default: the last of ``betas``;
            needed when ``betas`` is empty, i.e. continued chains recorded without a burn-in).

    Returns:
        int8 spins ``(G, R, records * chains, n)``; read ``r * chains + c`` is chain ``c``'s ``r``-th record, and
        the last record is where the chains stopped. Masked spins are drawn uniformly (they are free in the dropped
        problem).
    """
    G, R, n = h.shape
    if record_beta is None:
        if not betas and records > 1:
            raise ValueError("run_chains: records > 1 with no burn-in sweeps needs record_beta")
        record_beta = betas[-1] if betas else None
    order, rows = None, None
    if mask is not None:
        found = _active_rows(mask)
        if found is not None:  # nested masks (causal prefixes): sort the problems, sweep active ones only
            order, rows = found
            take = lambda x: torch.gather(x, 1, order.view(G, R, *[1] * (x.ndim - 2)).expand_as(x))  # noqa: E731
            h, mask, betas = take(h), take(mask), [take(bt) for bt in betas]
            record_beta = None if record_beta is None else take(record_beta)
            if initial_state is not None:
                initial_state = take(initial_state)
    if initial_state is None:
        s = torch.randint(0, 2, (G, n, R, chains), generator=generator).to(h.dtype).mul_(2).sub_(1)
    else:
        s = initial_state.to(h.dtype).permute(0, 3, 1, 2).contiguous()  # (G, n, R, C)
    mk = None if mask is None else mask.permute(0, 2, 1)[..., None]  # (G, n, R, 1)
    if mk is not None:
        s.mul_(mk)

    def sweep(beta: torch.Tensor) -> None:
        _sweep(s, h, J, mask, (2 * beta)[..., None], rows, generator)

    def record() -> torch.Tensor:
        out = s.permute(0, 2, 3, 1).to(torch.int8)  # (G, R, C, n), masked spins 0
        if mk is not None:  # in int8: a quarter of the memory traffic of the float state
            free = torch.randint(0, 2, out.shape, generator=generator, dtype=torch.int8).mul_(2).sub_(1)
            out = torch.where(out == 0, free, out)
        return out

    for beta in betas:
        sweep(beta)
    out = [record()]
    for _ in range(records - 1):
        for _ in range(record_every):
            sweep(record_beta)
        out.append(record())
    spins = torch.cat(out, dim=2)
    if order is not None:  # back to the caller's problem order
        spins = torch.empty_like(spins).scatter_(1, order.view(G, R, 1, 1).expand_as(spins), spins)
    return spins


# ---------------------------------------------------------------------------------------------- compiled (numba)
_COMPILED = None


def numba_available() -> bool:
    """Whether the compiled kernel can run (``numba`` importable)."""
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def _compiled():
    """The jitted :func:`_chains_loop` (compiled on first use, cached on disk by numba)."""
    global _COMPILED
    if _COMPILED is None:
        try:
            import numba
        except ImportError as exc:  # the caller asked for the compiled kernel explicitly
            raise ImportError(
                "the compiled Gibbs kernel needs numba: pip install numba (or use kernel='torch')"
            ) from exc
        _COMPILED = numba.njit(cache=True, nogil=True)(_chains_loop)
    return _COMPILED


def _chains_loop(h, J, active, beta, factors, chains, record_every, records, seeds, out):  # noqa: C901
    """Plain-Python body of the compiled kernel (numba nopython subset; see :func:`run_chains_compiled`).

    ``h (G, R, n)`` float64, ``J (G, n, n)`` float64, ``active (G, R, n)`` bool, ``beta (G, R)``, ``factors (K,)``
    (sweep ``k`` runs at ``beta * factors[k]``; recording sweeps at the last factor), ``seeds (G, R)`` uint64,
    ``out (G, R, records * chains, n)`` int8, filled in place.
    """
    G, R, n = h.shape
    K = factors.shape[0]
    gold, m1, m2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
    s30, s27, s31, s11, s63 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11), np.uint64(63)
    inv53 = 1.0 / 9007199254740992.0
    idx = np.empty(n, np.int64)
    Jc = np.empty((n, n))
    hc = np.empty(n)
    s = np.empty(n)
    lf = np.empty(n)
    total = K + (records - 1) * record_every
    for g in range(G):
        for r in range(R):
            m = 0
            for j in range(n):
                if active[g, r, j]:
                    idx[m] = j
                    m += 1
            for a in range(m):  # the dropped problem: active spins only (masked spins are decoupled)
                hc[a] = h[g, r, idx[a]]
                for b in range(m):
                    Jc[a, b] = J[g, idx[a], idx[b]]
            st = seeds[g, r]
            for c in range(chains):
                for a in range(m):  # uniformly random start: the top bit of one SplitMix64 draw per spin
                    st += gold
                    z = (st ^ (st >> s30)) * m1
                    z = (z ^ (z >> s27)) * m2
                    z ^= z >> s31
                    s[a] = 1.0 if (z >> s63) != np.uint64(0) else -1.0
                for a in range(m):
                    acc = hc[a]
                    for b in range(m):
                        acc += Jc[a, b] * s[b]
                    lf[a] = acc
                rec, next_rec = 0, K - 1
                for k in range(total):
                    bt2 = 2.0 * beta[g, r] * factors[min(k, K - 1)]
                    for a in range(m):
                        st += gold
                        z = (st ^ (st >> s30)) * m1
                        z = (z ^ (z >> s27)) * m2
                        z ^= z >> s31
                        u = (z >> s11) * inv53
                        # heat bath: s_a = +1 with probability sigmoid(2 beta l_a) = 1 / (1 + exp(-2 beta l_a))
                        new = 1.0 if u * (1.0 + np.exp(-bt2 * lf[a])) < 1.0 else -1.0
                        if new != s[a]:
                            d = new - s[a]
                            for b in range(m):  # J symmetric, zero diagonal: row a updates every local field
                                lf[b] += d * Jc[a, b]
                            s[a] = new
                    if k == next_rec:
                        row = rec * chains + c
                        for j in range(n):  # masked spins are free in the dropped problem: uniform
                            st += gold
                            z = (st ^ (st >> s30)) * m1
                            z = (z ^ (z >> s27)) * m2
                            z ^= z >> s31
                            out[g, r, row, j] = 1 if (z >> s63) != np.uint64(0) else -1
                        for a in range(m):
                            out[g, r, row, idx[a]] = 1 if s[a] > 0 else -1
                        rec += 1
                        next_rec += max(record_every, 1)
            seeds[g, r] = st


def run_chains_compiled(
    h: torch.Tensor,
    J: torch.Tensor,
    mask: torch.Tensor | None,
    beta: torch.Tensor,
    factors: list[float],
    chains: int,
    *,
    record_every: int = 1,
    records: int = 1,
    seed: int = 0,
) -> torch.Tensor:
    """The chains of :func:`run_chains`, compiled with numba (float64 arithmetic, one random stream per problem).

    Args:
        h: ``(G, R, n)``; J: ``(G, n, n)``; mask: ``(G, R, n)`` 0/1 or None (see :class:`~hybrid_attention.grouping.Grouped`).
        beta: ``(G, R)`` inverse temperatures; sweep ``k`` runs at ``beta * factors[k]`` (all ones for Gibbs, a ramp
            for annealing) and the recording sweeps at ``beta * factors[-1]``.
        chains, record_every, records: as for :func:`run_chains`.
        seed: an int; problem ``(g, r)`` draws from its own SplitMix64 stream seeded from it.

    Returns:
        int8 spins ``(G, R, records * chains, n)``; read ``r * chains + c`` is chain ``c``'s ``r``-th record. Masked
        spins are drawn uniformly (they are free in the dropped problem).
    """
    kernel = _compiled()
    G, R, n = h.shape
    if not factors:
        raise ValueError("factors must hold at least one sweep, got an empty schedule")
    hn = h.detach().cpu().to(torch.float64).numpy()
    Jn = np.ascontiguousarray(J.detach().cpu().to(torch.float64).numpy())
    act = np.ones((G, R, n), dtype=np.bool_) if mask is None else (mask.detach().cpu() != 0).numpy()
    bn = np.ascontiguousarray(beta.detach().cpu().to(torch.float64).numpy().reshape(G, R))
    seeds = np.random.default_rng(seed).integers(0, 2**63, size=(G, R), dtype=np.uint64)
    out = np.empty((G, R, records * chains, n), dtype=np.int8)
    kernel(
        np.ascontiguousarray(hn),
        Jn,
        np.ascontiguousarray(act),
        bn,
        np.asarray(factors, dtype=np.float64),
        chains,
        record_every,
        records,
        seeds,
        out,
    )
    return torch.from_numpy(out)
