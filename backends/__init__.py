"""Samplers: the ``Sampler`` interface, ``SampleSet``, the registry and every backend.

Installed as ``hybrid_attention.backends`` (the repository keeps it at the top-level folder ``backends/``
and maps it through ``package_dir`` in ``setup.cfg``; nothing named ``backends`` is installed on its own).
Backends that need qiskit or pennylane are imported lazily by :func:`get_sampler`.
"""

from __future__ import annotations

from .base import Sampler, as_generator, spawn_seeds
from .registry import SAMPLERS, available_samplers, get_sampler, register_sampler
from .sampleset import SampleSet

__all__ = ["Sampler", "SampleSet", "get_sampler", "available_samplers", "register_sampler", "SAMPLERS", "as_generator", "spawn_seeds"]
