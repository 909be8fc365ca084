"""Fidelity metrics between sampler output and the exact Boltzmann distribution.

Owns distribution distances (total variation, KL in both directions, Hellinger, classical fidelity), statistic
errors (marginals, correlations, the normalised attention weights the layer uses) and the effective-temperature
fit. Depends on numpy and torch only.

Every function takes numpy arrays, torch tensors or nested sequences, computes in float64 numpy, and is batched:
the last axis is the distribution (``2**n`` configurations) or spin axis, and leading axes broadcast. Results are
float64 numpy arrays with the broadcast batch shape (0-d arrays for a single problem; ``float(x)`` works).

Zero probabilities. ``KL(p || q) = sum_c p_c log(p_c / q_c)`` uses ``0 log(0 / q) = 0``; with ``eps=0`` (the
default) a state with ``p_c > 0`` and ``q_c = 0`` makes the divergence ``+inf`` (the mathematically correct value,
common for shot histograms that miss a state). With ``eps > 0`` both distributions are smoothed first,
``p -> (p + eps) / (1 + eps * 2**n)`` (additive / Laplace smoothing), which makes the value finite and biased
low by about ``eps`` per missing state. :func:`kl_divergence` computes one direction; swap the arguments for the
other (:func:`compare_distributions` reports both).

Example:
    >>> import numpy as np
    >>> from hybrid_attention.metrics import total_variation, classical_fidelity
    >>> p, q = np.array([0.5, 0.5]), np.array([1.0, 0.0])
    >>> float(total_variation(p, q)), round(float(classical_fidelity(p, q)), 3)
    (0.5, 0.5)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .exact import enumerate_states
from .kernels import normalised_weights

__all__ = [
    "EffectiveBeta",
    "ErrorStats",
    "fit_effective_beta",
    "energy_terms",
    "total_variation",
    "expected_tv",
    "kl_divergence",
    "hellinger_distance",
    "bhattacharyya_coefficient",
    "classical_fidelity",
    "compare_distributions",
    "marginal_error",
    "correlation_error",
    "weights_from_marginals",
    "attention_weight_error",
]

#: tolerance on ``sum p = 1`` accepted by the distribution metrics
NORM_TOL = 1e-6


def _np(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _as_float(x: Any, name: str) -> np.ndarray:
    if isinstance(x, (str, bytes, dict)) or x is None:
        raise TypeError(f"{name} must be a numpy array, torch tensor or sequence of numbers, got {type(x).__name__}")
    a = _np(x)
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool) or np.iscomplexobj(a):
        raise TypeError(f"{name} must be real numeric, got dtype {a.dtype}")
    a = a.astype(np.float64)
    if a.ndim < 1:
        raise ValueError(f"{name} must have at least one axis (the distribution or spin axis), got a scalar")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or inf")
    return a


def _distributions(p: Any, q: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate two batched probability vectors: same last axis, broadcastable batch, >= 0, sum to 1."""
    p = _as_float(p, "p")
    q = _as_float(q, "q")
    if p.shape[-1] != q.shape[-1]:
        raise ValueError(f"p and q must have the same number of states on the last axis, got {p.shape} and {q.shape}")
    try:
        np.broadcast_shapes(p.shape, q.shape)
    except ValueError:
        raise ValueError(f"p and q batch shapes do not broadcast: {p.shape} and {q.shape}") from None
    for name, a in (("p", p), ("q", q)):
        if np.any(a < 0):
            raise ValueError(f"{name} must be non-negative, got minimum {a.min()}")
        s = a.sum(-1)
        if np.any(np.abs(s - 1) > NORM_TOL):
            bad = s.reshape(-1)[np.argmax(np.abs(s - 1).reshape(-1))]
            raise ValueError(f"{name} must sum to 1 over the last axis (tolerance {NORM_TOL}), got a sum of {bad}")
    return p, q


def total_variation(p: Any, q: Any) -> np.ndarray:
    """Total-variation distance ``TV = 1/2 sum_c |p_c - q_c|`` in ``[0, 1]``.

    Args:
        p, q: probabilities ``(*batch, K)`` (broadcastable batch shapes), each summing to 1.

    Returns:
        ``(*batch,)`` float64.
    """
    p, q = _distributions(p, q)
    return 0.5 * np.abs(p - q).sum(-1)


def expected_tv(p: Any, shots: int) -> np.ndarray:
    """The shot-noise floor of a TV: ``E[TV(p_hat, p)]`` for the histogram ``p_hat`` of ``shots`` draws from ``p``.

    Exact, no sampling: each count is binomial, ``X_c ~ Bin(N, p_c)``, so ``E[TV] = 1/(2N) sum_c E|X_c - N p_c|``
    with de Moivre's closed form ``E|X - N p| = 2 m C(N, m) p^m (1 - p)^(N - m + 1)``, ``m = floor(N p) + 1``
    (evaluated in logs). A sampled TV of this size is what a perfect sampler of ``p`` would report against ``p``;
    against another distribution ``q`` a sampled TV lies within about this much of the exact ``TV(p, q)``.

    Args:
        p: probabilities ``(*batch, K)``, each summing to 1. shots: draws per distribution, ``>= 1``.

    Returns:
        ``(*batch,)`` float64.

    Example:
        >>> round(float(expected_tv([0.5, 0.5], 1)), 6)  # one draw: the histogram is (1, 0) or (0, 1)
        0.5
    """
    if isinstance(shots, bool) or not isinstance(shots, (int, np.integer)) or shots < 1:
        raise ValueError(f"shots must be an integer >= 1, got {shots!r}")
    p, _ = _distributions(p, p)
    N = int(shots)
    pc = np.clip(p, 0.0, 1.0)
    m = np.floor(N * pc) + 1.0
    inside = (pc > 0) & (pc < 1) & (m <= N)
    pi, mi = np.where(inside, pc, 0.5), np.where(inside, m, 1.0)
    lg = lambda x: torch.lgamma(torch.as_tensor(x, dtype=torch.float64)).numpy()  # noqa: E731
    log_mad = (
        np.log(2.0 * mi)
        + lg(N + 1.0)
        - lg(mi + 1.0)
        - lg(N - mi + 1.0)
        + mi * np.log(pi)
        + (N - mi + 1.0) * np.log1p(-pi)
    )
    mad = np.where(inside, np.exp(log_mad), 0.0)  # E|X_c - N p_c|
    return 0.5 * mad.sum(-1) / N


def kl_divergence(p: Any, q: Any, *, eps: float = 0.0) -> np.ndarray:
    """Kullback-Leibler divergence ``KL(p || q) = sum_c p_c log(p_c / q_c)`` in nats, ``>= 0``.

    Zero probabilities (see the module docstring): ``p_c = 0`` terms contribute 0; ``p_c > 0, q_c = 0`` gives
    ``+inf`` unless ``eps > 0`` smooths both inputs to ``(x + eps) / (1 + eps K)``. For the reverse direction
    call ``kl_divergence(q, p)``.

    Args:
        p, q: probabilities ``(*batch, K)``.
        eps: additive smoothing (>= 0; 0 = none).

    Returns:
        ``(*batch,)`` float64, possibly ``inf``.
    """
    p, q = _distributions(p, q)
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)) or not eps >= 0 or not np.isfinite(eps):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    if eps > 0:
        K = p.shape[-1]
        p = (p + eps) / (1 + eps * K)
        q = (q + eps) / (1 + eps * K)
    p, q = np.broadcast_arrays(p, q)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * (np.log(np.where(p > 0, p, 1.0)) - np.log(q)), 0.0)
    out = terms.sum(-1)
    # rounding can leave tiny negatives for identical inputs
    return np.maximum(out, 0.0)


def bhattacharyya_coefficient(p: Any, q: Any) -> np.ndarray:
    """``BC = sum_c sqrt(p_c q_c)`` in ``[0, 1]`` (1 iff ``p == q``). Shapes as :func:`total_variation`."""
    p, q = _distributions(p, q)
    return np.clip(np.sqrt(p * q).sum(-1), 0.0, 1.0)


def classical_fidelity(p: Any, q: Any) -> np.ndarray:
    """Classical (Bhattacharyya) fidelity ``F = (sum_c sqrt(p_c q_c))**2`` in ``[0, 1]``.

    This is the quantum fidelity of the two diagonal states, so a statevector sampler's ``F`` against the exact
    Boltzmann distribution is comparable with hardware fidelity figures. Shapes as :func:`total_variation`.
    """
    return bhattacharyya_coefficient(p, q) ** 2


def hellinger_distance(p: Any, q: Any) -> np.ndarray:
    """Hellinger distance ``H = sqrt(1 - BC)`` in ``[0, 1]`` (``H**2 <= TV <= sqrt(2) H``)."""
    return np.sqrt(np.clip(1.0 - bhattacharyya_coefficient(p, q), 0.0, 1.0))


def compare_distributions(p: Any, q: Any, *, eps: float = 0.0) -> dict[str, np.ndarray]:
    """All distribution metrics of a sampled ``p`` against a reference ``q`` (usually exact).

    Returns:
        ``{"tv", "kl_pq", "kl_qp", "hellinger", "fidelity"}``, each ``(*batch,)``. ``kl_pq = KL(p || q)``
        (finite whenever ``q > 0``, as for a Boltzmann reference), ``kl_qp = KL(q || p)`` (``inf`` when a
        histogram ``p`` misses a state, unless ``eps > 0``).
    """
    return {
        "tv": total_variation(p, q),
        "kl_pq": kl_divergence(p, q, eps=eps),
        "kl_qp": kl_divergence(q, p, eps=eps),
        "hellinger": hellinger_distance(p, q),
        "fidelity": classical_fidelity(p, q),
    }


@dataclass
class ErrorStats:
    """Maximum and mean absolute error over the entries of each problem (batch-shaped float64 arrays).

    Attributes:
        max: ``max |x - x_ref|`` over the compared entries.
        mean: mean of ``|x - x_ref|`` over the compared entries.
        count: number of compared entries per problem.
    """

    max: np.ndarray
    mean: np.ndarray
    count: np.ndarray

    def as_dict(self) -> dict[str, np.ndarray]:
        return {"max": self.max, "mean": self.mean}


def _masked_stats(err: np.ndarray, sel: np.ndarray, axes: tuple[int, ...]) -> ErrorStats:
    sel = np.broadcast_to(sel, err.shape)
    cnt = sel.sum(axis=axes)
    e = np.where(sel, np.abs(err), 0.0)
    mx = np.where(cnt > 0, e.max(axis=axes, initial=0.0), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(cnt > 0, e.sum(axis=axes) / np.maximum(cnt, 1), 0.0)
    return ErrorStats(mx, mean, cnt)


def _mask_array(mask: Any, n: int) -> np.ndarray:
    if mask is None:
        return np.ones(n, dtype=bool)
    m = _np(mask)
    if m.dtype != bool:
        raise TypeError(f"mask must be boolean, got dtype {m.dtype}")
    if m.ndim < 1 or m.shape[-1] != n:
        raise ValueError(f"mask must have shape (*batch, {n}), got {m.shape}")
    return m


def _pair(x: Any, ref: Any, xname: str, rname: str, mat: bool = False) -> tuple[np.ndarray, np.ndarray]:
    x = _as_float(x, xname)
    ref = _as_float(ref, rname)
    k = 2 if mat else 1
    if x.ndim < k or ref.ndim < k or x.shape[-k:] != ref.shape[-k:]:
        raise ValueError(f"{xname} and {rname} must agree on the last {k} axes, got {x.shape} and {ref.shape}")
    if mat and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{xname} must be square (*batch, n, n), got {x.shape}")
    try:
        np.broadcast_shapes(x.shape, ref.shape)
    except ValueError:
        raise ValueError(f"{xname} {x.shape} and {rname} {ref.shape} do not broadcast") from None
    return x, ref


def marginal_error(m: Any, m_ref: Any, *, mask: Any = None) -> ErrorStats:
    """Absolute error of marginals ``<s_j>`` over the active spins.

    Args:
        m, m_ref: ``(*batch, n)``.
        mask: optional boolean ``(*batch, n)``; ``False`` spins are not compared.

    Returns:
        :class:`ErrorStats` with batch-shaped ``max`` and ``mean``.
    """
    m, m_ref = _pair(m, m_ref, "m", "m_ref")
    sel = _mask_array(mask, m.shape[-1])
    return _masked_stats(m - m_ref, sel, (-1,))


def correlation_error(c: Any, c_ref: Any, *, mask: Any = None) -> ErrorStats:
    """Absolute error of correlations ``<s_j s_k>`` over the pairs ``j < k`` of active spins.

    Args:
        c, c_ref: ``(*batch, n, n)``.
        mask: optional boolean ``(*batch, n)``.
    """
    c, c_ref = _pair(c, c_ref, "c", "c_ref", mat=True)
    n = c.shape[-1]
    mk = _mask_array(mask, n)
    sel = np.triu(np.ones((n, n), dtype=bool), 1) & mk[..., :, None] & mk[..., None, :]
    return _masked_stats(c - c_ref, sel, (-2, -1))


def weights_from_marginals(m: Any, mask: Any = None) -> np.ndarray:
    """The normalised attention weights the layer uses (docs/theory.md section 3), for numpy or torch marginals.

    ``alpha_j = (1 + m_j) / 2`` and ``a_j = alpha_j / sum_{k visible} alpha_k``; invisible keys get 0. A row
    whose visible alphas are all 0 (every visible spin pinned at -1) gets uniform weights over its visible keys.
    The rule itself is :func:`hybrid_attention.kernels.normalised_weights` (the layer's); this validates and converts.

    Args:
        m: marginals ``(*batch, n)`` in ``[-1, 1]``.
        mask: boolean visibility ``(*batch, n)`` (e.g. causal ``j <= i``), default all visible.

    Returns:
        ``(*batch, n)`` float64, rows summing to 1 over visible keys (0 for a row without visible keys).
    """
    m = _as_float(m, "m")
    if np.any(np.abs(m) > 1 + 1e-9):
        raise ValueError(f"marginals must lie in [-1, 1], got values up to {np.abs(m).max()}")
    vis = np.array(_mask_array(mask, m.shape[-1]))
    a = normalised_weights(torch.from_numpy(np.clip(m, -1, 1)), torch.from_numpy(vis)).numpy()
    return np.where(vis.any(-1, keepdims=True), a, 0.0)


def attention_weight_error(m: Any, m_ref: Any, *, mask: Any = None) -> dict[str, np.ndarray]:
    """Error of the attention weights computed from sampled marginals ``m`` against reference ``m_ref``.

    Args:
        m, m_ref: marginals ``(*batch, n)``.
        mask: visibility ``(*batch, n)`` as in :func:`weights_from_marginals`.

    Returns:
        ``{"max", "mean", "tv"}`` batch-shaped: max/mean ``|a - a_ref|`` over visible keys and the total variation
        ``1/2 sum_j |a_j - a_ref_j|`` between the two attention rows (each is a distribution over keys).
    """
    m, m_ref = _pair(m, m_ref, "m", "m_ref")
    a, a_ref = weights_from_marginals(m, mask), weights_from_marginals(m_ref, mask)
    vis = _mask_array(mask, m.shape[-1])
    st = _masked_stats(a - a_ref, vis, (-1,))
    return {"max": st.max, "mean": st.mean, "tv": 0.5 * np.abs(a - a_ref).sum(-1)}


# ---------------------------------------------------------------------- effective temperature
def energy_terms(h: Any, J: Any) -> tuple[np.ndarray, np.ndarray]:
    """Field and coupling energies of all ``2**n`` configurations (index order of :func:`enumerate_states`).

    Args:
        h: ``(*batch, n)``; J: ``(n, n)`` or ``(*batch, n, n)``.

    Returns:
        ``E_h = -h.s`` and ``E_J = -sum_{j<k} J_jk s_j s_k``, each ``(*batch, 2**n)`` float64.
    """
    h = _np(h).astype(np.float64)
    J = _np(J).astype(np.float64)
    n = h.shape[-1]
    S = enumerate_states(n, dtype=torch.float64).numpy()
    Eh = -(h @ S.T)
    EJ = -0.5 * np.einsum("cj,...jk,ck->...c", S, J, S)
    if EJ.ndim < Eh.ndim:
        EJ = np.broadcast_to(EJ, Eh.shape)
    return Eh, EJ


@dataclass
class EffectiveBeta:
    """Result of :func:`fit_effective_beta` (arrays have the batch shape; scalars for one problem).

    Attributes:
        beta_h: inverse temperature seen by the fields.
        beta_J: inverse temperature seen by the couplings.
        r: Pearson correlation between ``log p`` and the fitted ``c - beta_h E_h - beta_J E_J`` (1 = exactly
            Boltzmann).
        offset: the fitted constant ``c`` (``-log Z``).
        r2: coefficient of determination of the fit (``r**2`` for least squares with an intercept).
        rmse: root-mean-square residual of ``log p`` (nats): how far from Boltzmann form, in absolute terms.
    """

    beta_h: Any
    beta_J: Any
    r: Any
    offset: Any
    r2: Any = None
    rmse: Any = None


def fit_effective_beta(p: Any, h: Any, J: Any, *, floor: float = 1e-300) -> EffectiveBeta:
    """Fit ``log p(s) = c - beta_h E_h(s) - beta_J E_J(s)`` by least squares over all ``2**n`` states.

    This is how docs/theory.md section 4 measures what DQA samples. Use exact output probabilities (a statevector), not
    shot frequencies: empty bins make ``log p`` undefined (they are clipped at ``floor``).

    Args:
        p: probabilities ``(*batch, 2**n)`` indexed ``c = sum_j b_j 2**j``.
        h: fields ``(*batch, n)``; J: ``(n, n)`` or ``(*batch, n, n)``.

    Returns:
        :class:`EffectiveBeta` with batch-shaped ``beta_h``, ``beta_J``, ``r``, ``offset``, ``r2``, ``rmse``.

    Example:
        >>> import torch
        >>> from hybrid_attention import IsingProblem, exact
        >>> h = torch.tensor([0.5, -1.0, 0.2], dtype=torch.float64)
        >>> J = torch.tensor([[0, .7, 0], [.7, 0, -.4], [0, -.4, 0]], dtype=torch.float64)
        >>> fit = fit_effective_beta(exact.probabilities(IsingProblem(h, J, beta=0.3)), h, J)
        >>> round(fit.beta_h, 6), round(fit.beta_J, 6), round(fit.r, 6)
        (0.3, 0.3, 1.0)
    """
    p = _np(p).astype(np.float64)
    Eh, EJ = energy_terms(h, J)
    if p.shape != Eh.shape:
        raise ValueError(f"p must have shape {Eh.shape} (batch + 2**n), got {p.shape}")
    y = np.log(np.clip(p, floor, None))
    X = np.stack([np.ones_like(Eh), -Eh, -EJ], axis=-1)  # (*batch, 2^n, 3)
    flatX = X.reshape(-1, *X.shape[-2:])
    flaty = y.reshape(-1, y.shape[-1])
    coefs, rs, r2s, rmses = [], [], [], []
    for Xi, yi in zip(flatX, flaty):
        # drop all-zero columns (J = 0 or h = 0) so the fit stays well posed
        keep = [0] + [k for k in (1, 2) if np.ptp(Xi[:, k]) > 0]
        c = np.zeros(3)
        sol, *_ = np.linalg.lstsq(Xi[:, keep], yi, rcond=None)
        c[keep] = sol
        pred = Xi @ c
        r = np.corrcoef(pred, yi)[0, 1] if np.ptp(pred) > 0 and np.ptp(yi) > 0 else (1.0 if np.ptp(yi) == 0 else 0.0)
        res = yi - pred
        ss_tot = float(((yi - yi.mean()) ** 2).sum())
        r2s.append(1.0 - float((res**2).sum()) / ss_tot if ss_tot > 0 else 1.0)
        rmses.append(float(np.sqrt((res**2).mean())))
        coefs.append(c)
        rs.append(r)
    coefs_a = np.array(coefs).reshape(*p.shape[:-1], 3)
    shape = p.shape[:-1]
    squeeze = (lambda a: float(a)) if p.ndim == 1 else (lambda a: a)
    return EffectiveBeta(
        squeeze(coefs_a[..., 1]),
        squeeze(coefs_a[..., 2]),
        squeeze(np.array(rs).reshape(shape)),
        squeeze(coefs_a[..., 0]),
        squeeze(np.array(r2s).reshape(shape)),
        squeeze(np.array(rmses).reshape(shape)),
    )
