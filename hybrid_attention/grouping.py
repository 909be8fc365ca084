"""A batch of Ising problems regrouped by distinct coupling matrix (:class:`Grouped`).

The bridge hands a sampler one coupling matrix per attention head, broadcast (or expanded, stride 0) over the batch
and the queries; the Gibbs chains (:mod:`hybrid_attention.backends.mcmc.gibbs_kernel`), the mean-field iteration
(:mod:`hybrid_attention.backends.mcmc.meanfield`) and the bridge's covariance backward
(:class:`hybrid_attention.bridge.SampledMarginals`) work on ``G`` coupling matrices with ``R`` problems each, so a
shared ``J`` is never copied and every product with it is one matrix product over all of its problems.
"""

from __future__ import annotations

import numpy as np
import torch

from .ising import IsingProblem

__all__ = ["Grouped"]


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
            # J's batch dimensions aligned with the problem's; a dimension is shared when J has size 1 there
            # (broadcast: nothing to copy, and its gradient is never materialised at the batch's size) or stride 0
            # (expanded by the caller)
            J = J.reshape((1,) * (len(bs) + 2 - J.ndim) + tuple(J.shape))
            keep = [d for d in range(len(bs)) if bs[d] > 1 and J.shape[d] > 1 and J.stride(d) != 0]
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
        hits = torch.stack(
            [(self.J == ref * m[:, :, None] * m[:, None, :]).flatten(1).all(-1) for ref in refs]
        )  # (K, P)
        nhit = hits.sum(0)
        if bool((nhit == 0).any()):
            return
        group = torch.where(nhit == 1, hits.to(torch.uint8).argmax(0), -1)
        counts = torch.bincount(group[group >= 0], minlength=K).tolist()
        for p_ in (
            (nhit > 1).nonzero().flatten().tolist()
        ):  # fits several (e.g. one active spin): fill the groups evenly
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

    def group(self, x: torch.Tensor) -> torch.Tensor:
        """A per-problem tensor ``(*batch, *tail)`` (e.g. chain states ``(*batch, chains, n)``) in the grouped
        layout ``(G, R, *tail)``, rows in the order of :attr:`h` (the inverse of :meth:`ungroup`)."""
        bs = tuple(self.shape[self.perm.index(d)] for d in range(len(self.perm)))
        tail = tuple(x.shape[len(bs) :])
        flat = self._group(x.reshape(*bs, -1)).reshape(-1, *tail)  # problems in grouping order
        if self.order is not None:  # _share_masked's row order
            flat = flat[self.order]
        return flat.reshape(self.G, -1, *tail)

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
