"""``train --readout exact|shots`` (which output of a sampler the attention layers train on, recorded in config.json;
old runs without the key resume) and ``train --sampler ibm --backend NAME`` (fake backends by name, offline)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import torch

from hybrid_attention.apps import cli
from hybrid_attention.apps.train import TrainConfig, build_sampler, build_sampling

TINY = ["--n-embd", "8", "--batch-size", "4", "--no-progress", "--warmup", "2", "--eval-exact"]
DQA = ["--sampler", "statevector", "--tau", "1.0", "--trotter-steps", "4"]


def brackets(out, *extra, steps=2):
    return ["train", "--task", "brackets", "--attention", "hj", "--block-size", "4", "--steps", str(steps)] + [
        "--eval-interval",
        "2",
        *TINY,
        *extra,
        "--out",
        str(out),
    ]


def run_config(d):
    return json.loads((d / "config.json").read_text())["run"]


def one_line_error(err):
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("hybrid-attention train: error: "), err
    return lines[0]


@pytest.fixture(autouse=True)
def _threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def test_default_readout_keeps_the_exact_output_path_and_is_recorded(tmp_path):
    assert TrainConfig(sampler="statevector").resolved_readout() == "exact"
    assert TrainConfig(sampler="meanfield").resolved_readout() == "exact"
    assert TrainConfig(sampler="gibbs").resolved_readout() == "shots"
    assert TrainConfig().resolved_readout() == "exact"  # the exact enumeration path
    assert build_sampling(TrainConfig(sampler="statevector")).readout == "exact"
    assert build_sampling(TrainConfig()) is None
    assert cli.main(brackets(tmp_path / "a", *DQA)) == 0
    assert run_config(tmp_path / "a")["readout"] == "exact"
    assert cli.main(brackets(tmp_path / "b")) == 0
    assert run_config(tmp_path / "b")["readout"] == "exact"


def test_readout_shots_trains_on_reads(tmp_path, monkeypatch):
    """readout shots: the statevector sampler is sampled with --shots reads per call."""
    cfg = TrainConfig(sampler="statevector", readout="shots", shots=64)
    s = build_sampling(cfg)
    assert (s.readout, s.num_reads, s.sampler.name) == ("shots", 64, "statevector")
    from hybrid_attention.backends.dqa.statevector import StatevectorSampler

    reads = []
    real = StatevectorSampler.sample

    def spy(self, problem, *, num_reads=None, seed=None, **kw):
        reads.append(num_reads)
        return real(self, problem, num_reads=num_reads, seed=seed, **kw)

    monkeypatch.setattr(StatevectorSampler, "sample", spy)
    assert cli.main(brackets(tmp_path / "s", *DQA, "--readout", "shots", "--shots", "64")) == 0
    assert reads and set(reads) == {64}
    assert run_config(tmp_path / "s")["readout"] == "shots" and run_config(tmp_path / "s")["shots"] == 64


def test_shots_with_an_exact_readout_is_refused_or_warned(tmp_path, capsys, caplog):
    out = tmp_path / "x"
    assert cli.main(brackets(out, *DQA, "--readout", "exact", "--shots", "32")) == 2
    err = one_line_error(capsys.readouterr().err)
    assert "--shots 32 has no effect" in err and "--readout shots" in err and not out.exists()
    with caplog.at_level(logging.WARNING):
        assert cli.main(brackets(out, *DQA, "--shots", "32")) == 0  # an existing command line still runs
    assert any("--readout shots" in r.getMessage() for r in caplog.records)
    assert run_config(out)["readout"] == "exact"


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--sampler", "gibbs", "--readout", "exact"], "gives reads only"),
        (["--readout", "shots"], "needs a sampler"),
    ],
)
def test_bad_readouts_are_refused_before_any_work(tmp_path, capsys, extra, match):
    out = tmp_path / "r"
    assert cli.main(brackets(out, *extra)) == 2
    assert match in capsys.readouterr().err and not out.exists()
    with pytest.raises(ValueError, match="unknown readout 'both'"):
        TrainConfig(sampler="statevector", readout="both", out=str(out)).validate()


def test_resuming_a_run_written_before_readout_existed(tmp_path, capsys):
    out = tmp_path / "old"
    assert cli.main(brackets(out, *DQA)) == 0
    cfg_file = out / "config.json"
    blob = json.loads(cfg_file.read_text())
    del blob["run"]["readout"]  # a run that records no readout: in config.json and the checkpoint
    cfg_file.write_text(json.dumps(blob))
    ckpt = torch.load(out / "checkpoint.pt", weights_only=True)
    del ckpt["config"]["readout"]
    torch.save(ckpt, out / "checkpoint.pt")
    assert cli.main(brackets(out, *DQA, "--readout", "shots", "--resume", steps=4)) == 2
    assert "readout" in capsys.readouterr().err
    assert cli.main(brackets(out, *DQA, "--resume", steps=4)) == 0  # without --readout: accepted
    assert run_config(out)["readout"] == "exact"
    assert cli.main(brackets(out, *DQA, "--readout", "exact", "--resume", steps=6)) == 0
    assert json.loads((out / "metrics.json").read_text())["step"] == 6


# ---------------------------------------------------------------------- --backend NAME (IBM)
def test_ibm_fake_backend_by_name_trains_offline(tmp_path):
    pytest.importorskip("qiskit_ibm_runtime")
    pytest.importorskip("qiskit_aer")
    out = tmp_path / "ibm"
    args = ["--sampler", "ibm", "--backend", "fake_manila", "--shots", "32", "--trotter-steps", "2"]
    assert cli.main(brackets(out, *args)) == 0
    cfg = run_config(out)
    assert cfg["backend"] == "fake_manila" and cfg["readout"] == "shots" and "backend" not in cfg["sampler_options"]
    assert np.isfinite(json.loads((out / "metrics.json").read_text())["val_loss"])
    s = build_sampler(TrainConfig(sampler="ibm", backend="FakeManilaV2"))
    assert s.backend.name == "fake_manila" and s.local


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--sampler", "ibm", "--backend", "fake_torin"], "did you mean fake_torino"),
        (["--sampler", "ibm", "--backend", "ibm_torino"], "allow_hardware=true"),
        (["--sampler", "aer", "--backend", "fake_manila"], "--backend applies to --sampler ibm"),
        (
            ["--sampler", "ibm", "--backend", "fake_manila", "--sampler-option", "backend=fake_lima"],
            "give the backend once",
        ),
    ],
)
def test_bad_backends_are_refused_before_any_work(tmp_path, capsys, monkeypatch, extra, match):
    pytest.importorskip("qiskit_ibm_runtime")
    from hybrid_attention.backends.ibm import devices as ibm_devices

    monkeypatch.setattr(
        ibm_devices, "QiskitRuntimeService", lambda *a, **k: pytest.fail("the service must not be contacted")
    )
    out = tmp_path / "bad"
    assert cli.main(brackets(out, *extra)) == 2
    assert match in one_line_error(capsys.readouterr().err) and not out.exists()
