"""``hybrid-attention claims``: the claims report (:func:`hybrid_attention.apps.claims.report.write_report`) from the
runs of the experiment plan (``experiments/run_plan.py``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hybrid_attention.apps.run_files import lock_directory

from .report import write_report

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``claims`` flags."""
    parser.add_argument(
        "--root", default="results/claims", metavar="DIR", help="the plan's directory (studies with runs/)"
    )
    parser.add_argument("--out", default=None, metavar="DIR", help="where the report goes (default: --root)")
    parser.add_argument(
        "--quantum-training",
        default=None,
        metavar="FILE",
        help="finding 8's sampler-trained runs (experiments/quantum_training/run.py's summary.json; "
        "default: --root/../quantum_training/summary.json)",
    )


def run(args: argparse.Namespace) -> int:
    """Write the report; print ``claims.md``."""
    root = Path(args.root)
    if not root.is_dir():
        raise FileNotFoundError(f"no plan directory {str(root)!r}")
    out = Path(args.out) if args.out else root
    out.mkdir(parents=True, exist_ok=True)
    with lock_directory(out):
        path = write_report(root, out, quantum_training=args.quantum_training)
    print(path.read_text())
    print(f"report in {path}", file=sys.stderr)
    return 0
