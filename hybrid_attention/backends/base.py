"""What the backends share beyond the core interface: the progress bar of long sampler calls (:func:`progress`).

The :class:`~hybrid_attention.sampler.Sampler` interface, :class:`~hybrid_attention.sampler.SamplerCapabilities`
and :class:`~hybrid_attention.sampleset.SampleSet` live in the core (so the bridge reads capabilities without
importing a backend); seeds (``as_generator``, ``spawn_seeds``, ``SeedLike``) are owned by
:mod:`hybrid_attention.checks`; drawing basis states from a probability table (``draw_states``) by the oracle,
:mod:`hybrid_attention.exact`; spin / bit / index conversions by :mod:`hybrid_attention.ising`. The core names are
re-exported here for the backends and their users.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any

from hybrid_attention.checks import SeedLike, as_generator, spawn_seeds
from hybrid_attention.exact import draw_states
from hybrid_attention.sampler import Sampler, SamplerCapabilities

__all__ = [
    "lazy_exports",
    "Sampler",
    "SamplerCapabilities",
    "SeedLike",
    "as_generator",
    "draw_states",
    "progress",
    "spawn_seeds",
]


def progress(iterable: Iterable[Any], total: int, desc: str, *, show: bool | None = None) -> Iterable[Any]:
    """``iterable`` behind a transient tqdm bar (``leave=False``; hidden when the output is not a terminal) when
    the work is long enough to watch: ``show`` (default ``total >= 4``); else ``iterable`` itself.

    Args:
        iterable: the steps (chunks, problems, chain moves); total: their number; desc: the bar's label.
        show: whether to draw the bar (default: at least 4 steps).

    Example:
        >>> list(progress(range(3), 3, "aer"))  # too short for a bar
        [0, 1, 2]
    """
    if not (total >= 4 if show is None else show):
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, leave=False, disable=None)


def lazy_exports(package: str, module: str, names: list[str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package`` that resolves ``names`` from its sub-module ``module`` (relative,
    e.g. ``".sampler"``) on first use: a wing re-exports its sampler's public names without importing the sampler's
    heavy dependency (qiskit-ibm-runtime, dimod) when only a light sibling is imported."""

    def __getattr__(name: str) -> Any:
        if name in names:
            return getattr(importlib.import_module(module, package), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
