"""Sampler registry: names to lazily imported classes, with install hints for missing extras."""

from __future__ import annotations

import importlib
from typing import Any

from .base import Sampler

__all__ = ["get_sampler", "available_samplers", "register_sampler", "SAMPLERS"]

#: name -> (module, class, extra that provides its dependencies or None)
SAMPLERS: dict[str, tuple[str, str, str | None]] = {
    "exact": ("hybrid_attention.backends.exact", "ExactSampler", None),
    "statevector": ("hybrid_attention.backends.statevector", "StatevectorSampler", None),
    "aer": ("hybrid_attention.backends.aer", "AerSampler", "aer"),
    "pennylane": ("hybrid_attention.backends.pennylane", "PennyLaneSampler", "pennylane"),
    "ibm": ("hybrid_attention.backends.ibm", "IBMSampler", "ibm"),
    "gibbs": ("hybrid_attention.backends.classical", "GibbsSampler", None),
    "anneal": ("hybrid_attention.backends.classical", "AnnealingSampler", None),
    "meanfield": ("hybrid_attention.backends.classical", "MeanFieldSampler", None),
}


def register_sampler(name: str, module: str, cls: str, extra: str | None = None) -> None:
    """Register a sampler class by import path (imported only when first requested)."""
    SAMPLERS[name] = (module, cls, extra)


def _load(name: str) -> type[Sampler]:
    if not isinstance(name, str):
        raise TypeError(f"sampler name must be a string, got {type(name).__name__}")
    if name not in SAMPLERS:
        raise ValueError(f"unknown sampler {name!r}; available: {sorted(SAMPLERS)}")
    module, cls, extra = SAMPLERS[name]
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        if module.startswith("hybrid_attention.") and missing == module:
            raise ImportError(f"sampler {name!r} is registered but its module {module} is missing") from exc
        hint = f"pip install 'hybrid-attention[{extra}]'" if extra else "pip install hybrid-attention"
        raise ImportError(f"sampler {name!r} needs {missing!r}, which is not installed; run: {hint}") from exc
    return getattr(mod, cls)


def get_sampler(name: str, **kwargs: Any) -> Sampler:
    """Instantiate a registered sampler, e.g. ``get_sampler("aer", schedule=DQASchedule(tau=1.0, steps=20))``."""
    return _load(name)(**kwargs)


def available_samplers() -> dict[str, bool]:
    """``{name: importable}`` for every registered sampler (tries the imports; nothing is instantiated)."""
    out = {}
    for name in SAMPLERS:
        try:
            _load(name)
            out[name] = True
        except ImportError:
            out[name] = False
    return out
