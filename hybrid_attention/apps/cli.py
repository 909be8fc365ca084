"""The ``hybrid-attention`` command (console script ``hybrid_attention.apps.cli:main``). Each subcommand lives in its
own module exposing ``add_arguments(parser)`` and ``run(args) -> int``, imported by name when the parser is built.

Failures end with one line ``hybrid-attention COMMAND: error: ...`` on stderr (``-vv`` also prints the traceback):
exit code 2 when the command was refused before doing anything (bad values, settings that conflict with an
existing run, a missing or damaged input file, a run directory or a job ledger in use by another process), 1 when it
failed while running (a diverging run, an I/O error such as a read-only or full disk, a failed IBM job), 130 on
Ctrl-C. After Ctrl-C the command says what was saved and the exact command that continues (:func:`interrupted`);
further Ctrl-C while it saves and exits are ignored (:func:`_on_interrupt`).

Nothing heavy is imported until a command runs: :func:`build_parser` builds every subcommand's flags from their
record (:mod:`.cli_flags`), so ``--help`` at any level imports neither torch nor qiskit nor pennylane; a command that
runs is parsed by its own module's parser (:func:`command_parser`), imported then.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import signal
import sys
import threading
from typing import Any

from hybrid_attention import __version__

from .cli_flags import COMMANDS, command_parser, recorded, restore, subparser


def build_parser() -> argparse.ArgumentParser:
    """The whole ``hybrid-attention`` parser, every subcommand with its flags (from their record, :mod:`.cli_flags`:
    the same help text and attributes as the modules' own parsers, without importing them)."""
    parser = argparse.ArgumentParser(
        prog="hybrid-attention", description="Boltzmann attention with learnable Ising couplings."
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug and tracebacks)"
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", action=_Commands)
    flags = recorded()
    for name, (module, help_) in COMMANDS.items():
        p = subparser(sub, name, help_)
        if name in flags:
            restore(flags[name], p)
        else:  # not recorded: its module was missing when the record was made
            p.set_defaults(_missing=module)
    return parser


class _Commands(argparse._SubParsersAction):
    """The subcommands: a command that runs is parsed by its module's parser (imported now); a help request
    (``-h``/``--help`` among its arguments, before any ``--``) is answered from the recorded flags."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        name, rest = values[0], values[1:]
        if name in self._name_parser_map and not _asks_help(rest):
            real = command_parser(name)
            if real is None:
                self._name_parser_map[name].set_defaults(_missing=COMMANDS[name][0])
            else:
                self._name_parser_map[name] = real
        super().__call__(parser, namespace, values, option_string)


def _asks_help(args: list[str]) -> bool:
    for a in args:
        if a == "--":
            return False
        if a in ("-h", "--help"):
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
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
    previous = _on_interrupt()
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt as exc:
        print(interrupted(args.command, exc, argv), file=sys.stderr)
        return 130
    except Exception as exc:
        code = exit_code(exc)
        if code is None or args.verbose >= 2:
            raise
        print(f"hybrid-attention {args.command}: error: {message(exc)}", file=sys.stderr)
        return code
    finally:
        if previous is not None and signal.getsignal(signal.SIGINT) is not _again:
            signal.signal(signal.SIGINT, previous)  # after a Ctrl-C, further ones stay ignored until the process exits


def _on_interrupt() -> Any:
    """While a command runs, the first Ctrl-C (SIGINT) raises ``KeyboardInterrupt`` as usual and any further one
    (while samplers close, the lock is released, the message is printed, the interpreter exits) is ignored with a
    note instead of ending in a traceback. Returns the handler to restore when no Ctrl-C came (``None`` outside the
    main thread, where signals cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, _first)


def _first(signum: int, frame: Any) -> None:
    signal.signal(signal.SIGINT, _again)
    raise KeyboardInterrupt


def _again(signum: int, frame: Any) -> None:
    print("hybrid-attention: already stopping (saving what there is and exiting), please wait", file=sys.stderr)


def interrupted(command: str, exc: BaseException, argv: list[str]) -> str:
    """What a Ctrl-C left and the exact command that continues: a training run's checkpoint (its path and step, or
    that none was written) and ``train ... --resume`` (``ablate``, ``fidelity``: the same command, which skips what
    is done)."""
    from hybrid_attention.apps.train import TrainingInterrupted  # imported by the command that raised it

    again = "hybrid-attention " + shlex.join(argv)
    if isinstance(exc, TrainingInterrupted):
        ckpt = exc.out / "checkpoint.pt"
        resume = again + (" --resume" if command == "train" and "--resume" not in argv else "")
        if exc.checkpoint_step is not None:
            return (
                f"hybrid-attention {command}: interrupted; the checkpoint {str(ckpt)!r} (step {exc.checkpoint_step} "
                f"of {exc.max_steps}) is kept, steps after it are lost; resume with:\n  {resume}"
            )
        if exc.left:
            return (
                f"hybrid-attention {command}: interrupted before the first checkpoint: no checkpoint was saved, but "
                f"{str(exc.out)!r} still holds {list(exc.left)}; move them away or choose another --out, then start "
                f"again with:\n  {again}"
            )
        return (
            f"hybrid-attention {command}: interrupted before the first checkpoint: nothing was saved; start again "
            f"with:\n  {again}"
        )
    if command == "fidelity":
        return (
            f"hybrid-attention {command}: interrupted; the points measured so far are saved in the report of --out; "
            f"the same command measures the rest:\n  {again}"
        )
    return f"hybrid-attention {command}: interrupted; nothing to resume"


def exit_code(exc: BaseException) -> int | None:
    """2 for refused input, 1 for a failure while running, ``None`` for anything else (a bug: keep the traceback)."""
    from hybrid_attention.apps.train import TrainingDiverged
    from hybrid_attention.backends.file_lock import FileLocked  # a run directory or a job ledger in use

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
            FileLocked,
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
        c.__module__.startswith(("qiskit_ibm_runtime", "hybrid_attention.backends.ibm.sampler"))
        for c in type(exc).__mro__
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
