"""One run-directory loader (hybrid_attention/apps/runs.py): config, model, metrics of a trained run."""

from __future__ import annotations

import json

import pytest
import torch

from hybrid_attention.apps.runs import load_run
from hybrid_attention.apps.train import TrainConfig, train


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "hj"
    cfg = TrainConfig(
        task="brackets", attention="hj", block_size=6, max_steps=3, out=str(out), progress=False, eval_interval=3,
        n_embd=16, eval_size=64,
    )  # fmt: skip
    train(cfg)
    return out


def test_a_run_reads_back_with_its_settings_weights_and_metrics(run):
    r = load_run(run)
    assert r.path == run and r.config.block_size == 6 and r.config.out == str(run)
    assert r.metrics == json.loads((run / "metrics.json").read_text())
    assert r.saved == json.loads((run / "config.json").read_text())
    assert not r.model.training
    state = torch.load(run / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(v, state[k]) for k, v in r.model.state_dict().items())
    assert load_run(run / "checkpoint.pt").config == r.config
    x, _ = r.task().get_batch("val", 2, generator=torch.Generator().manual_seed(0))
    assert r.model(x)[0].shape[:2] == (2, 6)


def test_a_directory_without_config_json_reads_the_checkpoint_settings(run, tmp_path):
    other = tmp_path / "bare"
    other.mkdir()
    (other / "checkpoint.pt").write_bytes((run / "checkpoint.pt").read_bytes())
    r = load_run(other, exact=True)
    assert r.saved is None and r.metrics is None and r.model.config.exact
    assert all(torch.equal(v, load_run(run).model.state_dict()[k]) for k, v in r.model.state_dict().items())


def test_missing_and_foreign_checkpoints_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_run(tmp_path)
    torch.save({"model": {"nothing": torch.zeros(1)}, "config": {"task": "brackets"}}, tmp_path / "checkpoint.pt")
    with pytest.raises(ValueError, match="does not describe a model"):
        load_run(tmp_path)
