"""Resuming a run with its own command line, and refusing run directories written by another version."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from hybrid_attention.apps import cli
from hybrid_attention.apps.train import TrainConfig
from hybrid_attention.apps.train.config import PERSISTENT_BURN_IN, TRAINING_DEFAULTS

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
    assert (
        saved
        == TRAINING_DEFAULTS["qemcmc"]["sampler_options"]
        == {"burn_in": 1, "start": "meanfield", "trotter_steps": 2}
    )
    assert cli.main([*QEMCMC, "--out", out, "--resume"]) == 0
    assert cli.main([*QEMCMC, "--out", out, "--resume", "--steps", "2", "--sampler-option", "burn_in=1"]) == 0
    capsys.readouterr()
    assert cli.main([*QEMCMC, "--out", out, "--resume", "--steps", "3", "--sampler-option", "burn_in=3"]) == 2
    err = capsys.readouterr().err
    assert "option burn_in: checkpoint 1, now 3" in err
    assert json.loads((tmp_path / "q" / "metrics.json").read_text())["step"] == 2


def test_a_qemcmc_run_recorded_with_two_moves_resumes_with_two(tmp_path):
    """The training default was two moves until the one-move row was validated (PROTOCOL_qemcmc_1move.md): a run that
    ``--sampler qemcmc`` alone started then (two moves recorded) resumes with two from the same command line; other
    recorded options are not taken for a former default."""
    out = tmp_path / "q"
    assert cli.main([*QEMCMC, "--out", str(out), "--sampler-option", "burn_in=2"]) == 0  # what that version recorded
    assert cli.main([*QEMCMC, "--out", str(out), "--resume", "--steps", "2"]) == 0
    assert json.loads((out / "config.json").read_text())["run"]["sampler_options"]["burn_in"] == 2
    assert torch.load(out / "checkpoint.pt", weights_only=False)["config"]["sampler_options"]["burn_in"] == 2
    other = tmp_path / "q3"
    assert cli.main([*QEMCMC, "--out", str(other), "--sampler-option", "burn_in=3"]) == 0
    assert cli.main([*QEMCMC, "--out", str(other), "--resume", "--steps", "2"]) == 2


def test_persistent_qemcmc_chains_continue_by_the_persistent_moves_not_the_fresh_chains_burn_in():
    fresh = TrainConfig(attention="hj", sampler="qemcmc").resolved()
    kept = TrainConfig(attention="hj", sampler="qemcmc", persistent_chains=8).resolved()
    given = TrainConfig(
        attention="hj", sampler="qemcmc", persistent_chains=8, sampler_options={"burn_in": 1}
    ).resolved()
    assert (fresh.sampler_options["burn_in"], kept.sampler_options["burn_in"]) == (1, PERSISTENT_BURN_IN)
    assert given.sampler_options["burn_in"] == 1


EXACT = ["train", "--task", "brackets", "--block-size", "4", "--steps", "1", "--batch-size", "2", "--eval-size", "4",
         "--n-embd", "8", "--no-progress"]  # fmt: skip


def _edit_config(d, change):
    path = d / "config.json"
    blob = json.loads(path.read_text())
    change(blob)
    path.write_text(json.dumps(blob))


def _edit_checkpoint(d, change):
    blob = torch.load(d / "checkpoint.pt", weights_only=True)
    change(blob)
    torch.save(blob, d / "checkpoint.pt")


@pytest.mark.parametrize(
    "edit, words",
    [
        (
            lambda d: _edit_config(d, lambda b: b["run"].update(quantum_magic=3)),
            "(format 2; this version reads format 1 or 2): unknown settings ['quantum_magic']",
        ),
        (lambda d: _edit_config(d, lambda b: b["run"].pop("max_steps")), "missing settings ['max_steps']"),
        (
            lambda d: _edit_config(d, lambda b: b.update(format=99)),
            "config.json' was written by another version of "
            "hybrid-attention (format 99; this version reads format 1 or 2)",
        ),
        (
            lambda d: _edit_checkpoint(d, lambda b: b.update(format=99)),
            "checkpoint.pt' was written by another version "
            "of hybrid-attention (format 99; this version reads format 1 or 2)",
        ),
        (
            lambda d: _edit_checkpoint(d, lambda b: b["config"].update(future_knob=True)),
            "unknown settings ['future_knob']",
        ),
    ],  # fmt: skip
)
def test_a_run_written_by_another_version_is_refused(tmp_path, capsys, edit, words):
    out = tmp_path / "run"
    assert cli.main([*EXACT, "--out", str(out)]) == 0
    edit(out)
    before = (out / "checkpoint.pt").read_bytes()
    capsys.readouterr()
    assert cli.main(["train", "--resume", "--out", str(out), "--steps", "2", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert words in err, err
    assert (out / "checkpoint.pt").read_bytes() == before


def test_runs_of_the_formats_this_version_reads_still_resume(tmp_path):
    """Format 2 written before the sampling value (tests/apps/data/README.md), with ``steps`` for ``max_steps`` and
    no format in its config.json; and a format-1 checkpoint (no ``format``, no corpus sha256)."""
    old = tmp_path / "old"
    shutil.copytree(Path(__file__).parent / "data" / "checkpoint_v2_qemcmc", old)
    assert "format" not in json.loads((old / "config.json").read_text())
    assert cli.main(["train", "--resume", "--out", str(old), "--steps", "3", "--no-progress"]) == 0
    v1 = tmp_path / "v1"
    assert cli.main([*EXACT, "--out", str(v1)]) == 0
    _edit_checkpoint(v1, lambda b: [b.pop("format"), b.pop("data_sha256")])
    _edit_config(v1, lambda b: b.pop("format", None))
    assert cli.main(["train", "--resume", "--out", str(v1), "--steps", "2", "--no-progress"]) == 0
