"""``hybrid-attention ablate``: the subcommand's flags (the training ones shared with ``train``) and :func:`run`."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from hybrid_attention.apps.cli_types import non_negative_int, positive_float, positive_int
from hybrid_attention.apps.distributed import add_cluster_arguments
from hybrid_attention.apps.run_files import lock_directory
from hybrid_attention.apps.train import TrainConfig
from hybrid_attention.apps.train.flags import MODEL_FLAGS, add_train_flags
from hybrid_attention.attention import MODES

from .grid import ablate
from .report import diverged_runs, report

__all__ = ["add_arguments", "run"]

_MODEL_FLAGS = (*MODEL_FLAGS, "data", "threads")
_LR = _MODEL_FLAGS.index("lr")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``ablate`` flags: the grid, the directory, and the training flags of :mod:`hybrid_attention.apps.train.flags`
    (defaulting to the :class:`TrainConfig` values)."""
    a = parser.add_argument
    add_train_flags(parser, ["task"], defaults="config")
    a("--modes", nargs="+", choices=MODES, default=list(MODES), help="attention modes")
    a("--block-sizes", type=positive_int, nargs="+", default=[4, 8, 12, 16], metavar="T")
    a("--seeds", type=non_negative_int, nargs="+", default=[0, 1, 2], metavar="S")
    a(
        "--lrs",
        type=positive_float,
        nargs="+",
        metavar="LR",
        help="a learning-rate axis: one run per (mode, T, lr, seed), and the best lr per (mode, T) in the summaries "
        "(default: the single --lr; a directory made with one lr can be continued with --lrs that include it)",
    )
    add_train_flags(parser, ["max_steps"], defaults="config", help={"max_steps": ""})  # train's text is about --resume
    a("--out", required=True, metavar="DIR", help="ablation directory (resumable)")
    add_train_flags(parser, _MODEL_FLAGS[:_LR], defaults="config")
    add_train_flags(parser, ["lr"], defaults="given")  # None when not given: --lr and --lrs must agree
    add_train_flags(parser, _MODEL_FLAGS[_LR + 1 :], defaults="config")
    a("--report-only", action="store_true", help="only rebuild tables and plots from the finished runs")
    add_cluster_arguments(parser)
    add_train_flags(parser, ["progress"], defaults="config")


def run(args: argparse.Namespace) -> int:
    """Run (or, with ``--report-only``, only tabulate) the ablation; print its summary. 1 if a run diverged."""
    out = Path(args.out)
    if args.report_only:
        if not out.is_dir():
            raise FileNotFoundError(f"--report-only: no ablation directory {str(out)!r}")
        with lock_directory(out):
            report(out, args.task)
    else:
        names = {f.name for f in dataclasses.fields(TrainConfig)}
        given = {k: v for k, v in vars(args).items() if k in names and k not in ("out", "progress")}
        if args.lr is None:
            del given["lr"]  # the TrainConfig default
        elif args.lrs is not None and set(args.lrs) != {args.lr}:
            raise ValueError(
                f"--lr {args.lr:g} and --lrs {' '.join(f'{x:g}' for x in args.lrs)} disagree: give all the learning "
                "rates with --lrs and drop --lr (--lr X alone is the same as --lrs X)"
            )
        base = TrainConfig(**given, out=str(out))
        grid_logger = logging.getLogger("hybrid_attention.apps.ablate.grid")
        if grid_logger.getEffectiveLevel() > logging.INFO:  # the projected time is said before the first run
            grid_logger.setLevel(logging.INFO)
        ablate(
            base,
            out,
            list(dict.fromkeys(args.modes)),
            list(dict.fromkeys(args.block_sizes)),
            list(dict.fromkeys(args.seeds)),
            lrs=args.lrs,
            progress=args.progress,
            scheduler=args.scheduler,
            workers=args.workers,
        )
    md = out / "summary.md"
    print(md.read_text())
    print(f"tables and plots in {out}", file=sys.stderr)
    bad = diverged_runs(out)
    for name, r in bad.items():
        print(
            f"hybrid-attention ablate: warning: run {str(out / 'runs' / name)!r} diverged at step {r['step']} ({r['reason']}); "
            "it is left out of the tables",
            file=sys.stderr,
        )
    return 1 if bad else 0
