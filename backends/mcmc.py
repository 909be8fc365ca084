"""Markov-chain analysis: exact transition matrices of small chains, spectral gaps, autocorrelation diagnostics.

Used by the ``qemcmc`` sampler (its diagnostics in ``SampleSet.info``), its tests (detailed balance, stationarity)
and ``experiments/qemcmc_mixing`` (spectral gaps of quantum, local and uniform proposals). numpy only.

States are indexed ``c = sum_j b_j 2**j`` (docs/theory.md section 2). A transition matrix ``P`` has ``P[s, s']`` the
probability of moving from ``s`` to ``s'`` (rows sum to 1).

* :func:`metropolis_matrix`: the Metropolis-Hastings chain of a proposal ``Q`` on energies ``E`` at ``beta``
  (acceptance ``min(1, exp(-beta (E' - E)) Q(s|s') / Q(s'|s))``, reducing to ``min(1, exp(-beta dE))`` for a
  symmetric ``Q``);
* :func:`local_proposal`, :func:`uniform_proposal`, :func:`heat_bath_matrix`: the classical baselines
  (single-spin-flip Metropolis, uniform proposals, random-scan Gibbs);
* :func:`stationary_distribution`, :func:`detailed_balance_violation`, :func:`spectral_gap`,
  :func:`exact_integrated_time`: exact properties of a chain;
* :func:`integrated_time`, :func:`effective_sample_size`: estimates from sampled traces (Sokal's automatic window).

Example:
    >>> import numpy as np
    >>> E = np.array([0.0, 1.0, 1.0, -0.5])
    >>> P = metropolis_matrix(uniform_proposal(2), E, 1.0)
    >>> pi = np.exp(-E) / np.exp(-E).sum()
    >>> bool(np.allclose(stationary_distribution(P), pi)), detailed_balance_violation(P, pi) < 1e-15
    (True, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "metropolis_matrix",
    "local_proposal",
    "uniform_proposal",
    "heat_bath_matrix",
    "stationary_distribution",
    "detailed_balance_violation",
    "spectral_gap",
    "exact_integrated_time",
    "integrated_time",
    "effective_sample_size",
]


def _flips(n: int) -> np.ndarray:
    """``(2**n, n)`` index of ``s`` with spin ``j`` flipped."""
    c = np.arange(1 << n)
    return c[:, None] ^ (1 << np.arange(n))[None, :]


def metropolis_matrix(Q: Any, E: Any, beta: float) -> np.ndarray:
    """Transition matrix of Metropolis-Hastings with proposal ``Q (2**n, 2**n)`` on energies ``E (2**n,)``.

    ``P[s, s'] = Q[s, s'] min(1, exp(-beta (E[s'] - E[s])) Q[s', s] / Q[s, s'])`` for ``s' != s``; the rejected
    mass stays on the diagonal. For a symmetric ``Q`` the ratio of proposals is 1.
    """
    Q = np.asarray(Q, dtype=np.float64)
    E = np.asarray(E, dtype=np.float64)
    dE = E[None, :] - E[:, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.where(Q > 0, np.exp(-beta * dE) * Q.T / np.where(Q > 0, Q, 1.0), 0.0)
    P = Q * np.minimum(1.0, ratio)
    np.fill_diagonal(P, 0.0)
    P[np.diag_indices_from(P)] = 1.0 - P.sum(1)
    return P


def local_proposal(n: int) -> np.ndarray:
    """Single-spin-flip proposal: flip one uniformly chosen spin, ``Q[s, s^j] = 1/n``."""
    Q = np.zeros((1 << n, 1 << n))
    Q[np.arange(1 << n)[:, None], _flips(n)] = 1.0 / n
    return Q


def uniform_proposal(n: int) -> np.ndarray:
    """Uniform proposal ``Q[s, s'] = 2**-n`` (Layden et al.'s classical baseline, with local moves)."""
    return np.full((1 << n, 1 << n), 1.0 / (1 << n))


def heat_bath_matrix(E: Any, beta: float, n: int) -> np.ndarray:
    """Random-scan Gibbs (heat bath): pick spin ``j`` uniformly, redraw it from its conditional distribution."""
    E = np.asarray(E, dtype=np.float64)
    F = _flips(n)
    c = np.arange(1 << n)
    p_flip = 1.0 / (1.0 + np.exp(np.clip(beta * (E[F] - E[:, None]), -700, 700)))  # (2**n, n)
    P = np.zeros((1 << n, 1 << n))
    P[c[:, None], F] = p_flip / n
    P[c, c] = 1.0 - p_flip.sum(1) / n
    return P


def stationary_distribution(P: Any) -> np.ndarray:
    """The stationary distribution of an ergodic chain: the left eigenvector of ``P`` for eigenvalue 1, normalised."""
    P = np.asarray(P, dtype=np.float64)
    w, v = np.linalg.eig(P.T)
    k = int(np.argmin(np.abs(w - 1.0)))
    pi = np.real(v[:, k])
    return pi / pi.sum()


def detailed_balance_violation(P: Any, pi: Any) -> float:
    """``max |pi[s] P[s, s'] - pi[s'] P[s', s]|`` (0 for a reversible chain with stationary ``pi``)."""
    F = np.asarray(pi)[:, None] * np.asarray(P)
    return float(np.abs(F - F.T).max())


def spectral_gap(P: Any, pi: Any) -> float:
    """``1 - |lambda_2|`` of a reversible chain, ``lambda_2`` the second-largest eigenvalue in absolute value.

    Computed from the symmetric matrix ``D^1/2 P D^-1/2`` (``D = diag(pi)``), which has the eigenvalues of ``P``
    when detailed balance holds.
    """
    pi = np.asarray(pi, dtype=np.float64)
    d = np.sqrt(pi)
    A = d[:, None] * np.asarray(P) / d[None, :]
    lam = np.linalg.eigvalsh(0.5 * (A + A.T))
    lam = np.sort(np.abs(lam))
    return float(1.0 - lam[-2])


def exact_integrated_time(P: Any, pi: Any, f: Any) -> float:
    """Integrated autocorrelation time ``1 + 2 sum_{t>=1} rho_f(t)`` of ``f(X_t)`` for a stationary chain.

    Uses ``sum_{t>=1} P^t g = (I - P + 1 pi^T)^-1 P g`` for the centred ``g = f - E_pi f`` (the fundamental matrix).
    """
    P = np.asarray(P, dtype=np.float64)
    pi = np.asarray(pi, dtype=np.float64)
    g = np.asarray(f, dtype=np.float64) - pi @ np.asarray(f, dtype=np.float64)
    var = pi @ g**2
    Z = np.linalg.solve(np.eye(len(pi)) - P + np.outer(np.ones(len(pi)), pi), P @ g)
    return float(1.0 + 2.0 * (pi * g) @ Z / var)


def _autocorrelation(x: np.ndarray) -> np.ndarray:
    """Chain-averaged normalised autocorrelation of ``x (..., chains, T)`` along the last axis (FFT).

    The mean subtracted is pooled over chains and time: per-chain means bias the autocovariance low by about
    ``tau / T`` (short traces), and chains stuck in different modes then show up as a long time, not a short one."""
    T = x.shape[-1]
    y = x - x.mean((-2, -1), keepdims=True)
    f = np.fft.rfft(y, n=2 * T, axis=-1)
    acov = np.fft.irfft(f * np.conj(f), axis=-1)[..., :T] / T
    acov = acov.mean(-2)  # average over chains
    with np.errstate(divide="ignore", invalid="ignore"):
        return acov / acov[..., :1]


def integrated_time(x: Any, *, c: float = 5.0) -> np.ndarray:
    """Integrated autocorrelation time (in steps) of traces ``x (..., chains, T)``, per leading index.

    Sokal's automatic window (as in emcee): ``tau(M) = 1 + 2 sum_{t=1}^{M} rho(t)`` with the chain-averaged
    autocorrelation ``rho``, at the smallest ``M >= c tau(M)``. A constant trace (no variance) gives 1; a window
    that never closes within ``T`` gives the last estimate (an underestimate: the trace is too short).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim < 2 or x.shape[-1] < 2:
        raise ValueError(f"integrated_time needs traces (..., chains, T >= 2), got shape {x.shape}")
    rho = _autocorrelation(x)
    rho = np.where(np.isfinite(rho), rho, 0.0)
    rho[..., 0] = 1.0
    taus = 2.0 * np.cumsum(rho, axis=-1) - 1.0
    M = np.arange(x.shape[-1])
    ok = M >= c * taus
    first = np.where(ok.any(-1), ok.argmax(-1), x.shape[-1] - 1)
    return np.maximum(np.take_along_axis(taus, first[..., None], -1)[..., 0], 1.0)


def effective_sample_size(num_chains: int, records: int, iat: Any, thinning: int = 1) -> np.ndarray:
    """Effective number of independent reads among ``num_chains * records`` recorded states.

    Chains are independent; within a chain, records ``thinning`` steps apart have an integrated time of about
    ``max(1, iat / thinning)`` records, so ``ESS = num_chains * min(records, max(1, records / (iat / thinning)))``.
    """
    tau = np.maximum(np.asarray(iat, dtype=np.float64) / thinning, 1.0)
    return num_chains * np.minimum(records, np.maximum(1.0, records / tau))
