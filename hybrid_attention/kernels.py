"""Attention kernels: exact Boltzmann marginals of every query of a layer (docs/theory.md section 3).

Owns the layer-shaped kernels built on the exact oracle's factorised core (:mod:`hybrid_attention.exact`):

* :func:`causal_marginals`: ``h (B, H, T, T)``, query ``i`` sees keys ``0..i``; prefixes of one length share one
  coupling table per head, and short prefixes are grouped into one padded call by :func:`plan_groups` (a dynamic
  program over a per-call overhead, which the sampler bridge reuses with a sampler's own overhead);
* :func:`bidirectional_marginals`: ``h (B, H, Tq, T)``, every query sees all keys;
* :func:`shared_marginals`: ``h (R, H, n)``, many rows per head sharing one coupling matrix;
* :func:`causal_marginals_loop`: the slow, obviously correct reference (one enumeration per query);
* :func:`normalised_weights`: the layer's normalisation ``a_j = alpha_j / sum_k alpha_k``, ``alpha = (1 + m)/2``;
* ``exact_weights``: the exact layer's weights (unvalidated, called by the attention layer), which redo in log
  space the rows where ``alpha = (1 + m) / 2`` has underflowed (``log alpha_j = log p(s_j = +1)`` by log-sum-exp,
  ``_log_alpha``).

Public kernels validate their raw tensors and call the unvalidated ``_``-kernels, which the attention layer calls
directly after validating once per forward (the training hot path).

Example:
    >>> import torch
    >>> from hybrid_attention import kernels
    >>> m = kernels.causal_marginals(torch.zeros(1, 1, 3, 3), torch.zeros(1, 3, 3))
    >>> m[0, 0].tolist()
    [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
"""

from __future__ import annotations

import math
import threading
from typing import Any

import torch

# the factorised core (coupling tables, field factors, the log-space and upcast paths) has one owner, the oracle:
# the kernels call it through the module, so there is one definition of each numerical path
from . import banded, checks, exact

__all__ = [
    "causal_marginals",
    "bidirectional_marginals",
    "shared_marginals",
    "causal_marginals_loop",
    "plan_groups",
    "normalised_weights",
]


def _kernel_inputs(
    h: Any,
    J: Any,
    beta: Any,
    T: int,
    max_spins: int | None,
    visible: torch.Tensor | None = None,
    *,
    band: list[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Validate ``h`` (already shape-checked, ``H = h.shape[1]``), ``J`` and ``beta`` for a kernel over ``T`` keys;
    return ``J``'s leading ``T x T`` block in ``h``'s dtype and ``beta`` as an ``(H,)`` tensor. ``visible`` (a
    ``(Tq, T)`` bool mask) restricts the finiteness check of ``h`` to the entries the kernel reads. With ``band`` (a
    list to fill), couplings in a band ``1 <= W < T - 1`` put ``W`` into it and skip the enumeration size limit
    (the caller takes the transfer matrix of :mod:`hybrid_attention.banded`) when the band is cheaper than
    enumeration or ``T`` is above its limit (:func:`hybrid_attention.banded.band_pays`)."""
    if not h.is_floating_point():
        raise TypeError(f"h must be a floating-point tensor, got dtype {h.dtype}")
    H = h.shape[1]
    Jt = checks.check_head_couplings(J, H, T)
    beta_h = checks.beta_per_head(beta, H, h)
    W = banded.bandwidth(Jt) if band is not None else 0
    if 1 <= W < T - 1 and (
        banded.band_pays(T, W, causal=True) or T > (exact.MAX_SPINS if max_spins is None else int(max_spins))
    ):
        band.append(W)
    else:
        exact.check_size(T, max_spins)
    hd = h.detach() if visible is None else h.detach().masked_fill(~visible, 0.0)
    if not bool(torch.isfinite(hd).all()):
        where = "" if visible is None else " on the keys each query sees"
        raise ValueError(f"h (the fields / attention scores) must be finite{where}")
    return Jt.to(h.dtype), beta_h


def shared_marginals(h: torch.Tensor, J: torch.Tensor, beta: Any = 1.0) -> torch.Tensor:
    """Exact marginals for many rows per head sharing one coupling matrix.

    Args:
        h: fields ``(R, H, n)`` (R rows: batch elements, queries, ...), finite.
        J: couplings ``(H, n', n')``, ``n' >= n`` (leading ``n x n`` block used): finite, symmetric, zero diagonal.
        beta: a positive scalar, ``H`` values, or a tensor of shape ``()`` or ``(H,)``.

    Returns:
        ``(R, H, n)`` marginals. Builds each head's coupling table once; the field part is two GEMMs.

    Raises:
        ValueError: wrong shapes, non-finite ``h`` or ``J``, an asymmetric ``J`` or one with a nonzero diagonal,
            ``beta <= 0`` or not finite.
    """
    if not isinstance(h, torch.Tensor) or h.ndim != 3:
        raise ValueError(f"h must be a tensor of shape (R, H, n), got {getattr(h, 'shape', type(h).__name__)}")
    Jt, beta_h = _kernel_inputs(h, J, beta, h.shape[-1], None)
    return _shared_marginals(h, Jt, beta_h)


def _shared_marginals(h: torch.Tensor, J: torch.Tensor, beta_h: torch.Tensor) -> torch.Tensor:
    """:func:`shared_marginals` without validation: ``h (R, H, n)``, ``J (H, n, n)`` symmetric in ``h``'s dtype,
    ``beta_h (H,)``."""
    R, H, n = h.shape
    if R == 0:
        return h * 0.0  # empty, but on h's graph
    a = n // 2
    # Without autograd the coupling factor is first built without any exp over the 2^n table (_factored_marginals:
    # the cross term as an outer product of two small exponential tables, written into a reused buffer); where the
    # couplings between the halves are too strong for that, the table is built scaled by beta into the buffer and
    # exponentiated in place: beta C (one GEMM), its range (one read), exp(beta (C - Cmax)) (two in-place passes).
    # Reused buffers: no page faults for a fresh multi-MiB table per call. With autograd, the functional form below
    # (the same values up to rounding).
    fast = not (torch.is_grad_enabled() and (h.requires_grad or J.requires_grad or beta_h.requires_grad))
    if fast:
        m = _factored_marginals(h.transpose(0, 1), J, beta_h, a)
        if m is not None:
            return m.transpose(0, 1)
        buf = _scratch("kernel table", (H, 1 << (n - a), 1 << a), h.dtype, h.device)
        bC = exact.coupling_table(J, a, scale=beta_h, out=buf)  # beta C: (H, 2^b, 2^a)
        bmin, bmax = _table_range(bC)
        crange = bmax - bmin
    else:
        C = exact.coupling_table(J, a)  # (H, 2^b, 2^a)
        Cd = C.detach()
        cmin, cmax = _table_range(Cd)
        Cmax = cmax.reshape(H, 1, 1)
        crange = (cmax - cmin) * beta_h.detach()
    if bool((crange > exact.RANGE_LIMIT.get(h.dtype, 50.0)).any()):
        if exact.upcast_ok(h.dtype, crange):
            return _shared_marginals(h.double(), J.double(), beta_h.double()).to(h.dtype)
        hr = h.transpose(0, 1).reshape(H * R, n)
        Jr = J.repeat_interleave(R, dim=0)
        br = beta_h.repeat_interleave(R)
        _, m, _ = exact.logspace_stats(hr, Jr, br, a, False)
        return m.reshape(H, R, n).transpose(0, 1)
    hh = h.transpose(0, 1)  # (H, R, n)
    if fast:
        return _fast_marginals(hh, bC.sub_(bmax[:, None, None]).exp_(), beta_h, a).transpose(0, 1)
    xA, xB, _ = exact.field_factors(hh, beta_h[:, None].expand(H, R), a)  # (H, R, 2^a), (H, R, 2^b)
    K = torch.exp(beta_h[:, None, None] * (C - Cmax))
    YA = torch.bmm(xB, K)  # (H, R, 2^a)
    YB = torch.bmm(xA, K.transpose(1, 2))  # (H, R, 2^b)
    _, m, _ = exact.stats_from_factors(xA, xB, YA, YB, a, False)
    return m.transpose(0, 1)


def _fast_marginals(hh: torch.Tensor, K: torch.Tensor, beta_h: torch.Tensor, a: int) -> torch.Tensor:
    """The factorised marginals without autograd (:mod:`.exact`'s core, fewer passes): the field factors
    ``xA = exp(beta hA . sA - max)`` exponentiated in place, ``YA = xB K`` and ``YB = xA K^T`` (the two GEMMs), then
    ``m_A = (xA YA) SA / Z`` with the normalisation applied to the ``(H, R, a)`` result instead of the weights.

    Args:
        hh: ``(H, R, n)`` fields; K: ``(H, 2^b, 2^a)`` the coupling factor ``exp(beta (C - max C))``; beta_h ``(H,)``.

    Returns:
        ``(H, R, n)`` marginals.
    """
    n = hh.shape[-1]
    SA = exact.enumerate_states(a, dtype=hh.dtype, device=hh.device)
    SB = exact.enumerate_states(n - a, dtype=hh.dtype, device=hh.device)
    hb = hh * beta_h[:, None, None]
    xA, xB = hb[..., :a] @ SA.transpose(0, 1), hb[..., a:] @ SB.transpose(0, 1)  # beta h . s, (H, R, 2^a / 2^b)
    xA.sub_(xA.amax(-1, keepdim=True)).exp_()
    xB.sub_(xB.amax(-1, keepdim=True)).exp_()
    pA = torch.bmm(xB, K).mul_(xA)  # (H, R, 2^a): unnormalised marginal weights of the A half's configurations
    pB = torch.bmm(xA, K.transpose(1, 2)).mul_(xB)
    Z = pA.sum(-1, keepdim=True)
    return torch.cat([pA @ SA, pB @ SB], dim=-1).div_(Z)


def _factored_marginals(hh: torch.Tensor, J: torch.Tensor, beta_h: torch.Tensor, a: int) -> torch.Tensor | None:
    """The marginals without autograd and without exponentiating a ``2**n`` table: ``(H, R, n)``, or ``None`` when
    the couplings between the halves are too strong for it (the caller takes the table path then).

    The coupling factor splits as ``exp(beta C) = exp(beta cA) exp(beta cB) exp(beta w(cB) . sA)`` with the halves'
    own energies ``cA``, ``cB`` and ``w = SB JBA`` ``(2**b, a)``: the first two are per-configuration factors, folded
    into the field factors ``xA``, ``xB`` (vectors, as the fields'), and the cross factor is a product over A's spins,
    so with A split into a low part A1 and a high part A2 it is the outer product of two small exponential tables
    ``E1 (2**b, 2**a1)`` and ``E2 (2**b, 2**a2)`` (one GEMM and one ``exp`` for both): one multiply pass writes ``K``,
    where the table path needs a GEMM, a range pass, a shift and an ``exp`` over all ``2**n`` entries (together as
    long as the two products with ``K``). The cross exponent is bounded by ``|beta w(cB) . sA| <= beta |w(cB)|_1``;
    where twice its largest value is within the dtype's ``RANGE_LIMIT`` (the table path's bound on its range), ``K``
    lies in ``[exp(-RANGE_LIMIT / 2), exp(RANGE_LIMIT / 2)]`` unshifted, and the largest field factors (1 each) keep
    ``Z`` above ``exp(-RANGE_LIMIT / 2)``; otherwise ``None``. float32 and float64 only (``None`` for the half
    precisions, whose range could not hold ``2**b exp(RANGE_LIMIT / 2)``).

    Args:
        hh: ``(H, R, n)`` fields; J: ``(H, n, n)`` symmetric couplings; beta_h: ``(H,)``; a: spins in the low half.
    """
    H, R, n = hh.shape
    if hh.dtype not in (torch.float32, torch.float64):
        return None
    if H == 1:  # plain matrix products: a broadcast (2^b, b) @ (1, b, a) would expand and copy its left factor
        m = _factored_one(hh[0], J[0], beta_h[0], a)
        return None if m is None else m[None]
    b, a1 = n - a, a // 2
    dt, dev = hh.dtype, hh.device
    SA, SB = (exact.enumerate_states(k, dtype=dt, device=dev) for k in (a, b))
    beta = beta_h[:, None, None]
    w = (SB @ J[:, a:, :a]).mul_(beta)  # (H, 2^b, a): beta times the field of B's configuration on A's spins
    if 2.0 * float(w.abs().sum(-1).amax()) > exact.RANGE_LIMIT.get(dt, 50.0):
        return None
    E = (w @ _split_states(a1, a - a1, dt, dev)).exp_()  # (H, 2^b, 2^a1 + 2^a2): [E1 | E2]
    K = _scratch("kernel table", (H, 1 << b, 1 << (a - a1), 1 << a1), dt, dev)
    K = torch.mul(E[..., 1 << a1 :, None], E[..., None, : 1 << a1], out=K).view(H, 1 << b, 1 << a)  # cA1 + 2^a1 cA2
    cA = ((SA @ J[:, :a, :a]) * SA).sum(-1).mul_(0.5 * beta[..., 0])  # (H, 2^a): beta times A's own coupling energy
    cB = ((SB @ J[:, a:, a:]) * SB).sum(-1).mul_(0.5 * beta[..., 0])  # (H, 2^b)
    hb = hh * beta
    xA = torch.baddbmm(cA[:, None, :], hb[..., :a], SA.T.expand(H, a, 1 << a))  # log field factors (H, R, 2^a)
    xB = torch.baddbmm(cB[:, None, :], hb[..., a:], SB.T.expand(H, b, 1 << b))  # (H, R, 2^b)
    xA.sub_(xA.amax(-1, keepdim=True)).exp_()  # largest entry 1
    xB.sub_(xB.amax(-1, keepdim=True)).exp_()
    pA = torch.bmm(xB, K).mul_(xA)  # unnormalised marginal weights of A's configurations
    pB = torch.bmm(xA, K.transpose(1, 2)).mul_(xB)
    return torch.cat([pA @ SA, pB @ SB], dim=-1).div_(pA.sum(-1, keepdim=True))


def _factored_one(h: torch.Tensor, J: torch.Tensor, beta: torch.Tensor, a: int) -> torch.Tensor | None:
    """:func:`_factored_marginals` of one head: ``h (R, n)``, ``J (n, n)``, ``beta`` 0-dim; ``(R, n)`` or ``None``."""
    R, n = h.shape
    b, a1 = n - a, a // 2
    dt, dev = h.dtype, h.device
    SA, SB = (exact.enumerate_states(k, dtype=dt, device=dev) for k in (a, b))
    w = (SB @ J[a:, :a]).mul_(beta)  # (2^b, a)
    if 2.0 * float(w.abs().sum(-1).amax()) > exact.RANGE_LIMIT.get(dt, 50.0):
        return None
    E = (w @ _split_states(a1, a - a1, dt, dev)).exp_()  # (2^b, 2^a1 + 2^a2): [E1 | E2]
    K = _scratch("kernel table", (1 << b, 1 << (a - a1), 1 << a1), dt, dev)
    K = torch.mul(E[:, 1 << a1 :, None], E[:, None, : 1 << a1], out=K).view(1 << b, 1 << a)
    cA = ((SA @ J[:a, :a]) * SA).sum(-1).mul_(0.5 * beta)
    cB = ((SB @ J[a:, a:]) * SB).sum(-1).mul_(0.5 * beta)
    hb = h * beta
    xA = torch.addmm(cA, hb[:, :a], SA.T)  # log field factors (R, 2^a)
    xB = torch.addmm(cB, hb[:, a:], SB.T)
    xA.sub_(xA.amax(-1, keepdim=True)).exp_()
    xB.sub_(xB.amax(-1, keepdim=True)).exp_()
    pA = (xB @ K).mul_(xA)
    pB = (xA @ K.T).mul_(xB)
    return torch.cat([pA @ SA, pB @ SB], dim=-1).div_(pA.sum(-1, keepdim=True))


_SPLIT: dict[tuple, torch.Tensor] = {}


def _split_states(a1: int, a2: int, dtype: torch.dtype, device: Any) -> torch.Tensor:
    """The block-diagonal ``(a1 + a2, 2**a1 + 2**a2)`` matrix ``[[SA1^T, 0], [0, SA2^T]]`` (cached): ``w @`` it gives
    the exponents of both small tables of :func:`_factored_marginals` in one GEMM."""
    key = (a1, a2, dtype, str(device))
    if key not in _SPLIT:
        out = torch.zeros(a1 + a2, (1 << a1) + (1 << a2), dtype=dtype, device=device)
        out[:a1, : 1 << a1] = exact.enumerate_states(a1, dtype=dtype, device=device).T
        out[a1:, 1 << a1 :] = exact.enumerate_states(a2, dtype=dtype, device=device).T
        _SPLIT[key] = out
    return _SPLIT[key]


def _table_range(C: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(min, max)`` of each table of ``C`` ``(H, rows, cols)``, each ``(H,)``. A whole-tensor ``aminmax`` for one
    table (one pass), else ``amin`` and ``amax`` over the last dimension: ``aminmax`` along a dimension runs ~6x
    slower than both together on CPU (torch 2.13)."""
    flat = C.reshape(C.shape[0], -1)
    if flat.shape[0] == 1:
        lo, hi = torch.aminmax(flat)
        return lo.reshape(1), hi.reshape(1)
    return flat.amin(-1), flat.amax(-1)


_SCRATCH = threading.local()


def _scratch(name: str, shape: tuple[int, ...], dtype: torch.dtype, device: Any) -> torch.Tensor:
    """A reusable uninitialised CPU tensor per thread, name and dtype (grown when too small; above 64 MiB, or off the
    CPU, a fresh one): a fresh multi-MiB table per call costs a page fault per 4 KiB, on a virtual machine about as
    much as the arithmetic on it. Valid until the next request of the same name: never returned to a caller."""
    numel = math.prod(shape)
    if torch.device(device).type != "cpu" or numel * torch.empty(0, dtype=dtype).element_size() > 64 << 20:
        return torch.empty(shape, dtype=dtype, device=device)
    pool = _SCRATCH.__dict__.setdefault("pool", {})
    buf = pool.get((name, dtype))
    if buf is None or buf.numel() < numel:
        pool[(name, dtype)] = buf = torch.empty(numel, dtype=dtype)
    return buf[:numel].view(shape)


# Cost model for grouping prefixes: a kernel call costs about this many (row, configuration) pairs of work
# in fixed overhead (measured: ~0.5 ms per call against ~0.5 ns per pair on a laptop core).
_CALL_OVERHEAD_PAIRS = 1_000_000


def plan_groups(T: int, rows: int, overhead: float = _CALL_OVERHEAD_PAIRS) -> list[tuple[int, int]]:
    """Partition prefix lengths ``1..T`` into consecutive groups ``(lo, hi)`` computed in one call each.

    A group pads its prefixes to ``hi`` spins with free, decoupled spins (exact: they drop out), costing
    ``rows * (hi - lo + 1) * 2**hi`` pairs plus one call ``overhead`` (in the same units); dynamic programming
    minimises the total. The sampler bridge uses it too, with a sampler's own overhead.
    """
    best = [0.0] + [float("inf")] * T
    cut = [0] * (T + 1)
    for hi in range(1, T + 1):
        for lo in range(1, hi + 1):
            c = best[lo - 1] + overhead + rows * (hi - lo + 1) * float(1 << hi)
            if c < best[hi]:
                best[hi], cut[hi] = c, lo
    groups, hi = [], T
    while hi > 0:
        groups.append((cut[hi], hi))
        hi = cut[hi] - 1
    return groups[::-1]


def causal_marginals(
    h: torch.Tensor, J: torch.Tensor, beta: Any = 1.0, *, max_spins: int | None = None
) -> torch.Tensor:
    """Causal Boltzmann marginals for every query: query ``i`` is the Ising system of keys ``0..i``.

    Args:
        h: scores ``(B, H, T, T)``; ``h[b, hd, i, j]`` is the field of key ``j`` for query ``i`` (entries with
            ``j > i`` are ignored and may hold anything, e.g. ``-inf``; the others must be finite).
        J: couplings ``(H, T', T')`` with ``T' >= T`` (the leading ``T x T`` block is used), finite, symmetric and
            with a zero diagonal (docs/theory.md section 2: there are no self-couplings; a nonzero diagonal is refused,
            not silently dropped), each to ``1e-6 * max(1, max |J|)``.
        beta: a positive scalar, ``H`` values, or a tensor of shape ``()`` or ``(H,)`` (may be learnable).

    Returns:
        ``m`` of shape ``(B, H, T, T)`` with ``m[..., i, j] = <s_j>`` for ``j <= i`` and 0 above the diagonal.

    Raises:
        ValueError: wrong shapes, ``T`` above ``max_spins`` with a full ``J``, non-finite visible scores or couplings, an asymmetric
            ``J`` (e.g. only its upper triangle filled in) or one with a nonzero diagonal, ``beta`` not finite or
            ``<= 0``; raised before any work.

    Couplings in a band ``|j - k| <= W`` with ``1 <= W < T - 1`` take the transfer matrix of
    :mod:`hybrid_attention.banded` instead, at any ``T`` (``max_spins`` does not apply), unless enumeration is the
    cheaper of the two (a band nearly as wide as ``T``); a full ``J`` is enumerated.
    Queries with the same prefix length share one coupling table per head, built once; the field part is two
    GEMMs per group of prefixes. Short prefixes are grouped into one call (padded with free spins, which drop
    out exactly) so Python overhead does not dominate; total work is about ``B H sum_m 2**m`` multiply-adds
    for the long prefixes (docs/theory.md section 3). Autograd gives exact gradients for ``h``, ``J`` and ``beta``.
    """
    if not isinstance(h, torch.Tensor) or h.ndim != 4 or h.shape[-1] != h.shape[-2]:
        raise ValueError(f"h must have shape (B, H, T, T), got {tuple(getattr(h, 'shape', ()))}")
    T = h.shape[-1]
    tril = torch.ones(T, T, dtype=torch.bool, device=h.device).tril()
    band: list[int] = []
    Jt, beta_h = _kernel_inputs(h, J, beta, T, max_spins, visible=tril, band=band)
    if band:  # couplings in a band: the transfer matrix, at any T
        la = banded.layer_log_alpha(h, banded.diagonals(Jt.to(h.dtype), band[0]), beta_h)
        return (2.0 * la.exp() - 1.0).masked_fill(~tril, 0.0)
    return _causal_marginals(h, Jt, beta_h)


def _causal_marginals(h: torch.Tensor, J: torch.Tensor, beta_h: torch.Tensor) -> torch.Tensor:
    """:func:`causal_marginals` without validation (the attention layer's hot path): ``h (B, H, T, T)``,
    ``J (H, T', T')`` symmetric (leading block used), ``beta_h (H,)``, all in ``h``'s dtype."""
    B, H, T, _ = h.shape
    if B == 0:
        return h * 0.0  # empty, but on h's graph
    J = J.to(h.dtype)
    causal = torch.ones(T, T, dtype=torch.bool, device=h.device).tril()
    parts = []
    for lo, hi in plan_groups(T, B * H):
        g = hi - lo + 1
        if g == 1:  # one prefix: every key of the block visible, nothing to mask (multiplying by 1 changes nothing)
            m = _shared_marginals(h[:, :, hi - 1, :hi], J[:, :hi, :hi], beta_h).reshape(B, H, 1, hi)
            parts.append(torch.nn.functional.pad(m, (0, T - hi)))
            continue
        pm = causal[lo - 1 : hi, :hi]  # (g, hi): key j visible to query i = m - 1
        pmf = pm.to(h.dtype)
        hg = h[:, :, lo - 1 : hi, :hi] * pmf  # (B, H, g, hi)
        Jg = J[:, None, :hi, :hi] * (pmf[:, :, None] * pmf[:, None, :])  # (H, g, hi, hi)
        m = _shared_marginals(hg.reshape(B, H * g, hi), Jg.reshape(H * g, hi, hi), beta_h.repeat_interleave(g))
        m = m.reshape(B, H, g, hi) * pmf
        parts.append(torch.nn.functional.pad(m, (0, T - hi)))
    return torch.cat(parts, dim=2)


def bidirectional_marginals(
    h: torch.Tensor, J: torch.Tensor, beta: Any = 1.0, *, max_spins: int | None = None
) -> torch.Tensor:
    """Bidirectional marginals: every query sees all ``T`` keys. ``h (B, H, Tq, T)`` finite, ``J (H, T', T')`` with
    ``T' >= T`` (finite, symmetric, zero diagonal), ``beta`` as for :func:`causal_marginals`; returns
    ``(B, H, Tq, T)``. Raises ``ValueError`` as :func:`causal_marginals` does."""
    if not isinstance(h, torch.Tensor) or h.ndim != 4:
        raise ValueError(f"h must have shape (B, H, Tq, T), got {tuple(getattr(h, 'shape', ()))}")
    band: list[int] = []
    Jt, beta_h = _kernel_inputs(h, J, beta, h.shape[-1], max_spins, band=band)
    if band:
        la = banded.layer_log_alpha(h, banded.diagonals(Jt.to(h.dtype), band[0]), beta_h, causal=False)
        return 2.0 * la.exp() - 1.0
    return _bidirectional_marginals(h, Jt, beta_h)


def _bidirectional_marginals(h: torch.Tensor, J: torch.Tensor, beta_h: torch.Tensor) -> torch.Tensor:
    """:func:`bidirectional_marginals` without validation (``J`` of shape ``(H, T', T')``, ``beta_h (H,)``)."""
    B, H, Tq, T = h.shape
    rows = h.permute(0, 2, 1, 3).reshape(B * Tq, H, T)
    m = _shared_marginals(rows, J[:, :T, :T].to(h.dtype), beta_h)
    return m.reshape(B, Tq, H, T).permute(0, 2, 1, 3)


def causal_marginals_loop(h: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
    """The straightforward reference for :func:`causal_marginals` (beta = 1): every (batch, head, query) problem
    enumerated on its own over the ``2**(i+1)`` configurations of its prefix. Slow; for benchmarks and demos.
    Validates like :func:`causal_marginals`."""
    if not isinstance(h, torch.Tensor) or h.ndim != 4 or h.shape[-1] != h.shape[-2]:
        raise ValueError(f"h must have shape (B, H, T, T), got {tuple(getattr(h, 'shape', ()))}")
    B, H, T, _ = h.shape
    _kernel_inputs(h, J, 1.0, T, None, visible=torch.ones(T, T, dtype=torch.bool, device=h.device).tril())
    out = torch.zeros_like(h)
    for b in range(B):
        for hd in range(H):
            for i in range(T):
                S = exact.enumerate_states(i + 1, dtype=h.dtype)
                Jm = J[hd, : i + 1, : i + 1].to(h.dtype)
                L = S @ h[b, hd, i, : i + 1] + 0.5 * ((S @ Jm) * S).sum(-1)
                out[b, hd, i, : i + 1] = exact.table_marginals(torch.softmax(L, 0))
    return out


def normalised_weights(m: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """The layer's attention weights from marginals: ``alpha = (1 + m) / 2`` normalised over the visible keys.

    ``alpha`` is clamped below at ``sqrt(tiny)`` of its dtype (1e-19 in float32, far below the 6e-8 resolution
    of ``1 + m`` near ``m = -1``, so only exact zeros are affected): when all visible keys are saturated negative
    the row becomes uniform over them instead of ``0 / 0``, and the backward pass (which divides by the squared
    sum) stays finite.

    Args:
        m: marginals ``(*batch, T)`` in ``[-1, 1]`` (values on invisible keys are ignored).
        visible: boolean ``(*batch, T)`` (broadcastable) mask of the keys each row sees.

    Returns:
        ``(*batch, T)`` weights in ``m``'s dtype, zero on invisible keys, rows summing to 1.
    """
    alpha = (1.0 + m) / 2.0
    floor = torch.finfo(alpha.dtype).tiny ** 0.5
    alpha = alpha.clamp_min(floor) * visible.to(alpha.dtype)
    return alpha / alpha.sum(-1, keepdim=True)


# A row's weights are recomputed in log space when a visible alpha = (1 + m) / 2 is below the clamp floor of
# normalised_weights (1 + m rounded to 0 or below: in float32 from p(s_j = +1) < 3e-8, scores below about -9), or
# when every visible alpha is below sqrt(eps) (3.5e-4 in float32: 1 + m has lost at least half its digits, so the
# ratios alpha_j / sum alpha would be off by up to 1e-4 relative and more). Rows with one visible key are left
# alone: their weight is exactly 1 either way. The other rows keep today's formula bit for bit.
def _underflow_rows(m: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
    """Boolean ``(*batch,)`` mask of the rows of ``m (*batch, T)`` whose weights take the log-space path."""
    md, fi = m.detach(), torch.finfo(m.dtype)
    # (1 + m) / 2 is monotone in m (also after rounding): reduce m first, transform only the extremes
    amin = (1.0 + md.masked_fill(~visible, 1.0).amin(-1)) / 2.0
    amax = (1.0 + md.masked_fill(~visible, -1.0).amax(-1)) / 2.0
    return (visible.sum(-1) >= 2) & ((amin < fi.tiny**0.5) | (amax < fi.eps**0.5))


# p(s_j = +1) Z' below this (float64, Z' the partition function in units of the factors' maxima) means the
# factorised products may have lost configurations with s_j = +1 to float64's exponent range (it ends near 1e-308):
# such rows take one log-sum-exp per spin over the materialised energies instead.
_DEEP = 1e-280


def _log_alpha(h: torch.Tensor, J: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """``log alpha_j = log p(s_j = +1)`` for rows sharing one coupling matrix, exact for any finite fields.

    Args:
        h: fields ``(R, n)``, finite.
        J: couplings ``(n, n)``, symmetric with a zero diagonal (validated by the caller).
        beta: inverse temperature, a 0-dim tensor.

    Returns:
        ``(R, n)`` float64: ``log p(s_j = +1) = log sum_{s: s_j = +1} exp L(s) - log sum_s exp L(s)`` with
        ``L(s) = beta (h . s + sum_{j<k} J_jk s_j s_k)``; finite where ``(1 + m) / 2`` would be 0 (e.g.
        ``-2 beta |h_j|`` for a free spin pinned by a field ``h_j << 0``), differentiable by autograd.

    The factorised product of the exact core (:mod:`hybrid_attention.exact`) in float64, summing the positive
    terms with ``s_j = +1`` directly instead of forming ``1 + m`` (which cancels): float64 holds them down to about
    ``exp(-700)`` of the largest factors. Rows beyond that (fields of several hundred) take one log-sum-exp per spin
    over the materialised energies. The fallback for the rows :func:`exact_weights` redoes, not the hot path.

    Example:
        >>> import torch
        >>> la = _log_alpha(torch.tensor([[-60.0, 0.0]]), torch.zeros(2, 2), torch.tensor(1.0))
        >>> [round(v, 3) for v in la[0].tolist()]  # log sigmoid(2 h)
        [-120.0, -0.693]
    """
    R, n = h.shape
    a = n // 2
    h64, b64, J64 = h.double(), beta.double(), J.double()
    SA = exact.enumerate_states(a, dtype=torch.float64, device=h.device)
    SB = exact.enumerate_states(n - a, dtype=torch.float64, device=h.device)
    C = exact.coupling_table(J64, a)  # (2^b, 2^a)
    K = torch.exp(b64 * (C - C.detach().max()))
    xA, xB, _ = exact.field_factors(h64, b64.expand(R), a)  # (R, 2^a), (R, 2^b), each with largest entry 1
    pA, pB = xA * (xB @ K), xB * (xA @ K.T)  # unnormalised marginal weights of the two halves' configurations
    up = torch.cat([pA @ (SA > 0).double(), pB @ (SB > 0).double()], dim=-1)  # (R, n): p(s_j = +1) Z'
    deep = (up.detach() < _DEEP).any(-1)
    up = torch.where(deep[:, None], 1.0, up)  # safe input for the log on rows redone below (no inf in backward)
    la = torch.log(up) - torch.log(pA.sum(-1, keepdim=True).clamp_min(_DEEP))
    for idx in deep.nonzero().squeeze(1).split(max(1, exact.CHUNK_ELEMENTS >> n)):
        fA, fB = h64[idx, :a] @ SA.T, h64[idx, a:] @ SB.T
        L = (b64 * (fA[:, None, :] + fB[:, :, None] + C)).reshape(len(idx), 1 << n)  # c = cA + 2^a cB
        # bit j of c is spin j and splits c = (high, bit, low); the configurations with s_j = +1 are bit = 0
        lse = [torch.logsumexp(L.view(-1, 1 << (n - 1 - j), 2, 1 << j)[:, :, 0, :], dim=(1, 2)) for j in range(n)]
        la = la.index_put((idx,), torch.stack(lse, dim=-1) - torch.logsumexp(L, dim=-1, keepdim=True))
    return la


def _log_weights(h: torch.Tensor, J: torch.Tensor, beta_h: torch.Tensor, rows: torch.Tensor, causal: bool):
    """Weights ``(len(rows), T)`` of the rows ``rows = (b, head, query)`` (a ``(R, 3)`` index tensor) of a layer
    with scores ``h (B, H, Tq, T)``, from :func:`_log_alpha`: ``softmax_j(log alpha_j)`` over the visible keys
    (in float64, then cast to ``h``'s dtype). Rows are grouped by head and by prefix length (causal: query ``i`` is
    the Ising system of keys ``0..i``), so each group shares one coupling table."""
    T = h.shape[-1]
    out = h.new_zeros(rows.shape[0], T)
    sizes = rows[:, 2] + 1 if causal else torch.full_like(rows[:, 2], T)
    for hd in rows[:, 1].unique().tolist():
        for n in sizes[rows[:, 1] == hd].unique().tolist():
            sel = ((sizes == n) & (rows[:, 1] == hd)).nonzero().squeeze(1)
            b, q = rows[sel, 0], rows[sel, 2]
            la = _log_alpha(h[b, hd, q, :n], J[hd, :n, :n], beta_h[hd])
            w = torch.softmax(la, dim=-1).to(h.dtype)
            out = out.index_put((sel,), torch.nn.functional.pad(w, (0, T - n)))
    return out


def exact_weights(h: torch.Tensor, J: torch.Tensor, beta_h: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
    """The exact layer's attention weights (unvalidated: the attention layer validates once per forward).

    Computes the marginals with :func:`causal_marginals` / :func:`bidirectional_marginals` and the weights with
    :func:`normalised_weights`; the rows where ``alpha = (1 + m) / 2`` has underflowed (a visible ``alpha`` rounded
    to 0, or every visible ``alpha`` below ``sqrt(eps)`` of the dtype, so ``1 + m`` has lost at least half its
    digits) are recomputed from ``log alpha`` (:func:`_log_alpha`), so weights and gradients stay finite and exact
    for any scores. All other rows are bitwise what :func:`normalised_weights` gives (and so are their gradients).

    Args:
        h: scores ``(B, H, Tq, T)`` (causal: ``Tq == T``, entries above the diagonal ignored); finite where visible.
        J: couplings ``(H, T', T')``, ``T' >= T``, symmetric, in ``h``'s dtype.
        beta_h: ``(H,)`` inverse temperatures.
        causal: query ``i`` sees keys ``0..i`` (dropped, not pinned, beyond).

    Returns:
        ``(B, H, Tq, T)`` weights, zero on masked keys, rows summing to 1.
    """
    B, H, Tq, T = h.shape
    vis = torch.ones(Tq, T, dtype=torch.bool, device=h.device)
    if causal:
        vis = vis.tril()
    m = _causal_marginals(h, J, beta_h) if causal else _bidirectional_marginals(h, J, beta_h)
    w = normalised_weights(m, vis)
    bad = _underflow_rows(m, vis)
    if bool(bad.any()):
        rows = bad.nonzero()  # (R, 3): (b, head, query)
        w = w.index_put(tuple(rows.unbind(1)), _log_weights(h, J, beta_h, rows, causal))
    return w
