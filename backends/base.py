"""What the backends share beyond the core interface: basis-state helpers (``draw_states`` is the oracle's).

The :class:`~hybrid_attention.sampler.Sampler` interface, :class:`~hybrid_attention.sampler.SamplerCapabilities`
and :class:`~hybrid_attention.sampleset.SampleSet` live in the core (so the bridge reads capabilities without
importing a backend); seeds (``as_generator``, ``spawn_seeds``, ``SeedLike``) are owned by
:mod:`hybrid_attention.checks`. All are re-exported here for the backends and their users.
"""

from __future__ import annotations

import functools

import numpy as np

from hybrid_attention.checks import SeedLike, as_generator, spawn_seeds
from hybrid_attention.exact import draw_states
from hybrid_attention.sampler import Sampler, SamplerCapabilities

__all__ = ["Sampler", "SamplerCapabilities", "SeedLike", "as_generator", "draw_states", "spawn_seeds", "state_bits"]


@functools.lru_cache(maxsize=32)
def _bit_table(n: int) -> np.ndarray:
    table = ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1).astype(bool)
    table.flags.writeable = False
    return table


def state_bits(idx: np.ndarray, n: int) -> np.ndarray:
    """Bits of basis-state indices, ``idx (...)`` -> bool ``(..., n)`` with column ``j`` = bit ``j`` of
    ``c = sum_j b_j 2**j`` (a table lookup: ~10x cheaper than shifting the int64 indices)."""
    return _bit_table(n)[idx]
