"""``hybrid-attention train``: the subcommand's flags and :func:`run` (the Python API is
:func:`hybrid_attention.apps.train.train`)."""

from __future__ import annotations

import argparse
import logging

from .flags import MODEL_FLAGS, add_train_flags, config_from_args
from .loop import train

__all__ = ["add_arguments", "run"]

_BEFORE_OUT = ("task", "attention", "block_size", "band", "band_shape", "max_steps", "seed")
_AFTER_OUT = (
    "resume",
    *MODEL_FLAGS,
    "grad_clip",
    "data",
    "sampler",
    "shots",
    "tau",
    "trotter_steps",
    "sampler_options",
    "readout",
    "estimator",
    "persistent_chains",
    "backend",
    "max_qpu_seconds",
    "eval_exact",
    "threads",
    "progress",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``train`` flags. Their argparse default is ``None`` (not given): :func:`config_from_args` fills in the
    :class:`TrainConfig` default, or with ``--resume`` the run's own setting; the help shows the default."""
    add_train_flags(parser, _BEFORE_OUT, defaults="given")
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="run directory (must be new or empty unless --resume)"
    )
    add_train_flags(parser, _AFTER_OUT, defaults="given")


def run(args: argparse.Namespace) -> int:
    """Train the run the flags describe; print what a sampler-backed run will cost first, its final metrics last."""
    cost = logging.getLogger("hybrid_attention.apps.train.cost")
    if cost.getEffectiveLevel() > logging.INFO:
        cost.setLevel(logging.INFO)
    cfg = config_from_args(args)
    metrics = train(cfg)
    keys = [k for k in ("val_loss", "val_perplexity", "val_accuracy", "val_string_accuracy") if k in metrics]
    print(f"{cfg.out}: step {metrics['step']}, " + ", ".join(f"{k} {metrics[k]:.4f}" for k in keys))
    return 0
