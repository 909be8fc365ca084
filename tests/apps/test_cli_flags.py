"""The command line's help without heavy imports: ``build_parser`` and every ``--help`` load no torch, qiskit or
pennylane, and the recorded flags (``hybrid_attention/apps/cli_flags_data.py``) still match the subcommands' own parsers."""

from __future__ import annotations

import difflib
import subprocess
import sys

import pytest

from hybrid_attention.apps import cli

HEAVY = ("torch", "qiskit", "qiskit_aer", "qiskit_ibm_runtime", "pennylane", "numpy", "scipy", "matplotlib")
REGENERATE = "the recorded flags are stale: regenerate them with `python -m hybrid_attention.apps.cli_flags`"


def heavy_modules_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter and return the heavy packages it imported."""
    probe = f"{code}\nimport sys\nprint(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r}))"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return eval(r.stdout.strip().splitlines()[-1])  # a list literal printed by the probe


def test_building_the_parser_imports_nothing_heavy():
    code = "from hybrid_attention.apps.cli import build_parser\nbuild_parser()"
    assert heavy_modules_after(code) == []


@pytest.mark.parametrize("command", [None, *cli.COMMANDS])
def test_help_imports_nothing_heavy(command):
    argv = [command, "--help"] if command else ["--help"]
    code = (
        "import contextlib, io\nfrom hybrid_attention.apps import cli\n"
        f"with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n    cli.main({argv!r})"
    )
    assert heavy_modules_after(code) == []


def subparsers(parser):
    return next(a for a in parser._actions if isinstance(a, cli._Commands))._name_parser_map


@pytest.mark.parametrize("command", list(cli.COMMANDS))
def test_recorded_flags_match_the_subcommand_modules(command):
    """Same help text, same actions with the same attributes (types resolved), as the module's own parser."""
    recorded = subparsers(cli.build_parser())[command]
    real = cli.command_parser(command)
    want, got = real.format_help(), recorded.format_help()
    assert got == want, REGENERATE + "\n" + "\n".join(difflib.unified_diff(want.splitlines(), got.splitlines()))
    assert len(recorded._actions) == len(real._actions), REGENERATE
    for r, a in zip(real._actions, recorded._actions):
        assert type(a) is type(r) or type(a).__name__ == "Recorded", REGENERATE
        for key, value in vars(r).items():
            if key == "container":
                continue
            mine = getattr(a, key)
            if key == "type" and value is not None:
                mine = mine.resolve()
            assert mine == value or str(mine) == str(value), f"{command} {r.dest}.{key}: {REGENERATE}"


def test_a_command_that_runs_is_parsed_by_its_own_parser(tmp_path, capsys):
    """Types and choices come from the module: a bad value is refused by the real parser (exit 2, its message)."""
    with pytest.raises(SystemExit) as exc:
        cli.main(["fidelity", "--n", "3,x", "--out", str(tmp_path / "f")])
    assert exc.value.code == 2
    assert "expected an integer >= 1, got 'x' in the list '3,x'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["train", "--attention", "nope", "--out", str(tmp_path / "t")])
    assert "invalid choice" in capsys.readouterr().err


def test_help_from_the_record_is_the_modules_help(capsys):
    """``COMMAND --help`` prints the recorded help, equal to what the module's parser prints."""
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    assert capsys.readouterr().out == cli.command_parser("train").format_help()
