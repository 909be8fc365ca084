"""Bracket matching (docs/theory.md section 5): seeded well-nested strings, labels, held-out set, accuracies.

Tokens are ``0 = "("`` and ``1 = ")"``. For every closing bracket at position ``i`` the label is the position of
its matching opening bracket (``< i``); other positions carry the ignore label ``-100``. Strings have even length
``T`` and varied depth: each string draws its own opening probability ``p ~ U(0.2, 0.8)`` and then opens with
probability ``p`` whenever both moves keep the string completable (low ``p``: shallow ``()()()``; high ``p``:
deep nesting).

Training batches are fresh strings from a seeded generator; the held-out set is a fixed set drawn from a
different seed (:data:`VAL_SEED`), the same for every run so results are comparable. For small ``T`` there are
few distinct strings (the Catalan number ``C_{T/2}``, 1430 at ``T = 16``), so train and held-out strings overlap;
the task tests the matching rule rather than memorisation only for larger ``T``.

Example:
    >>> x, y = generate_brackets(2, 6, seed=0)
    >>> decode(x[0]), y[0].tolist()
    ('(())()', [-100, -100, 1, 0, -100, 4])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["OPEN", "CLOSE", "VAL_SEED", "generate_brackets", "match_positions", "decode", "accuracy", "BracketTask"]

OPEN, CLOSE = 0, 1
IGNORE = -100
VAL_SEED = 20_260_612


def _check_length(T: Any) -> int:
    if isinstance(T, bool) or not isinstance(T, (int, np.integer)):
        raise TypeError(f"bracket string length must be an int, got {type(T).__name__}")
    if T < 2 or T % 2:
        raise ValueError(f"bracket strings need an even length >= 2, got block_size = {T}")
    return int(T)


def generate_brackets(
    n: int, T: int, seed: int | np.random.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random well-nested strings of length ``T``.

    Returns:
        ``tokens (n, T)`` int64 in {0, 1} and ``labels (n, T)`` int64: matching opening position at closing
        brackets, -100 elsewhere.
    """
    T = _check_length(T)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    p = rng.uniform(0.2, 0.8, size=n)
    u = rng.random((n, T))
    tokens = np.zeros((n, T), dtype=np.int64)
    labels = np.full((n, T), IGNORE, dtype=np.int64)
    stack = np.zeros((n, T), dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    for t in range(T):
        remaining = T - t
        must_close = depth >= remaining
        must_open = depth == 0
        open_ = np.where(must_close, False, np.where(must_open, True, u[:, t] < p))
        tokens[:, t] = np.where(open_, OPEN, CLOSE)
        # push on open, pop on close
        stack[rows[open_], depth[open_]] = t
        close = ~open_
        labels[rows[close], t] = stack[rows[close], depth[close] - 1]
        depth = depth + np.where(open_, 1, -1)
    assert (depth == 0).all()
    return torch.from_numpy(tokens), torch.from_numpy(labels)


def match_positions(s: str) -> list[int]:
    """Reference labels for a bracket string (plain stack), e.g. ``"(())" -> [-100, -100, 1, 0]``."""
    out, stack = [], []
    for i, c in enumerate(s):
        if c == "(":
            stack.append(i)
            out.append(IGNORE)
        elif c == ")":
            if not stack:
                raise ValueError(f"unbalanced bracket string {s!r}")
            out.append(stack.pop())
        else:
            raise ValueError(f"bracket strings contain only '(' and ')', got {c!r}")
    if stack:
        raise ValueError(f"unbalanced bracket string {s!r}")
    return out


def decode(tokens: Any) -> str:
    return "".join("()"[int(t)] for t in tokens)


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[float, float]:
    """Per-closing-bracket accuracy and whole-string accuracy (all closing brackets right).

    Args:
        logits: ``(N, T, P)`` scores over positions.
        labels: ``(N, T)`` with -100 at positions that are not scored.
    """
    pred = logits.argmax(-1)
    scored = labels != IGNORE
    right = (pred == labels) & scored
    per = float(right.sum()) / max(int(scored.sum()), 1)
    whole = float(((right | ~scored).all(-1)).float().mean())
    return per, whole


class BracketTask:
    """Bracket-matching data for one block size.

    Args:
        block_size: string length ``T`` (even).
        val_size: held-out strings (drawn once with :data:`VAL_SEED`, independent of the training seed).
    """

    def __init__(self, block_size: int, val_size: int = 2000, val_seed: int = VAL_SEED) -> None:
        self.block_size = _check_length(block_size)
        self.vocab_size = 2
        self.val = generate_brackets(val_size, self.block_size, np.random.default_rng(val_seed))

    def get_batch(
        self, split: str, batch_size: int, block_size: int | None = None, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``train``: fresh strings seeded from ``generator``; ``val``: a random subset of the held-out set."""
        if block_size is not None and block_size != self.block_size:
            raise ValueError(f"this BracketTask has block_size {self.block_size}, got {block_size}")
        if split == "train":
            seed = int(torch.randint(0, 2**62, (1,), generator=generator))
            return generate_brackets(batch_size, self.block_size, seed)
        if split == "val":
            ix = torch.randint(len(self.val[0]), (batch_size,), generator=generator)
            return self.val[0][ix], self.val[1][ix]
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
