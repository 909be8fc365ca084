"""The run-finding task: point at the one run of consecutive query letters among isolated decoys.

A task where no single query-key score suffices and evidence must be pooled across neighbouring keys (after the toy
task of Multi-Token Attention, Golovneva et al. 2025). A sequence of ``T`` tokens holds ``T - 1`` letters from an
alphabet of ``V`` and ends with a query token ``?c`` naming a letter ``c``. Letter ``c`` occurs exactly once as a run
of ``q`` consecutive positions, and elsewhere only isolated (no two ``c`` adjacent, none next to the run): the decoys.
The model must point, at the last position, at the middle of the run (position ``start + q // 2``).

Every occurrence of ``c`` has the same query-key score, so attention that scores keys one at a time (softmax, or
independent spins) cannot tell the run from a decoy; couplings between neighbouring keys can (``J > 0`` at distance
1 lets the run's spins reinforce each other). Tokens: letters ``0 .. V-1``, query tokens ``V .. 2V-1`` (``V + c``:
"find c"). Labels: the run's middle at position ``T - 1``, ``-100`` elsewhere.

Read out with a linear pointer head over the attention output, the task is solvable without pooling in the
attention (the output sums the values of every ``c``, which encodes the set of their positions, and a linear map of
that set finds the run); the long-context study therefore lets the attention weights themselves point
(``--pointer attention``), where they must single out the run. Training batches are fresh sequences
from the caller's generator; the held-out set is fixed (:data:`VAL_SEED`).

Example:
    >>> x, y = generate_runs(1, 12, seed=0)
    >>> decode(x[0]), int(y[0, -1])
    ('edbcgggbgeh?g', 5)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["VAL_SEED", "generate_runs", "decode", "RunsTask", "check_runs", "default_decoys"]

IGNORE = -100
VAL_SEED = 20_261_204


def default_decoys(T: int, letters: int = 8, run: int = 3) -> int:
    """The decoy count when none is given: ``(T - 1 - run) // letters``, the query letter's share of the positions
    outside the run. It grows with ``T`` (3 at T = 32, 7 at T = 64, 15 at T = 128 with the defaults); a study that compares
    lengths at a fixed difficulty passes ``decoys`` explicitly instead.

    Example:
        >>> default_decoys(32), default_decoys(64), default_decoys(128)
        (3, 7, 15)
    """
    return (T - 1 - run) // letters


def check_runs(T: Any, letters: Any, run: Any, decoys: Any) -> None:
    """``ValueError``/``TypeError`` naming the setting that cannot make a valid sequence of length ``T``."""
    for name, v in (("block_size", T), ("letters", letters), ("run", run), ("decoys", decoys)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"runs task: {name} must be an int, got {type(v).__name__} {v!r}")
    if letters < 2:
        raise ValueError(f"runs task: letters must be >= 2 (the query letter and at least one other), got {letters}")
    if run < 2:
        raise ValueError(f"runs task: run must be >= 2 (a run of one is a decoy), got {run}")
    if decoys < 0:
        raise ValueError(f"runs task: decoys must be >= 0, got {decoys}")
    # the run, a gap on each side and every decoy with a gap after it fit into the T - 1 letter positions; and
    # however the decoys fall (each blocks itself and its two neighbours), a free slot is left for every one of them
    need = max(run + 2 + 2 * decoys, run + 3 * decoys)
    if T - 1 < need:
        raise ValueError(
            f"runs task: block_size {T} is too short for a run of {run} and {decoys} decoys (needs T >= {need + 1})"
        )


def generate_runs(
    n: int, T: int, seed: int | np.random.Generator | None = None, *, letters: int = 8, run: int = 3, decoys: int = -1
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random sequences of length ``T`` (module docstring).

    Args:
        letters: alphabet size ``V``; run: length ``q`` of the run; decoys: isolated occurrences of the query letter
            (``-1``: :func:`default_decoys`, ``(T - 1 - q) // V``, the letter's share of the other positions, which
            grows with ``T``; any ``N >= 0``: exactly ``N`` at every ``T``).

    Returns:
        ``tokens (n, T)`` int64 and ``labels (n, T)`` int64 (the run's middle at the last position, -100 elsewhere).
    """
    if decoys == -1:
        decoys = default_decoys(T, letters, run)
    check_runs(T, letters, run, decoys)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    L = T - 1
    tokens = np.empty((n, T), dtype=np.int64)
    labels = np.full((n, T), IGNORE, dtype=np.int64)
    for b in range(n):
        c = int(rng.integers(letters))
        others = rng.integers(letters - 1, size=L)
        seq = others + (others >= c)  # letters other than c
        start = int(rng.integers(L - run + 1))
        seq[start : start + run] = c
        # decoys: positions not adjacent to the run or to each other (a random choice among the free slots)
        free = np.ones(L, dtype=bool)
        free[max(0, start - 1) : start + run + 1] = False
        for _ in range(decoys):
            slots = np.flatnonzero(free)
            assert len(slots) > 0, "check_runs guarantees a free slot for every decoy"
            p = int(rng.choice(slots))
            seq[p] = c
            free[max(0, p - 1) : p + 2] = False
        tokens[b, :L] = seq
        tokens[b, L] = letters + c
        labels[b, L] = start + run // 2
    return torch.from_numpy(tokens), torch.from_numpy(labels)


def decode(tokens: Any, letters: int = 8) -> str:
    """Letters as ``a, b, ...``, query tokens as ``?a, ?b, ...``."""
    out = []
    for t in (int(v) for v in tokens):
        out.append(chr(97 + t) if t < letters else "?" + chr(97 + t - letters))
    return "".join(out)


class RunsTask:
    """The run-finding task at block size ``T``: fresh training sequences, a fixed held-out set.

    Args:
        decoys: isolated occurrences of the query letter per sequence; ``-1`` (the default):
            :func:`default_decoys`, which grows with ``T``; ``N >= 0``: exactly ``N`` at every ``T`` (a study that
            compares lengths at fixed difficulty).

    Attributes:
        vocab_size: ``2 * letters``; decoys: the decoy count in use; val: ``(x, y)`` of the held-out set.
    """

    def __init__(
        self,
        block_size: int,
        *,
        letters: int = 8,
        run: int = 3,
        decoys: int = -1,
        val_size: int = 2000,
        val_seed: int = VAL_SEED,
    ) -> None:
        self.block_size, self.letters, self.run = int(block_size), letters, run
        self.decoys = default_decoys(block_size, letters, run) if decoys == -1 else decoys
        check_runs(block_size, letters, run, self.decoys)
        self.vocab_size = 2 * letters
        self.val = self._draw(val_size, np.random.default_rng(val_seed))

    def _draw(self, n: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return generate_runs(n, self.block_size, rng, letters=self.letters, run=self.run, decoys=self.decoys)

    def get_batch(
        self, split: str, batch_size: int, block_size: int, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``train``: fresh sequences seeded from ``generator``; ``val``: a random subset of the held-out set."""
        if block_size != self.block_size:
            raise ValueError(f"runs task built for block_size {self.block_size}, asked for {block_size}")
        if split == "train":
            seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
            return self._draw(batch_size, np.random.default_rng(seed))
        if split == "val":
            ix = torch.randint(len(self.val[0]), (batch_size,), generator=generator)
            return self.val[0][ix], self.val[1][ix]
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
