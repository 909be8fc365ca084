"""Exact enumeration: the oracle every other sampler in the toolkit is measured against.

Owns :func:`log_partition`, :func:`marginals`, :func:`correlations`, :func:`probabilities`, exact
:func:`sample`, :func:`enumerate_states`, the size limit (:data:`MAX_SPINS`, :func:`check_size`) and the factorised
core below. The attention-shaped kernels built on that core (causal, bidirectional, shared couplings) live in
:mod:`hybrid_attention.kernels`.

How it is fast. Split the ``n`` spins into a low half ``A`` (spins ``0..a-1``) and a high half ``B``.
A configuration index is ``c = cA + 2**a cB`` (the qiskit little-endian index of :mod:`hybrid_attention.ising`).
The Boltzmann weight factorises exactly::

    exp(-beta E(s)) = xA(cA) * K(cB, cA) * xB(cB)
    xA = exp(beta hA.sA),  xB = exp(beta hB.sB),  K = exp(beta sum_{j<k} J_jk s_j s_k)

so ``Z = xB^T K xA`` and every marginal is one matrix product with ``K``: no ``(rows, 2**n)`` tensor is ever
built for the fields. When ``J`` is shared by many rows (the attention layer: one ``J`` per head, every batch
element and every query with the same prefix), ``K`` is built once and the whole batch is two GEMMs.
Each factor is shifted by its own maximum, so nothing overflows; the product can only underflow when
``beta * (max C - min C)`` of the coupling energy ``C`` is large, and those problems take a log-space path
(log-sum-exp over the materialised energies) instead. Both paths are plain torch ops, so autograd gives exact
gradients (equal to ``beta Cov(...)``; docs/theory.md section 3) in float32 and float64.

Masked spins are dropped (decoupled and then marginalised out, which is exact), never pinned.

Structure decides the engine of :func:`marginals` (``method="auto"``): couplings in a band ``|j - k| <= W`` narrower
than a full ``J`` (``1 <= W < n - 1``) go through the transfer matrix of :mod:`hybrid_attention.banded` at any ``n``
(cost about ``n 2**W`` per row instead of ``2**n``) when that is the cheaper engine or ``n`` is above the
enumeration limit (:func:`hybrid_attention.banded.band_pays`); a full ``J`` is enumerated (``n <= max_spins``); anything else is
refused with the reason. ``method="enumerate"`` or ``"banded"`` forces one engine.

Example:
    >>> import torch
    >>> from hybrid_attention import IsingProblem, exact
    >>> p = IsingProblem(torch.tensor([[0.3]], dtype=torch.float64))
    >>> bool(torch.allclose(exact.marginals(p), torch.tanh(torch.tensor([[0.3]], dtype=torch.float64))))
    True
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import torch

from . import banded, checks
from .ising import IsingProblem, index_to_spins

__all__ = [
    "MAX_SPINS",
    "enumerate_states",
    "log_partition",
    "marginals",
    "correlations",
    "probabilities",
    "sample",
    "draw_states",
    "inverse_cdf",
    "check_size",
    "table_marginals",
    "table_correlations",
]

logger = logging.getLogger(__name__)

#: Default largest number of spins exact enumeration accepts. Override per call with ``max_spins=``.
MAX_SPINS = 24
#: Elements per materialised chunk (bounds memory: 2**24 float64 values are 128 MiB).
CHUNK_ELEMENTS = 1 << 24
# beta * (range of the coupling energy) above which the factorised product could underflow.
RANGE_LIMIT = {torch.float16: 5.0, torch.bfloat16: 40.0, torch.float32: 50.0, torch.float64: 600.0}


def check_size(n: int, max_spins: int | None = None) -> None:
    """Raise ``ValueError`` (before any allocation) if ``n`` spins exceed the exact-enumeration limit."""
    limit = MAX_SPINS if max_spins is None else int(max_spins)
    if n > limit:
        raise ValueError(
            f"exact enumeration of n = {n} spins needs 2**{n} configurations, above the limit max_spins = {limit}. "
            "Use an approximate sampler for this size (get_sampler('gibbs') or get_sampler('meanfield')), "
            "or raise the limit with max_spins=... if you have the time and memory."
        )


_STATES: dict[tuple[int, torch.dtype, str], torch.Tensor] = {}


def enumerate_states(n: int, *, dtype: torch.dtype = torch.float32, device: Any = None) -> torch.Tensor:
    """All ``2**n`` spin configurations as a ``(2**n, n)`` ±1 tensor; row ``c`` has ``s_j = 1 - 2 * ((c >> j) & 1)``.

    Cached per ``(n, dtype, device)`` (do not modify the returned tensor).
    """
    key = (n, dtype, str(device))
    S = _STATES.get(key)
    if S is None:
        n = checks.check_positive_int(n, "n", minimum=0)  # on a cache miss only: this is called in the hot loops
        S = torch.from_numpy(index_to_spins(np.arange(1 << n), n)).to(dtype=dtype, device=device)
        if n <= 16:
            _STATES[key] = S
    return S


# ---------------------------------------------------------------------- the factorised core
def coupling_table(J: torch.Tensor, a: int, *, scale: Any = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """Coupling energy ``C(cB, cA) = sum_{j<k} J_jk s_j s_k`` (note: without the minus sign) for ``J`` of
    shape ``(..., n, n)``; returns ``(..., 2**b, 2**a)`` (times ``scale`` ``(...)`` when given, into ``out`` when given:
    no autograd then).

    One GEMM writes the table: ``[SB JBA, cB, 1] @ [SA^T; 1; cA]`` (inner dimension ``a + 2``), the cross term plus
    both halves' own energies, instead of a GEMM and two broadcast passes over the ``2**n`` entries."""
    n = J.shape[-1]
    b = n - a
    SA = enumerate_states(a, dtype=J.dtype, device=J.device)
    SB = enumerate_states(b, dtype=J.dtype, device=J.device)
    JAA, JBB, JBA = J[..., :a, :a], J[..., a:, a:], J[..., a:, :a]
    cA = 0.5 * ((SA @ JAA) * SA).sum(-1)  # (..., 2^a)
    cB = 0.5 * ((SB @ JBB) * SB).sum(-1)  # (..., 2^b)
    left = torch.cat([SB @ JBA, cB.unsqueeze(-1), torch.ones_like(cB).unsqueeze(-1)], dim=-1)  # (..., 2^b, a + 2)
    if scale is not None:
        left = left * scale[..., None, None]
    right = torch.cat(
        [SA.transpose(0, 1).expand(*cA.shape[:-1], a, 1 << a), torch.ones_like(cA)[..., None, :], cA[..., None, :]],
        dim=-2,
    )
    return torch.matmul(left, right, out=out)


def field_factors(h: torch.Tensor, beta: torch.Tensor, a: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``xA (..., 2^a)``, ``xB (..., 2^b)`` (each max-shifted to 1) and their total log shift (...,)."""
    n = h.shape[-1]
    SA = enumerate_states(a, dtype=h.dtype, device=h.device)
    SB = enumerate_states(n - a, dtype=h.dtype, device=h.device)
    LA = (h[..., :a] @ SA.transpose(0, 1)) * beta[..., None]
    LB = (h[..., a:] @ SB.transpose(0, 1)) * beta[..., None]
    mA = LA.detach().amax(-1, keepdim=True)
    mB = LB.detach().amax(-1, keepdim=True)
    return torch.exp(LA - mA), torch.exp(LB - mB), (mA + mB).squeeze(-1)


def stats_from_factors(xA, xB, YA, YB, a, want_corr, K=None, shared=False):
    """Marginals (and correlations) from factors; ``YA = xB K`` and ``YB = K xA`` along the batch."""
    n_b = int(round(math.log2(xB.shape[-1])))
    SA = enumerate_states(a, dtype=xA.dtype, device=xA.device)
    SB = enumerate_states(n_b, dtype=xA.dtype, device=xA.device)
    Z = (xA * YA).sum(-1)
    pA = xA * YA / Z[..., None]
    pB = xB * YB / Z[..., None]
    m = torch.cat([pA @ SA, pB @ SB], dim=-1)
    if not want_corr:
        return Z, m, None
    cAA = torch.einsum("...c,cj,ck->...jk", pA, SA, SA)
    cBB = torch.einsum("...c,cj,ck->...jk", pB, SB, SB)
    XA = xA.unsqueeze(-1) * SA  # (..., 2^a, a)
    if shared:
        V = torch.einsum("...ba,...aj->...bj", K, XA) if K.ndim > 2 else torch.einsum("ba,...aj->...bj", K, XA)
    else:
        V = K @ XA  # (..., 2^b, a)
    cAB = torch.einsum("...b,bk,...bj->...jk", xB, SB, V) / Z[..., None, None]
    top = torch.cat([cAA, cAB], dim=-1)
    bottom = torch.cat([cAB.transpose(-1, -2), cBB], dim=-1)
    return Z, m, torch.cat([top, bottom], dim=-2)


def logspace_stats(h, J, beta, a, want_corr):
    """Materialised log-sum-exp path (used when the factorised product could underflow). Shapes as _rows."""
    C = coupling_table(J, a)  # (..., 2^b, 2^a)
    n = h.shape[-1]
    SA = enumerate_states(a, dtype=h.dtype, device=h.device)
    SB = enumerate_states(n - a, dtype=h.dtype, device=h.device)
    fA = h[..., :a] @ SA.transpose(0, 1)
    fB = h[..., a:] @ SB.transpose(0, 1)
    L = beta[..., None, None] * (fA.unsqueeze(-2) + fB.unsqueeze(-1) + C)
    Lf = L.flatten(-2)
    logZ = torch.logsumexp(Lf, dim=-1)
    p = torch.softmax(Lf, dim=-1).reshape(L.shape)  # normalised by its own sum: stays in [0, 1] in float32
    pA, pB = p.sum(-2), p.sum(-1)
    m = torch.cat([pA @ SA, pB @ SB], dim=-1)
    corr = None
    if want_corr:
        corr = table_correlations(p.flatten(-2))
    return logZ, m, corr


def upcast_ok(dtype: torch.dtype, crange: torch.Tensor) -> bool:
    """A low-precision problem whose coupling range is too wide for its exponent range can still take the
    factorised path in float64 (GEMMs stay cheap; results are cast back)."""
    return dtype != torch.float64 and bool((crange <= RANGE_LIMIT[torch.float64]).all())


def _rows(h: torch.Tensor, J: torch.Tensor, beta: torch.Tensor, want_corr: bool):
    """Core on flat rows: ``h (R, n)``, ``J (n, n)`` shared or ``(R, n, n)``, ``beta (R,)``.

    Returns ``logZ (R,)``, ``m (R, n)``, ``corr (R, n, n) | None``.
    """
    R, n = h.shape
    a = n // 2
    limit = RANGE_LIMIT.get(h.dtype, 50.0)
    C = coupling_table(J, a)
    Cd = C.detach()
    crange = (
        (Cd.amax(dim=(-2, -1)) - Cd.amin(dim=(-2, -1))) * beta.detach()
        if C.ndim > 2
        else (Cd.max() - Cd.min()) * beta.detach()
    )
    if bool((crange > limit).any()):
        if upcast_ok(h.dtype, crange):  # float64's exponent range still holds the factorised product
            out = _rows(h.double(), J.double(), beta.double(), want_corr)
            return tuple(None if o is None else o.to(h.dtype) for o in out)
        logger.debug(
            "exact: beta * coupling range %.3g above %.3g, using the log-space path", float(crange.max()), limit
        )
        Jr = J if J.ndim == 3 else J.expand(R, n, n)
        return logspace_stats(h, Jr, beta, a, want_corr)
    xA, xB, shift = field_factors(h, beta, a)
    Cmax = Cd.amax(dim=(-2, -1), keepdim=True) if C.ndim > 2 else Cd.max()
    if C.ndim == 2 and beta.numel() > 0 and bool((beta == beta[0]).all()):
        K = torch.exp(beta[0] * (C - Cmax))  # one table for the whole batch: two GEMMs
        YA, YB = xB @ K, xA @ K.transpose(0, 1)
        Z, m, corr = stats_from_factors(xA, xB, YA, YB, a, want_corr, K=K, shared=True)
        logZ = torch.log(Z) + shift + beta[0] * Cmax
    else:
        if C.ndim == 2:
            C = C.expand(R, *C.shape)
            Cmax = Cmax.expand(R, 1, 1)
        K = torch.exp(beta[:, None, None] * (C - Cmax))
        YA = (xB.unsqueeze(-2) @ K).squeeze(-2)
        YB = (K @ xA.unsqueeze(-1)).squeeze(-1)
        Z, m, corr = stats_from_factors(xA, xB, YA, YB, a, want_corr, K=K)
        logZ = torch.log(Z) + shift + beta * Cmax.reshape(R)
    return logZ, m, corr


METHODS = ("auto", "enumerate", "banded")


def _band_of(J: torch.Tensor, n: int, method: str, max_spins: int | None) -> int:
    """The band ``W >= 1`` the transfer matrix should use for couplings ``J (..., n, n)``, or 0 to enumerate.

    Raises:
        ValueError: an unknown ``method``; ``method="banded"`` with a full ``J`` (no band narrower than ``n - 1``);
            enumeration of more than ``max_spins`` spins (the message names the couplings' bandwidth).
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    W = banded.bandwidth(J) if method != "enumerate" else n - 1
    limit = MAX_SPINS if max_spins is None else int(max_spins)
    banded_auto = 1 <= W < n - 1 and (banded.band_pays(n, W) or n > limit)
    if method == "banded" or (method == "auto" and (banded_auto or (W == 0 and n > limit))):
        if W >= n - 1 and n > 1 and W > 0:
            raise ValueError(
                f"method='banded' needs couplings in a band |j - k| <= W with W < n - 1 = {n - 1}, got a full J "
                f"(couplings up to key distance {W}); use method='enumerate' (n <= {limit}) or a banded J"
            )
        if n > 1:
            return max(W, 1)
    if n > limit and method == "auto":
        raise ValueError(
            f"exact marginals of n = {n} spins: the couplings reach key distance {W} = n - 1 (a full J), so the "
            f"transfer matrix does not apply, and enumeration needs 2**{n} configurations, above max_spins = {limit}. "
            "Restrict J to a band (|j - k| <= W < n - 1), use an approximate sampler (get_sampler('gibbs') or "
            "get_sampler('meanfield')), or raise max_spins"
        )
    check_size(n, max_spins)
    return 0


def _banded_marginals(problem: IsingProblem, W: int) -> torch.Tensor:
    """Marginals ``(*batch, n)`` by the transfer matrix (:mod:`hybrid_attention.banded`)."""
    flat = problem.flatten()
    h, J = flat.dropped()
    n = problem.n
    m = 2.0 * banded.log_marginals(h, banded.diagonals(J, W), flat.beta_tensor()).exp() - 1.0
    if flat.mask is not None:
        m = m * flat.mask.to(m.dtype)
    return m.reshape(*problem.batch_shape, n)


def _run(problem: IsingProblem, want_corr: bool, max_spins: int | None):
    if not isinstance(problem, IsingProblem):
        raise TypeError(f"expected an IsingProblem, got {type(problem).__name__}")
    n = problem.n
    check_size(n, max_spins)
    flat = problem.flatten()
    h, J = flat.dropped()
    beta = flat.beta_tensor()
    R = h.shape[0]
    if R == 0:  # an empty batch: empty results of the right shapes
        shape = problem.batch_shape
        corr = h.new_zeros(*shape, n, n) if want_corr else None
        return h.new_zeros(shape), h.new_zeros(*shape, n), corr
    per_row = (1 << n) if J.ndim == 3 else (1 << ((n + 1) // 2)) * max(n, 1)
    step = max(1, CHUNK_ELEMENTS // per_row)
    outs = []
    for s in range(0, R, step):
        Jc = J if J.ndim == 2 else J[s : s + step]
        outs.append(_rows(h[s : s + step], Jc, beta[s : s + step], want_corr))
    logZ = torch.cat([o[0] for o in outs])
    m = torch.cat([o[1] for o in outs])
    corr = torch.cat([o[2] for o in outs]) if want_corr else None
    if flat.mask is not None:
        mk = flat.mask.to(h.dtype)
        logZ = logZ - (n - flat.mask.sum(-1)).to(h.dtype) * math.log(2.0)
        m = m * mk
        if corr is not None:
            corr = corr * mk[:, :, None] * mk[:, None, :]
    shape = problem.batch_shape
    return logZ.reshape(shape), m.reshape(*shape, n), None if corr is None else corr.reshape(*shape, n, n)


# ---------------------------------------------------------------------- public API
def log_partition(problem: IsingProblem, *, max_spins: int | None = None) -> torch.Tensor:
    """``log Z = log sum_s exp(-beta E(s))`` over the active spins, shape ``batch``. Differentiable."""
    return _run(problem, False, max_spins)[0]


def marginals(problem: IsingProblem, *, max_spins: int | None = None, method: str = "auto") -> torch.Tensor:
    """Exact ``<s_j>``, shape ``(*batch, n)``; 0 for masked spins. Differentiable (autograd gives ``beta Cov``).

    ``method``: ``"auto"`` (couplings in a band ``|j - k| <= W < n - 1`` take the transfer matrix at any ``n``, a
    full ``J`` is enumerated up to ``max_spins``), ``"enumerate"`` or ``"banded"``.

    Raises:
        ValueError: a full ``J`` with ``n > max_spins`` (or with ``method="banded"``); an unknown ``method``; a band
            above the memory budget (:data:`hybrid_attention.checks.MEMORY_BUDGET`).

    Example:
        >>> import torch
        >>> from hybrid_attention import IsingProblem, exact
        >>> J = torch.diag(torch.ones(99), 1) + torch.diag(torch.ones(99), -1)  # a chain of 100 spins: W = 1
        >>> exact.marginals(IsingProblem(torch.zeros(100), J)).abs().max().item()  # h = 0: every m = 0
        0.0
    """
    if not isinstance(problem, IsingProblem):
        raise TypeError(f"expected an IsingProblem, got {type(problem).__name__}")
    W = _band_of(problem.J, problem.n, method, max_spins)
    if W:
        return _banded_marginals(problem, W)
    return _run(problem, False, max_spins)[1]


def correlations(problem: IsingProblem, *, max_spins: int | None = None) -> torch.Tensor:
    """Exact ``<s_j s_k>``, shape ``(*batch, n, n)`` with ones on the diagonal of active spins; rows and columns of
    masked spins are 0. Differentiable."""
    return _run(problem, True, max_spins)[2]


def probabilities(problem: IsingProblem, *, max_spins: int | None = None) -> torch.Tensor:
    """Exact Boltzmann probabilities over all ``2**n`` configurations, shape ``(*batch, 2**n)``.

    Index ``c = sum_j b_j 2**j`` with ``s_j = 1 - 2 b_j`` (qiskit's little-endian statevector order). Masked
    spins are free and uniform (the distribution of a decoupled spin), so the active spins' distribution is
    the exact dropped-spin distribution. Differentiable.
    """
    if not isinstance(problem, IsingProblem):
        raise TypeError(f"expected an IsingProblem, got {type(problem).__name__}")
    n = problem.n
    check_size(n, max_spins)
    flat = problem.flatten()
    h, J = flat.dropped()
    beta = flat.beta_tensor()
    S = enumerate_states(n, dtype=h.dtype, device=h.device)
    R = h.shape[0]
    if R == 0:
        return h.new_zeros(*problem.batch_shape, 1 << n)
    step = max(1, CHUNK_ELEMENTS // (1 << n))
    out = []
    for s in range(0, R, step):
        hc = h[s : s + step]
        Jc = J if J.ndim == 2 else J[s : s + step]
        coup = 0.5 * ((S @ Jc) * S).sum(-1)  # (2^n,) or (r, 2^n)
        L = beta[s : s + step, None] * (hc @ S.transpose(0, 1) + coup)
        out.append(torch.softmax(L, dim=-1))
    return torch.cat(out).reshape(*problem.batch_shape, 1 << n)


def _table(p: Any) -> tuple[torch.Tensor, int]:
    """``p`` as a tensor ``(..., 2**n)`` and its ``n``; ``ValueError`` when the last dimension is not a power of 2."""
    p = torch.as_tensor(p)
    size = p.shape[-1] if p.ndim else 0
    n = size.bit_length() - 1
    if size < 1 or size != 1 << n:
        raise ValueError(
            f"a probability table needs a last dimension of 2**n configurations, got shape {tuple(p.shape)}"
        )
    return p, n


def table_marginals(p: Any) -> torch.Tensor:
    """``<s_j>`` of a probability table over configurations: ``p (..., 2**n)`` -> ``(..., n)``.

    Index ``c = sum_j b_j 2**j`` with ``s_j = 1 - 2 b_j`` (the order of :func:`probabilities`, of every DQA
    reference and statevector sampler), so ``<s_j> = P(b_j = 0) - P(b_j = 1)``: summed over the other bits without
    materialising the ``(2**n, n)`` configuration matrix. ``p`` is a tensor (differentiable) or a numpy array (read as
    a tensor of its dtype); rows need not be normalised (the result is then ``sum_c p_c s_j(c)``).

    Example:
        >>> import torch
        >>> table_marginals(torch.tensor([0.5, 0.0, 0.25, 0.25], dtype=torch.float64))  # s_0 = +1 w.p. 3/4
        tensor([0.5000, 0.0000], dtype=torch.float64)
    """
    p, n = _table(p)
    lead = p.shape[:-1]
    flat = p.reshape(-1, 1 << n)
    cols = []
    for j in range(n):
        v = flat.reshape(-1, 1 << (n - j - 1), 2, 1 << j).sum(dim=(1, 3))
        cols.append(v[:, 0] - v[:, 1])
    m = torch.stack(cols, dim=-1) if cols else flat.new_zeros(flat.shape[0], 0)
    return m.reshape(*lead, n)


def table_correlations(p: Any) -> torch.Tensor:
    """``<s_j s_k>`` of a probability table over configurations: ``p (..., 2**n)`` -> ``(..., n, n)`` (the diagonal is
    the total probability). Index order as :func:`table_marginals`; differentiable.

    Example:
        >>> import torch
        >>> table_correlations(torch.tensor([0.5, 0.0, 0.0, 0.5], dtype=torch.float64))  # s_0 = s_1 always
        tensor([[1., 1.],
                [1., 1.]], dtype=torch.float64)
    """
    p, n = _table(p)
    S = enumerate_states(n, dtype=p.dtype, device=p.device)
    return torch.einsum("...c,cj,ck->...jk", p, S, S)


def draw_states(p: Any, shots: int, rng: np.random.Generator) -> np.ndarray:
    """Draw ``shots`` basis-state indices per row of a probability table (inverse-CDF sampling).

    Args:
        p: ``(B, 2**n)`` probabilities (numpy or torch, any float dtype; each row is renormalised in float64).
        shots: draws per row.
        rng: the generator (``B * shots`` uniforms are taken from it, row-major).

    Returns:
        ``(B, shots)`` int64 indices ``c = sum_j b_j 2**j``.
    """
    p = torch.as_tensor(p).detach()
    return inverse_cdf(p, rng.random((p.shape[0], int(shots))))


def inverse_cdf(p: Any, u: np.ndarray) -> np.ndarray:
    """The draws of :func:`draw_states` at given uniforms: row ``r``'s draw ``k`` is the first index whose cumulative
    probability (row renormalised, float64) reaches ``u[r, k]``.

    Args:
        p: ``(B, 2**n)`` probabilities (numpy or torch, any float dtype).
        u: ``(B, shots)`` float64 uniforms in ``[0, 1)``.

    Returns:
        ``(B, shots)`` int64 indices. Row by row: a slice of rows gives the same draws as the whole table.
    """
    p = torch.as_tensor(p).detach().to("cpu", torch.float64)
    cdf = torch.cumsum(p, dim=-1)
    cdf = cdf / cdf[:, -1:]
    return torch.searchsorted(cdf, torch.as_tensor(u)).clamp_(max=p.shape[-1] - 1).numpy()


def sample(
    problem: IsingProblem, num_reads: int, seed: checks.SeedLike = None, *, max_spins: int | None = None
) -> torch.Tensor:
    """Exact samples from ``p(s)``: int8 ±1 spins of shape ``(*batch, num_reads, n)``.

    Masked spins are drawn uniformly (they are free); statistics over samples should ignore them. ``seed`` is an
    ``int``, a ``numpy.random.Generator``, a ``numpy.random.SeedSequence`` or ``None``; global random state is
    never touched.

    Raises:
        ValueError: ``num_reads < 1``; more spins than ``max_spins``; an output whose estimated size
            (``batch * num_reads * n`` int8 spins plus ``batch * num_reads * (8 n + 16)`` bytes of intermediates)
            exceeds :data:`hybrid_attention.checks.MEMORY_BUDGET`.
        TypeError: a non-integer ``num_reads``, a float or bool ``seed``.
    """
    if not isinstance(problem, IsingProblem):
        raise TypeError(f"expected an IsingProblem, got {type(problem).__name__}")
    num_reads = checks.check_num_reads(num_reads, allow_none=False)
    rng = checks.as_generator(seed)
    n = problem.n
    check_size(n, max_spins)
    rows = problem.h.numel() // n
    checks.check_memory(
        float(rows) * num_reads * (9 * n + 16),
        f"exact.sample of {rows} problem(s) x {num_reads} reads x n = {n} spins (batch * reads * (9 n + 16) bytes)",
        hint="draw fewer reads per call",
    )
    if rows == 0:
        return torch.zeros(*problem.batch_shape, num_reads, n, dtype=torch.int8)
    with torch.no_grad():
        p = probabilities(problem.detach(), max_spins=max_spins).to(torch.float64).reshape(-1, 1 << n)
    spins = torch.from_numpy(index_to_spins(draw_states(p, num_reads, rng), n))
    return spins.reshape(*problem.batch_shape, int(num_reads), n)
