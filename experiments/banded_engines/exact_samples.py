"""Independent exact samples of banded Ising chains by forward filtering, backward sampling.

For the noise floor of the sampling engines: the error of the exact marginals estimated from the same number of
exact reads.

The law of a chain with couplings up to distance ``W`` is a Markov chain of order ``W`` over the window
``w_j = (s_{j-W+1}, ..., s_j)`` (SPEC 3b): the forward pass keeps ``log alpha_j(w_j)``, the backward pass draws
``w_{n-1}`` from ``alpha_{n-1}`` and then each dropped spin ``s_{j-W}`` from ``alpha_{j-1}(w_{j-1}) + beta G_j``.
Bit ``k`` of a window index is ``(1 - s_{j-k}) / 2``, as in :mod:`hybrid_attention.banded`.
"""

from __future__ import annotations

import torch


def _local(h: torch.Tensor, c: torch.Tensor, beta: float, j: int, prev: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``beta s_j (h_j + sum_d c[d-1, j] s_{j-d})`` for previous windows ``prev (P, ...)`` and new bits ``b`` (same
    shape): ``h (P, n)``, ``c (P, W, n)``."""
    W = c.shape[1]
    s_prev = (1 - 2 * ((prev.unsqueeze(-1) >> torch.arange(W, device=prev.device)) & 1)).to(h.dtype)  # spin j-d
    ones = (1,) * (prev.dim() - 1)
    coupled = (s_prev * c[:, :, j].view(-1, *ones, W)).sum(-1)
    return beta * (1 - 2 * b).to(h.dtype) * (h[:, j].view(-1, *ones) + coupled)


def sample_chains(h: torch.Tensor, c: torch.Tensor, beta: float, num_reads: int, gen: torch.Generator) -> torch.Tensor:
    """``num_reads`` independent exact samples of each chain.

    Args:
        h: fields ``(P, n)`` (float64 recommended).
        c: diagonals ``(P, W, n)``, ``c[p, d-1, j] = J_{j-d, j}`` (entries with ``j < d`` ignored), ``W >= 1``.
        beta: inverse temperature.
        num_reads: samples per chain.
        gen: the random stream.

    Returns:
        ``(P, num_reads, n)`` spins as int8 ±1.
    """
    P, W, n = c.shape
    S = 1 << W
    real = (torch.arange(1, W + 1)[:, None] <= torch.arange(n)[None, :]).to(c.dtype)
    c = c * real  # no couplings to positions before 0 (free ghost spins)
    states = torch.arange(S)
    prev = states.expand(P, S)  # (P, S) previous windows
    alphas = []
    A = h.new_zeros(P, S)
    for j in range(n):
        alphas.append(A)
        loc = torch.stack([_local(h, c, beta, j, prev, torch.full_like(prev, b)) for b in (0, 1)], -1)  # (P, S, 2)
        T = (A.unsqueeze(-1) + loc).view(P, 2, S // 2, 2)  # [top bit of prev, rest, new bit]
        A = torch.logsumexp(T, dim=1).reshape(P, S)  # index 2 r + b
        A = A - A.amax(-1, keepdim=True)
    w = torch.multinomial(torch.softmax(A, -1), num_reads, replacement=True, generator=gen)  # (P, N)
    spins = torch.empty(P, num_reads, n, dtype=torch.int8)
    for j in range(n - 1, -1, -1):
        spins[:, :, j] = (1 - 2 * (w & 1)).to(torch.int8)
        r, b = w >> 1, w & 1
        cand = torch.stack([r, r + (S >> 1)], -1)  # (P, N, 2): top bit 0, 1
        logit = alphas[j].gather(1, cand.flatten(1)).view_as(cand).to(h.dtype)
        logit = logit + _local(h, c, beta, j, cand, b.unsqueeze(-1).expand_as(cand))
        top = torch.bernoulli(torch.softmax(logit, -1)[..., 1], generator=gen).long()
        w = r + top * (S >> 1)
    return spins
