"""How attention marginals are sampled: the frozen :class:`Sampling` value and the :class:`PersistentChains` store.

A caller (the training loop, an experiment, a notebook) builds one :class:`Sampling` value, which validates every
setting once, and passes it down explicitly: ``Transformer.forward(idx, targets, sampling=...)`` ->
``Block`` -> ``BoltzmannAttention.forward(x, sampling=...)`` -> :func:`hybrid_attention.bridge.attention_marginals`.
``sampling=None`` everywhere means exact enumeration. Nothing is attached to a layer and no wrapper class changes
what the bridge does: the value says it.

* ``readout``: ``"exact"`` differentiates through the sampler's exact output marginals (exact enumeration, the
  statevector simulator, mean field: samplers whose ``capabilities.differentiable``); ``"shots"`` draws
  ``num_reads`` reads per problem and backpropagates by the covariance identities over those reads.
* ``estimator``: how reads become marginals: ``"reads"`` (the mean spin) or ``"conditional"`` (Rao-Blackwellised:
  the mean of ``E[s_j | s_-j]``; unbiased for Boltzmann reads, lower variance, exact from one read at ``J = 0``).
* ``chains``: persistent Markov chains (a :class:`PersistentChains` store) for samplers whose
  ``capabilities.markov_chain``: each (layer, head, query) problem's chains start where the last call's stopped.
  :meth:`Sampling.layer` gives the per-layer view (the chain key ``layer<i>``) that the model hands to layer ``i``.

Example:
    >>> import torch
    >>> from hybrid_attention import Sampling, Transformer, TransformerConfig
    >>> from hybrid_attention.backends import get_sampler
    >>> model = Transformer(TransformerConfig(vocab_size=10, block_size=6, n_embd=16))
    >>> sampling = Sampling(get_sampler("gibbs"), num_reads=8, estimator="conditional", seed=0)
    >>> logits, loss = model(torch.randint(0, 10, (2, 6)), torch.randint(0, 10, (2, 6)), sampling=sampling)
    >>> sampling.readout, tuple(logits.shape)
    ('shots', (2, 6, 10))
"""

from __future__ import annotations

import copy
import dataclasses
import warnings
import zlib
from typing import Any

import numpy as np
import torch

from . import checks
from .checks import SeedLike
from .sampler import Sampler, capabilities_of

__all__ = [
    "Sampling",
    "PersistentChains",
    "ReadNoiseWarning",
    "check_sampling",
    "REMOVED_KEYWORDS",
    "READOUTS",
    "ESTIMATORS",
]

#: ``exact``: differentiate through the sampler's exact output; ``shots``: train on reads
READOUTS = ("exact", "shots")
#: ``reads``: mean spin of the reads; ``conditional``: Rao-Blackwellised (mean conditional expectation)
ESTIMATORS = ("reads", "conditional")


class ReadNoiseWarning(UserWarning):
    """Attention marginals estimated from plain spin averages of reads (``readout="shots"``,
    ``estimator="reads"``): their shot noise is far larger than the Rao-Blackwellised estimator's
    (``estimator="conditional"``). Silence it with ``warnings.simplefilter("ignore", ReadNoiseWarning)`` when that
    is what you mean to measure."""


class PersistentChains:
    """Markov-chain states kept between calls, per (layer, head, query): persistent chains (as in persistent
    contrastive divergence) for samplers with ``capabilities.markov_chain`` (``qemcmc``, ``gibbs``).

    A training step's problems differ from the previous step's only by a small parameter update, so chains that
    start where the last step's chains stopped need only a few moves instead of a full burn-in. Give the store to a
    :class:`Sampling` value (``Sampling(sampler, chains=PersistentChains(8))``); the bridge then starts every
    problem's chains from the stored states of its key (``layer<i>``, from :meth:`Sampling.layer`; :meth:`start`) and,
    once the call has returned, stores where they stopped (:meth:`store`). The states are values: a sampler call
    takes its start states and returns its end states, and nothing inside autograd writes to the store.

    Storage, per key: an int8 ±1 tensor ``(B, H, Tq, num_chains, T)``: for batch row ``b``, head ``hd``, query
    ``i`` (causal: the prefix of ``i + 1`` keys) the states of its chains over the keys (columns beyond the prefix
    are masked, free spins). New keys start uniformly at random from ``seed``. A call with a smaller batch ``B' < B``
    continues the first ``B'`` rows and leaves the others as they are; a larger one grows the store by reusing the
    stored rows cyclically (new row ``b`` starts from stored row ``b % B``); a call with another ``H``, ``Tq``, ``T``
    under the same key raises ``ValueError``.

    :meth:`state_dict` / :meth:`load_state_dict` export and restore every key as tensors (for checkpoints);
    :meth:`copy` gives an independent store (evaluation continues a copy, leaving the training chains as they are).

    Args:
        num_chains: chains per problem (``num_reads`` must be at least this; reads per chain are
            ``ceil(num_reads / num_chains)``).
        seed: seed of the random initial states (a non-negative int).

    Example:
        >>> chains = PersistentChains(num_chains=4, seed=0)
        >>> start = chains.start("layer0", B=2, H=1, Tq=3, T=3)
        >>> tuple(start.shape), chains.keys()
        ((2, 1, 3, 4, 3), [])
        >>> chains.store("layer0", start)
        >>> chains.keys()
        ['layer0']
    """

    def __init__(self, num_chains: int = 8, *, seed: int = 0) -> None:
        self.num_chains = checks.check_positive_int(num_chains, "num_chains")
        self.seed = checks.check_positive_int(seed, "seed", minimum=0)
        self._states: dict[str, torch.Tensor] = {}

    def keys(self) -> list[str]:
        return sorted(self._states)

    def state(self, key: str) -> torch.Tensor:
        """The stored states of ``key``, ``(B, H, Tq, num_chains, T)`` int8 (a ``KeyError`` for an unknown key)."""
        return self._states[key]

    def start(self, key: str, *, B: int, H: int, Tq: int, T: int) -> torch.Tensor:
        """Where the chains of ``key`` start for a call of shape ``(B, H, Tq, T)``: a new tensor (a value; the store
        is not changed), random from ``seed`` for a new key, else the stored states resized along the batch (the
        first ``B`` rows of a larger store, the stored rows reused cyclically for a larger batch).

        Raises:
            ValueError: the key holds states of another ``(H, Tq, num_chains, T)``.
        """
        C = self.num_chains
        st = self._states.get(key)
        if st is None:
            rng = np.random.default_rng([self.seed, zlib.crc32(key.encode())])
            return torch.from_numpy(rng.choice(np.array([-1, 1], dtype=np.int8), size=(B, H, Tq, C, T)))
        if tuple(st.shape[1:]) != (H, Tq, C, T):
            raise ValueError(
                f"persistent chains {key!r} hold states of shape (B, H, Tq, chains, T) = {tuple(st.shape)}, "
                f"a call needs (B, {H}, {Tq}, {C}, {T}); use another key for another layer"
            )
        if st.shape[0] >= B:
            return st[:B].clone()
        return st[torch.arange(B) % st.shape[0]].clone()

    def store(self, key: str, states: torch.Tensor) -> None:
        """Keep ``states`` ``(B, H, Tq, num_chains, T)`` (where a call's chains stopped) under ``key``: a smaller batch
        than the stored one replaces the first ``B`` rows and keeps the others, a larger one replaces them all."""
        st = self._states.get(key)
        if st is not None and st.shape[0] > states.shape[0]:
            states = torch.cat([states, st[states.shape[0] :]])
        self._states[key] = states

    def state_dict(self) -> dict[str, torch.Tensor]:
        """``{key: states}`` (copies, int8 ``(B, H, Tq, num_chains, T)``), for a checkpoint."""
        return {k: v.clone() for k, v in self._states.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (checked: int8 ±1 tensors with 5 dimensions and ``num_chains``)."""
        if not isinstance(state, dict):
            raise TypeError(f"load_state_dict expects a dict of tensors, got {type(state).__name__}")
        loaded = {}
        for k, v in state.items():
            if not isinstance(k, str) or not isinstance(v, torch.Tensor):
                raise TypeError(
                    f"persistent chains: expected str -> tensor, got {type(k).__name__} -> {type(v).__name__}"
                )
            if v.dtype != torch.int8 or v.ndim != 5 or v.shape[3] != self.num_chains or not bool((v.abs() == 1).all()):
                raise ValueError(
                    f"persistent chains {k!r}: expected int8 ±1 states (B, H, Tq, {self.num_chains}, T), got "
                    f"{v.dtype} {tuple(v.shape)}"
                )
            loaded[k] = v.clone().cpu()
        self._states = loaded

    def copy(self) -> PersistentChains:
        """An independent store with the same settings and a copy of every key's states."""
        other = PersistentChains(self.num_chains, seed=self.seed)
        other._states = self.state_dict()
        return other

    def __repr__(self) -> str:
        return f"PersistentChains(num_chains={self.num_chains}, keys={self.keys()})"


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How to sample attention marginals: one frozen value, validated when built, passed down explicitly.

    Attributes:
        sampler: a :class:`~hybrid_attention.sampler.Sampler` (``hybrid_attention.backends.get_sampler(name)``).
        num_reads: reads per problem (a positive int; ``None``: the sampler's default). Unused with
            ``readout="exact"``.
        readout: ``"exact"`` (differentiate through the sampler's exact output; needs ``capabilities.differentiable``)
            or ``"shots"`` (train on reads, covariance backward). ``None`` resolves to ``"exact"`` for a
            differentiable sampler with the plain estimator and no chains, else ``"shots"``.
        estimator: ``"reads"`` or ``"conditional"`` (Rao-Blackwellised; needs ``readout="shots"``).
        chains: a :class:`PersistentChains` store (needs a sampler with ``capabilities.markov_chain`` and
            ``num_reads`` at least its ``num_chains``), or ``None``.
        seed: ``int | numpy.random.Generator | numpy.random.SeedSequence | None``; every sampler call spawns its own
            child seed from it. Training builds a new value per step with :meth:`with_seed`.
        chain_key: the key of this layer's chains (set by :meth:`layer`; ``None`` outside a model: the key
            ``"attention"``).

    Raises:
        TypeError: ``sampler`` is a class rather than an instance or declares no capabilities, ``chains`` is not a :class:`PersistentChains`, a bad
            ``num_reads``/``seed`` type.
        ValueError: an unknown ``readout``/``estimator``, a combination the sampler cannot do.

    Example:
        >>> from hybrid_attention.backends import get_sampler
        >>> Sampling(get_sampler("statevector")).readout
        'exact'
        >>> Sampling(get_sampler("statevector"), num_reads=256, readout="shots").layer(0).chain_key
        'layer0'
    """

    sampler: Sampler
    num_reads: int | None = None
    readout: str | None = None
    estimator: str = "reads"
    chains: PersistentChains | None = None
    seed: SeedLike = None
    chain_key: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.sampler, type):  # the class declares capabilities too, but cannot sample
            raise TypeError(
                f"sampler must be a Sampler instance (e.g. get_sampler('gibbs') or {self.sampler.__name__}()), got the "
                f"class {self.sampler.__name__}"
            )
        caps = capabilities_of(self.sampler)
        checks.check_num_reads(self.num_reads)
        checks.check_seed(self.seed)
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"unknown estimator {self.estimator!r}; expected one of {ESTIMATORS}")
        if self.readout not in (None, *READOUTS):
            raise ValueError(f"unknown readout {self.readout!r}; expected one of {READOUTS} or None")
        name = getattr(self.sampler, "name", type(self.sampler).__name__)
        if self.chains is not None:
            if not isinstance(self.chains, PersistentChains):
                raise TypeError(f"chains must be a PersistentChains or None, got {type(self.chains).__name__}")
            if not caps.markov_chain:
                raise ValueError(
                    f"persistent chains need a Markov-chain sampler (capabilities.markov_chain, e.g. 'qemcmc' or "
                    f"'gibbs'); sampler {name!r} is not one"
                )
            if self.num_reads is not None and self.num_reads < self.chains.num_chains:
                raise ValueError(
                    f"num_reads = {self.num_reads} is below the {self.chains.num_chains} persistent chains"
                )
        if self.chain_key is not None and not isinstance(self.chain_key, str):
            raise TypeError(f"chain_key must be a string or None, got {type(self.chain_key).__name__}")
        readout = self.readout
        if readout is None:
            exact = caps.differentiable and self.estimator == "reads" and self.chains is None
            readout = "exact" if exact else "shots"
            object.__setattr__(self, "readout", readout)
        if readout == "exact":
            if not caps.differentiable:
                raise ValueError(
                    f"readout 'exact' needs a sampler that gives its exact output (capabilities.differentiable: "
                    f"exact, statevector, meanfield); sampler {name!r} gives reads only: use readout='shots'"
                )
            if self.estimator != "reads" or self.chains is not None:
                raise ValueError(
                    f"readout 'exact' uses no reads: estimator {self.estimator!r} and chains need readout='shots'"
                )
        elif self.estimator == "reads":
            reads = "the sampler's default number of" if self.num_reads is None else str(self.num_reads)
            warnings.warn(
                f"attention marginals from plain spin averages of {reads} reads per problem (estimator='reads'): "
                "each marginal carries shot noise of about 1/sqrt(reads), which attention's many near-zero weights "
                "amplify (results/quantum_training: training on 8 reads per row falls far further behind exact "
                "training with plain averages than with the Rao-Blackwellised estimator). Use "
                "estimator='conditional' (exact at J = 0, lower variance) unless plain averages are what you measure.",
                ReadNoiseWarning,
                stacklevel=3,
            )

    def with_seed(self, seed: SeedLike) -> Sampling:
        """The same value with another seed (a training step's fresh seed); the other settings were validated (and
        warned about) when the value was built."""
        checks.check_seed(seed)
        return self._copy_with("seed", seed)

    def layer(self, index: int) -> Sampling:
        """The view that attention layer ``index`` gets: its persistent chains live under the key ``layer<index>``."""
        return self._copy_with("chain_key", f"layer{index}")

    def _copy_with(self, field: str, value: Any) -> Sampling:
        new = copy.copy(self)
        object.__setattr__(new, field, value)
        return new

    def __repr__(self) -> str:
        name = getattr(self.sampler, "name", type(self.sampler).__name__)
        extra = "" if self.chains is None else f", chains={self.chains.num_chains}"
        return (
            f"Sampling({name!r}, num_reads={self.num_reads}, readout={self.readout!r}, "
            f"estimator={self.estimator!r}{extra})"
        )


#: the keywords the public entry points took before the :class:`Sampling` value, and what replaces each
REMOVED_KEYWORDS = {
    "sampler": "pass sampling=Sampling(sampler, num_reads=..., seed=...)",
    "num_reads": "pass sampling=Sampling(sampler, num_reads=...) (the field Sampling.num_reads)",
    "seed": "pass sampling=Sampling(sampler, seed=...) (the field Sampling.seed)",
}


def check_sampling(sampling: Any, where: str, removed: dict[str, Any] | None = None) -> Sampling | None:
    """``sampling`` (a :class:`Sampling` or ``None``: exact enumeration) as a public entry point ``where`` receives
    it, checked before any work; ``removed`` holds the entry point's other keyword arguments (its ``**removed``).

    Raises:
        TypeError: ``sampling`` is not a :class:`Sampling` or ``None``; a keyword of ``removed``: one the value
            replaced (``sampler=``, ``num_reads=``, ``seed=``: the message names the :class:`Sampling` field to use)
            or one ``where`` never took.
    """
    for key in removed or {}:
        if key in REMOVED_KEYWORDS:
            raise TypeError(f"{where}: {key}= was removed: {REMOVED_KEYWORDS[key]}")
        raise TypeError(f"{where}() got an unexpected keyword argument {key!r}")
    if sampling is not None and not isinstance(sampling, Sampling):
        raise TypeError(f"sampling must be a Sampling or None, got {type(sampling).__name__}")
    return sampling
