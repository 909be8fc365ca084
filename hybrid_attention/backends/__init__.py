"""The backends floor: every sampler, the registry that builds them by name, and the shipped conformance suite.

It sits above the core and the circuits (imports ``hybrid_attention.*`` and ``hybrid_attention.circuits``) and below
the applications. The typed interface the samplers implement lives in the core and is re-exported here:
:class:`Sampler`, :class:`SamplerCapabilities` and :class:`SampleSet`. The registry is the one way in:
:func:`get_sampler` builds a sampler by name, :func:`available_samplers` lists them.

At this level, what every wing shares:

* ``registry``: names -> lazily imported sampler classes (:func:`get_sampler`, :func:`available_samplers`);
* ``exact``: enumeration as a backend, the reference;
* ``sharded``: any registered sampler with its batch sharded across Dask workers, one spawned seed per problem;
* ``testing``: :func:`~hybrid_attention.backends.testing.assert_sampler_conforms`, for any sampler, third-party ones too;
* ``base``: what the backends share beyond the core interface (the progress bar of long calls, seeds);
* ``workspace``: reusable scratch tensors of the simulators' hot loops;
* ``parallel``: independent chunks of a batch on a few threads (one intra-op thread each), chosen per call.

The wings, each a sub-package whose docstring says what lives there:

* ``dqa/``: the Trotterized anneal simulated (``statevector``) or as circuits (``aer``, ``pennylane``), its base;
* ``ibm/``: IBM Quantum (sampler, jobs, ledger, cost, mitigation, devices, the runtime test double);
* ``mcmc/``: Markov chains (Metropolis with classical proposals, qemcmc with quantum ones, Gibbs, annealing),
  mean field and chain analysis;
* ``ocean/``: D-Wave Ocean (dimod) interop.

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
