"""The problems of one Metropolis-chain call as the chains see them: :class:`ChainRows`, and masked batches split by
the spins that take part.

A masked (dropped) spin has no field and no coupling: it drops out of the acceptance ``exp(-beta dE)``, and the
proposals act on it alone (a quantum proposal's problem term never touches it and its driver is a product over
qubits, so the proposal factorises into the visible spins' proposal times the dropped ones'). A chain over all
``n`` spins therefore moves the visible spins exactly as a chain over the visible spins alone, and the dropped spins
are free spins, uniform and independent of everything for chains started at random, from the fields or from the mean
field (all give them magnetisation 0). :meth:`.chain.MetropolisChain._sample` uses that: it groups the rows of a
masked batch by their visible spins (:func:`visible_groups`; the bridge's padded causal call holds one group per
prefix length), runs each group's chains on its visible spins only (the cost of the per-prefix calls, in one call),
and writes the dropped spins as free spins (:func:`fill_dropped`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from hybrid_attention.circuits.proposal import alpha_of
from hybrid_attention.ising import IsingProblem, index_to_bits

__all__ = ["ChainRows", "visible_groups", "merge_groups", "group_labels", "spread_indices", "fill_dropped"]


@dataclasses.dataclass(frozen=True)
class ChainRows:
    """Problems handed to the chains, on the spins they run over.

    Attributes:
        h: ``(N, n)`` float64 fields (0 on dropped spins); J: ``(N, n, n)`` float64 couplings (a stride-0 view when
            shared; a dropped spin's couplings need not be zeroed: the chains of :func:`visible_groups` never see it);
        beta: ``(N,)`` float64; alpha: ``(N,)`` the proposal's problem scale (``ProposalParams.alpha`` or Layden's,
            :func:`~hybrid_attention.circuits.proposal.alpha_of`, over the visible spins);
        m0: ``(N, n)`` start magnetisations, or ``None`` (uniformly random start or ``init``);
        init: ``(N, C, n)`` int8 ±1 start states of persistent chains, or ``None``;
        mask: ``(N, n)`` bool or ``None``; rows: the rows' indices in the call's batch (``slice(None)``: all).
    """

    h: torch.Tensor
    J: torch.Tensor
    beta: np.ndarray
    alpha: np.ndarray
    m0: np.ndarray | None
    init: np.ndarray | None
    mask: np.ndarray | None
    rows: Any = dataclasses.field(default_factory=lambda: slice(None))

    @classmethod
    def of(cls, flat: IsingProblem, opts: dict[str, Any]) -> ChainRows:
        """The rows of a flat (validated) problem with the call's resolved options ``opts`` (``params``,
        ``initial_state``, ``chains``)."""
        N, n = flat.h.shape[0], flat.n
        mask = None if flat.mask is None else flat.mask.cpu().numpy()
        h, Jd = flat.dropped()
        h64 = h.detach().to(torch.float64).cpu()
        J64 = flat.J.detach().to(torch.float64).cpu().expand(N, n, n)
        params = opts["params"]
        if params.alpha is None:
            alpha = alpha_of(h64.numpy(), Jd.detach().to(torch.float64).cpu().numpy(), mask)
        else:
            alpha = np.full(N, params.alpha)
        beta = flat.beta_tensor().detach().to(torch.float64).cpu().numpy().reshape(-1)
        beta = np.full(N, beta[0]) if beta.size == 1 and N != 1 else beta
        init = None if opts["initial_state"] is None else opts["initial_state"].reshape(N, opts["chains"], n)
        return cls(
            h64, J64, np.asarray(beta, dtype=np.float64), np.array(np.broadcast_to(alpha, (N,))), None, init, mask
        )

    def select(self, rows: np.ndarray | None, cols: np.ndarray | None) -> ChainRows:
        """The rows ``rows`` on the spins ``cols`` (``None``: every row on every spin, no copy). Spins of ``cols``
        that a row does not see (a run of :func:`merge_groups`) stay in its problem as dropped spins: no field, no
        coupling, magnetisation 0, masked."""
        if rows is None:
            return self
        r, c = torch.from_numpy(rows), torch.from_numpy(cols)
        mk = self.mask[np.ix_(rows, cols)]
        if self.J.stride(0) == 0:  # shared couplings stay shared (the energy table's one-GEMM path)
            J = self.J[0][c[:, None], c].expand(len(rows), len(cols), len(cols))
        else:
            J = self.J[r[:, None, None], c[:, None], c]
        if not mk.all():  # decouple the dropped spins row by row
            m = torch.from_numpy(mk).to(J.dtype)
            J = J * m[:, :, None] * m[:, None, :]
        return ChainRows(
            self.h[r[:, None], c],
            J,
            self.beta[rows],
            self.alpha[rows],
            None if self.m0 is None else self.m0[np.ix_(rows, cols)],
            None if self.init is None else self.init[rows][:, :, cols],
            None if mk.all() else mk,
            rows,
        )

    def chunk(self, start: int, stop: int) -> ChainRows:
        """Rows ``start:stop`` (positions within these rows)."""
        s = slice(start, stop)
        return ChainRows(
            self.h[s],
            self.J[s],
            self.beta[s],
            self.alpha[s],
            None if self.m0 is None else self.m0[s],
            None if self.init is None else self.init[s],
            None if self.mask is None else self.mask[s],
            s,
        )


def visible_groups(mask: np.ndarray | None) -> list[tuple[np.ndarray | None, np.ndarray | None]]:
    """The rows of a flat batch grouped by the spins that take part: ``[(rows, cols)]`` (index arrays), one entry per
    distinct row of ``mask (N, n)``, in the order of the patterns' packed bytes; ``[(None, None)]`` (every row, every
    spin) when no spin is masked."""
    if mask is None or bool(mask.all()):
        return [(None, None)]
    packed = np.packbits(mask, axis=-1)
    keys = np.ascontiguousarray(packed).view(np.dtype((np.void, packed.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(first) + 1))
    return [(order[bounds[k] : bounds[k + 1]], np.flatnonzero(mask[i])) for k, i in enumerate(first)]


def merge_groups(
    groups: list[tuple[np.ndarray | None, np.ndarray | None]], overhead: float
) -> list[tuple[np.ndarray | None, np.ndarray | None]]:
    """Groups of :func:`visible_groups` merged into runs of chains over the union of their spins where that is
    cheaper, for a proposal under which dropped spins are free (module docstring): a run over ``k`` spins of ``R``
    rows costs ``overhead + R * 2**k`` (``overhead``: the fixed cost of running one group, in units of one row's
    configuration); groups are taken by their number of spins, and each joins the run before it when one run costs
    less than two (greedy: for the prefixes of a causal layer, the short prefixes go together). ``overhead <= 0``:
    the groups as they are. Returns ``[(rows, cols)]`` (rows sorted)."""
    if overhead <= 0 or len(groups) < 2 or groups[0][0] is None:
        return groups
    order = sorted(groups, key=lambda g: (len(g[1]), int(g[0][0])))
    runs = [(list(order[0][0]), set(order[0][1].tolist()))]
    for rows, cols in order[1:]:
        R, S = runs[-1]
        union = S | set(cols.tolist())
        merged = overhead + (len(R) + len(rows)) * float(1 << len(union))
        apart = 2 * overhead + len(R) * float(1 << len(S)) + len(rows) * float(1 << len(cols))
        if merged <= apart:
            runs[-1] = (R + list(rows), union)
        else:
            runs.append((list(rows), set(cols.tolist())))
    return [(np.sort(np.asarray(R, dtype=np.int64)), np.asarray(sorted(S), dtype=np.int64)) for R, S in runs]


def group_labels(groups: list[tuple[np.ndarray | None, np.ndarray | None]], N: int) -> np.ndarray:
    """``(N,)`` the index in ``groups`` (:func:`visible_groups`) of each row."""
    labels = np.zeros(N, dtype=np.int64)
    for k, (rows, _) in enumerate(groups):
        if rows is not None:
            labels[rows] = k
    return labels


def spread_indices(idx: np.ndarray, cols: np.ndarray | None) -> np.ndarray:
    """Configuration indices over the spins ``cols`` as indices over all spins (bit ``k`` of ``idx`` to bit
    ``cols[k]``; the other bits 0). ``cols=None``: ``idx`` itself."""
    if cols is None:
        return idx
    k = len(cols)
    weights = np.left_shift(np.int64(1), cols.astype(np.int64))
    if k <= 16:  # a table of the 2**k spread indices (index_to_bits' cached table), one look-up
        return (index_to_bits(np.arange(1 << k), k).astype(np.int64) @ weights)[idx]
    return (index_to_bits(idx, k).astype(np.int64) * weights).sum(-1)


def fill_dropped(spins: np.ndarray, final: np.ndarray, mask: np.ndarray, init: np.ndarray | None, seed: Any) -> None:
    """Write the dropped (masked) spins of the reads ``spins (N, C * r, n)`` (chain-major) and the end states ``final
    (N, C, n)``: for fresh chains free spins, uniform and independent (their law in a chain over every spin: module
    docstring), drawn from ``seed``; for chains continued from ``init (N, C, n)``, where those were."""
    N, C, n = final.shape
    off = ~mask.astype(bool)
    if init is None:
        rand = (1 - 2 * np.random.default_rng(seed).integers(0, 2, size=spins.shape, dtype=np.int8)).astype(np.int8)
        np.copyto(spins, rand, where=off[:, None, :])
        np.copyto(final, spins.reshape(N, C, -1, n)[:, :, -1], where=off[:, None, :])
    else:
        r = spins.shape[1] // C
        np.copyto(spins.reshape(N, C, r, n), init[:, :, None, :], where=off[:, None, None, :])
        np.copyto(final, init, where=off[:, None, :])
