"""The problem ensembles of a fidelity sweep: random Ising problems, and those a trained attention layer solves."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from hybrid_attention.ising import IsingProblem

__all__ = ["random_problems", "problems_from_model"]


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


@torch.no_grad()
def problems_from_model(
    model: torch.nn.Module, idx: torch.Tensor, n: int, *, layer: int = 0, head: int = 0
) -> IsingProblem:
    """The Ising problems a trained model's attention layer solves for query position ``i = n - 1``.

    Runs ``model`` on ``idx``, captures the input of attention layer ``layer`` with a forward hook, and rebuilds
    the fields ``h_j = q_i . k_j / sqrt(d_head)`` over the visible keys ``j <= i`` (docs/theory.md section 3) with the
    layer's couplings ``J[head, :n, :n]`` and its ``beta``.

    Args:
        model: a :class:`hybrid_attention.model.Transformer` (anything with ``attention_layers`` whose items have
            ``c_attn``, ``n_head``, ``n_embd``, ``J``, ``beta``).
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
    att = layers[layer]
    if not 0 <= head < att.n_head:
        raise ValueError(f"head must be in [0, {att.n_head}), got {head}")
    if idx.ndim != 2 or idx.shape[1] < n:
        raise ValueError(f"idx must have shape (B, T) with T >= n = {n}, got {tuple(idx.shape)}")
    seen: dict[str, torch.Tensor] = {}

    def capture(mod: Any, inp: tuple, out: Any) -> None:  # returns None: the layer's output is left as it is
        seen.setdefault("x", inp[0])

    hook = att.register_forward_hook(capture)
    was_training = model.training
    try:
        model.eval()
        model(idx)
    finally:
        hook.remove()
        model.train(was_training)
    x = seen["x"]
    B, T, C = x.shape
    d = C // att.n_head
    q, k, _ = att.c_attn(x).split(att.n_embd, dim=2)
    q = q.view(B, T, att.n_head, d)[:, n - 1, head]  # (B, d)
    k = k.view(B, T, att.n_head, d)[:, :n, head]  # (B, n, d)
    h = torch.einsum("bd,bnd->bn", q, k) / math.sqrt(d)
    J = att.J[head, :n, :n] if att.J is not None else torch.zeros(n, n)
    beta = float(att.beta[head])
    return IsingProblem(h.double(), J.double(), beta=beta)
