"""The typed sampler interface: :class:`Sampler` and the :class:`SamplerCapabilities` each sampler declares.

Close to dimod's ``Sampler`` and qiskit's primitives. ``sample(problem, *, num_reads=None, seed=None, **options)``
and ``marginals(...)`` (same arguments) validate first (problem type, finiteness is guaranteed by
:class:`IsingProblem`, ``num_reads`` and ``seed`` by :mod:`hybrid_attention.checks`, size against
``max_spins``, unknown options, the estimated memory of the result) and only then call the abstract
``_sample`` (and the ``_marginals`` hook). An empty batch (a batch shape with a zero) never reaches a backend: it
gets an empty :class:`SampleSet` / empty marginals of the right shapes here, for every sampler, third-party ones
included. Subclasses declare:

* ``name``: registry name;
* ``parameters``: ``{option: description}`` accepted per call (anything else raises ``TypeError``);
* ``capabilities``: a :class:`SamplerCapabilities` (what the sampler bridge and the conformance suite read);
* ``default_num_reads``: reads per problem when ``num_reads=None`` (``None``: the exact output, ``2**n`` states);
* ``properties``: display facts (the capabilities under their historical keys, versions...).

Lives in the core (numpy + torch only) so that the bridge can read a sampler's capabilities without importing any
backend; :mod:`hybrid_attention.backends` re-exports it.

Example:
    >>> from hybrid_attention.backends import get_sampler
    >>> caps = get_sampler("exact").capabilities
    >>> caps.exact_output, caps.differentiable, caps.dqa
    (True, True, False)
"""

from __future__ import annotations

import abc
import dataclasses
import logging
from typing import Any, ClassVar

import numpy as np
import torch

from hybrid_attention import checks
from hybrid_attention.checks import SeedLike
from hybrid_attention.ising import IsingProblem

from .sampleset import SampleSet

__all__ = ["Sampler", "SamplerCapabilities", "capabilities_of"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SamplerCapabilities:
    """What a sampler can do: declared by each sampler class, read by the bridge instead of probing attributes.

    Attributes:
        differentiable: the sampler has ``differentiable_marginals(problem) -> (*batch, n)``: the exact marginals of
            its output distribution, keeping the autograd graph of ``problem`` (exact enumeration, the statevector
            simulator, mean field). The bridge then differentiates through it instead of sampling.
        exact_output: ``sample(problem, num_reads=None)`` returns the exact output distribution (every one of the
            ``2**n`` configurations, weighted by its probability; ``SampleSet.exact``), and ``marginals(problem)``
            its exact marginals.
        per_call_overhead: fixed cost of one call in units of (problem x configuration) work, or ``None``. When
            given, the bridge groups consecutive causal prefix lengths into padded, masked calls where that is
            cheaper (:func:`hybrid_attention.kernels.plan_groups`).
        pad_with_mask: the bridge sends one padded problem (``n = T`` with a causal mask) instead of one call per
            prefix length (cheap for samplers whose cost does not grow like ``2**n``).
        dqa: the sampler runs a DQA circuit: it has a ``schedule`` and ``effective_beta(beta) -> (beta_h, beta_J)``,
            the inverse temperatures of its approximately Boltzmann output (the bridge's surrogate gradients use them)
            and ``reference_probabilities(problem)``, the ideal circuit's exact output.
        markov_chain: the sampler runs Markov chains and takes the per-call option ``initial_state`` (reads start
            there; ``info["final_state"]`` holds where they stopped): persistent chains can continue them.
        approximate: its output is not the Boltzmann distribution of the problem even with unlimited reads (mean
            field; DQA circuits, whose output is only approximately Boltzmann at an effective temperature). Markov
            chains and exact enumeration are not approximate.
        needs_circuit: it builds and runs quantum circuits (DQA programs, quantum proposals).

    A sampler's limit on ``n`` is not a capability of its class but of the instance (:attr:`Sampler.max_spins`).
    """

    differentiable: bool = False
    exact_output: bool = False
    per_call_overhead: float | None = None
    pad_with_mask: bool = False
    dqa: bool = False
    markov_chain: bool = False
    approximate: bool = False
    needs_circuit: bool = False

    #: the boolean fields
    FLAGS = ("differentiable", "exact_output", "pad_with_mask", "dqa", "markov_chain", "approximate", "needs_circuit")

    def __post_init__(self) -> None:
        for name in self.FLAGS:
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"SamplerCapabilities.{name} must be a bool, got {getattr(self, name)!r}")
        oh = self.per_call_overhead
        if oh is not None and (isinstance(oh, bool) or not isinstance(oh, (int, float)) or not oh >= 0):
            raise ValueError(f"SamplerCapabilities.per_call_overhead must be a number >= 0 or None, got {oh!r}")


def capabilities_of(sampler: Any) -> SamplerCapabilities:
    """``sampler.capabilities``, checked: ``TypeError`` for an object that declares none (not a :class:`Sampler`)."""
    caps = getattr(sampler, "capabilities", None)
    if not isinstance(caps, SamplerCapabilities):
        raise TypeError(
            f"sampler must be a Sampler declaring SamplerCapabilities (.capabilities), got {type(sampler).__name__}"
        )
    return caps


class Sampler(abc.ABC):
    """Base class: validates, then delegates to :meth:`_sample`. Use as a context manager to release
    resources (IBM sessions) with :meth:`close`.

    Class attributes a subclass declares: ``name``, ``parameters``, ``default_num_reads`` and ``capabilities`` (a
    :class:`SamplerCapabilities`: what the bridge, the registry and the conformance suite read). ``max_spins`` (the
    largest ``n`` accepted, ``None``: no limit) may be set per instance.
    """

    name: str = "sampler"
    #: what this sampler can do; the base declares nothing special
    capabilities: ClassVar[SamplerCapabilities] = SamplerCapabilities()
    #: the largest ``n`` accepted (``None``: no limit); larger problems raise ``ValueError`` before any work
    max_spins: int | None = None
    #: per-call options accepted by :meth:`sample` (beyond ``num_reads`` and ``seed``), with descriptions
    parameters: dict[str, str] = {}
    #: flat constructor options the registry folds into a grouped one: ``{flat: (parameter, field)}``, the
    #: parameter's value a frozen dataclass (``get_sampler("qemcmc", burn_in=8)`` builds
    #: ``chain=dataclasses.replace(<default chain>, burn_in=8)``)
    option_groups: ClassVar[dict[str, tuple[str, str]]] = {}
    #: reads per problem when ``num_reads=None`` (``None``: the exact output distribution over all ``2**n`` states)
    default_num_reads: int | None = 1024

    def __init__(self) -> None:
        self._closed = False

    @property
    def properties(self) -> dict[str, Any]:
        """Display facts: the capabilities under their historical keys (``max_spins``, ``exact``, ``differentiable``,
        ``pad_with_mask``, ``dqa``, ``group_prefixes`` when grouping applies) and ``default_num_reads``;
        subclasses add versions, schedules, devices. Code should read :attr:`capabilities` instead."""
        caps = self.capabilities
        props: dict[str, Any] = {
            "max_spins": self.max_spins,
            "exact": caps.exact_output,
            "default_num_reads": self.default_num_reads,
            "differentiable": caps.differentiable,
            "pad_with_mask": caps.pad_with_mask,
            "dqa": caps.dqa,
        }
        if caps.per_call_overhead is not None:
            props["group_prefixes"] = caps.per_call_overhead
        return props

    # ------------------------------------------------------------------ public API
    def sample(
        self, problem: IsingProblem, *, num_reads: int | None = None, seed: SeedLike = None, **options: Any
    ) -> SampleSet:
        """Sample a batch of problems.

        Args:
            problem: an :class:`IsingProblem` with batch shape ``batch`` and ``n`` spins.
            num_reads: reads (shots) per problem, a positive int; ``None`` means the backend default (or, for
                samplers with ``capabilities.exact_output``, the exact output distribution over all ``2**n`` states).
            seed: ``int | numpy.random.Generator | numpy.random.SeedSequence | None``; recorded in ``info['seed']``.
            **options: backend options listed in :attr:`parameters`.

        Returns:
            :class:`SampleSet` with spins ``(*batch, reads, n)`` (``reads = 0`` problems when ``batch`` is empty).

        Raises:
            TypeError: not an :class:`IsingProblem`, a non-integer ``num_reads``, a float or bool ``seed``, an
                unknown option.
            ValueError: ``num_reads < 1``, more spins than the backend's limit, an output of more than
                :data:`hybrid_attention.checks.MEMORY_BUDGET` bytes (estimated as ``batch * reads * (n + 8)``: int8
                spins and float64 weights).
        """
        problem = self.validate(problem, num_reads=num_reads, seed=seed, options=options)
        reads = self._output_reads(problem, num_reads)
        self._check_output_size(problem, reads)
        if problem.h.numel() == 0:
            exact = num_reads is None and self.capabilities.exact_output
            return self._empty_sampleset(problem, reads, seed, exact=exact)
        return self._sample(problem.detach(), num_reads=num_reads, seed=seed, **options)

    def validate(
        self, problem: Any, *, num_reads: Any = None, seed: Any = None, options: dict | None = None
    ) -> IsingProblem:
        """All checks that must happen before any compile, simulation or job submission."""
        if self._closed:
            raise RuntimeError(f"sampler {self.name!r} is closed")
        if not isinstance(problem, IsingProblem):
            raise TypeError(f"{self.name}: expected an IsingProblem, got {type(problem).__name__}")
        try:
            checks.check_num_reads(num_reads)
            checks.check_seed(seed)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{self.name}: {exc}") from None
        unknown = sorted(set(options or {}) - set(self.parameters))
        if unknown:
            raise TypeError(
                f"{self.name}.sample() got unknown option(s) {unknown}; "
                f"accepted options: {sorted(self.parameters) or 'none'}"
            )
        limit = self.max_spins
        if limit is not None and problem.n > limit:
            raise ValueError(f"{self.name}: problem has n = {problem.n} spins, above this backend's limit of {limit}")
        return problem

    def marginals(
        self, problem: IsingProblem, *, num_reads: int | None = None, seed: SeedLike = None, **options: Any
    ) -> torch.Tensor:
        """``<s_j>`` of the sampler's output, ``(*batch, n)`` (float64 tensor; 0 for masked spins).

        Takes the arguments of :meth:`sample` on every sampler. ``num_reads=None`` gives the exact marginals of the
        sampler's output where the sampler computes them (exact enumeration, the statevector simulators, mean
        field; ``seed`` is then unused) and the weighted mean of the default number of reads otherwise; a given
        ``num_reads`` always gives the mean of that many reads. Subclasses with a cheaper route override
        :meth:`_marginals`, not this method. An empty batch gives an empty ``(*batch, n)`` tensor.
        """
        problem = self.validate(problem, num_reads=num_reads, seed=seed, options=options)
        if problem.h.numel() == 0:
            return torch.zeros(*problem.batch_shape, problem.n, dtype=torch.float64)
        return self._marginals(problem, num_reads=num_reads, seed=seed, **options)

    def _marginals(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> torch.Tensor:
        """Marginals of a validated, non-empty problem: by default the weighted mean of :meth:`sample`'s reads."""
        reads = self._output_reads(problem, num_reads)
        self._check_output_size(problem, reads)
        ss = self._sample(problem.detach(), num_reads=num_reads, seed=seed, **options)
        return torch.from_numpy(ss.marginals())

    # ------------------------------------------------------------------ shared helpers
    def _output_reads(self, problem: IsingProblem, num_reads: int | None) -> int:
        """Reads per problem of :meth:`sample`'s output: ``num_reads``, else ``2**n`` for exact-output samplers, else
        the backend's ``default_num_reads``."""
        if num_reads is not None:
            return int(num_reads)
        if self.default_num_reads is None or self.capabilities.exact_output:
            return 1 << problem.n
        return int(self.default_num_reads)

    def _check_output_size(self, problem: IsingProblem, reads: int) -> None:
        """Refuse (``ValueError``) a SampleSet larger than the memory budget, before any work."""
        rows = problem.h.numel() // problem.n
        checks.check_memory(
            float(rows) * reads * (problem.n + 8),
            f"{self.name}: a SampleSet of {rows} problem(s) x {reads} reads x n = {problem.n} spins "
            "(batch * reads * (n + 8) bytes: int8 spins, float64 weights)",
            hint="ask for fewer reads per call, or split the batch",
        )

    def _empty_sampleset(self, problem: IsingProblem, reads: int, seed: Any, *, exact: bool) -> SampleSet:
        """The result for an empty batch: spins ``(*batch, reads, n)`` and weights ``(*batch, reads)`` with no rows."""
        bs, n = tuple(problem.batch_shape), problem.n
        info = {"backend": self.name, "num_reads": reads, "seed": checks.describe_seed(seed)}
        spins = np.zeros((*bs, reads, n), dtype=np.int8)
        return SampleSet(spins, np.zeros((*bs, reads)), problem.detach(), info, exact=exact)

    @abc.abstractmethod
    def _sample(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> SampleSet:
        """Backend work on a validated, detached problem."""

    # ------------------------------------------------------------------ resources
    def close(self) -> None:
        """Release resources (sessions, pools). Idempotent."""
        self._closed = True

    def __enter__(self) -> Sampler:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
