"""Samplers: the registry and every backend (the ``Sampler`` interface and ``SampleSet`` are re-exported from core).

Installed as ``hybrid_attention.backends`` (the repository keeps it at the top-level folder ``backends/``
and maps it through ``package_dir`` in ``setup.cfg``; nothing named ``backends`` is installed on its own).
Backends that need qiskit or pennylane are imported lazily by :func:`get_sampler`.
"""

from __future__ import annotations

from hybrid_attention.sampler import Sampler, SamplerCapabilities
from hybrid_attention.sampleset import SampleSet

from .base import as_generator, spawn_seeds
from .registry import SAMPLERS, available_samplers, get_sampler, register_sampler

__all__ = ["Sampler", "SamplerCapabilities", "SampleSet", "get_sampler", "available_samplers", "register_sampler", "SAMPLERS", "as_generator", "spawn_seeds"]
