"""The ``hybrid-attention`` command (console script ``hybrid_attention.apps.cli:main``). Each subcommand lives in its
own module exposing ``add_arguments(parser)`` and ``run(args) -> int``, imported by name when the parser is built.

Failures end with one line ``hybrid-attention COMMAND: error: ...`` on stderr (``-vv`` also prints the traceback):
exit code 2 when the command was refused before doing anything (bad values, settings that conflict with an
existing run, a missing or damaged input file, a run directory in use by another process), 1 when it failed while
running (a diverging run, an I/O error such as a read-only or full disk, a failed IBM job), 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from hybrid_attention import __version__
from hybrid_attention.apps.run_files import DirectoryLocked
from hybrid_attention.apps.train import TrainingDiverged

# subcommand -> (module, one-line help)
COMMANDS = {
    "demo": ("hybrid_attention.apps.demo", "the main demonstration on local defaults (no account, no network)"),
    "train": ("hybrid_attention.apps.train.command", "train a decoder with Boltzmann or softmax attention on a task"),
    "ablate": (
        "hybrid_attention.apps.ablate.command",
        "run the four-way ablation (modes x block sizes x seeds) and tabulate it",
    ),
    "fidelity": ("hybrid_attention.apps.fidelity.command", "measure sampler fidelity against exact enumeration"),
    "claims": (
        "hybrid_attention.apps.claims.command",
        "the paper's findings against the experiment plan's runs: paired CIs, Holm tests, verdicts, plots",
    ),
}


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends ``(default: X)`` to the help of every option taking a value, except where the help already says it
    or there is no default to show (``None`` or suppressed)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        help_ = action.help or ""
        return (
            help_ if "(default" in help_ or not _shows_default(action) else f"{help_} (default: %(default)s)".lstrip()
        )


def _shows_default(action: argparse.Action) -> bool:
    """Options taking a value, with a default to show (a flag's ``True``/``False`` says nothing useful)."""
    return action.nargs != 0 and action.default is not None and action.default is not argparse.SUPPRESS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hybrid-attention", description="Boltzmann attention with learnable Ising couplings."
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug and tracebacks)"
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_, formatter_class=HelpFormatter)
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            p.set_defaults(_missing=module)
            continue
        mod.add_arguments(p)
        for action in p._actions:  # argparse prints nothing, not even the default, for an option without help text
            if action.help is None and action.option_strings and _shows_default(action):
                action.help = "(default: %(default)s)"
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
        format="%(levelname)s %(name)s: %(message)s",
    )
    if args.command is None:
        parser.print_help()
        return 2
    if getattr(args, "_missing", None):
        print(
            f"hybrid-attention {args.command}: not available in this version ({args._missing} missing)", file=sys.stderr
        )
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        code = exit_code(exc)
        if code is None or args.verbose >= 2:
            raise
        print(f"hybrid-attention {args.command}: error: {message(exc)}", file=sys.stderr)
        return code


def exit_code(exc: BaseException) -> int | None:
    """2 for refused input, 1 for a failure while running, ``None`` for anything else (a bug: keep the traceback)."""
    if isinstance(
        exc,
        (
            ValueError,
            TypeError,
            FileNotFoundError,
            FileExistsError,
            IsADirectoryError,
            NotADirectoryError,
            ImportError,
            DirectoryLocked,
        ),
    ):
        return 2
    if isinstance(exc, (TrainingDiverged, OSError)) or _is_ibm_error(exc):
        return 1
    return None


def _is_ibm_error(exc: BaseException) -> bool:
    """qiskit-ibm-runtime's errors (accounts, API, jobs) and the IBM sampler's job errors, matched by module so that
    nothing is imported here."""
    return any(
        c.__module__.startswith(("qiskit_ibm_runtime", "hybrid_attention.backends.ibm")) for c in type(exc).__mro__
    )


def message(exc: BaseException) -> str:
    """One line: OS errors as ``PATH: reason`` (their ``str`` is ``[Errno 13] Permission denied: 'PATH'``)."""
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
