"""Fidelity metrics between sampler output and the exact Boltzmann distribution.

Owns distribution distances and the effective-temperature fit. Depends on numpy and torch only.
All functions take arrays whose last axis is the distribution (or spin) axis and are batched over the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .exact import enumerate_states

__all__ = ["EffectiveBeta", "fit_effective_beta", "energy_terms"]


def _np(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


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
    """

    beta_h: Any
    beta_J: Any
    r: Any
    offset: Any


def fit_effective_beta(p: Any, h: Any, J: Any, *, floor: float = 1e-300) -> EffectiveBeta:
    """Fit ``log p(s) = c - beta_h E_h(s) - beta_J E_J(s)`` by least squares over all ``2**n`` states.

    This is how SPEC section 4 measures what DQA samples. Use exact output probabilities (a statevector), not
    shot frequencies: empty bins make ``log p`` undefined (they are clipped at ``floor``).

    Args:
        p: probabilities ``(*batch, 2**n)`` indexed ``c = sum_j b_j 2**j``.
        h: fields ``(*batch, n)``; J: ``(n, n)`` or ``(*batch, n, n)``.

    Returns:
        :class:`EffectiveBeta` with batch-shaped ``beta_h``, ``beta_J``, ``r``, ``offset``.
    """
    p = _np(p).astype(np.float64)
    Eh, EJ = energy_terms(h, J)
    if p.shape != Eh.shape:
        raise ValueError(f"p must have shape {Eh.shape} (batch + 2**n), got {p.shape}")
    y = np.log(np.clip(p, floor, None))
    X = np.stack([np.ones_like(Eh), -Eh, -EJ], axis=-1)  # (*batch, 2^n, 3)
    flatX = X.reshape(-1, *X.shape[-2:])
    flaty = y.reshape(-1, y.shape[-1])
    coefs, rs = [], []
    for Xi, yi in zip(flatX, flaty):
        # drop all-zero columns (J = 0 or h = 0) so the fit stays well posed
        keep = [0] + [k for k in (1, 2) if np.ptp(Xi[:, k]) > 0]
        c = np.zeros(3)
        sol, *_ = np.linalg.lstsq(Xi[:, keep], yi, rcond=None)
        c[keep] = sol
        pred = Xi @ c
        r = np.corrcoef(pred, yi)[0, 1] if np.ptp(pred) > 0 and np.ptp(yi) > 0 else (1.0 if np.ptp(yi) == 0 else 0.0)
        coefs.append(c)
        rs.append(r)
    coefs_a = np.array(coefs).reshape(*p.shape[:-1], 3)
    r_a = np.array(rs).reshape(p.shape[:-1])
    squeeze = (lambda a: float(a)) if p.ndim == 1 else (lambda a: a)
    return EffectiveBeta(squeeze(coefs_a[..., 1]), squeeze(coefs_a[..., 2]), squeeze(r_a), squeeze(coefs_a[..., 0]))
