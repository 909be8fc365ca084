"""hybrid-attention: Boltzmann attention with learnable Ising couplings.

The core floor (this package) depends on numpy and torch only: ``import hybrid_attention`` never imports
qiskit or pennylane, and nothing here imports the floors above it (circuits, backends, apps). It owns:

* ``ising``: :class:`IsingProblem` and the conventions (docs/theory.md section 2); ``checks``: every input check (beta,
  seeds, counts, head couplings, the memory budget);
* ``exact``: the exact oracle (enumeration, log Z, marginals, correlations, probabilities, exact samples);
  ``kernels``: the attention kernels on its factorised core (causal, bidirectional, shared couplings); ``banded``:
  the transfer matrix for couplings in a band ``|j - k| <= W`` (exact at any length);
* ``sampler``: the typed sampler interface (``Sampler``, ``SamplerCapabilities``); ``sampleset``: ``SampleSet``;
* ``sampling``: ``Sampling``, the one value that says how attention is sampled (sampler, reads, readout, estimator,
  persistent chains), passed explicitly as ``model(idx, targets, sampling=...)``; ``bridge``: any sampler's output
  as differentiable attention marginals; ``attention``, ``model``: the layer and the decoder; ``mta``: the key-query
  convolution of the control ``mta``; ``sizing``: parameter counts and width matching; ``metrics``: fidelity
  metrics; ``tasks``: the data sets.

Quantum and classical samplers live in :mod:`hybrid_attention.backends`, circuits in
:mod:`hybrid_attention.circuits` and the applications in :mod:`hybrid_attention.apps` (loaded on first use).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"


# Names resolved lazily so that importing the package stays light: ``import hybrid_attention`` imports no torch
# (the command line's ``--help`` needs only the version), the first use of any of these names does.
_LAZY = {
    "IsingProblem": ("hybrid_attention.ising", "IsingProblem"),
    "boltzmann_attention": ("hybrid_attention.attention", "boltzmann_attention"),
    "BoltzmannAttention": ("hybrid_attention.attention", "BoltzmannAttention"),
    "TransformerConfig": ("hybrid_attention.model", "TransformerConfig"),
    "Transformer": ("hybrid_attention.model", "Transformer"),
    "Sampling": ("hybrid_attention.sampling", "Sampling"),
    "ReadNoiseWarning": ("hybrid_attention.sampling", "ReadNoiseWarning"),
    "PersistentChains": ("hybrid_attention.sampling", "PersistentChains"),
}

__all__ = ["IsingProblem", "exact", "__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    if name in {
        "exact",
        "banded",
        "ising",
        "kernels",
        "sampler",
        "sampleset",
        "metrics",
        "bridge",
        "attention",
        "model",
        "sampling",
        "tasks",
        "mta",
        "sizing",
    }:
        return importlib.import_module(f"hybrid_attention.{name}")
    raise AttributeError(f"module 'hybrid_attention' has no attribute {name!r}")
