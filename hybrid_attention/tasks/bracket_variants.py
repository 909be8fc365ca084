"""Harder bracket-matching variants (docs/theory.md section 5): several bracket types, filler tokens, held-out strings
disjoint from training, windows cut from long strings, a depth split, and accuracy by match distance and depth.

The classic task (:mod:`hybrid_attention.tasks.brackets`) saturates: at ``T <= 16`` there are at most 1,430 distinct
strings, nearly every held-out string also occurs in training, and most scored brackets are a plain ``"()"``. The
variants here keep its rule (a closing bracket points at its matching opening bracket, label = that position, ``-100``
elsewhere) and its generator idea (each string draws an opening probability ``p ~ U(0.2, 0.8)``), and add:

* ``types`` bracket types: type ``k`` opens with token ``2k`` and closes with ``2k + 1`` (``types = 1``: the classic
  tokens ``0 = "("``, ``1 = ")"``); the closing type always matches the open bracket it closes.
* ``filler`` probability: at each position a filler token (id ``2 * types``) instead of a bracket, whenever the string
  can still be completed. Fillers make the bracket count and positions vary and the number of strings explode.
* ``disjoint``: a fixed hash of the string's tokens puts a fifth of all strings in a held-out partition; training draws
  never contain them and the held-out set has only them, so no held-out string is ever trained on.
* ``train_max_depth``: training strings never nest deeper than this; the held-out set is not capped (train shallow,
  test deeper; :func:`accuracy_by` reports accuracy per depth).
* ``source_length``: strings of this length are generated and a window of ``T`` tokens cut at a uniform offset; a
  closing bracket is scored only when its opening bracket lies inside the window.

Every scored bracket also carries its nesting depth (1 = outermost pair) in a third array.

Example:
    >>> task = BracketVariantTask(16, types=2, filler=0.2, disjoint=True, val_size=50)
    >>> task.vocab_size, tuple(task.val[0].shape)
    (5, (50, 16))
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .brackets import IGNORE, VAL_SEED

__all__ = [
    "BracketVariant",
    "BracketVariantTask",
    "generate_variant",
    "in_heldout_partition",
    "reference_labels",
    "accuracy_by",
    "HELDOUT_MODULUS",
]

#: one string in HELDOUT_MODULUS falls in the held-out partition (``disjoint``)
HELDOUT_MODULUS = 5
MAX_TYPES = 8


@dataclass(frozen=True)
class BracketVariant:
    """The settings of a bracket-task variant (defaults: the classic strings, drawn by this module's generator).

    Attributes:
        types: bracket types (1 to 8).
        filler: probability of a filler token at a position where one keeps the string completable, in ``[0, 1)``.
        disjoint: held-out strings disjoint from training strings (hash partition).
        train_max_depth: deepest nesting in training strings (0: no cap); the held-out set is never capped.
        source_length: length of the strings windows are cut from (0: no windows; else ``>= T``).
    """

    types: int = 1
    filler: float = 0.0
    disjoint: bool = False
    train_max_depth: int = 0
    source_length: int = 0

    def check(self, T: int) -> None:
        """``ValueError``/``TypeError`` naming the bad setting, for strings of length ``T``."""
        for name in ("types", "train_max_depth", "source_length"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TypeError(f"bracket variant {name} must be an int, got {type(v).__name__} {v!r}")
        if not 1 <= self.types <= MAX_TYPES:
            raise ValueError(f"bracket types must be in 1..{MAX_TYPES}, got {self.types}")
        if isinstance(self.filler, bool) or not isinstance(self.filler, (int, float)) or not 0 <= self.filler < 1:
            raise ValueError(f"filler probability must be in [0, 1), got {self.filler!r}")
        if self.train_max_depth < 0:
            raise ValueError(f"train_max_depth must be >= 0 (0: no cap), got {self.train_max_depth}")
        if self.source_length and self.source_length < T:
            raise ValueError(f"source_length must be 0 (no windows) or >= T = {T}, got {self.source_length}")
        L = self.source_length or T
        if isinstance(T, bool) or not isinstance(T, (int, np.integer)) or T < 2:
            raise ValueError(f"bracket strings need a length >= 2, got {T!r}")
        if self.filler == 0 and L % 2:
            raise ValueError(f"without filler tokens, bracket strings need an even length, got {L}")

    @property
    def is_classic(self) -> bool:
        return self == BracketVariant()

    def vocab_size(self) -> int:
        return 2 * self.types + (1 if self.filler > 0 else 0)


def generate_variant(
    n: int,
    T: int,
    variant: BracketVariant = BracketVariant(),
    *,
    max_depth: int = 0,
    seed: int | np.random.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` strings of length ``T`` of the variant (no held-out partition filter; see :class:`BracketVariantTask`).

    Args:
        max_depth: deepest nesting (0: no cap), applied to the source strings.

    Returns:
        ``tokens (n, T)``, ``labels (n, T)`` (matching opening position in the window at scored closing brackets,
        -100 elsewhere) and ``depth (n, T)`` (nesting depth of the pair at scored closing brackets, 0 elsewhere),
        all int64.
    """
    variant.check(T)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    L = variant.source_length or T
    filler_tok = 2 * variant.types
    p = rng.uniform(0.2, 0.8, size=n)
    u_open, u_fill = rng.random((n, L)), rng.random((n, L))
    kinds = rng.integers(0, variant.types, size=(n, L))
    tokens = np.zeros((n, L), dtype=np.int64)
    labels = np.full((n, L), IGNORE, dtype=np.int64)
    depths = np.zeros((n, L), dtype=np.int64)
    stack_pos = np.zeros((n, L + 1), dtype=np.int64)
    stack_kind = np.zeros((n, L + 1), dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    cap = max_depth if max_depth > 0 else L
    for t in range(L):
        remaining = L - t  # slots left, this one included
        can_close = depth > 0
        can_open = (depth + 2 <= remaining) & (depth < cap)
        must_close = depth >= remaining
        fill = ~must_close & (u_fill[:, t] < variant.filler)
        fill |= ~can_open & ~can_close  # depth 0 with one slot left (odd lengths need a filler)
        open_ = ~fill & can_open & (~can_close | (u_open[:, t] < p))
        close = ~fill & ~open_
        r = rows[open_]
        stack_pos[r, depth[r]] = t
        stack_kind[r, depth[r]] = kinds[r, t]
        tokens[r, t] = 2 * kinds[r, t]
        depth[r] += 1
        r = rows[close]
        labels[r, t] = stack_pos[r, depth[r] - 1]
        depths[r, t] = depth[r]
        tokens[r, t] = 2 * stack_kind[r, depth[r] - 1] + 1
        depth[r] -= 1
        tokens[rows[fill], t] = filler_tok
    assert (depth == 0).all()
    if L > T:  # cut windows; a closing bracket is scored only if its match is inside the window
        off = rng.integers(0, L - T + 1, size=n)
        idx = off[:, None] + np.arange(T)
        tokens = np.take_along_axis(tokens, idx, 1)
        labels = np.take_along_axis(labels, idx, 1) - off[:, None]
        depths = np.take_along_axis(depths, idx, 1)
        outside = labels < 0
        labels[outside] = IGNORE
        depths[outside] = 0
    return torch.from_numpy(tokens), torch.from_numpy(labels), torch.from_numpy(depths)


def in_heldout_partition(tokens: torch.Tensor) -> torch.Tensor:
    """Whether each string ``tokens (n, T)`` falls in the held-out partition (a fixed blake2b hash of its tokens
    modulo :data:`HELDOUT_MODULUS` is 0), independent of seeds, runs and machines. Returns ``(n,)`` bool."""
    arr = np.ascontiguousarray(tokens.numpy().astype(np.int64))
    out = [
        int.from_bytes(hashlib.blake2b(row.tobytes(), digest_size=8).digest(), "little") % HELDOUT_MODULUS == 0
        for row in arr
    ]
    return torch.tensor(out, dtype=torch.bool)


def reference_labels(tokens: list[int], types: int) -> tuple[list[int], list[int]]:
    """Labels and depths of one complete (not windowed) string by a plain stack: ``(labels, depths)``; raises
    ``ValueError`` for a mismatched or unbalanced string. Tokens: ``2k`` opens type k, ``2k + 1`` closes it,
    ``2 * types`` is a filler."""
    labels, depths, stack = [], [], []
    for i, tok in enumerate(tokens):
        if tok == 2 * types:
            labels.append(IGNORE)
            depths.append(0)
        elif tok % 2 == 0:
            stack.append((i, tok // 2))
            labels.append(IGNORE)
            depths.append(0)
        else:
            if not stack or stack[-1][1] != tok // 2:
                raise ValueError(f"mismatched closing bracket at {i} in {tokens}")
            depths.append(len(stack))
            labels.append(stack.pop()[0])
    if stack:
        raise ValueError(f"unbalanced string {tokens}")
    return labels, depths


def accuracy_by(
    logits: torch.Tensor, labels: torch.Tensor, key: torch.Tensor | None = None
) -> dict[int, tuple[int, int]]:
    """Per-closing-bracket accuracy split by ``key``: ``{value: (right, count)}`` over scored positions.

    Args:
        logits: ``(N, T, P)`` scores over positions.
        labels: ``(N, T)``, -100 where not scored.
        key: ``(N, T)`` ints (e.g. depths); ``None``: the match distance ``i - label``.

    The counts add up to the scored positions and the right answers to :func:`hybrid_attention.tasks.brackets.accuracy`'s
    numerator, so the weighted mean of the groups is the overall accuracy.
    """
    scored = labels != IGNORE
    if key is None:
        key = torch.arange(labels.shape[1])[None, :] - labels
    if key.shape != labels.shape:
        raise ValueError(f"key must have the labels' shape {tuple(labels.shape)}, got {tuple(key.shape)}")
    right = (logits.argmax(-1) == labels) & scored
    k, r = key[scored], right[scored]
    out = {}
    for v in torch.unique(k).tolist():
        sel = k == v
        out[int(v)] = (int(r[sel].sum()), int(sel.sum()))
    return out


class BracketVariantTask:
    """Bracket-matching data of one variant and block size (same interface as
    :class:`~hybrid_attention.tasks.brackets.BracketTask`, plus :attr:`val_depth`).

    Args:
        block_size: window length ``T``.
        types, filler, disjoint, train_max_depth, source_length: :class:`BracketVariant`.
        val_size: held-out strings, drawn once with ``val_seed`` (never capped in depth; only from the held-out
            partition when ``disjoint``).
    """

    def __init__(
        self,
        block_size: int,
        *,
        types: int = 1,
        filler: float = 0.0,
        disjoint: bool = False,
        train_max_depth: int = 0,
        source_length: int = 0,
        val_size: int = 2000,
        val_seed: int = VAL_SEED,
    ) -> None:
        self.variant = BracketVariant(types, filler, disjoint, train_max_depth, source_length)
        self.variant.check(block_size)
        self.block_size = int(block_size)
        self.vocab_size = self.variant.vocab_size()
        x, y, d = self._draw(val_size, np.random.default_rng(val_seed), heldout=True, max_depth=0)
        self.val, self.val_depth = (x, y), d

    def _draw(
        self, n: int, rng: np.random.Generator, *, heldout: bool, max_depth: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not self.variant.disjoint:
            return generate_variant(n, self.block_size, self.variant, max_depth=max_depth, seed=rng)
        parts, have = [], 0
        for _ in range(1000):
            x, y, d = generate_variant(
                max(2 * n, 64) if heldout else n + n // 2 + 8,
                self.block_size,
                self.variant,
                max_depth=max_depth,
                seed=rng,
            )
            keep = in_heldout_partition(x) == heldout
            parts.append((x[keep], y[keep], d[keep]))
            have += int(keep.sum())
            if have >= n:
                break
        else:
            raise ValueError(
                f"could not draw {n} {'held-out' if heldout else 'training'} strings of length {self.block_size}: "
                "too few distinct strings for a disjoint split (use a longer block, more types or filler)"
            )
        return tuple(torch.cat(p)[:n] for p in zip(*parts))  # type: ignore[return-value]

    def get_batch(
        self, split: str, batch_size: int, block_size: int | None = None, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``train``: fresh strings seeded from ``generator`` (depth-capped, outside the held-out partition as set);
        ``val``: a random subset of the held-out set. Returns ``x, y (batch_size, T)``."""
        if block_size is not None and block_size != self.block_size:
            raise ValueError(f"this BracketVariantTask has block_size {self.block_size}, got {block_size}")
        if split == "train":
            seed = int(torch.randint(0, 2**62, (1,), generator=generator))
            x, y, _ = self._draw(
                batch_size, np.random.default_rng(seed), heldout=False, max_depth=self.variant.train_max_depth
            )
            return x, y
        if split == "val":
            ix = torch.randint(len(self.val[0]), (batch_size,), generator=generator)
            return self.val[0][ix], self.val[1][ix]
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")

    def describe(self) -> dict[str, Any]:
        """The variant's settings and the held-out set's composition (strings, scored brackets, depth counts)."""
        y, d = self.val[1], self.val_depth
        scored = y != IGNORE
        return {
            **self.variant.__dict__,
            "block_size": self.block_size,
            "vocab_size": self.vocab_size,
            "val_strings": len(y),
            "val_distinct": len({tuple(r) for r in self.val[0].tolist()}),
            "val_scored": int(scored.sum()),
            "val_depth_counts": {int(k): int(v) for k, v in zip(*torch.unique(d[scored], return_counts=True))},
        }
