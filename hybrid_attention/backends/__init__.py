"""The backends floor: every sampler, the registry that builds them by name, and the shipped conformance suite.

It sits above the core and the circuits (imports ``hybrid_attention.*`` and ``hybrid_attention.circuits``) and below
the applications. The typed interface the samplers implement lives in the core and is re-exported here:
:class:`Sampler`, :class:`SamplerCapabilities` and :class:`SampleSet`. Modules:

* ``registry``: names -> lazily imported sampler classes (:func:`get_sampler`, :func:`available_samplers`);
* ``exact``: enumeration as a backend, the reference;
* ``dqa``: the DQA base (schedule, effective beta, exact reference output); ``statevector``: the native simulator;
  ``circuit``: the circuit machinery (templates, chunks, transpilation) of ``aer``, ``pennylane`` and ``ibm``;
* classical samplers for any ``n``, both on ``grouped`` batches: ``gibbs`` (registry names ``gibbs``, ``anneal``:
  heat-bath chains, unbiased up to mixing, annealing more robust on rugged landscapes; sweeps in ``gibbs_kernel``)
  and ``meanfield`` (deterministic, cheapest, differentiable, an approximation whose error grows with the coupling
  strength: ``results/meanfield/``);
* ``sharded``: any registered sampler with its batch sharded across Dask workers, one spawned seed per problem;
* ``testing``: :func:`~hybrid_attention.backends.testing.assert_sampler_conforms`, for any sampler, third-party ones too;
* ``base``: what the backends share beyond the core interface (the progress bar of long calls);
* ``driver``: the driver layer of the native statevector engines (``statevector``, ``qemcmc``).

Backends that need qiskit or pennylane are imported lazily by :func:`get_sampler`.
"""

from __future__ import annotations

from hybrid_attention.sampler import Sampler, SamplerCapabilities
from hybrid_attention.sampleset import SampleSet

from .base import as_generator, spawn_seeds
from .registry import SAMPLERS, available_samplers, get_sampler, register_sampler

__all__ = [
    "Sampler",
    "SamplerCapabilities",
    "SampleSet",
    "get_sampler",
    "available_samplers",
    "register_sampler",
    "SAMPLERS",
    "as_generator",
    "spawn_seeds",
]
