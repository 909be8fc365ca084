"""The ``hybrid-attention`` command. Each subcommand lives in its own module exposing
``add_arguments(parser)`` and ``run(args) -> int``; modules are imported only when their subcommand runs."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# subcommand -> (module, one-line help)
COMMANDS = {
    "demo": ("hybrid_attention.demo", "the main demonstration on local defaults (no account, no network)"),
    "train": ("hybrid_attention.train", "train a decoder with Boltzmann or softmax attention on a task"),
    "ablate": ("hybrid_attention.ablate", "run the four-way ablation (modes x block sizes x seeds) and tabulate it"),
    "fidelity": ("hybrid_attention.fidelity", "measure sampler fidelity against exact enumeration"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hybrid-attention", description="Boltzmann attention with learnable Ising couplings.")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            p.set_defaults(_missing=module)
            continue
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
                        format="%(levelname)s %(name)s: %(message)s")
    if args.command is None:
        parser.print_help()
        return 2
    if getattr(args, "_missing", None):
        print(f"hybrid-attention {args.command}: not available in this version ({args._missing} missing)", file=sys.stderr)
        return 2
    try:
        return int(args._run(args) or 0)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as exc:
        print(f"hybrid-attention {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
