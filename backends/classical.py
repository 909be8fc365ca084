"""Classical samplers for Ising problems beyond exact reach (registry names ``gibbs``, ``anneal``, ``meanfield``).

The implementations live in :mod:`.gibbs` (heat-bath Gibbs chains and simulated annealing, whose sweeps are
:mod:`.gibbs_kernel`) and :mod:`.meanfield` (naive and TAP mean field with a differentiable fixed point), both on a
batch regrouped by coupling matrix (:mod:`.grouped`); this module re-exports the samplers so the registry path
``hybrid_attention.backends.classical`` stays stable.

All three accept any ``n`` (no enumeration), handle masks (dropped spins are decoupled and report 0), and declare
``capabilities.pad_with_mask``: the bridge may send one batched problem with ``n = T`` and a causal mask instead of
one call per prefix length.

Which one to use:

* ``gibbs``: unbiased up to mixing; reads are independent chains, so shot-noise tolerances apply directly.
* ``anneal``: the same chains with a beta ramp first; more robust for rugged (strongly coupled) landscapes.
* ``meanfield``: deterministic and cheapest, differentiable (the bridge uses its gradients directly), but an
  approximation whose error grows with the coupling strength (``results/meanfield/``).
"""

from __future__ import annotations

from .gibbs import AnnealingSampler, GibbsSampler
from .meanfield import MeanFieldSampler, mean_field

__all__ = ["GibbsSampler", "AnnealingSampler", "MeanFieldSampler", "mean_field"]
