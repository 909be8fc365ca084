"""Banded couplings: exact marginals at any length by a transfer matrix in log space (SPEC section 3b).

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

from typing import Any

import torch

from . import checks

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


def _check_memory(rows: int, n: int, W: int, causal: bool, dtype: torch.dtype) -> None:
    item = torch.empty(0, dtype=dtype).element_size()
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
    _check_memory(R, n, W, False, h.dtype)
    beta = torch.as_tensor(beta, dtype=h.dtype, device=h.device).expand(R)
    if R == 0:
        return h * 0.0
    c = c.to(h.dtype)
    bh = (beta[:, None] * h).T  # (n, R)
    if c.ndim == 2 and bool((beta == beta[0]).all()):  # one table for every row: rows innermost
        F = _field_tables(bh[:, None, None, :])  # (n, 1, 2, 1, R)
        G = _coupling_tables(c[None], beta[:1])
    else:  # a table per row
        F = _field_tables(bh[:, :, None, None])  # (n, R, 2, 1, 1)
        G = _coupling_tables(c.expand(R, W, n), beta)
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
        last dimension (SPEC 3b: never through ``(1 + m) / 2``). Differentiable.

    Example:
        >>> import torch
        >>> la = layer_log_alpha(torch.zeros(1, 1, 3, 3), torch.zeros(1, 1, 3), torch.ones(1))
        >>> torch.softmax(la, -1)[0, 0, 2].tolist()  # h = 0: uniform over the visible keys
        [0.3333333432674408, 0.3333333432674408, 0.3333333432674408]
    """
    B, H, Tq, T = h.shape
    W = c.shape[-2]
    _check_memory(B * H * (1 if causal else 2 * Tq / T), T, W, True, h.dtype)
    if B == 0:
        return h * 0.0
    beta_h = beta_h.to(h.dtype)
    G = _coupling_tables(c[..., :T].to(h.dtype), beta_h)  # (H, T, 2, half, 2, 1, 1)
    F = _field_tables((beta_h[:, None, None] * h).permute(3, 1, 2, 0))  # (T keys, H, 2, Tq queries, B)
    out = _run(F, G, list(range(T)) if causal else [0] * T, c[..., :T], beta_h)  # out[j]: (H, q, B)
    if not causal:
        return torch.stack(out, dim=-1).permute(2, 0, 1, 3)
    flat = torch.cat(out, dim=1)  # (H, T (T + 1) / 2, B), key-major
    j, i = torch.triu_indices(T, T, device=h.device)  # key j, query i >= j, in that order
    la = h.new_full((H, T * T, B), float("-inf")).index_copy(1, i * T + j, flat)
    return la.view(H, T, T, B).permute(3, 0, 1, 2)
