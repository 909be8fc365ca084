"""Training runs on the IBM route that stop early: a run refused by its QPU budget leaves nothing in ``--out``, and a
run killed before its first checkpoint resumes from its job ledger alone, paying for no PUB twice."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest

pytest.importorskip("qiskit_aer")
pytest.importorskip("qiskit_ibm_runtime")

from hybrid_attention.apps.cli import main  # noqa: E402
from hybrid_attention.apps.train import TrainConfig, train  # noqa: E402
from hybrid_attention.apps.train import loop as train_loop  # noqa: E402
from hybrid_attention.apps.train.config import CHECKPOINT_FORMAT

KW = dict(
    task="brackets",
    attention="hj",
    block_size=4,
    batch_size=2,
    ffn=False,
    sampler="ibm",
    backend="fake_manila",
    shots=16,
    trotter_steps=2,
    eval_exact=True,
    eval_size=4,
    eval_interval=2,
    progress=False,
)


def as_device(monkeypatch):
    """Builds the run's IBM sampler as on a real device (``local`` False), so that the budget applies."""
    real = train_loop.build_sampler

    def build(cfg):
        s = real(cfg)
        s.local = False
        return s

    monkeypatch.setattr(train_loop, "build_sampler", build)


@pytest.mark.parametrize("existing", [False, True], ids=["new-out", "empty-out"])
def test_a_run_refused_by_its_budget_writes_nothing_and_its_out_stays_usable(tmp_path, monkeypatch, existing):
    out = tmp_path / "run"
    if existing:
        out.mkdir()
    as_device(monkeypatch)
    with pytest.raises(ValueError, match="above --max-qpu-seconds 0.001; nothing was submitted"):
        train(TrainConfig(max_steps=2, out=str(out), max_qpu_seconds=0.001, **KW))
    assert (sorted(p.name for p in out.iterdir()) if out.exists() else None) == ([] if existing else None)
    monkeypatch.undo()
    metrics = train(TrainConfig(max_steps=2, out=str(out), **KW))  # the same --out: a new run is accepted
    assert metrics["step"] == 2


def test_an_ibm_run_killed_before_its_first_checkpoint_resumes_from_its_ledger(tmp_path, monkeypatch, capsys):
    """The run stops at its first checkpoint (after a step of PUBs in its ledger); ``train --resume`` restarts it
    from step 0 with its settings, reads those PUBs from the ledger instead of submitting them again, and ends where
    an uninterrupted run ends."""
    kw = {**KW, "eval_interval": 1}
    whole = train(TrainConfig(max_steps=2, out=str(tmp_path / "whole"), **kw))
    out = tmp_path / "run"

    def killed(self, final):
        raise KeyboardInterrupt  # killed before checkpoint.pt is written

    monkeypatch.setattr(train_loop._Run, "checkpoint", killed)
    with pytest.raises(KeyboardInterrupt):
        train(TrainConfig(max_steps=2, out=str(out), **kw))
    monkeypatch.undo()
    assert not (out / "checkpoint.pt").exists() and (out / "config.json").is_file()
    ledger = out / "ibm_jobs.jsonl"
    before = Counter(json.loads(x)["event"] for x in ledger.read_text().splitlines())
    assert before["completed"] > 0
    assert main(["train", "--out", str(out), "--resume", "--no-progress"]) == 0, capsys.readouterr().err
    rows = [json.loads(x) for x in ledger.read_text().splitlines()]
    submitted = Counter(r["pub_sha256"] for r in rows if r["event"] == "submitted")
    assert max(submitted.values()) == 1  # no PUB paid twice
    assert sum(submitted.values()) == sum(
        json.loads(x)["event"] == "submitted" for x in (tmp_path / "whole" / "ibm_jobs.jsonl").read_text().splitlines()
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["step"] == 2 and metrics["val_loss"] == whole["val_loss"]


def test_resume_without_a_checkpoint_or_ledger_says_what_a_ledger_would_do(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    run = dataclasses.asdict(TrainConfig(task="brackets", block_size=4, max_steps=2, out=str(out)))
    (out / "config.json").write_text(json.dumps({"format": CHECKPOINT_FORMAT, "run": run}))  # as a run writes it
    assert main(["train", "--out", str(out), "--resume", "--no-progress"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no job ledger" in err and "--resume then restarts it without paying twice" in err
