"""The demo (`hybrid-attention demo`) runs end to end in its --quick configuration, offline, and refuses to overwrite."""

from __future__ import annotations

import json

import pytest

from hybrid_attention.apps import cli


def test_demo_quick_end_to_end(tmp_path, capsys):
    out = tmp_path / "demo"
    assert cli.main(["demo", "--quick", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "tanh(1.5) = 0.905148" in text and "<s0 s1> = 0.905148" in text
    for label in ("| softmax |", "| hj (exact) |", "| hj (qemcmc samples) |", "| hj (DQA samples) |"):
        assert label in text
    for d in ("softmax", "hj", "hj_qemcmc", "hj_dqa"):
        m = json.loads((out / d / "metrics.json").read_text())
        assert m["finished"] and 0 <= m["val_accuracy"] <= 1
    dqa = json.loads((out / "hj_dqa" / "config.json").read_text())["run"]
    assert dqa["sampler"] == "statevector" and dqa["readout"] == "shots"  # trained on its shots, as the table says
    qm = json.loads((out / "hj_qemcmc" / "config.json").read_text())["run"]
    assert qm["sampler"] == "qemcmc" and qm["readout"] == "shots" and qm["sampler_options"]["start"] == "meanfield"
    assert qm["estimator"] == "conditional"
    rep = json.loads((out / "fidelity" / "report.json").read_text())
    assert rep["config"]["ensemble"] == "model" and rep["plots"]
    assert all((out / "fidelity" / f).stat().st_size > 1000 for f in rep["plots"])
    # a second run into the same directory is refused, nothing is touched
    before = (out / "hj" / "metrics.json").read_text()
    assert cli.main(["demo", "--quick", "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert (out / "hj" / "metrics.json").read_text() == before


def test_demo_exact_checks_only_and_bad_args(tmp_path, capsys):
    assert cli.main(["demo", "--skip-training", "--quick", "--out", str(tmp_path / "x")]) == 0
    assert "causal attention kernel" in capsys.readouterr().out
    assert not (tmp_path / "x").exists()
    assert cli.main(["demo", "--quick", "--block-size", "5", "--out", str(tmp_path / "y")]) == 2
    for flag in ("--shots", "--mcmc-reads"):  # refused by the parser (hybrid_attention/apps/cli_types.py)
        with pytest.raises(SystemExit) as info:
            cli.main(["demo", "--quick", flag, "0", "--out", str(tmp_path / "y")])
        assert info.value.code == 2
    assert not (tmp_path / "y").exists()
