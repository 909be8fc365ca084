"""Shots of the statevector engines, read out from exact output probabilities.

:func:`inverse_cdf` returns the draws of :func:`hybrid_attention.exact.inverse_cdf` (and so those of
:func:`~hybrid_attention.exact.draw_states` at the same uniforms), index for index: the same cumulative table, searched
for the first entry that reaches each uniform. The search is branch-free and vectorised over every shot at once
(``log2 N`` rounds of a gather, a comparison and an add), where ``torch.searchsorted`` runs one branching binary
search per shot: over a row of ``2**10`` nearly uniform probabilities about half of its ten branches mispredict, about
80 ns a shot on the 2-core test machine, a quarter of a statevector chunk's time at n = 10 and 1024 shots; the
vectorised rounds take about 0.55x of that. :func:`draw_spins_into` writes the spins of the draws, a block of rows at
a time.

Example:
    >>> import numpy as np, torch
    >>> p = torch.tensor([[0.5, 0.0, 0.25, 0.25]], dtype=torch.float64)
    >>> inverse_cdf(p, np.array([[0.0, 0.5, 0.6, 0.99]])).tolist()
    [[0, 0, 2, 3]]
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from hybrid_attention.exact import inverse_cdf as _searchsorted_inverse_cdf
from hybrid_attention.ising import index_to_spins

__all__ = ["inverse_cdf", "draw_spins_into", "BLOCK_SHOTS"]

#: shots per block of rows in :func:`draw_spins_into`: the search's five arrays of a block (about 40 bytes a shot) and
#: its rows' table stay within a 1 MiB L2 cache (blocks of 16 and 32 rows of 1024 shots measured alike, 1.15-1.3x
#: faster than a 64-row chunk at once, CPU time in the sampler after a chunk's simulation)
BLOCK_SHOTS = 1 << 14


def inverse_cdf(p: Any, u: np.ndarray) -> np.ndarray:
    """:func:`hybrid_attention.exact.inverse_cdf` (the same draws) by a vectorised branch-free binary search.

    Args:
        p: ``(R, N)`` non-negative probabilities (numpy or torch, any float dtype; rows with a positive sum).
        u: ``(R, shots)`` float64 uniforms in ``[0, 1)``.

    Returns:
        ``(R, shots)`` int64: row ``r``'s draw ``k`` is the first index whose cumulative probability (float64, row
        renormalised) reaches ``u[r, k]``. ``N`` not a power of two: :func:`hybrid_attention.exact.inverse_cdf` itself.
    """
    p = torch.as_tensor(p).detach().to("cpu", torch.float64)
    R, N = p.shape
    u = np.asarray(u, dtype=np.float64)
    if N & (N - 1) or R == 0 or u.shape[0] != R:
        return _searchsorted_inverse_cdf(p, u)
    cdf = torch.cumsum(p, dim=-1)
    cdf = cdf / cdf[:, -1:]  # the operations of exact.inverse_cdf: the same table, so the same draws
    return _lower_bound(cdf.numpy().reshape(-1), u, N)


def _lower_bound(flat: np.ndarray, u: np.ndarray, N: int) -> np.ndarray:
    """Per shot, the number of entries below ``u[r, k]`` in row ``r`` (entries ``r N .. r N + N - 1`` of ``flat``,
    non-decreasing). Round ``N / 2, N / 4, ..., 1``: move ``pos`` up by the step when the entry
    just below ``pos + step`` is below the uniform; for a power-of-two ``N`` this lands on the first entry that
    reaches it (``torch.searchsorted``'s left side), with ties and empty bins (equal entries) as there."""
    R, S = u.shape
    uf = np.ascontiguousarray(u).reshape(-1)
    pos = np.repeat(np.arange(0, R * N, N, dtype=np.int64), S)  # each shot's row start in flat
    idx, probe, below = np.empty_like(pos), np.empty_like(uf), np.empty(uf.shape, dtype=bool)
    step = N >> 1
    while step:
        np.add(pos, step - 1, out=idx)
        np.take(flat, idx, out=probe)
        np.less(probe, uf, out=below)
        pos += below * step if step > 1 else below
        step >>= 1
    pos = pos.reshape(R, S)
    pos -= np.arange(0, R * N, N, dtype=np.int64)[:, None]
    return pos  # at most N - 1 (the steps sum to N - 1): exact.inverse_cdf's clamp


def draw_spins_into(p: torch.Tensor, u: np.ndarray, out: np.ndarray) -> None:
    """Shots into ``out`` ``(R, shots, n)`` int8: :func:`inverse_cdf` of ``p`` ``(R, 2**n)`` at ``u`` ``(R, shots)``,
    read out as ±1 spins (column ``j`` is spin ``j``), in blocks of rows of about :data:`BLOCK_SHOTS` shots."""
    n, R = out.shape[-1], p.shape[0]
    table = index_to_spins(np.arange(1 << n), n) if n <= 16 else None  # (2**n, n) int8
    rows = max(1, BLOCK_SHOTS // max(1, u.shape[-1]))
    for a in range(0, R, rows):
        idx = inverse_cdf(p[a : a + rows], u[a : a + rows])
        if table is not None:  # one lookup, written in place
            np.take(table, idx, axis=0, out=out[a : a + rows])
        else:
            out[a : a + rows] = index_to_spins(idx, n)
