"""The problem ensembles of a fidelity sweep: random Ising problems, and those a trained attention layer solves."""

from __future__ import annotations

import numpy as np
import torch

from hybrid_attention.ising import IsingProblem

__all__ = [
    "random_problems",
    "problems_from_model",
    "ensemble_problems",
    "banded_problems",
    "ENSEMBLES",
    "BAND_ENSEMBLES",
    "ATTENTION_COUPLING_RATIOS",
]

#: the synthetic ensembles (:func:`ensemble_problems`)
ENSEMBLES = ("random", "sk", "layden", "coupling")
#: the ensembles that have a banded form (:func:`banded_problems`)
BAND_ENSEMBLES = ("random", "coupling")
#: rms |J| / rms |h| of trained attention layers, measured on exact-trained brackets models (T = 8: 0.103 / 1.136;
#: T = 12: 0.091 / 0.641; ``results/quantum_training/burn_in.md``): where attention problems sit on the coupling axis
ATTENTION_COUPLING_RATIOS = {8: 0.103 / 1.136, 12: 0.091 / 0.641}


def random_problems(n: int, count: int, *, seed: int = 0, scale: float = 1.0, beta: float = 1.0) -> IsingProblem:
    """``count`` random problems on ``n`` spins: ``h, J_jk ~ N(0, scale**2)`` i.i.d. (docs/theory.md section 4's ensemble).

    Args:
        n: spins (>= 1); count: problems (>= 1); seed: int; scale: standard deviation; beta: inverse temperature.

    Returns:
        float64 :class:`IsingProblem` with ``h (count, n)`` and ``J (count, n, n)``. The stream depends only on
        ``(seed, n)``, so adding sizes to a sweep never changes the problems of the others.
    """
    if n < 1 or count < 1:
        raise ValueError(f"n and count must be >= 1, got n = {n}, count = {count}")
    rng = np.random.default_rng([int(seed), int(n)])
    h = scale * rng.standard_normal((count, n))
    U = np.triu(scale * rng.standard_normal((count, n, n)), 1)
    return IsingProblem(torch.from_numpy(h), torch.from_numpy(U + U.transpose(0, 2, 1)), beta=beta)


def ensemble_problems(
    ensemble: str, n: int, count: int, *, seed: int = 0, scale: float = 1.0, beta: float = 1.0, coupling: float = 1.0
) -> IsingProblem:
    """``count`` problems on ``n`` spins from a synthetic ensemble (float64, ``h (count, n)``, ``J (count, n, n)``).

    * ``random``: ``h, J_jk ~ N(0, scale**2)`` (:func:`random_problems`);
    * ``sk``: ``h ~ N(0, scale**2)``, ``J_jk ~ N(0, scale**2 / (n - 1))`` (Sherrington-Kirkpatrick scaling: the
      field each spin feels from the others stays O(1) as ``n`` grows);
    * ``layden``: ``h_j, J_jk ~ N(0, 1)`` all-to-all at ``beta = 1`` whatever ``scale`` and ``beta`` say (the
      fully connected spin-glass instances of Layden et al., Nature 619, 282 (2023), as this repository's mixing
      experiment defines them);
    * ``coupling``: ``h ~ N(0, scale**2)``, ``J_jk ~ N(0, (coupling * scale)**2)``: the coupling-strength axis;
      ``coupling`` is rms J / rms h, from attention-like (:data:`ATTENTION_COUPLING_RATIOS`, about 0.1) to spin-glass
      strength (1, Layden's).

    The stream depends only on ``(seed, n)`` (and the ensemble), as for :func:`random_problems`.
    """
    if ensemble not in ENSEMBLES:
        raise ValueError(f"ensemble must be one of {ENSEMBLES}, got {ensemble!r}")
    if ensemble == "random":
        return random_problems(n, count, seed=seed, scale=scale, beta=beta)
    if n < 1 or count < 1:
        raise ValueError(f"n and count must be >= 1, got n = {n}, count = {count}")
    if not (coupling >= 0 and np.isfinite(coupling)):
        raise ValueError(f"coupling must be a finite number >= 0, got {coupling}")
    tag = {"sk": 1, "layden": 2, "coupling": 3}[ensemble]
    rng = np.random.default_rng([int(seed), int(n), tag])
    if ensemble == "layden":
        scale, beta, j_scale = 1.0, 1.0, 1.0
    elif ensemble == "sk":
        j_scale = scale / np.sqrt(max(n - 1, 1))
    else:
        j_scale = coupling * scale
    h = scale * rng.standard_normal((count, n))
    U = np.triu(rng.standard_normal((count, n, n)), 1) * j_scale
    return IsingProblem(torch.from_numpy(h), torch.from_numpy(U + U.transpose(0, 2, 1)), beta=beta)


def banded_problems(
    n: int, band: int, count: int, *, seed: int = 0, scale: float = 1.0, beta: float = 1.0, coupling: float = 1.0
) -> IsingProblem:
    """``count`` random chain problems on ``n`` spins with couplings in a band of width ``band`` (SPEC section 3b).

    ``h_j ~ N(0, scale**2)``, ``J_{j,j+d} ~ N(0, (coupling * scale)**2)`` i.i.d. for ``d = 1..band``, ``J_jk = 0``
    for ``|j - k| > band``; symmetric, zero diagonal. ``coupling = 1`` is the ``random`` ensemble restricted to the
    band, other values its ``coupling`` ensemble. The stream depends only on ``(seed, n, band)``.

    Returns:
        float64 :class:`IsingProblem` with ``h (count, n)`` and ``J (count, n, n)``.
    """
    from hybrid_attention import banded

    if n < 1 or count < 1:
        raise ValueError(f"n and count must be >= 1, got n = {n}, count = {count}")
    banded.check_band(band, n)
    if not (coupling >= 0 and np.isfinite(coupling)):
        raise ValueError(f"coupling must be a finite number >= 0, got {coupling}")
    rng = np.random.default_rng([int(seed), int(n), 100 + int(band)])
    h = scale * rng.standard_normal((count, n))
    c = coupling * scale * rng.standard_normal((count, band, n))
    c[:, np.arange(band)[:, None] >= np.arange(n)[None, :]] = 0.0  # c[d-1, j] = J_{j-d, j} needs j >= d
    J = banded.dense_couplings(torch.from_numpy(c), n)
    return IsingProblem(torch.from_numpy(h), J, beta=beta)


@torch.no_grad()
def problems_from_model(
    model: torch.nn.Module, idx: torch.Tensor, n: int, *, layer: int = 0, head: int = 0
) -> IsingProblem:
    """The Ising problems a trained model's attention layer solves for query position ``i = n - 1``.

    Runs ``model`` (in eval mode) on ``idx`` up to attention layer ``layer``
    (:meth:`hybrid_attention.model.Transformer.attention_problems`) and keeps query ``n - 1``'s fields
    ``h_j = q_i . k_j / sqrt(d_head)`` over the visible keys ``j <= i`` (docs/theory.md section 3) with the layer's
    couplings ``J[head, :n, :n]`` and its ``beta``.

    Args:
        model: a :class:`hybrid_attention.model.Transformer`.
        idx: token ids ``(B, T)`` with ``T >= n``.
        n: number of visible keys (spins).

    Returns:
        float64 :class:`IsingProblem` with ``h (B, n)``, ``J (n, n)``.
    """
    layers = list(getattr(model, "attention_layers", []))
    if not layers:
        raise ValueError("model has no attention_layers; expected a hybrid_attention.model.Transformer")
    if not 0 <= layer < len(layers):
        raise ValueError(f"layer must be in [0, {len(layers)}), got {layer}")
    if not 0 <= head < layers[layer].n_head:
        raise ValueError(f"head must be in [0, {layers[layer].n_head}), got {head}")
    if idx.ndim != 2 or idx.shape[1] < n:
        raise ValueError(f"idx must have shape (B, T) with T >= n = {n}, got {tuple(idx.shape)}")
    was_training = model.training
    try:
        model.eval()
        (problems,) = model.attention_problems(idx, layers=[layer])
    finally:
        model.train(was_training)
    return problems.ising(head, n - 1)
