"""The settings of one training run: :class:`TrainConfig` and its validation.

Owns what a run is (task, model, optimiser, sampler settings, output directory) and which values are legal; every
check runs before any data is loaded or a model is built. The command-line flags that set these fields are in
:mod:`hybrid_attention.apps.train.flags`.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from dataclasses import dataclass, field
from typing import Any

from hybrid_attention.attention import ALL_MODES
from hybrid_attention.backends.registry import SAMPLERS, check_sampler_options
from hybrid_attention.exact import MAX_SPINS
from hybrid_attention.model import TransformerConfig
from hybrid_attention.sampler import capabilities_of
from hybrid_attention.sampling import ESTIMATORS, READOUTS
from hybrid_attention.tasks.bracket_variants import BracketVariant
from hybrid_attention.tasks.mqar import check_mqar, default_pairs, default_vocab
from hybrid_attention.tasks.runs import check_runs, default_decoys

from ..hardware import DEFAULT_MAX_QPU_SECONDS, check_budget_value

#: the run-finding task's alphabet and run length (its decoys: ``--decoys``, by default the query letter's share of
#: the other positions, which grows with T)
RUNS_LETTERS, RUNS_LENGTH = 8, 3

__all__ = [
    "TASKS",
    "POINTER_TASKS",
    "ACCURACY_TASKS",
    "POINTERS",
    "READOUTS",
    "ESTIMATORS",
    "TrainConfig",
    "RESUME_FREE",
    "RENAMED",
    "CHECKPOINT_FORMAT",
    "READ_FORMATS",
    "RECORDED_SINCE_FORMAT_1",
    "upgrade_saved",
    "TRAINING_DEFAULTS",
    "DEFAULT_SHOTS",
    "PERSISTENT_BURN_IN",
    "complete_saved",
    "default_readout",
]

TASKS = ("shakespeare", "brackets", "runs", "mqar")
#: tasks whose model points at a position (accuracy metrics) rather than predicting the next character
POINTER_TASKS = ("brackets", "runs")
#: tasks scored by accuracy over their labelled positions (the pointer tasks, and mqar's recalled values)
ACCURACY_TASKS = (*POINTER_TASKS, "mqar")
#: how the bracket model points: a linear head over positions, or the last layer's attention weights
POINTERS = ("linear", "attention")
#: config keys that may differ when resuming (everything else must match the checkpoint)
RESUME_FREE = {"max_steps", "out", "resume", "progress", "threads", "data", "max_qpu_seconds"}
#: settings saved under an older name: old name -> field (runs written before the rename still load and resume)
RENAMED = {"steps": "max_steps"}
#: the layout of a run directory (``checkpoint.pt``'s and ``config.json``'s ``format``): 2 adds ``format`` and the
#: corpus sha256 to the checkpoint (1, without them, still loads); a run of another format is refused on resume
CHECKPOINT_FORMAT = 2
#: the formats this version resumes
READ_FORMATS = (1, 2)
#: the settings every run has recorded since format 1 (``max_steps`` as ``steps`` before the rename); settings added
#: later take the default they had when missing
RECORDED_SINCE_FORMAT_1 = (
    "task",
    "attention",
    "block_size",
    "max_steps",
    "seed",
    "ffn",
    "n_layer",
    "n_head",
    "n_embd",
    "dropout",
    "beta",
    "learn_beta",
    "lr",
    "weight_decay",
    "batch_size",
    "eval_interval",
    "eval_size",
    "warmup",
    "grad_clip",
    "sampler",
    "tau",
    "trotter_steps",
)


#: reads per sampler call when a run leaves ``shots`` unset and its sampler has no training default
DEFAULT_SHOTS = 256
#: sweeps (or moves) by which persistent chains continue at every call when a run sets ``--persistent-chains`` and
#: leaves ``burn_in`` unset: chains that start where the last step's stopped need only a few, not a full burn-in from
#: scratch (Gibbs' generic 256 sweeps). 2 is the setting the project measured persistent chains with: the long-context
#: protocol's candidate engine (``experiments/long_context/plan.py``, ``CANDIDATE_CONFIGS["gibbs-persistent"]``;
#: ``results/long_context/PROTOCOL.md``, "The engine") and its step-time bench (``results/bench/long_context.md``:
#: 6.8-7.2x softmax at T = 64).
PERSISTENT_BURN_IN = 2
#: what a sampler trains with when a run leaves ``shots``, ``estimator``, ``persistent_chains`` or one of these
#: constructor options unset. ``qemcmc``: the settings the project validated for training: fresh chains from the
#: mean-field magnetisations, one move of a 2-Trotter-step proposal, one read per chain and 8 chains,
#: Rao-Blackwellised. Validated by training (``results/quantum_training/``, row ``qemcmc-1move``, pre-registered in
#: ``PROTOCOL_qemcmc_1move.md``): within 0.10-0.16 % perplexity and 0.14-0.63 accuracy points of exact training at
#: T = 8 and 12 (3 seeds per cell, the study's targets met in all four), as the two-move row ``qemcmc`` was (0.12-0.17 %,
#: 0.17-0.48 points), at half its proposal circuits; runs recorded with two moves resume with two. The sampler's
#: generic defaults (random start, 128 moves, 256 reads) cost about 25 million proposal circuits per step at T = 12.
#: ``gibbs``: 8 reads, Rao-Blackwellised, from 8 persistent chains continued by :data:`PERSISTENT_BURN_IN`
#: sweeps per step: the long-context protocol's candidate (2), 6.8-7.2x the softmax step at T = 64, where the generic
#: defaults (256 fresh chains of 256 sweeps, spin averages) took minutes per step. Validated by training
#: (``results/quantum_training/``, row ``gibbs-persistent``, pre-registered in ``PROTOCOL_gibbs_persistent.md``): within
#: 0.11-0.21 % perplexity and 0.30-0.69 accuracy points of exact training at T = 8 and 12 (3 seeds per cell, the
#: study's targets met in all four); at larger T the engine validation
#: (``results/long_context/engine_validation.md``) found its one-step coupling gradient far from the exact one
#: (cosine 0.1-0.9 on round 1's T = 64 models), which those runs do not reach. ``meanfield``: the per-row solver
#: (:mod:`hybrid_attention.backends.mcmc.fixed_point`: each row stops on its own, Newton for the stragglers) with
#: undamped steps (damping 1; rows that oscillate go to Newton), in compiled loops when numba is installed: 1.23x the
#: softmax step over a run's first 500 steps at T = 64 on a quiet machine (1.46x in torch loops, the legacy solver
#: 5.30x; ``results/bench/meanfield_run.md``). Runs that
#: recorded no ``solver`` and ``damping`` resume with the sampler's defaults, the legacy whole-batch iteration at
#: damping 0.5 (:meth:`TrainConfig.pinned_options`).
TRAINING_DEFAULTS: dict[str, dict[str, Any]] = {
    "qemcmc": {
        "shots": 8,
        "estimator": "conditional",
        "sampler_options": {"burn_in": 1, "start": "meanfield", "trotter_steps": 2},
    },
    "gibbs": {"shots": 8, "estimator": "conditional", "persistent_chains": 8},
    "meanfield": {"sampler_options": {"solver": "rows", "damping": 1.0}},
}
#: earlier versions' :data:`TRAINING_DEFAULTS` sampler options, as runs started with ``--sampler X`` alone recorded
#: them: the same command line resumes such a run with its recorded options (``qemcmc``: two moves until the
#: one-move row was validated, 2026-12-07)
FORMER_TRAINING_OPTIONS: dict[str, tuple[dict[str, Any], ...]] = {
    "qemcmc": ({"burn_in": 2, "start": "meanfield", "trotter_steps": 2},),
}


def complete_saved(saved: dict[str, Any]) -> dict[str, Any]:
    """A run's saved settings (renamed ones under today's names, :func:`upgrade_saved`) completed with what the run
    had for settings added after it was written: the :class:`TrainConfig` default, the readout training used before
    ``readout`` existed (:func:`default_readout`) and no persistent chains before ``persistent_chains`` existed
    (never today's training defaults: a run resumes with what it ran with)."""
    out = {**dataclasses.asdict(TrainConfig()), **upgrade_saved(saved)}
    if out.get("readout") is None:
        out["readout"] = default_readout(out["sampler"])
    if out.get("persistent_chains") is None:
        out["persistent_chains"] = 0
    return out


def upgrade_saved(saved: dict[str, Any]) -> dict[str, Any]:
    """A run's saved settings with every setting saved under an older name (:data:`RENAMED`) under today's."""
    return {RENAMED.get(k, k): v for k, v in saved.items()}


def default_readout(sampler: str) -> str:
    """``"exact"`` for the exact path and for registered samplers whose class declares ``capabilities.differentiable``
    (statevector, meanfield: they give their exact output differentiably), else ``"shots"``."""
    if sampler == "exact":
        return "exact"
    from hybrid_attention.backends.registry import sampler_class

    try:
        cls = sampler_class(sampler)
    except (ImportError, ValueError):
        return "shots"
    return "exact" if capabilities_of(cls).differentiable else "shots"


_POSITIVE_INTS = (
    "block_size",
    "max_steps",
    "n_layer",
    "n_head",
    "n_embd",
    "batch_size",
    "eval_interval",
    "eval_size",
    "shots",
    "trotter_steps",
    "threads",
)


@dataclass
class TrainConfig:
    """One training run (CLI flags map one-to-one; defaults are the ablation's).

    Example:
        >>> TrainConfig(task="brackets", block_size=8, max_steps=200, out="runs/b8").model_config().vocab_size
        2
    """

    task: str = "shakespeare"
    attention: str = "hj"
    block_size: int = 8
    max_steps: int = 1000
    seed: int = 0
    out: str | None = None
    ffn: bool = True
    n_layer: int = 1
    n_head: int = 1
    n_embd: int = 64
    dropout: float = 0.0
    beta: float = 1.0
    learn_beta: bool = False
    lr: float = 3e-3
    weight_decay: float = 0.0
    batch_size: int = 64
    eval_interval: int = 100
    eval_size: int = 2048
    warmup: int = 50
    grad_clip: float = 1.0
    data: str | None = None
    sampler: str = "exact"
    shots: int | None = None
    tau: float = 1.0
    trotter_steps: int = 20
    sampler_options: dict[str, Any] = field(default_factory=dict)
    readout: str | None = None
    persistent_chains: int | None = None
    estimator: str | None = None
    backend: str | None = None
    max_qpu_seconds: float = DEFAULT_MAX_QPU_SECONDS
    eval_exact: bool = False
    bracket_types: int = 1
    filler: float = 0.0
    disjoint: bool = False
    train_max_depth: int = 0
    source_length: int = 0
    pointer: str = "linear"
    decoys: int = -1
    kv_pairs: int = 0
    mqar_vocab: int = 0
    j_field: float = 0.0
    band: int = 0
    band_shape: str = "free"
    mta_query_kernel: int = 6
    mta_key_kernel: int = 11
    patience: int = 0
    threads: int = 1
    resume: bool = False
    progress: bool = True

    @classmethod
    def from_saved(cls, saved: dict[str, Any], **overrides: Any) -> TrainConfig:
        """The configuration a run saved (``config.json["run"]``, a checkpoint's ``config``), its settings saved
        under an older name (:data:`RENAMED`) read under today's, ``overrides`` applied."""
        return cls(**{**upgrade_saved(saved), **overrides})

    def validate(self) -> None:
        """Check every value before any data is loaded or a model is built (``ValueError``/``TypeError``)."""
        if self.task not in TASKS:
            raise ValueError(f"unknown task {self.task!r}; expected one of {TASKS}")
        if self.attention not in ALL_MODES:
            raise ValueError(f"unknown attention mode {self.attention!r}; expected one of {ALL_MODES}")
        self._check_numbers()
        check_budget_value(self.max_qpu_seconds)  # nan or inf would let every estimate pass the budget
        self._check_task()
        self._check_sampler()
        if self.out is None:
            raise ValueError("an output directory is required (--out DIR)")
        self.model_config()  # validates the model side (mode, block size against the exact limit, ...)

    def _check_numbers(self) -> None:
        for name in _POSITIVE_INTS:
            v = getattr(self, name)
            if name == "shots" and v is None:  # the sampler's training default
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        for name in ("seed", "warmup"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {v!r}")
        for name in ("lr", "tau", "beta", "grad_clip"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        if not (0.0 <= self.weight_decay < 1.0):
            raise ValueError(f"weight_decay must be in [0, 1), got {self.weight_decay!r}")
        if isinstance(self.patience, bool) or not isinstance(self.patience, int) or self.patience < 0:
            raise ValueError(f"patience must be a non-negative integer (0: off), got {self.patience!r}")
        if (
            isinstance(self.j_field, bool)
            or not isinstance(self.j_field, (int, float))
            or not math.isfinite(self.j_field)
        ):
            raise ValueError(f"j_field must be a finite number, got {self.j_field!r}")
        if self.j_field != 0 and self.attention != "j":
            raise ValueError(f"--j-field applies to --attention j only, got attention {self.attention!r}")

    def bracket_variant(self) -> BracketVariant:
        """The bracket-task variant of this run (all defaults: the classic task)."""
        return BracketVariant(self.bracket_types, self.filler, self.disjoint, self.train_max_depth, self.source_length)

    def _check_task(self) -> None:
        if isinstance(self.decoys, bool) or not isinstance(self.decoys, int) or self.decoys < -1:
            raise ValueError(f"decoys must be an integer >= 0, or -1 for the default, got {self.decoys!r}")
        if self.task != "runs" and self.decoys != -1:
            raise ValueError(f"--decoys applies to --task runs, got task {self.task!r}")
        if self.task == "runs":
            check_runs(self.block_size, RUNS_LETTERS, RUNS_LENGTH, self.runs_decoys())
        for name in ("kv_pairs", "mqar_vocab"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(
                    f"{name} must be a non-negative integer (0: the default for the block size), got {v!r}"
                )
            if v and self.task != "mqar":
                raise ValueError(f"--{name.replace('_', '-')} applies to --task mqar, got task {self.task!r}")
        if self.task == "mqar":
            check_mqar(self.block_size, *self.mqar_settings())
        variant = self.bracket_variant()
        if self.task != "brackets":
            if not variant.is_classic or (self.task != "runs" and self.pointer != "linear"):
                raise ValueError(
                    "the bracket-variant settings (--bracket-types, --filler, --disjoint, --train-max-depth, "
                    f"--source-length) apply to --task brackets, --pointer to brackets and runs; got task {self.task!r}"
                )
            if self.task != "runs":
                return
        if self.pointer not in POINTERS:
            raise ValueError(f"unknown pointer {self.pointer!r}; expected one of {POINTERS}")
        if self.pointer == "attention" and self.attention == "j" and self.j_field == 0:
            raise ValueError(
                "--pointer attention with --attention j (h = 0) leaves nothing to learn: the attention is exactly "
                "uniform whatever J is (docs/theory.md); add --j-field EPS or use another mode"
            )
        if self.task == "runs":
            return
        if variant.is_classic:
            if self.block_size % 2:
                raise ValueError(
                    f"the bracket task needs an even block size (well-nested strings), got {self.block_size}"
                )
        else:
            variant.check(self.block_size)

    def runs_decoys(self) -> int:
        """The runs task's decoys per sequence: ``decoys``, or for ``-1`` the default that grows with ``T``
        (:func:`hybrid_attention.tasks.runs.default_decoys`)."""
        return default_decoys(self.block_size, RUNS_LETTERS, RUNS_LENGTH) if self.decoys == -1 else self.decoys

    def mqar_settings(self) -> tuple[int, int]:
        """The mqar task's ``(pairs, vocab_size)``: ``kv_pairs`` and ``mqar_vocab``, or for 0 the defaults that scale
        with ``T`` (:func:`hybrid_attention.tasks.mqar.default_pairs`,
        :func:`~hybrid_attention.tasks.mqar.default_vocab`)."""
        pairs = self.kv_pairs or default_pairs(self.block_size)
        return pairs, self.mqar_vocab or default_vocab(self.block_size)

    def _check_sampler(self) -> None:
        if self.sampler != "exact" and self.attention in ("softmax", "bias", "mta"):
            raise ValueError(f"--sampler applies to Boltzmann modes (hj, h, j), not to attention {self.attention!r}")
        if self.eval_exact and self.attention in ("hj", "j") and self.block_size > MAX_SPINS and not self.band:
            raise ValueError(
                f"--eval-exact needs block_size <= {MAX_SPINS} (exact enumeration) or a band (--band W: the transfer "
                f"matrix, any length), got block_size {self.block_size} with a full J"
            )
        if self.sampler != "exact" and self.sampler not in SAMPLERS:
            raise ValueError(f"unknown sampler {self.sampler!r}; available: {sorted(SAMPLERS)}")
        if not isinstance(self.sampler_options, dict) or not all(isinstance(k, str) for k in self.sampler_options):
            raise TypeError(f"sampler_options must be a dict with string keys, got {self.sampler_options!r}")
        if self.sampler_options:
            if self.sampler == "exact":
                raise ValueError(
                    f"--sampler-option needs a sampler other than 'exact' (--sampler NAME), got options "
                    f"{sorted(self.sampler_options)}"
                )
            check_sampler_options(self.sampler, self.sampler_options)
        self._check_readout_and_backend()
        self._check_persistent_chains()
        if self.estimator not in (None, *ESTIMATORS):
            raise ValueError(f"unknown estimator {self.estimator!r}; expected one of {ESTIMATORS}")
        if self.resolved_estimator() == "conditional" and (
            self.sampler == "exact" or self.resolved_readout() != "shots"
        ):
            raise ValueError(
                "--estimator conditional turns a sampler's reads into marginals: it needs --sampler NAME with reads "
                f"(readout shots), got sampler {self.sampler!r} with readout {self.resolved_readout()!r}"
            )

    def _check_persistent_chains(self) -> None:
        given = self.persistent_chains
        if given is not None and (isinstance(given, bool) or not isinstance(given, int) or given < 0):
            raise ValueError(f"persistent_chains must be a non-negative integer (0: off), got {given!r}")
        C = self.resolved_persistent_chains()
        if C == 0:
            return
        from hybrid_attention.backends.registry import sampler_class

        try:
            markov = self.sampler != "exact" and capabilities_of(sampler_class(self.sampler)).markov_chain
        except ImportError:
            markov = True  # the missing dependency is reported when the sampler is built
        if not markov:
            raise ValueError(
                f"--persistent-chains needs a Markov-chain sampler (capabilities.markov_chain: qemcmc), "
                f"got sampler {self.sampler!r}"
            )
        if self.resolved_shots() < C:
            raise ValueError(
                f"--persistent-chains {C} needs --shots >= {C} (at least one read per chain), got {self.resolved_shots()}"
            )
        chains = self.sampler_options.get("num_chains")
        if chains is not None and chains != C:
            raise ValueError(
                f"--persistent-chains {C} sets the chains per problem; --sampler-option num_chains={chains!r} "
                "contradicts it (drop the option)"
            )

    def _training_default(self, key: str, fallback: Any) -> Any:
        return TRAINING_DEFAULTS.get(self.sampler, {}).get(key, fallback)

    def resolved_shots(self) -> int:
        """``shots``, or for ``None`` the sampler's training default (:data:`TRAINING_DEFAULTS`), else
        :data:`DEFAULT_SHOTS`."""
        return self.shots if self.shots is not None else self._training_default("shots", DEFAULT_SHOTS)

    def resolved_persistent_chains(self) -> int:
        """``persistent_chains``, or for ``None`` the sampler's training default (:data:`TRAINING_DEFAULTS`: 8 for
        gibbs; as many as a given ``num_chains`` option) capped at the reads per call (one read per chain at least),
        else 0 (off)."""
        if self.persistent_chains is not None:
            return self.persistent_chains
        default = self._training_default("persistent_chains", 0)
        chains = self.sampler_options.get("num_chains")
        if default and isinstance(chains, int) and not isinstance(chains, bool) and chains > 0:
            default = chains
        return min(default, self.resolved_shots())

    def resolved_estimator(self) -> str:
        """``estimator``, or for ``None`` the sampler's training default, else ``"reads"``."""
        if self.estimator is not None:
            return self.estimator
        return self._training_default("estimator", "reads") if self.resolved_readout() == "shots" else "reads"

    def resolved_sampler_options(self) -> dict[str, Any]:
        """The sampler's training-default constructor options (:data:`TRAINING_DEFAULTS`) updated by
        ``sampler_options``; with persistent chains and no ``burn_in`` given, ``burn_in`` = :data:`PERSISTENT_BURN_IN`
        (chains continued by a few sweeps, not a burn-in from scratch; a training default's burn-in is that of fresh
        chains and does not apply), for samplers that take it."""
        options = {**self._training_default("sampler_options", {}), **self.sampler_options}
        if self.resolved_persistent_chains() and "burn_in" not in self.sampler_options and self._takes("burn_in"):
            options["burn_in"] = PERSISTENT_BURN_IN
        return options

    def _takes(self, option: str) -> bool:
        """Whether the sampler's constructor takes ``option`` (a missing optional dependency: assumed not)."""
        return option in self._constructor_defaults()

    def _constructor_defaults(self) -> dict[str, Any]:
        """The sampler class's constructor keywords and their defaults, with the flat spellings of its grouped options
        (``burn_in`` of ``chain``, the class's ``option_groups``) at the group default's values (``{}`` for exact or an
        unavailable class)."""
        if self.sampler == "exact":
            return {}
        from hybrid_attention.backends.registry import sampler_class

        try:
            cls = sampler_class(self.sampler)
        except (ImportError, ValueError):
            return {}
        params = inspect.signature(cls.__init__).parameters.values()
        out = {p.name: p.default for p in params if p.kind is p.KEYWORD_ONLY}
        for flat, (param, name) in getattr(cls, "option_groups", {}).items():  # e.g. burn_in of chain=ChainSchedule
            value = out.get(param)
            if value is not None and hasattr(value, name):
                out[flat] = getattr(value, name)
        return out

    def pinned_options(self) -> TrainConfig:
        """This configuration with its sampler options complete as a resumed run recorded them: every option that
        today's resolution (:meth:`resolved_sampler_options`: training defaults, the persistent chains' burn-in) would
        add to ``sampler_options`` is set to the sampler's constructor default, the value the run had when it
        recorded none. A run written before a training default existed keeps what it ran with."""
        added = {k for k in self.resolved_sampler_options() if k not in self.sampler_options}
        defaults = self._constructor_defaults()
        pinned = {
            k: defaults[k] for k in added if defaults.get(k, inspect.Parameter.empty) is not inspect.Parameter.empty
        }
        return dataclasses.replace(self, sampler_options={**pinned, **self.sampler_options})

    def resolved(self) -> TrainConfig:
        """This configuration with every setting left to the sampler made explicit (readout, shots, estimator,
        constructor options) and the task settings left to the block size (runs: decoys; mqar: pairs, vocabulary):
        what a run records in ``config.json`` and trains with."""
        return dataclasses.replace(
            self,
            decoys=self.runs_decoys() if self.task == "runs" else self.decoys,
            kv_pairs=self.mqar_settings()[0] if self.task == "mqar" else self.kv_pairs,
            mqar_vocab=self.mqar_settings()[1] if self.task == "mqar" else self.mqar_vocab,
            readout=self.resolved_readout(),
            shots=self.resolved_shots(),
            estimator=self.resolved_estimator(),
            persistent_chains=self.resolved_persistent_chains(),
            sampler_options=self.resolved_sampler_options(),
        )

    def resolved_from(self, saved: dict[str, Any]) -> TrainConfig:
        """This configuration with the sampler settings it leaves unset taken from a run's saved settings
        (``saved``: its config, as when resuming it): a run keeps what it ran with, whatever today's defaults are
        (runs written before ``estimator`` existed used the spin average)."""
        return dataclasses.replace(
            self,
            readout=self.readout or saved.get("readout") or self.resolved_readout(),
            shots=self.shots if self.shots is not None else saved.get("shots") or self.resolved_shots(),
            estimator=self.estimator or saved.get("estimator") or "reads",
            persistent_chains=(
                self.persistent_chains if self.persistent_chains is not None else saved.get("persistent_chains") or 0
            ),
            sampler_options=self.saved_or_given_options(saved.get("sampler_options") or {}),
        )

    def saved_or_given_options(self, saved: dict[str, Any]) -> dict[str, Any]:
        """The sampler options a resumed run continues with: the run's ``saved`` ones when ``sampler_options`` is
        unset or means the same (equal as given, or once resolved with today's training defaults, as a run records
        them: ``--sampler qemcmc`` alone is the run's ``burn_in=1, start=meanfield, trotter_steps=2``), else
        ``sampler_options`` (the resume check then names each option that differs)."""
        return dict(saved) if not self.sampler_options or self.means_options(saved) else dict(self.sampler_options)

    def means_options(self, saved: dict[str, Any]) -> bool:
        """Whether ``sampler_options`` are a run's ``saved`` ones: equal as given (a run written before the
        training defaults), once resolved with them (:meth:`resolved_sampler_options`, what a run records), or the
        options a run that recorded fewer of them ran with (:meth:`pinned_options`: ``{}`` saved by a mean-field run
        before its training default existed means the sampler's own ``solver="damped", damping=0.5``), or, none
        given, a training default of an earlier version (:data:`FORMER_TRAINING_OPTIONS`: ``--sampler X`` alone
        resumes a run it started under that version)."""
        if self.sampler_options == saved or self.resolved_sampler_options() == saved:
            return True
        if not self.sampler_options and saved in FORMER_TRAINING_OPTIONS.get(self.sampler, ()):
            return True
        return dataclasses.replace(self, sampler_options=dict(saved)).pinned_options().sampler_options == (
            self.sampler_options
        )

    def resolved_readout(self) -> str:
        """``readout``, or for ``None`` what training did before the setting existed: ``"exact"`` for the exact
        path and for samplers that give their exact output differentiably (statevector, meanfield), else ``"shots"``."""
        return self.readout or default_readout(self.sampler)

    def _check_readout_and_backend(self) -> None:
        if self.readout not in (None, *READOUTS):
            raise ValueError(f"unknown readout {self.readout!r}; expected one of {READOUTS}")
        if self.readout == "shots" and self.sampler == "exact":
            raise ValueError("--readout shots needs a sampler (--sampler NAME): exact enumeration has no reads")
        if self.readout == "exact" and default_readout(self.sampler) != "exact":
            raise ValueError(
                f"--readout exact needs a sampler that gives its exact output (statevector, meanfield, or exact "
                f"enumeration); sampler {self.sampler!r} gives reads only: use --readout shots"
            )
        if self.backend is None:
            return
        if not isinstance(self.backend, str) or not self.backend:
            raise TypeError(f"backend must be a backend name, got {self.backend!r}")
        if self.sampler != "ibm":
            raise ValueError(f"--backend applies to --sampler ibm, got sampler {self.sampler!r}")
        if "backend" in self.sampler_options:
            raise ValueError("give the backend once: --backend NAME or --sampler-option backend=NAME, not both")
        # qiskit-ibm-runtime is imported only when a backend is named
        from hybrid_attention.backends.ibm.sampler import fake_backend, is_fake_backend_name

        if is_fake_backend_name(self.backend):
            fake_backend(self.backend)  # ValueError listing close matches for an unknown name
        elif self.sampler_options.get("allow_hardware") is not True:
            raise ValueError(
                f"--backend {self.backend}: a real IBM Quantum device needs the explicit opt-in --sampler-option "
                "allow_hardware=true (QPU time is billed) and credentials; fake backends (e.g. fake_torino) run offline"
            )

    def model_config(self, vocab_size: int | None = None) -> TransformerConfig:
        """The model of this run (``vocab_size``: the corpus's; default: the bracket variant's, 65 for Shakespeare)."""
        if vocab_size is None:
            vocab_size = {"brackets": self.bracket_variant().vocab_size(), "runs": 2 * RUNS_LETTERS}.get(self.task, 65)
            vocab_size = self.mqar_settings()[1] if self.task == "mqar" else vocab_size
        vocab = vocab_size
        head = "lm" if self.task not in POINTER_TASKS else ("position" if self.pointer == "linear" else "attention")
        return TransformerConfig(
            vocab_size=vocab,
            block_size=self.block_size,
            n_layer=self.n_layer,
            n_head=self.n_head,
            n_embd=self.n_embd,
            ffn=self.ffn,
            dropout=self.dropout,
            attention=self.attention,
            beta=self.beta,
            learn_beta=self.learn_beta,
            head=head,
            exact=self.sampler == "exact",
            j_field=self.j_field,
            band=self.band,
            band_shape=self.band_shape,
            mta_query_kernel=self.mta_query_kernel,
            mta_key_kernel=self.mta_key_kernel,
        )
