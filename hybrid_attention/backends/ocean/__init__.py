"""The Ocean wing: D-Wave Ocean (dimod) interop, in both directions. Needs the ``ocean`` extra.

* ``sampler``: :class:`~hybrid_attention.backends.ocean.sampler.DimodSampler`, any ``dimod.Sampler`` as a batched
  attention sampler (registry name ``dimod``);
* ``adapter``: our samplers as ``dimod.Sampler`` objects (:class:`~hybrid_attention.backends.ocean.adapter.DimodAdapter`);
* ``convert``: binary quadratic models and sample sets, with dimod's opposite sign.

The public names of ``sampler`` are importable from here (``from hybrid_attention.backends.ocean import to_bqm``);
dimod is imported on first use of one of them.
"""

from __future__ import annotations

from ..base import lazy_exports

__all__ = [
    "DimodSampler",
    "DimodAdapter",
    "dimod_sampler",
    "to_bqm",
    "from_bqm",
    "sampleset_to_dimod",
    "sampleset_from_dimod",
    "BETA_MODES",
    "OWNED_OPTIONS",
]

__getattr__ = lazy_exports(__name__, ".sampler", __all__)
