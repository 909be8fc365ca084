"""Resuming a run with its own command line, and refusing run directories written by another version."""

from __future__ import annotations

import json

from hybrid_attention.apps import cli

QEMCMC = [
    "train",
    "--task",
    "brackets",
    "--block-size",
    "4",
    "--steps",
    "1",
    "--eval-interval",
    "1",
    "--batch-size",
    "2",
    "--eval-size",
    "4",
    "--n-embd",
    "8",
    "--no-progress",
    "--sampler",
    "qemcmc",
]


def test_a_qemcmc_run_resumes_with_its_own_command_line(tmp_path, capsys):
    """The run records its resolved sampler options; the same command line (which gives none) resumes it, and so do
    options that resolve to the recorded ones; a genuinely different option is refused, naming it and both values."""
    out = str(tmp_path / "q")
    assert cli.main([*QEMCMC, "--out", out]) == 0
    saved = json.loads((tmp_path / "q" / "config.json").read_text())["run"]["sampler_options"]
    assert saved == {"burn_in": 2, "start": "meanfield", "trotter_steps": 2}
    assert cli.main([*QEMCMC, "--out", out, "--resume"]) == 0
    assert cli.main([*QEMCMC, "--out", out, "--resume", "--steps", "2", "--sampler-option", "burn_in=2"]) == 0
    capsys.readouterr()
    assert cli.main([*QEMCMC, "--out", out, "--resume", "--steps", "3", "--sampler-option", "burn_in=3"]) == 2
    err = capsys.readouterr().err
    assert "option burn_in: checkpoint 2, now 3" in err
    assert json.loads((tmp_path / "q" / "metrics.json").read_text())["step"] == 2
