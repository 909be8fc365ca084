"""D-Wave Ocean interop: any ``dimod.Sampler`` as a batched attention sampler (registry name ``dimod``).

Needs the ``ocean`` extra (``pip install 'hybrid-attention[ocean]'``: dimod and dwave-samplers). D-Wave QPUs need
``dwave-system`` as well and the explicit opt-in ``allow_hardware=True`` (QPU time is billed); without it nothing is
ever submitted to a device.

:class:`DimodSampler` hands each problem of a batch to the wrapped sampler as a SPIN ``BinaryQuadraticModel`` with
dimod's sign (``h -> -h``, ``J -> -J``, :mod:`.ocean_convert`) over the problem's active spins only (masked spins
are dropped; in the returned :class:`SampleSet` they are uniform ±1 draws, as a decoupled spin of our other samplers,
and report 0), with one seed per problem spawned from ``seed``. What ``beta`` means (``beta_mode``):

* ``"schedule"`` (samplers with a ``beta_schedule`` parameter, e.g. dwave-samplers' ``SimulatedAnnealingSampler``):
  a constant schedule at the problem's ``beta`` for ``num_sweeps`` sweeps from random states, so every read is a
  Markov chain whose stationary law is exactly ``exp(-beta E) / Z`` (heat-bath ``"Gibbs"`` updates by default),
  unbiased once mixed; strong couplings need many sweeps (``python -m bench.ocean``: at ``J ~ N(0, 1)``, ``n = 6``,
  1000 sweeps leave errors of tens of standard errors, 5000 do not);
* ``"parameter"`` (samplers with a ``beta`` parameter, e.g. ``TreeDecompositionSampler``, which draws exact
  Boltzmann samples): ``beta`` is passed as is;
* ``"scale"`` (any other sampler: tabu, steepest descent, a QPU): the model handed over is ``beta * E``; the
  output follows the sampler's own physics for that model (a QPU samples at its own effective temperature, a
  descent solver returns low-energy states), *not* a Boltzmann law at ``beta``. Samplers that rescale the
  problem (``auto_scale``) get ``auto_scale=False`` so that ``beta`` keeps its meaning.

``"auto"`` (the default) picks the first that applies. Options that would set the temperature behind the
wrapper's back (``beta``, ``beta_range``, ``beta_schedule``, ``beta_schedule_type``, ``num_sweeps``,
``num_sweeps_per_beta``, ``auto_scale``), the reads (``num_reads``), the seed or initial states are refused.

The reverse direction (our samplers as ``dimod.Sampler``) is :class:`~.ocean_adapter.DimodAdapter`.

Example:
    >>> import torch
    >>> from hybrid_attention import IsingProblem
    >>> from hybrid_attention.backends import get_sampler
    >>> sampler = get_sampler("dimod", num_sweeps=200)
    >>> ss = sampler.sample(IsingProblem(torch.randn(3, 4)), num_reads=50, seed=0)
    >>> ss.spins.shape, ss.info["beta_mode"]
    ((3, 50, 4), 'schedule')
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import dimod
import numpy as np
import torch

from hybrid_attention.checks import check_positive_int, describe_seed, spawn_seeds
from hybrid_attention.ising import IsingProblem
from hybrid_attention.sampler import Sampler, SamplerCapabilities
from hybrid_attention.sampleset import SampleSet

from ..base import progress
from .adapter import DimodAdapter
from .convert import from_bqm, sampleset_from_dimod, sampleset_to_dimod, to_bqm

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

logger = logging.getLogger(__name__)

BETA_MODES = ("auto", "schedule", "parameter", "scale")
#: options of the wrapped sampler that the wrapper sets itself (refused in ``sample_options``)
OWNED_OPTIONS = frozenset(
    {
        "num_reads",
        "seed",
        "beta",
        "beta_range",
        "beta_schedule",
        "beta_schedule_type",
        "num_sweeps",
        "num_sweeps_per_beta",
        "auto_scale",
        "initial_states",
        "initial_states_generator",
        "initial_state",
    }
)
#: classical samplers by name (dwave-samplers); ``"dwave"`` is the QPU (dwave-system, needs allow_hardware)
NAMED = {
    "simulated_annealing": "SimulatedAnnealingSampler",
    "tree_decomposition": "TreeDecompositionSampler",
    "tabu": "TabuSampler",
    "steepest_descent": "SteepestDescentSolver",
}


def dimod_sampler(name: str, *, allow_hardware: bool = False) -> dimod.Sampler:
    """A dimod sampler by short name: ``"simulated_annealing"``, ``"tree_decomposition"``, ``"tabu"``,
    ``"steepest_descent"`` (dwave-samplers) or ``"dwave"`` (a QPU through ``dwave-system``'s
    ``EmbeddingComposite(DWaveSampler())``; needs ``allow_hardware=True`` and Leap credentials)."""
    if name == "dwave":
        if not allow_hardware:
            raise ValueError(
                "dimod: submitting to a D-Wave QPU needs the explicit opt-in allow_hardware=True (QPU time is billed); "
                "use a classical sampler such as 'simulated_annealing' or 'tree_decomposition' to run offline"
            )
        try:
            from dwave.system import DWaveSampler, EmbeddingComposite  # dwave-system: only on this path
        except ImportError as exc:
            raise ImportError(
                "dimod: a D-Wave QPU needs dwave-system (pip install dwave-system) and Leap credentials"
            ) from exc

        return EmbeddingComposite(DWaveSampler())
    if name not in NAMED:
        raise ValueError(f"dimod: unknown sampler name {name!r}; known: {sorted([*NAMED, 'dwave'])}")
    import dwave.samplers

    return getattr(dwave.samplers, NAMED[name])()


def _is_hardware(sampler: Any) -> bool:
    """A sampler (or any child of a composite) from ``dwave.system`` / ``dwave.cloud`` talks to a remote solver."""
    stack, seen = [sampler], set()
    while stack:
        s = stack.pop()
        if id(s) in seen:
            continue
        seen.add(id(s))
        mod = type(s).__module__ or ""
        if mod.startswith(("dwave.system", "dwave.cloud")) or hasattr(s, "solver"):
            return True
        stack.extend(getattr(s, "children", None) or [])
        if getattr(s, "child", None) is not None:
            stack.append(s.child)
    return False


class DimodSampler(Sampler):
    """Any ``dimod.Sampler`` as a batched attention sampler (module docstring: sign, masks, what beta means).

    Args:
        sampler: a ``dimod.Sampler`` instance or a short name (:func:`dimod_sampler`); default
            ``"simulated_annealing"``. It must take ``num_reads`` (samplers that enumerate every state, like
            ``dimod.ExactSolver``, return no samples: use the ``exact`` sampler).
        beta_mode: ``"auto"``, ``"schedule"``, ``"parameter"`` or ``"scale"`` (module docstring).
        num_sweeps: sweeps per read at constant ``beta`` (``"schedule"`` mode); more sweeps, better mixing.
        sample_options: fixed extra options for the wrapped sampler's ``sample`` (checked against its
            ``parameters``; :data:`OWNED_OPTIONS` are refused). ``"schedule"`` mode defaults
            ``proposal_acceptance_criteria="Gibbs"`` where the sampler has it.
        allow_hardware: explicit opt-in for a QPU (a sampler from ``dwave.system`` or ``dwave.cloud``).
        default_num_reads: reads per problem when ``num_reads=None``.
        max_spins: the largest ``n`` accepted (default: no limit).

    Raises:
        TypeError: ``sampler`` is neither a ``dimod.Sampler`` nor a name. ValueError: a QPU without
        ``allow_hardware=True``, a sampler without ``num_reads``, an impossible ``beta_mode``, a refused option.
    """

    name = "dimod"
    #: samples (not exact output); masked spins are dropped before the call, so a padded causal problem costs no
    #: more than its active spins
    capabilities = SamplerCapabilities(pad_with_mask=True)
    parameters: dict[str, str] = {}

    def __init__(
        self,
        sampler: Any = "simulated_annealing",
        *,
        beta_mode: str = "auto",
        num_sweeps: int = 1000,
        sample_options: dict[str, Any] | None = None,
        allow_hardware: bool = False,
        default_num_reads: int = 1024,
        max_spins: int | None = None,
    ) -> None:
        super().__init__()
        if isinstance(sampler, str):
            sampler = dimod_sampler(sampler, allow_hardware=bool(allow_hardware))
        if not isinstance(sampler, dimod.Sampler):
            raise TypeError(f"dimod: sampler must be a dimod.Sampler or a name, got {type(sampler).__name__}")
        self.hardware = _is_hardware(sampler)
        if self.hardware and not allow_hardware:
            raise ValueError(
                f"dimod: {type(sampler).__name__} submits to a D-Wave QPU, which needs the explicit opt-in "
                "allow_hardware=True (QPU time is billed)"
            )
        params = dict(sampler.parameters)
        if "num_reads" not in params:
            raise ValueError(
                f"dimod: {type(sampler).__name__} takes no num_reads (it does not draw samples; dimod.ExactSolver "
                "enumerates every state): wrap a sampler with a num_reads parameter, or use the 'exact' sampler"
            )
        if beta_mode not in BETA_MODES:
            raise ValueError(f"dimod: beta_mode must be one of {BETA_MODES}, got {beta_mode!r}")
        if beta_mode == "auto":
            beta_mode = "schedule" if "beta_schedule" in params else "parameter" if "beta" in params else "scale"
        need = {"schedule": "beta_schedule", "parameter": "beta"}.get(beta_mode)
        if need is not None and need not in params:
            raise ValueError(f"dimod: beta_mode={beta_mode!r} needs a sampler with a {need!r} parameter")
        self.num_sweeps = check_positive_int(num_sweeps, "num_sweeps")
        opts = dict(sample_options or {})
        owned = sorted(set(opts) & OWNED_OPTIONS)
        if owned:
            raise ValueError(
                f"dimod: sample_options {owned} are set by the wrapper (num_reads, seed, beta through beta_mode); "
                "passing them would silently change what the reads mean"
            )
        unknown = sorted(set(opts) - set(params))
        if unknown:
            raise TypeError(
                f"dimod: {type(sampler).__name__} does not take option(s) {unknown}; it takes {sorted(params)}"
            )
        if beta_mode == "schedule" and "proposal_acceptance_criteria" in params:
            opts.setdefault("proposal_acceptance_criteria", "Gibbs")
        self.sampler = sampler
        self.beta_mode = beta_mode
        self.sample_options = opts
        self.default_num_reads = check_positive_int(default_num_reads, "default_num_reads")
        self.max_spins = check_positive_int(max_spins, "max_spins", allow_none=True)
        self._seeded = "seed" in params
        self._auto_scale = "auto_scale" in params

    @property
    def properties(self) -> dict[str, Any]:
        import dwave.samplers

        props = super().properties
        props.update(
            {
                "dimod_sampler": type(self.sampler).__name__,
                "beta_mode": self.beta_mode,
                "num_sweeps": self.num_sweeps if self.beta_mode == "schedule" else None,
                "hardware": self.hardware,
                "versions": {"dimod": dimod.__version__, "dwave-samplers": dwave.samplers.__version__},
            }
        )
        return props

    def _beta_options(self, beta: float) -> dict[str, Any]:
        if self.beta_mode == "schedule":
            return {"beta_schedule_type": "custom", "beta_schedule": np.full(self.num_sweeps, beta)}
        if self.beta_mode == "parameter":
            return {"beta": beta}
        return {"auto_scale": False} if self._auto_scale else {}

    def _sample(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> SampleSet:
        reads = int(num_reads if num_reads is not None else self.default_num_reads)
        flat = problem.flatten().to(torch.float64)
        B, n = flat.h.shape
        if seed is not None and not self._seeded:
            warnings.warn(
                f"dimod: {type(self.sampler).__name__} takes no seed; seed={seed!r} only fixes the masked spins' "
                "values and the reads are not reproducible",
                stacklevel=3,
            )
        seeds = spawn_seeds(seed, B)
        betas = flat.beta_tensor().numpy()
        h_all, J_all = flat.dropped()
        spins = np.empty((B, reads, n), dtype=np.int8)
        for b in progress(range(B), B, "dimod", show=B >= 16):
            one = IsingProblem.derived(h_all[b], J_all if J_all.ndim == 2 else J_all[b], float(betas[b]), None)
            if flat.mask is not None:
                one.mask = flat.mask[b]
            spins[b] = self._sample_one(one, reads, seeds[b])
        info = {
            "backend": self.name,
            "dimod_sampler": type(self.sampler).__name__,
            "beta_mode": self.beta_mode,
            "num_reads": reads,
            "seed": describe_seed(seed),
            "seeds": seeds,
        }
        shape = (*problem.batch_shape, reads)
        return SampleSet(spins.reshape(*shape, n), np.full(shape, 1.0 / reads), problem.detach(), info)

    def _sample_one(self, problem: IsingProblem, reads: int, seed: int) -> np.ndarray:
        """``(reads, n)`` spins for one unbatched problem (masked spins: uniform draws from ``seed``)."""
        beta = float(problem.beta)
        active = problem.mask is None or bool(problem.mask.any())
        if not active:  # every spin dropped: nothing to hand over
            return np.random.default_rng(seed).choice(np.array([-1, 1], dtype=np.int8), size=(reads, problem.n))
        scaled = problem
        if self.beta_mode == "scale":
            scaled = IsingProblem.derived(problem.h * beta, problem.J * beta, 1.0, problem.mask)
        bqm = to_bqm(scaled)
        kw = dict(self.sample_options, num_reads=reads, **self._beta_options(beta))
        if self._seeded:
            kw["seed"] = int(seed)
        result = self.sampler.sample(bqm, **kw)
        total = int(np.sum(result.record.num_occurrences))
        if total != reads:
            raise RuntimeError(
                f"dimod: {type(self.sampler).__name__} returned {total} reads (sum of num_occurrences), asked {reads}"
            )
        return sampleset_from_dimod(result, problem, seed=seed + 1).spins
