"""Multi-query associative recall (MQAR; Arora et al. 2023, "Zoology: Measuring and Improving Recall in Efficient
Language Models", arXiv 2312.04927): seeded sequences, labels, a held-out set, the lookup oracle.

A sequence of ``T`` tokens opens with ``n`` key-value pairs ``k_1 v_1 k_2 v_2 ... k_n v_n`` (positions
``0 .. 2n-1``); after them every key comes back once as a query, in random order, at the even offsets ``2n + 2g`` of
the rest, whose other positions hold the filler token 0. At a query position the model must output the value that
followed that key in the context: the label there is the value, every other position carries the ignore label
``-100`` (loss and accuracy count the query positions only). As in Zoology's generator:

* keys are drawn without replacement from ``1 .. V/2 - 1`` and values without replacement from ``V/2 .. V - 1``
  (``V`` the vocabulary size, ``0`` the filler), so no key occurs twice in a context and a token says by itself
  whether it is a key or a value;
* the query slots ``g`` are drawn without replacement with ``p(g) ∝ (g + 1)^(a - 1)``, ``a = 0.01``
  (``power_a``): queries tend to come soon after the context, with a long tail. Unlike Zoology's generator, which
  gives the ``k``-th drawn slot (likely an early one) to the ``k``-th key, so that the queries tend to follow the
  context's order and a one-layer model reads part of the answers off positions, the drawn slots go to the keys in
  random order;
* ``random_non_queries=True`` fills the non-query positions with uniform random tokens instead of 0 (Zoology's
  option; off by default, as in its figure 2).

Defaults scale with ``T`` (Zoology varies the pairs with the sequence length, ``T / 16`` in its figure 2 at
``T >= 64`` with ``V = 8192``): ``n = T // 8`` pairs (:func:`default_pairs`; at ``T = 32`` that is 4, where
``T / 16`` would leave 2 and guessing among the context's values would already score 50 %) and ``V = max(64, 4 T)``
(:func:`default_vocab`; Zoology requires ``V > T``). Chance for a model that cannot bind keys to values is about
``1 / n`` (a value of the context at random).

Training batches are fresh sequences from the caller's ``torch.Generator``; the held-out set is fixed
(:data:`VAL_SEED`). The two come from different streams of ``numpy.random.SeedSequence`` (spawn keys
:data:`TRAIN_STREAM` and :data:`VAL_STREAM`), so no training seed reproduces the held-out draw.

Example:
    >>> x, y = generate_mqar(1, 16, seed=0, pairs=2, vocab_size=20)
    >>> x[0].tolist()[:4], mqar_oracle(x, vocab_size=20).equal(y)
    ([4, 12, 3, 14], True)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = [
    "VAL_SEED",
    "TRAIN_STREAM",
    "VAL_STREAM",
    "FILLER",
    "default_pairs",
    "default_vocab",
    "check_mqar",
    "generate_mqar",
    "mqar_oracle",
    "MQARTask",
]

IGNORE = -100
FILLER = 0
VAL_SEED = 20_231_208
#: ``SeedSequence`` spawn keys of the training draws and of the held-out set: disjoint streams
TRAIN_STREAM, VAL_STREAM = 0, 1
POWER_A = 0.01


def default_pairs(T: int) -> int:
    """Key-value pairs when none are given: ``max(1, T // 8)`` (module docstring).

    Example:
        >>> default_pairs(32), default_pairs(64), default_pairs(128)
        (4, 8, 16)
    """
    return max(1, T // 8)


def default_vocab(T: int) -> int:
    """Vocabulary size when none is given: ``max(64, 4 T)`` (keys and values ``2 T`` each; Zoology needs ``V > T``).

    Example:
        >>> default_vocab(8), default_vocab(32), default_vocab(128)
        (64, 128, 512)
    """
    return max(64, 4 * T)


def _int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"mqar: {name} must be an int, got {type(v).__name__} {v!r}")
    return int(v)


def check_mqar(T: Any, pairs: Any, vocab_size: Any, power_a: Any = POWER_A) -> None:
    """``ValueError``/``TypeError`` naming the setting that cannot make a valid sequence of length ``T``."""
    T, pairs, vocab_size = _int("block_size", T), _int("pairs", pairs), _int("vocab_size", vocab_size)
    if pairs < 1:
        raise ValueError(f"mqar: pairs must be >= 1, got {pairs}")
    if T < 4 * pairs:
        raise ValueError(
            f"mqar: block_size {T} is too short for {pairs} key-value pairs: the pairs take {2 * pairs} positions and "
            f"each of the {pairs} queries a slot of two more (needs block_size >= 4 * pairs = {4 * pairs})"
        )
    keys, values = vocab_size // 2 - 1, vocab_size - vocab_size // 2
    if keys < pairs or values < pairs:
        raise ValueError(
            f"mqar: vocab_size {vocab_size} has {keys} key tokens (1 .. V/2 - 1) and {values} value tokens, too few "
            f"for {pairs} distinct pairs (needs vocab_size >= {2 * pairs + 2})"
        )
    if isinstance(power_a, bool) or not isinstance(power_a, (int, float)) or not 0 < power_a <= 1:
        raise ValueError(f"mqar: power_a must be a number in (0, 1] (1: uniform query slots), got {power_a!r}")


def _distinct(rng: np.random.Generator, n: int, k: int, lo: int, hi: int) -> np.ndarray:
    """``(n, k)`` ints from ``lo .. hi - 1``, distinct within each row, uniformly (the first k of a random order)."""
    return lo + np.argsort(rng.random((n, hi - lo)), axis=1)[:, :k]


def generate_mqar(
    n: int,
    T: int,
    seed: int | np.random.Generator | None = None,
    *,
    pairs: int | None = None,
    vocab_size: int | None = None,
    power_a: float = POWER_A,
    random_non_queries: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random MQAR sequences of length ``T`` (module docstring).

    Args:
        pairs: key-value pairs ``n`` per sequence (``None``: :func:`default_pairs`); each key is queried once.
        vocab_size: ``V`` (``None``: :func:`default_vocab`); keys ``1 .. V/2 - 1``, values ``V/2 .. V - 1``.
        power_a: the power law of the query slots (``1``: uniform).
        random_non_queries: non-query positions after the context hold random tokens instead of the filler 0.

    Returns:
        ``tokens (n, T)`` int64 and ``labels (n, T)`` int64: the queried key's value at each query position,
        -100 elsewhere.
    """
    pairs = default_pairs(T) if pairs is None else pairs
    vocab_size = default_vocab(T) if vocab_size is None else vocab_size
    check_mqar(T, pairs, vocab_size, power_a)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    half = vocab_size // 2
    keys = _distinct(rng, n, pairs, 1, half)
    values = _distinct(rng, n, pairs, half, vocab_size)
    slots = (T - 2 * pairs) // 2
    # without replacement, proportional to p: the k smallest of -log p + Gumbel noise (Gumbel top-k)
    p = np.arange(1, slots + 1, dtype=np.float64) ** (power_a - 1)
    gaps = np.argsort(-np.log(p) + np.log(-np.log(rng.random((n, slots)))), axis=1)[:, :pairs]
    # in draw order the likeliest (earliest) slots come first: handed to the keys in that order, the queries would
    # follow the context's order and position alone would give answers away; each key gets a slot at random
    gaps = np.take_along_axis(gaps, np.argsort(rng.random((n, pairs)), axis=1), axis=1)
    tokens = np.full((n, T), FILLER, dtype=np.int64)
    if random_non_queries:
        tokens[:, 2 * pairs :] = rng.integers(vocab_size, size=(n, T - 2 * pairs))
    labels = np.full((n, T), IGNORE, dtype=np.int64)
    tokens[:, 0 : 2 * pairs : 2], tokens[:, 1 : 2 * pairs : 2] = keys, values
    where = 2 * pairs + 2 * gaps  # the query positions, (n, pairs)
    np.put_along_axis(tokens, where, keys, axis=1)
    np.put_along_axis(labels, where, values, axis=1)
    return torch.from_numpy(tokens), torch.from_numpy(labels)


def mqar_oracle(tokens: torch.Tensor, *, vocab_size: int) -> torch.Tensor:
    """The labels recovered from the sequences alone, by a lookup: the context is the leading run of key-value
    pairs (a key token at every even position, a value token after it), and every later occurrence of one of its
    keys is labelled with the value that followed the key there (-100 elsewhere). Equals the generator's labels
    when the non-query positions hold the filler; the task is well posed.

    Args:
        tokens: ``(N, T)`` int token ids.
        vocab_size: ``V`` of the sequences (keys below ``V/2``, values from ``V/2``).

    Returns:
        ``(N, T)`` int64 labels.
    """
    half = vocab_size // 2
    out = torch.full(tokens.shape, IGNORE, dtype=torch.int64)
    for r, row in enumerate(tokens.tolist()):
        table, i = {}, 0
        while i + 1 < len(row) and 1 <= row[i] < half and row[i + 1] >= half and row[i] not in table:
            table[row[i]] = row[i + 1]
            i += 2
        for j in range(i, len(row)):
            if row[j] in table:
                out[r, j] = table[row[j]]
    return out


class MQARTask:
    """MQAR data for one block size: fresh training sequences, a fixed held-out set.

    Args:
        block_size: sequence length ``T``.
        pairs: key-value pairs per sequence (``None``: :func:`default_pairs`).
        vocab_size: ``V`` (``None``: :func:`default_vocab`).
        power_a, random_non_queries: as in :func:`generate_mqar`.
        val_size: held-out sequences (drawn once from ``val_seed`` on its own stream).

    Attributes:
        vocab_size, pairs: the settings in use; val: ``(x, y)`` of the held-out set, each ``(val_size, T)``.
    """

    def __init__(
        self,
        block_size: int,
        *,
        pairs: int | None = None,
        vocab_size: int | None = None,
        power_a: float = POWER_A,
        random_non_queries: bool = False,
        val_size: int = 2000,
        val_seed: int = VAL_SEED,
    ) -> None:
        self.block_size = _int("block_size", block_size)
        self.pairs = default_pairs(self.block_size) if pairs is None else pairs
        self.vocab_size = default_vocab(self.block_size) if vocab_size is None else vocab_size
        self.power_a, self.random_non_queries = power_a, bool(random_non_queries)
        check_mqar(self.block_size, self.pairs, self.vocab_size, power_a)
        self.val = self._draw(val_size, _stream(val_seed, VAL_STREAM))

    def _draw(self, n: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        return generate_mqar(
            n,
            self.block_size,
            rng,
            pairs=self.pairs,
            vocab_size=self.vocab_size,
            power_a=self.power_a,
            random_non_queries=self.random_non_queries,
        )

    def get_batch(
        self, split: str, batch_size: int, block_size: int, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``train``: fresh sequences seeded from ``generator`` (training stream); ``val``: a random subset of the
        held-out set. Returns ``x, y (batch_size, T)``."""
        if block_size != self.block_size:
            raise ValueError(f"mqar task built for block_size {self.block_size}, asked for {block_size}")
        if split == "train":
            seed = int(torch.randint(2**62, (1,), generator=generator))
            return self._draw(batch_size, _stream(seed, TRAIN_STREAM))
        if split == "val":
            ix = torch.randint(len(self.val[0]), (batch_size,), generator=generator)
            return self.val[0][ix], self.val[1][ix]
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")


def _stream(seed: int, stream: int) -> np.random.Generator:
    """The generator of ``seed`` on stream ``stream`` (:data:`TRAIN_STREAM` or :data:`VAL_STREAM`)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(stream,)))
