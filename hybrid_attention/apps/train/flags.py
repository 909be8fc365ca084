"""The command-line flags of :class:`~hybrid_attention.apps.train.config.TrainConfig`, defined once.

``hybrid-attention train`` adds all of them (:func:`add_train_flags` with ``defaults="given"``: a flag not given is
``None``, so that ``--resume`` can tell it from the run's own setting); ``hybrid-attention ablate`` adds the ones it
shares (``defaults="config"``: the :class:`TrainConfig` default). Either way the help shows the default.
:func:`config_from_args` turns parsed ``train`` flags into a :class:`TrainConfig`.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hybrid_attention.attention import ALL_MODES, BAND_SHAPES

from ..cli_types import non_negative_int, positive_float, positive_int
from ..hardware import budget_seconds
from .config import ESTIMATORS, POINTERS, READOUTS, TASKS, TrainConfig, complete_saved
from .resume import refuse_changes, saved_settings

__all__ = ["Flag", "FLAGS", "MODEL_FLAGS", "add_train_flags", "parse_sampler_option", "config_from_args"]

#: the model and optimiser settings every training command takes (train, ablate), in help order
MODEL_FLAGS = (
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
    "patience",
    "j_field",
    "mta_query_kernel",
    "mta_key_kernel",
    "bracket_types",
    "filler",
    "disjoint",
    "train_max_depth",
    "source_length",
    "pointer",
    "decoys",
    "kv_pairs",
    "mqar_vocab",
)


def parse_sampler_option(item: str) -> tuple[str, Any]:
    """``"KEY=VALUE"`` to ``(key, value)``; the value becomes an int, float, bool (true/false), None (none) or
    stays a string. ``ValueError`` naming the expected form when ``item`` is malformed.

    Example:
        >>> parse_sampler_option("burn_in=32"), parse_sampler_option("ramp=0.25"), parse_sampler_option("method=tap")
        (('burn_in', 32), ('ramp', 0.25), ('method', 'tap'))
    """
    key, sep, raw = item.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not key.isidentifier() or not raw:
        raise ValueError(f"a sampler option must look like KEY=VALUE (e.g. burn_in=32), got {item!r}")
    low = raw.lower()
    if low in ("true", "false"):
        return key, low == "true"
    if low == "none":
        return key, None
    for conv in (int, float):
        try:
            return key, conv(raw)
        except ValueError:
            pass
    return key, raw


def _option_arg(item: str) -> tuple[str, Any]:
    try:
        return parse_sampler_option(item)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@dataclass(frozen=True)
class Flag:
    """One flag of a :class:`TrainConfig` field: its option string, help text and further ``add_argument``
    keywords (``type``, ``action``, ``metavar``, ``choices``; ``dest`` is the field)."""

    option: str
    help: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()


#: TrainConfig field -> its flag, in the order ``hybrid-attention train --help`` lists them
FLAGS: dict[str, Flag] = {
    "task": Flag(
        "--task",
        "shakespeare (next character), brackets (point at the match), runs (point at the run of the query letter) or "
        "mqar (recall the value of each queried key)",
        {"choices": TASKS},
    ),
    "attention": Flag(
        "--attention",
        "attention mode (docs/theory.md section 3); controls: bias (a learned positional bias), mta (key-query "
        "convolution)",
        {"choices": ALL_MODES},
    ),
    "block_size": Flag("--block-size", "sequence length T (spins per query)", {"type": positive_int, "metavar": "T"}),
    "max_steps": Flag(
        "--max-steps",
        "the optimiser steps the run may take (early stopping may end it sooner; with --resume: the new total, to "
        "extend a run; --steps is the same flag)",
        {"type": positive_int, "metavar": "N"},
        aliases=("--steps",),
    ),
    "seed": Flag("--seed", "", {"type": non_negative_int, "metavar": "S"}),
    "resume": Flag(
        "--resume",
        "continue the run in DIR from its last checkpoint, with the settings of DIR/config.json "
        "(flags given as well must match them, except --max-steps, --data, --threads, --no-progress)",
        {"action": "store_true"},
    ),
    "ffn": Flag("--no-ffn", "drop the MLP sub-block", {"action": "store_false"}),
    "n_layer": Flag("--n-layer", "", {"type": positive_int}),
    "n_head": Flag("--n-head", "", {"type": positive_int}),
    "n_embd": Flag("--n-embd", "", {"type": positive_int}),
    "dropout": Flag("--dropout", "", {"type": float}),
    "beta": Flag("--beta", "(initial) inverse temperature of the Ising attention", {"type": positive_float}),
    "learn_beta": Flag("--learn-beta", "learn beta per head", {"action": "store_true"}),
    "lr": Flag("--lr", "peak learning rate (warmup, then cosine decay to 10 %%)", {"type": positive_float}),
    "weight_decay": Flag("--weight-decay", "", {"type": float}),
    "batch_size": Flag("--batch-size", "", {"type": positive_int}),
    "eval_interval": Flag("--eval-interval", "steps between evaluations and checkpoints", {"type": positive_int}),
    "eval_size": Flag(
        "--eval-size", "validation windows (shakespeare; brackets use the held-out set)", {"type": positive_int}
    ),
    "warmup": Flag("--warmup", "", {"type": non_negative_int}),
    "patience": Flag(
        "--patience",
        "early stopping: stop after this many evaluations without a 0.1 %% drop of the validation loss (0: off)",
        {"type": non_negative_int, "metavar": "EVALS"},
    ),
    "j_field": Flag(
        "--j-field",
        "attention j: a constant symmetry-breaking field replacing h = 0, so that J can learn (0: the paper's J-only)",
        {"type": float, "metavar": "EPS"},
    ),
    "band": Flag(
        "--band",
        "couplings only between keys at distance <= W (1 <= W < T): exact at any T by the transfer matrix, cost about "
        "T 2**W per attention row (docs/banded.md); 0: a full J",
        {"type": non_negative_int, "metavar": "W"},
    ),
    "band_shape": Flag(
        "--band-shape",
        "with --band: free (a coupling per position and distance) or toeplitz (one per distance, any length)",
        {"choices": BAND_SHAPES},
    ),
    "mta_query_kernel": Flag(
        "--mta-query-kernel",
        "attention mta: the convolution kernel's size over queries (the latest c_q queries)",
        {"type": positive_int, "metavar": "CQ"},
    ),
    "mta_key_kernel": Flag(
        "--mta-key-kernel",
        "attention mta: the convolution kernel's size over keys, odd (centred)",
        {"type": positive_int, "metavar": "CK"},
    ),
    "bracket_types": Flag(
        "--bracket-types", "brackets: number of bracket types", {"type": positive_int, "metavar": "K"}
    ),
    "filler": Flag("--filler", "brackets: probability of a filler token per position", {"type": float}),
    "disjoint": Flag(
        "--disjoint", "brackets: held-out strings disjoint from the training strings", {"action": "store_true"}
    ),
    "train_max_depth": Flag(
        "--train-max-depth",
        "brackets: deepest nesting in training strings (0: no cap)",
        {"type": non_negative_int, "metavar": "D"},
    ),
    "source_length": Flag(
        "--source-length",
        "brackets: cut windows of T tokens from strings of this length (0: whole strings)",
        {"type": non_negative_int, "metavar": "L"},
    ),
    "pointer": Flag(
        "--pointer", "brackets: a linear pointer head, or the last layer's attention weights", {"choices": POINTERS}
    ),
    "decoys": Flag(
        "--decoys",
        "runs: isolated occurrences of the query letter per sequence, N at every T (default: (T - 4) // 8, which "
        "grows with T)",
        {"type": non_negative_int, "metavar": "N"},
    ),
    "kv_pairs": Flag(
        "--kv-pairs",
        "mqar: key-value pairs per sequence, each queried once (0: T // 8)",
        {"type": non_negative_int, "metavar": "N"},
    ),
    "mqar_vocab": Flag(
        "--mqar-vocab",
        "mqar: vocabulary size, keys below V/2 and values above (0: max(64, 4 T))",
        {"type": non_negative_int, "metavar": "V"},
    ),
    "grad_clip": Flag("--grad-clip", "gradient-norm clipping threshold", {"type": positive_float}),
    "data": Flag(
        "--data", "Tiny Shakespeare text (default: $HYBRID_ATTENTION_DATA, else the user cache)", {"metavar": "PATH"}
    ),
    "sampler": Flag("--sampler", "'exact' (enumeration) or a registry name: statevector, aer, gibbs, ..."),
    "shots": Flag(
        "--shots",
        "reads per sampler call (non-exact samplers; default: the sampler's training setting, 8 for qemcmc and "
        "gibbs, else 256)",
        {"type": positive_int},
    ),
    "tau": Flag("--tau", "DQA anneal time (DQA samplers)", {"type": positive_float}),
    "trotter_steps": Flag("--trotter-steps", "DQA Trotter steps (DQA samplers)", {"type": positive_int}),
    "sampler_options": Flag(
        "--sampler-option",
        "a sampler constructor option, repeatable (e.g. --sampler-option burn_in=32 "
        "--sampler-option num_chains=8); values are read as int, float, true/false, none or string",
        {"action": "append", "type": _option_arg, "metavar": "KEY=VALUE"},
    ),
    "readout": Flag(
        "--readout",
        "exact: train on the sampler's exact output (differentiable; statevector, meanfield); shots: on --shots "
        "reads per call with covariance gradients (default: exact where the sampler offers it, else shots)",
        {"choices": READOUTS},
    ),
    "estimator": Flag(
        "--estimator",
        "readout shots: marginals from the spin average of the reads, or from the average of each spin's conditional "
        "mean tanh(beta (h_j + sum_k J_jk s_k)) over the reads (Rao-Blackwellised: unbiased for Boltzmann reads, "
        "lower variance; exact at J = 0) (default: the sampler's training setting, conditional for qemcmc and "
        "gibbs, else reads)",
        {"choices": ESTIMATORS},
    ),
    "persistent_chains": Flag(
        "--persistent-chains",
        "C Markov chains per (layer, head, query) kept between optimiser steps and in checkpoints (as in persistent "
        "contrastive divergence): each step continues them for 2 moves (or --sampler-option burn_in=N) before "
        "recording --shots reads; Markov-chain samplers (qemcmc, gibbs, mh-local, mh-uniform); 0: off (default: "
        "the sampler's training setting, 8 for gibbs, else 0)",
        {"type": non_negative_int, "metavar": "C"},
    ),
    "backend": Flag(
        "--backend",
        "--sampler ibm: the backend, a fake one by name (fake_torino, fake_fractional, ...: offline) or a device "
        "(needs --sampler-option allow_hardware=true and credentials)",
        {"metavar": "NAME"},
    ),
    "max_qpu_seconds": Flag(
        "--max-qpu-seconds",
        "the IBM route on a real device: the run's estimated QPU time is printed first and the run refused above this "
        "many seconds (raise it on purpose: QPU time is billed); offline the estimate is printed only",
        {"type": budget_seconds, "metavar": "S"},
    ),
    "eval_exact": Flag(
        "--eval-exact", "evaluate with exact marginals even when training with a sampler", {"action": "store_true"}
    ),
    "threads": Flag("--threads", "torch CPU threads", {"type": positive_int}),
    "progress": Flag("--no-progress", "no progress bar", {"action": "store_false"}),
}


def add_train_flags(
    parser: argparse.ArgumentParser,
    names: list[str] | tuple[str, ...],
    *,
    defaults: Literal["given", "config"],
    help: dict[str, str] | None = None,
) -> None:
    """Add the flags of the :class:`TrainConfig` fields ``names`` (keys of :data:`FLAGS`) to ``parser``.

    Args:
        defaults: ``"given"``: every flag defaults to ``None`` (not given) and its help shows the
            :class:`TrainConfig` default; ``"config"``: the flags default to the :class:`TrainConfig` values (the
            ``hybrid-attention`` help formatter shows them).
        help: help texts replacing those of :data:`FLAGS` (``""``: none), for a flag whose text is specific to
            ``train`` (``--max-steps`` mentions ``--resume``).
    """
    d = TrainConfig()
    for name in names:
        flag = FLAGS[name]
        value = getattr(d, name)
        help_ = flag.help if help is None or name not in help else help[name]
        if defaults == "given":
            if "action" not in flag.kwargs and value is not None:  # the help shows what "not given" means
                help_ = f"{help_} (default: {value})".strip()
            default = None
        else:
            default = value
        parser.add_argument(flag.option, *flag.aliases, dest=name, default=default, help=help_ or None, **flag.kwargs)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """The run's :class:`TrainConfig`: flags given on the command line, the rest from the :class:`TrainConfig`
    defaults, or with ``--resume`` from ``DIR/config.json`` (a flag that differs from it is refused unless it is one
    that may change on resume, such as ``--max-steps``)."""
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    given = {k: v for k, v in vars(args).items() if k in names and v is not None}
    items = given.pop("sampler_options", None)
    if items is not None or "sampler" in given:  # --sampler given again comes with its own options (or none)
        opts: dict[str, Any] = {}
        for key, value in items or []:
            if key in opts and opts[key] != value:
                raise ValueError(
                    f"--sampler-option {key} given twice with different values: {opts[key]!r} and {value!r}"
                )
            opts[key] = value
        given["sampler_options"] = opts
    if not given.get("resume"):
        return _check_shots(TrainConfig(**given), given)
    saved = saved_settings(Path(given["out"]))
    # a setting added after the run was written (absent from its config) had its default then
    base = {k: v for k, v in complete_saved(saved).items() if k in names and k not in ("out", "resume", "progress")}
    base = {**dataclasses.asdict(TrainConfig()), **base}
    refuse_changes(base, given, given["out"], hint=" (omit a flag to keep the run's setting)")
    if "sampler_options" in given:  # the same options, given as today's or as the run's version recorded them
        given["sampler_options"] = TrainConfig(
            sampler=given.get("sampler", base["sampler"]), sampler_options=given["sampler_options"]
        ).saved_or_given_options(base["sampler_options"])
    return _check_shots(TrainConfig(**{**base, **given}), given)


def _check_shots(cfg: TrainConfig, given: dict[str, Any]) -> TrainConfig:
    """``--shots`` with ``--readout exact`` has no effect: refused (with the default readout, :func:`train` warns)."""
    if "shots" in given and given.get("readout") == "exact" and cfg.sampler != "exact":
        raise ValueError(
            f"--shots {given['shots']} has no effect: sampler {cfg.sampler!r} trains on its exact output (readout "
            "exact); pass --readout shots to train on that many reads per call, or drop --shots"
        )
    return cfg
