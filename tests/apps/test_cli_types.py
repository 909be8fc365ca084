"""Counts, sizes and scales on the command line: one set of argparse types (:mod:`hybrid_attention.apps.cli_types`)
refuses zero, negative and non-finite values in every command, with exit status 2 and one line naming the flag."""

from __future__ import annotations

import argparse
import json

import pytest

from hybrid_attention.apps import cli
from hybrid_attention.apps.cli_flags_data import FLAGS
from hybrid_attention.apps.cli_types import non_negative_int, positive_float, positive_int, positive_ints


@pytest.mark.parametrize(
    "argv, message",
    [
        (["estimate", "sample", "--n", "-3"], "argument --n: expected an integer >= 1, got '-3'"),
        (["estimate", "sample", "--problems", "0"], "argument --problems: expected an integer >= 1, got '0'"),
        (["estimate", "train", "--block-size", "0"], "argument --block-size: expected an integer >= 1"),
        (["estimate", "fidelity", "--shots", "256,0"], "got '0' in the list '256,0'"),
        (["mixing", "--n", "4,-1"], "argument --n: expected an integer >= 1, got '-1'"),
        (["mixing", "--scale", "0"], "argument --scale: expected a finite number > 0, got '0'"),
        (["mixing", "--moves", "0"], "argument --moves: expected an integer >= 1, got '0'"),
        (["mixing", "--nodes", "-2"], "argument --nodes: expected an integer >= 1"),
        (["fidelity", "--n", "0", "--out", "x"], "argument --n: expected an integer >= 1, got '0'"),
        (["fidelity", "--scale", "nan", "--out", "x"], "argument --scale: expected a finite number > 0, got 'nan'"),
        (["fidelity", "--budget", "-1", "--out", "x"], "argument --budget: expected an integer >= 0, got '-1'"),
        (["train", "--shots", "0", "--out", "x"], "argument --shots: expected an integer >= 1, got '0'"),
        (["train", "--lr", "-1", "--out", "x"], "argument --lr: expected a finite number > 0, got '-1'"),
        (["ablate", "--block-sizes", "4", "0", "--out", "x"], "argument --block-sizes: expected an integer >= 1"),
        (["demo", "--mcmc-reads", "0"], "argument --mcmc-reads: expected an integer >= 1, got '0'"),
    ],
)
def test_bad_sizes_are_refused_by_the_parser(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_the_types_read_integral_numbers_and_refuse_the_rest():
    assert positive_int("8") == 8 and positive_int("1e5") == 100000 and non_negative_int("0") == 0
    assert positive_ints("3, 4,5") == [3, 4, 5] and positive_float("2.5") == 2.5
    for bad in ("0", "-3", "2.5", "inf", "x", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            positive_int(bad)
    for bad in ("0", "-1", "nan", "inf", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            positive_float(bad)


def test_no_command_parses_a_count_with_plain_int():
    """Every integer flag of every command goes through the shared types (one helper, not copies)."""
    plain = [
        (name, a["attrs"]["option_strings"]["literal"])
        for name, spec in json.loads(FLAGS).items()
        for a in spec["actions"]
        if a["attrs"].get("type", {}).get("callable") == "builtins:int"
    ]
    assert plain == []


def test_mixing_refuses_bad_input_with_exit_status_2(capsys):
    assert cli.main(["mixing", "--proposals", "gibbs", "--no-progress"]) == 2
    assert "--proposals must be among" in capsys.readouterr().err
    assert cli.main(["mixing", "--n", "20", "--no-progress"]) == 2
    assert "--n must be sizes in [1, 16], got 20" in capsys.readouterr().err
    assert cli.main(["mixing", "--n", "13", "--moves", "5", "--no-progress"]) == 2
    assert "--moves must be at least 15" in capsys.readouterr().err
