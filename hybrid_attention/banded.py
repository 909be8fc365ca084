"""Banded couplings: exact marginals at any length by a transfer matrix in log space (docs/banded.md).

Owns the band representation and its engine:

* :func:`bandwidth` (the largest key distance with a nonzero coupling), :func:`diagonals` (a banded ``J`` as its ``W``
  diagonals, ``c[..., d-1, j] = J[..., j-d, j]``; a ``J`` with couplings outside the band is refused),
  :func:`dense_couplings` (back to a symmetric, zero-diagonal ``J``) and :func:`check_band`;
* :func:`log_marginals`: ``log P(s_j = +1)`` of independent rows (the Ising-problem path of
  :func:`hybrid_attention.exact.marginals`);
* :func:`layer_log_alpha`: ``log alpha_ij = log P_i(s_j = +1)`` of every query of an attention layer at once (causal or
  bidirectional).

How. With the window ``w_j = (s_{j-W+1}, ..., s_j)`` (2**W states; bit ``k`` of the state index is ``b = (1 - s) / 2``
of spin ``j - k``) the law of a row is a chain of order ``W``. The forward pass advances
``A_j(w_j) = logaddexp over s_{j-W} of [A_{j-1}(w_{j-1}) + beta G_j(u)] + beta h_j s_j`` with
``G_j(u) = s_j sum_d c[d-1, j] s_{j-d}`` on the ``W + 1`` spins ``u = (s_{j-W}, ..., s_j)``; the backward pass is its
mirror, and ``log P(s_j = +1) = logsumexp_{w: s_j = +1}(A_j + B_j) - logsumexp_w(A_j + B_j)``, normalised per position
(no global ``log Z`` is subtracted, so nothing cancels at large fields). Each step's table and field are shifted by
their maxima (constants that cancel in that ratio), so ``A`` and ``B`` stay within about ``T log 2`` of zero.
Positions before 0 are free ghost spins with no coupling (they change no marginal). All rows and all queries advance
together: a tensor ``(B, H, queries, 2**W)`` per position, and a query whose last key has passed leaves the tensor.
Cost about ``2 T 2**W`` log-add-exps per row each way; plain torch ops, so autograd gives exact gradients.

The block engine (tried first, float32/float64, ``W <= 10``): ``W`` positions at a time, so a block's spins replace
the whole window and one block is a dense ``2**W x 2**W`` transfer matrix ``exp(beta E(w_out, w_in) - max)`` shared by
every query and row, applied to all of them as one matrix product; causal queries are grouped by ``i mod W`` so every
chain ends on a block boundary, and each spin's marginal is read from the posterior of the block window that holds it.
The backward pass is the explicit adjoint of the two sweeps (:mod:`hybrid_attention.banded_block`: dense matrices
below ``W = 8``, from there factorised over half-windows, two ``2**(3W/2)`` contractions instead of one ``4**W``
product). Messages are rescaled per block, exact while the block energies span at most ``_SCALED_LIMIT``; fields too large for the posterior's range take
a read-out with each spin's own field left out (:func:`_block_sweep`, autograd); stronger couplings go to the
per-position sweeps above.

Example:
    >>> import torch
    >>> from hybrid_attention import banded
    >>> J = torch.diag(torch.full((3,), 0.5, dtype=torch.float64), 1)
    >>> J = J + J.T
    >>> up = banded.log_marginals(torch.zeros(1, 4, dtype=torch.float64), banded.diagonals(J, 1))
    >>> [round(v, 6) for v in (2 * up.exp() - 1)[0].tolist()]  # h = 0: every m = 0
    [0.0, 0.0, 0.0, 0.0]
"""

from __future__ import annotations

import math
from typing import Any

import torch

from . import checks
from .banded_block import BlockSweepFn as _BlockSweepFn
from .banded_block import DenseBlockSweepFn as _DenseBlockSweepFn
from .banded_block import block_energies as _block_energies
from .banded_block import split as _split
from .banded_block import state_bits as _state_bits
from .banded_layout import BlockFieldsFn as _BlockFieldsFn

__all__ = [
    "bandwidth",
    "diagonals",
    "dense_couplings",
    "check_band",
    "estimate_bytes",
    "log_marginals",
    "layer_log_alpha",
]

# bytes per (row, query, position, window state): A and B kept for the marginals, plus autograd's saved sums
# (measured peak / (rows * T**2 / 2 * 2**W * itemsize) with autograd, B = 16, T = 128, W = 6, float32: about 7 for
# the probability-domain sweep, 9 for the log-space one)
_BYTES_FACTOR = 12


def bandwidth(J: torch.Tensor, tol: float = 0.0) -> int:
    """The largest ``|j - k|`` with ``|J_jk| > tol`` over ``J (..., n, n)`` (0 when ``J`` is zero)."""
    n = J.shape[-1]
    nz = (J.detach().abs() > tol).reshape(-1, n, n).any(0)
    if not bool(nz.any()):
        return 0
    j, k = nz.nonzero().unbind(1)
    return int((j - k).abs().max())


def band_pays(n: int, W: int, *, causal: bool = False) -> bool:
    """Whether the transfer matrix over a band ``W`` costs less than enumerating ``n`` spins: about ``n 2**W``
    against ``2**n`` for one system, ``n**2 / 2 * 2**W`` against ``2**(n + 1)`` for the ``n`` causal prefixes of an
    attention row (``causal``). A full ``J`` whose farthest diagonals happen to be zero (``W`` just below
    ``n - 1``) is then enumerated rather than sent through a band nearly as wide as the system."""
    return (1 << W) * n * (n if causal else 2) < (1 << (n + (2 if causal else 1)))


def check_band(W: Any, n: int, *, name: str = "band") -> int:
    """``W`` as an int with ``1 <= W < n`` (``n`` spins or keys).

    Raises:
        TypeError: not an integer. ValueError: ``W < 1`` or ``W >= n`` (a band that wide is a full ``J``).
    """
    if isinstance(W, bool) or not isinstance(W, int):
        raise TypeError(f"{name} must be an int (the coupling band width W), got {type(W).__name__} {W!r}")
    if W < 1:
        raise ValueError(f"{name} must be >= 1 for the banded engine (0 means a full J), got {W}")
    if W >= n:
        raise ValueError(
            f"{name} = {W} must be below the number of keys n = {n} (a band of width >= n - 1 is a full J); "
            f"use band <= {n - 1}, or band 0 for a full J"
        )
    return W


def estimate_bytes(rows: int, n: int, W: int, queries: int | None, itemsize: int) -> float:
    """Estimated peak bytes of the engine: ``rows`` chains of ``n`` positions (causal: ``queries = n`` chains per
    row, each as long as its prefix), ``2**W`` window states."""
    per = n * n / 2 if queries else n
    return float(rows) * per * float(2**W) * itemsize * _BYTES_FACTOR


def _check_memory(rows: int, n: int, W: int, causal: bool, dtype: torch.dtype, tables: int | None = None) -> None:
    """Refuse a request above the memory budget: the block engine's estimate when ``tables`` (the number of coupling
    tables) is given and that engine applies, else the per-position sweeps' (:func:`estimate_bytes`)."""
    item = torch.empty(0, dtype=dtype).element_size()
    if tables is not None and _block_applies(W, dtype):
        # A, B and the window fields F of every (slot, row) per block of W positions, twice that in scratch and
        # gradients; three 2**W x 2**W tables per block (transfer matrix, its energy, its gradient)
        per = n * n / 2 if causal else n
        need = float(rows) * (per / W + n) * float(2**W) * item * 6 + 3.0 * tables * (n + W) * float(4**W) * item
        checks.check_memory(
            need,
            f"the banded block engine for {rows} row(s) x n = {n} keys at band W = {W} (about 6 * rows * "
            f"{'n^2/2' if causal else 'n'} / W * 2**W * {item} bytes + 3 * tables * n * 4**W * {item} bytes)",
            hint="use a narrower band, a shorter block or a smaller batch",
        )
        return
    need = estimate_bytes(rows, n, W, n if causal else None, item)
    checks.check_memory(
        need,
        f"the banded engine for {rows} row(s) x n = {n} keys at band W = {W} "
        f"(about {_BYTES_FACTOR} * rows * {'n^2/2' if causal else 'n'} * 2**W * {item} bytes)",
        hint="use a narrower band, a shorter block or a smaller batch",
    )


def diagonals(J: torch.Tensor, W: int) -> torch.Tensor:
    """A banded ``J (..., n, n)`` as its diagonals ``c (..., W, n)``: ``c[..., d-1, j] = J[..., j-d, j]`` (0 for
    ``j < d``). Differentiable.

    Raises:
        ValueError: ``J`` has a coupling at a distance above ``W`` (e.g. a full ``J`` handed to the banded path).
    """
    n = J.shape[-1]
    found = bandwidth(J)
    if found > W:
        raise ValueError(
            f"J has couplings up to key distance {found}, outside the band W = {W}: the banded engine needs "
            f"J_jk = 0 for |j - k| > W (pass band = {found} or more, or a full J to the enumeration path)"
        )
    cols = [torch.nn.functional.pad(torch.diagonal(J, offset=d, dim1=-2, dim2=-1), (d, 0)) for d in range(1, W + 1)]
    return torch.stack(cols, dim=-2) if cols else J.new_zeros(*J.shape[:-2], 0, n)


def dense_couplings(c: torch.Tensor, n: int | None = None) -> torch.Tensor:
    """Diagonals ``c (..., W, n)`` (or ``(..., W)`` for one value per distance, a Toeplitz band, with ``n`` given)
    as the symmetric, zero-diagonal ``J (..., n, n)``; entries ``c[..., d-1, j]`` with ``j < d`` are ignored."""
    if n is not None and (c.ndim == 1 or c.shape[-1] != n):
        c = c.unsqueeze(-1).expand(*c.shape, n)
    W, n = c.shape[-2], c.shape[-1]
    J = c.new_zeros(*c.shape[:-2], n, n)
    for d in range(1, W + 1):
        J = J + torch.diag_embed(c[..., d - 1, d:], offset=d)
    return J + J.transpose(-1, -2)


# ---------------------------------------------------------------------- the engine
def _pair_spins(W: int, dtype: torch.dtype, device: Any) -> torch.Tensor:
    """``(2**(W+1), W + 1)`` spins of ``u = (s_{j-W}, ..., s_j)``: column ``k`` is ``s_{j-k}`` (bit ``k`` of ``u``)."""
    u = torch.arange(1 << (W + 1), device=device)
    bits = (u[:, None] >> torch.arange(W + 1, device=device)) & 1
    return (1 - 2 * bits).to(dtype)


def _coupling_tables(c: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """``beta G_j(u) - max_u`` for ``c (P, W, n)``, ``beta (P,)``: ``(P, n, 2, 2**(W-1), 2, 1, 1)`` indexed
    ``[p, j, s_{j-W} bit, middle bits, s_j bit]`` (two trailing broadcast dimensions for queries and batch).
    Couplings to positions before 0 are dropped."""
    P, W, n = c.shape
    S = _pair_spins(W, c.dtype, c.device)
    pair = S[:, :1] * S[:, 1:]  # (2^(W+1), W): s_j s_{j-d}
    d = torch.arange(1, W + 1, device=c.device)
    real = (d[:, None] <= torch.arange(n, device=c.device)[None, :]).to(c.dtype)  # (W, n): j - d >= 0
    G = torch.einsum("pdj,ud->pju", c * real, pair) * beta[:, None, None]  # (P, n, 2^(W+1))
    G = G - G.detach().amax(-1, keepdim=True)
    # u = top * 2^W + mid * 2 + b, with bit 0 = s_j and bit W = s_{j-W}
    return G.view(P, n, 2, 1 << (W - 1), 2, 1, 1)


def _field_tables(bh: torch.Tensor) -> torch.Tensor:
    """``beta h s - |beta h|`` for ``s = +1, -1``: ``bh (n, P, Q, R)`` -> ``(n, P, 2, Q, R)``, each at most 0."""
    a = bh.detach().abs()
    return torch.stack([bh - a, -bh - a], dim=2)


def _sweep(F: torch.Tensor, G: torch.Tensor, starts: list[int]) -> list[torch.Tensor]:
    """Forward-backward over positions ``0..n-1``: per position ``j`` a ``(P, Q - starts[j], R)`` tensor of
    ``log P(s_j = +1)`` for the queries ``starts[j]..Q-1``, those whose chain reaches position
    ``j`` (``starts`` non-decreasing; query ``q``'s chain ends at the last ``j`` with ``starts[j] <= q``).

    Args:
        F: field tables ``(n, P, 2, Q, R)`` (:func:`_field_tables`; ``P`` coupling groups, ``Q`` queries, ``R`` rows
            sharing a table: the innermost, contiguous dimension, so every op runs over long vectors).
        G: coupling tables ``(P, n, 2, half, 2, 1, 1)`` (:func:`_coupling_tables`), ``half = 2**(W-1)``.
    """
    n, P, _, Q, R = F.shape
    half = G.shape[3]
    # unbind once: indexing F[j] / G[:, j] per step would cost a full-size zero tensor each in the backward pass
    Fs, Gs = F.unbind(0), [g.unbind(1) for g in G.unbind(1)]  # Fs[j] (P, 2, Q, R); Gs[j][top] (P, half, 2, 1, 1)
    Hs = [g.unbind(1) for g in G.permute(0, 1, 4, 2, 3, 5, 6).unbind(1)]  # Hs[j][s_j bit] (P, 2, half, 1, 1)
    A = F.new_zeros(P, 2, half, Q, R)  # ghost start: log uniform over the window w = (s_{j-W}, middle)
    fwd, prev = [], 0
    for j in range(n):
        s = starts[j]
        A0, A1 = A[:, :, :, s - prev :].unsqueeze(3).unbind(1)  # (P, half, 1, q, R) each: s_{j-W} = +1, -1
        A = torch.logaddexp(A0 + Gs[j][0], A1 + Gs[j][1])  # (P, half, 2, q, R): w_j = (middle, s_j)
        A = (A + Fs[j][:, None, :, s:]).view(P, 2, half, -1, R)
        fwd.append(A)
        prev = s
    out: list[torch.Tensor] = [F] * n
    B = F.new_zeros(P, half, 2, 0, R)  # the backward message of w_j, as (middle, s_j)
    for j in range(n - 1, -1, -1):
        q = Q - starts[j]
        if q > B.shape[3]:  # queries whose last key is j start here
            B = torch.cat([F.new_zeros(P, half, 2, q - B.shape[3], R), B], dim=3)
        lp = torch.logsumexp(fwd[j].view(P, half, 2, q, R) + B, dim=1)  # (P, 2, q, R): s_j = +1, -1
        up, down = lp.unbind(1)
        out[j] = up - torch.logaddexp(up, down)  # log P(s_j = +1)
        if j:
            B0, B1 = (B + Fs[j][:, None, :, starts[j] :]).unbind(2)  # (P, half, q, R) each: s_j = +1, -1
            B = torch.logaddexp(B0.unsqueeze(1) + Hs[j][0], B1.unsqueeze(1) + Hs[j][1])  # (P, 2, half, q, R)
            B = B.view(P, half, 2, q, R)
    return out


# beta * (largest coupling energy a window can lose across one cut) up to which the scaled sweep cannot underflow
# (float32's normal range ends near exp(-87), float64's near exp(-708); the margin covers the 2**-W of a window)
_SCALED_LIMIT = {torch.float32: 40.0, torch.float64: 500.0}


def _scaled_period(c: torch.Tensor, beta: torch.Tensor, dtype: torch.dtype) -> int:
    """How often (in positions) the probability-domain sweep must rescale its messages for diagonals ``c (P, W, n)``,
    or 0 when it is not safe at all. Per cut between ``j`` and ``j + 1``, ``2 beta`` times the couplings crossing it
    plus those entering at ``j`` bounds how far a window's weight can fall below the message's maximum; each step
    without rescaling can lower the maximum by ``2 beta sum_d |c[d-1, j]|`` more; all of it must stay below
    :data:`_SCALED_LIMIT` (in natural-log units). At most every 8 positions."""
    limit = _SCALED_LIMIT.get(dtype)
    if limit is None:
        return 0
    a = c.detach().abs()  # (P, W, n)
    W, n = a.shape[-2:]
    cs = torch.nn.functional.pad(a.cumsum(-1), (1, 0))  # cs[..., k] = sum_{b < k} |c[.., b]|
    cross = a.new_zeros(a.shape[0], n)
    for d in range(1, W + 1):  # couplings (b - d, b) crossing cut j: j < b <= j + d
        idx = torch.arange(n, device=a.device)
        cross = cross + cs[:, d - 1, (idx + d + 1).clamp(max=n)] - cs[:, d - 1, idx + 1]
    b2 = 2.0 * beta.detach().reshape(-1, 1)
    worst = float((b2 * (cross + a.sum(-2))).max())  # + the couplings entering at j
    step = float((b2 * a.sum(-2)).max())
    if worst > limit:
        return 0
    return int(min(8, max(1, (limit - worst) // max(step, 1e-9))))


def _scaled_sweep(F: torch.Tensor, G: torch.Tensor, starts: list[int], period: int = 1) -> list[torch.Tensor]:
    """:func:`_sweep` in the probability domain: the same recursions with products instead of log-add-exps, each
    message rescaled to a maximum of 1 every ``period`` positions (a constant that cancels; detached, so it adds
    nothing to the gradient), and the own-field factor of position ``j`` kept in log space: ``log P(s_j = +1) = F_+ + log S_+ -
    logaddexp(F_+ + log S_+, F_- + log S_-)`` with ``S_b = sum_w A~_j(w) B_j(w)`` over the windows with ``s_j = b``
    (``A~`` before the field), so fields of any size stay exact and finite. Safe with :func:`_scaled_period`."""
    n, P, _, Q, R = F.shape
    half = G.shape[3]
    K = G.exp()
    fs, Fs = F.exp().unbind(0), F.unbind(0)
    Ks = [k.unbind(1) for k in K.unbind(1)]  # Ks[j][s_{j-W} bit] (P, half, 2, 1, 1)
    Kb = [k.unbind(1) for k in K.permute(0, 1, 4, 2, 3, 5, 6).unbind(1)]  # Kb[j][s_j bit] (P, 2, half, 1, 1)
    A = F.new_ones(P, 2, half, Q, R)
    pre, prev = [], 0
    for j in range(n):
        s = starts[j]
        A0, A1 = A[:, :, :, s - prev :].unsqueeze(3).unbind(1)  # (P, half, 1, q, R)
        At = torch.addcmul(A0 * Ks[j][0], A1, Ks[j][1])  # (P, half, 2, q, R): w_j = (middle, s_j), before s_j's field
        pre.append(At)
        A = At * fs[j][:, None, :, s:]
        if j % period == period - 1:
            A = A / A.detach().flatten(1, 2).amax(1)[:, None, None]
        A = A.view(P, 2, half, -1, R)
        prev = s
    out: list[torch.Tensor] = [F] * n
    B = F.new_ones(P, half, 2, 0, R)
    for j in range(n - 1, -1, -1):
        q = Q - starts[j]
        if q > B.shape[3]:
            B = torch.cat([F.new_ones(P, half, 2, q - B.shape[3], R), B], dim=3)
        Sp, Sm = (pre[j] * B).sum(1).log().unbind(1)  # (P, q, R): log S_+, log S_-
        up = Fs[j][:, 0, starts[j] :] + Sp
        out[j] = up - torch.logaddexp(up, Fs[j][:, 1, starts[j] :] + Sm)
        if j:
            B0, B1 = (B * fs[j][:, None, :, starts[j] :]).unbind(2)  # (P, half, q, R): s_j = +1, -1
            B = torch.addcmul(B0.unsqueeze(1) * Kb[j][0], B1.unsqueeze(1), Kb[j][1])  # (P, 2, half, q, R): w_{j-1}
            if j % period == 0:
                B = B / B.detach().flatten(1, 2).amax(1)[:, None, None]
            B = B.view(P, half, 2, q, R)
    return out


def _run(F: torch.Tensor, G: torch.Tensor, starts: list[int], c: torch.Tensor, beta: torch.Tensor) -> list:
    """The scaled sweep when its range allows (:func:`_scaled_period`) and its results are finite, else the log-space
    sweep (exact for any couplings; several times slower: a log-add-exp per state instead of a multiply-add)."""
    period = _scaled_period(c, beta, F.dtype)
    if period:
        out = _scaled_sweep(F, G, starts, period)
        if bool(torch.isfinite(torch.cat([o.detach().reshape(-1) for o in out])).all()):  # one check, one sync
            return out
    return _sweep(F, G, starts)


# ---------------------------------------------------------------------- the block engine
# the widest band the block engine takes: its transfer matrices are 2**W x 2**W per block and head (W = 10: 4 MiB in
# float32 each), its matrix products 2**W multiply-adds per window state and block of W positions
_BLOCK_MAX_W = 10
# beta |h| + coupling span (natural-log units) up to which the block sweep's posteriors stay in the normal range, so
# the marginals can be read with every field included (:class:`_BlockSweepFn`); above it, each spin's own field is
# left out (:func:`_block_sweep`, slower)
_FAST_LIMIT = {torch.float32: 85.0, torch.float64: 700.0}
_USE_BLOCK = True  # tests switch the block engine off to exercise the per-position sweeps


def _block_applies(W: int, dtype: torch.dtype) -> bool:
    """Whether the block engine is tried at all (it may still hand over to the per-position sweeps at run time)."""
    return _USE_BLOCK and dtype in _SCALED_LIMIT and W <= _BLOCK_MAX_W


def _block_couplings(c: torch.Tensor, beta: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
    """The couplings of the blocks of ``k = W`` positions ending at ``ends (G, nb)`` (positions ``p - k + 1 .. p``;
    outside ``0..n-1`` free ghosts) for diagonals ``c (P, W, n)``: ``C (P, G, nb, k, 2k)`` with ``C[..., t, u] = beta
    c[u - t - 1, p - t]``, the coupling of spin ``p - t`` to its partner ``p - u`` (``u < k``: in the block, bit ``u``
    of the window ``w_out`` at ``p``; else bit ``u - k`` of the window ``w_in`` at ``p - k``); 0 where ``p - u < 0``."""
    P, W, n = c.shape
    k = W
    dev = c.device
    d = torch.arange(1, W + 1, device=dev)
    real = (d[:, None] <= torch.arange(n, device=dev)[None, :]).to(c.dtype)  # (W, n): j - d >= 0
    cz = torch.nn.functional.pad(c * real, (0, 1))  # (P, W, n + 1): column n is a ghost (zero)
    t = torch.arange(k, device=dev)
    j = ends[..., None] - t  # (G, nb, k): the block's spins
    j = torch.where((j >= 0) & (j < n), j, torch.full_like(j, n))
    u = torch.arange(2 * k, device=dev)
    sel = (u[None, None, :] == (t[:, None, None] + d[None, :, None])).to(c.dtype)  # (k, W, 2k)
    return torch.einsum("pdgbt,tdu->pgbtu", cz[:, :, j], sel) * beta.view(P, 1, 1, 1, 1)


def _leave_one_out(X: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
    """``out[..., t, b, :] = sum over the states w with bit t = b of X[..., w, :] prod_{t' != t} f[..., t', bit t'
    of w, :]`` for ``X (..., 2**k, N)``, ``f (..., k, 2, N)``: every spin's weights with its own field factor left out
    (divide and conquer over the bits: about four passes over ``X``). Returns ``(..., k, 2, N)``."""
    k = f.shape[-3]
    if k == 1:
        return X.unsqueeze(-3)
    lo = k // 2  # bits 0..lo-1 are the low part of the state index
    Xv = X.unflatten(-2, (1 << (k - lo), 1 << lo))  # (..., high, low, N)
    out_lo = _leave_one_out((Xv * _window(f[..., lo:, :, :]).unsqueeze(-2)).sum(-3), f[..., :lo, :, :])
    out_hi = _leave_one_out((Xv * _window(f[..., :lo, :, :]).unsqueeze(-3)).sum(-2), f[..., lo:, :, :])
    return torch.cat([out_lo, out_hi], dim=-3)


def _window(f: torch.Tensor) -> torch.Tensor:
    """``prod_t f[..., t, bit t of w, :]`` over the states ``w`` of ``m`` bits: ``f (..., m, 2, N)`` -> ``(..., 2**m,
    N)``."""
    fs = f.unbind(-3)
    X = fs[-1]
    for t in range(len(fs) - 2, -1, -1):
        X = (X.unsqueeze(-2) * fs[t].unsqueeze(-3)).flatten(-3, -2)
    return X


def _block_sweep(M: torch.Tensor, Phi: torch.Tensor, first: list[int]) -> list[torch.Tensor]:
    """Forward-backward over blocks of ``k`` positions in the probability domain: per block step ``b`` a
    ``(P, G, k, q, R)`` tensor of ``log P(s_{p-t} = +1)`` for the slots ``first[b]..Q-1`` (``q`` of them).

    Args:
        M: block transfer matrices ``(P, G, nb, 2**k, 2**k)``, ``exp(beta E - max)`` (:func:`_block_energies`):
            ``G`` groups of chains, each with its own block boundaries, ``nb`` blocks each.
        Phi: field tables ``(nb, P, G, 2k, Q, R)`` in log space, ``Phi[b, ..., 2t + bit, q, r] = beta h s - |beta h|``
            of spin ``p - t`` (bit 0: ``s = +1``) for slot ``q`` (a chain; ``R`` rows share a table).
        first: per block, the first slot whose chain reaches it (non-decreasing; slot ``q``'s chain ends at the last
            block ``b`` with ``first[b] <= q``).

    The forward message of a slot is ``A_b = F_b * (M_b A_{b-1})`` (``F_b`` the product of the block's field factors,
    the matrix product carrying every coupling of the block), the backward one ``B_{b-1} = M_b^T (F_b B_b)``; both are
    rescaled to a maximum of 1 per block (a detached constant that cancels). The marginals of the block's spins come
    from ``A~_b B_b`` (``A~`` before the field) with every spin's own field factor left out and added back in log
    space (:func:`_leave_one_out`), so fields of any size stay exact and finite.
    """
    nb, P, G, k2, Q, R = Phi.shape
    k, S = k2 // 2, M.shape[-1]
    onehot = torch.nn.functional.one_hot(2 * torch.arange(k, device=M.device) + _state_bits(k, M.device), k2)
    onehot = onehot.sum(1).to(M.dtype)  # (2^k, 2k): the field entries of each window state
    # unbind once: selecting M[:, :, b] or Phi[b] per block would cost a full-size zero tensor each in the backward
    Ms, Phis = M.unbind(2), Phi.unbind(0)
    A = M.new_ones(P, G, S, Q * R)
    pre, win, prev = [], [], 0
    for b in range(nb):
        s = first[b]
        q = Q - s
        A = A.unflatten(-1, (-1, R))[:, :, :, s - prev :].flatten(-2)  # the slots still running
        At = Ms[b] @ A  # (P, G, S, q R)
        Fw = (onehot @ Phis[b][..., s:, :].flatten(-2)).exp()  # (P, G, S, q R)
        A = At * Fw
        A = A / A.detach().amax(2, keepdim=True)
        pre.append(At)
        win.append(Fw)
        prev = s
    out: list[torch.Tensor] = [Phi] * nb
    B = M.new_ones(P, G, S, 0)
    for b in range(nb - 1, -1, -1):
        s = first[b]
        q = Q - s
        if b < nb - 1:
            B = Ms[b + 1].transpose(-1, -2) @ (B * win[b + 1])
            B = B / B.detach().amax(2, keepdim=True)
        if q * R > B.shape[-1]:  # slots whose chain ends at this block start here
            B = torch.cat([M.new_ones(P, G, S, q * R - B.shape[-1]), B], dim=-1)
        phi = Phis[b][..., s:, :].unflatten(2, (k, 2)).flatten(-2)  # (P, G, k, 2, q R)
        lp = phi + _leave_one_out(pre[b] * B, phi.exp()).log()
        up, down = lp.unbind(3)
        out[b] = (up - torch.logaddexp(up, down)).unflatten(-1, (q, R))  # (P, G, k, q, R)
    return out


def _block_plan(n: int, W: int, Q: int, causal: bool, device: Any):
    """Block boundaries and slots: ``ends (G, nb)`` (the last position of each block), ``keys (nb, G, k)`` (spin
    ``p - t``, or ``-1`` for a ghost), ``queries (G, Q')`` (the query of each slot, or ``-1`` for padding) and
    ``first`` (:func:`_block_sweep`). Causal: query ``i``'s chain ends at key ``i``, so query ``i = g + k m`` is slot ``m``
    of group ``g``, whose blocks end at ``g, g + k, ...``; else one group, blocks ending at ``n - 1``."""
    k = W
    if causal:
        nb = -(-n // k)
        ends = torch.arange(k, device=device)[:, None] + k * torch.arange(nb, device=device)[None, :]
        queries = ends.clone()
        first = list(range(nb))
    else:
        g0 = (n - 1) % k
        nb = (n - 1 - g0) // k + 1
        ends = g0 + k * torch.arange(nb, device=device)[None, :]
        queries = torch.arange(Q, device=device)[None, :]
        first = [0] * nb
    queries = torch.where(queries < Q, queries, torch.full_like(queries, -1))
    keys = ends.T[:, :, None] - torch.arange(k, device=device)  # (nb, G, k)
    keys = torch.where((keys >= 0) & (keys < n), keys, torch.full_like(keys, -1))
    return ends, keys, queries, first


def _block_fields(x: torch.Tensor, keys: torch.Tensor, queries: torch.Tensor, causal: bool) -> torch.Tensor:
    """The sweep's fields ``beta h`` as ``(nb, P, G, Q', R, k)`` from ``x (n, P, Q, R)`` (any strides); ghosts,
    padding slots and (causal) keys after a slot's query, which no sweep reads, get 0 (a free spin). One strided view
    of a padded copy (:mod:`hybrid_attention.banded_layout`), with the plan's ``keys``, ``queries`` only for the mask."""
    ok = (keys[:, :, None, None, :] >= 0) & (queries[None, :, :, None, None] >= 0)
    if causal:
        ok = ok & (keys[:, :, None, None, :] <= queries[None, :, :, None, None])
    return _BlockFieldsFn.apply(x, ok, keys.shape[-1], causal)


def _block_run(x: torch.Tensor, c: torch.Tensor, beta: torch.Tensor, causal: bool) -> torch.Tensor | None:
    """``log P(s_j = +1)`` as ``(R, P, Q, n)`` (``-inf`` for the keys a causal query does not see) by the block engine
    for fields ``x = beta h`` as ``(n, P, Q, R)`` (``P`` coupling groups, ``Q`` queries, ``R`` rows sharing a table),
    or ``None`` when it does not apply (band too wide, couplings too strong for its range, a non-finite result)."""
    n, P, Q, R = x.shape
    W = c.shape[-2]
    if not _block_applies(W, x.dtype):
        return None
    limit = _SCALED_LIMIT[x.dtype]
    ends, keys, queries, first = _block_plan(n, W, Q, causal, x.device)
    C = _block_couplings(c, beta, ends)  # (P, G, nb, k, 2k)
    X = _block_fields(x, keys, queries, causal)  # (nb, P, G, Q', R, k)
    nb, G, k = keys.shape
    # the posterior A_b * B_b of a window is at least exp(-(2 |beta h| + 2 span + 2 W log 2)) where it matters
    lo, hi = torch.aminmax(X.detach())  # max |X| in one pass, without an |X| temporary
    fast = _FAST_LIMIT[x.dtype] - 2 * max(-float(lo), float(hi)) - 2 * W * math.log(2)
    fn = _BlockSweepFn if _split(W) else _DenseBlockSweepFn  # transfer matrices factorised over half-windows or dense
    out, status = fn.apply(C, X, tuple(first), limit, fast)  # (P, G, sum_b q_b R, k)
    if int(status) == 1:  # couplings too strong for the probability domain over a whole block
        return None
    if int(status) == 2:  # fields too large to read the marginals with every field included
        E = _block_energies(C)
        M = (E - E.detach().amax((-2, -1), keepdim=True)).exp()
        a = X.abs()
        Phi = torch.stack([X - a, -X - a], dim=-1).flatten(-2)  # (nb, P, G, Q', R, 2k)
        outs = _block_sweep(M, Phi.permute(0, 1, 2, 5, 3, 4), first)  # (P, G, k, q_b, R) each
        out = torch.cat([o.permute(0, 1, 3, 4, 2).flatten(2, 3) for o in outs], dim=2)
    if not bool(torch.isfinite(out.detach()).all()):
        return None
    # out[p, g, (b, slot, r), t] -> la[r, p, query, key]; the rest (ghosts, padding) to a spare last entry
    p = torch.arange(P, device=x.device)[:, None, None, None, None]
    r = torch.arange(R, device=x.device)[None, None, None, :, None]
    targets = []
    for b in range(nb):
        tq = queries[None, :, first[b] :, None, None]  # (1, G, q, 1, 1)
        tk = keys[b][None, :, None, None, :]  # (1, G, 1, 1, k)
        i = ((r * P + p) * Q + tq) * n + tk
        targets.append(torch.where((tq >= 0) & (tk >= 0), i, R * P * Q * n).expand(P, G, -1, R, k))
    idx = torch.cat(targets, dim=2).reshape(-1)
    la = x.new_full((R * P * Q * n + 1,), float("-inf")).index_copy(0, idx, out.reshape(-1))
    return la[:-1].view(R, P, Q, n)


def log_marginals(h: torch.Tensor, c: torch.Tensor, beta: Any = 1.0) -> torch.Tensor:
    """``log P(s_j = +1)`` of independent chains (unvalidated beyond shapes and memory).

    Args:
        h: fields ``(R, n)``, finite.
        c: diagonals ``(R, W, n)`` or ``(W, n)`` (shared), ``c[d-1, j] = J_{j-d, j}`` (:func:`diagonals`), ``W >= 1``.
        beta: a positive scalar or an ``(R,)`` tensor.

    Returns:
        ``(R, n)`` in ``h``'s dtype; the marginals are ``m = 2 exp(.) - 1``. Differentiable.
    """
    R, n = h.shape
    W = c.shape[-2]
    _check_memory(R, n, W, False, h.dtype, tables=R if c.ndim == 3 else 1)
    beta = torch.as_tensor(beta, dtype=h.dtype, device=h.device).expand(R)
    if R == 0:
        return h * 0.0
    c = c.to(h.dtype)
    bh = (beta[:, None] * h).T  # (n, R)
    shared = c.ndim == 2 and bool((beta == beta[0]).all())  # one table for every row: rows innermost
    x = bh[:, None, None, :] if shared else bh[:, :, None, None]  # (n, P, 1, rows)
    la = _block_run(x, c.expand(x.shape[1], W, n), beta[: x.shape[1]], False)
    if la is not None:  # (rows, P, 1, n)
        return la.reshape(R, n)
    _check_memory(R, n, W, False, h.dtype)  # the per-position sweeps
    F = _field_tables(x)
    G = _coupling_tables(c[None], beta[:1]) if shared else _coupling_tables(c.expand(R, W, n), beta)
    out = _run(F, G, [0] * n, c.reshape(-1, W, n).expand(R, W, n), beta)
    return torch.stack([o.reshape(o.shape[0], -1) for o in out], dim=-1).reshape(R, n)


def layer_log_alpha(h: torch.Tensor, c: torch.Tensor, beta_h: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
    """``log alpha_ij = log P_i(s_j = +1)`` of every query of an attention layer at once (causal: query ``i`` is the
    chain of keys ``0..i``, later keys dropped, not pinned; else every key), unvalidated beyond the memory check.

    Args:
        h: scores ``(B, H, Tq, T)`` (causal: ``Tq == T``, entries above the diagonal ignored).
        c: diagonals ``(H, W, T')``, ``T' >= T`` (leading ``T`` columns used), ``W >= 1``.
        beta_h: ``(H,)`` inverse temperatures.

    Returns:
        ``(B, H, Tq, T)`` in ``h``'s dtype, ``-inf`` on masked keys: the layer's weights are its softmax over the
        last dimension (docs/banded.md: never through ``(1 + m) / 2``). Differentiable.

    Example:
        >>> import torch
        >>> la = layer_log_alpha(torch.zeros(1, 1, 3, 3), torch.zeros(1, 1, 3), torch.ones(1))
        >>> torch.softmax(la, -1)[0, 0, 2].tolist()  # h = 0: uniform over the visible keys
        [0.3333333432674408, 0.3333333432674408, 0.3333333432674408]
    """
    B, H, Tq, T = h.shape
    W = c.shape[-2]
    rows = B * H * (1 if causal else 2 * Tq / T)
    _check_memory(rows, T, W, True, h.dtype, tables=H)
    if B == 0:
        return h * 0.0
    beta_h = beta_h.to(h.dtype)
    bh = (beta_h[:, None, None] * h).permute(3, 1, 2, 0)  # (T keys, H, Tq queries, B)
    la = _block_run(bh, c[..., :T].to(h.dtype), beta_h, causal)
    if la is not None:
        return la
    _check_memory(rows, T, W, True, h.dtype)  # the per-position sweeps
    F = _field_tables(bh)  # (T keys, H, 2, Tq queries, B)
    G = _coupling_tables(c[..., :T].to(h.dtype), beta_h)  # (H, T, 2, half, 2, 1, 1)
    out = _run(F, G, list(range(T)) if causal else [0] * T, c[..., :T], beta_h)  # out[j]: (H, q, B)
    if not causal:
        return torch.stack(out, dim=-1).permute(2, 0, 1, 3)
    flat = torch.cat(out, dim=1)  # (H, T (T + 1) / 2, B), key-major
    j, i = torch.triu_indices(T, T, device=h.device)  # key j, query i >= j, in that order
    la = h.new_full((H, T * T, B), float("-inf")).index_copy(1, i * T + j, flat)
    return la.view(H, T, T, B).permute(3, 0, 1, 2)
