"""The commands' IBM-route plumbing: the default ledger in --out, `hybrid-attention estimate`, fidelity's
--mitigation."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("qiskit_aer")
pytest.importorskip("qiskit_ibm_runtime")

from hybrid_attention.apps.cli import main  # noqa: E402
from hybrid_attention.apps.hardware import check_budget, reaches_ibm, with_default_ledger  # noqa: E402


def test_default_ledger_only_on_the_ibm_route():
    assert with_default_ledger("ibm", {}, "runs/x")["ledger"] == "runs/x/ibm_jobs.jsonl"
    assert with_default_ledger("qemcmc", {"engine": "ibm"}, "o")["ledger"] == "o/ibm_jobs.jsonl"
    assert "ledger" not in with_default_ledger("qemcmc", {"engine": "aer"}, "o")
    assert with_default_ledger("ibm", {"ledger": "mine.jsonl"}, "o")["ledger"] == "mine.jsonl"  # never overwritten
    assert "ledger" not in with_default_ledger("qemcmc", {"engine": "ibm", "ibm_options": {"ledger": "a"}}, "o")
    assert "ledger" not in with_default_ledger("ibm", {}, None)
    assert reaches_ibm("ibm") and not reaches_ibm("aer")


def test_check_budget_refuses_only_a_real_device_above_the_limit():
    est = {"jobs": 2, "pubs": 2, "circuits": 10, "shots": 1000, "depth": 9, "two_qubit_gates": 2, "qpu_seconds": 61.0}
    assert "61.0 s" in check_budget(est, 60, real_device=False, what="x")
    with pytest.raises(ValueError, match="above --max-qpu-seconds 60; nothing was submitted"):
        check_budget(est, 60, real_device=True, what="x")
    assert check_budget(est, 61, real_device=True, what="x")
    with pytest.raises(ValueError, match="non-negative"):
        check_budget(est, -1, real_device=True, what="x")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "1e400", "NaN", "sixty"])
@pytest.mark.parametrize("command", ["train", "estimate"])
def test_max_qpu_seconds_takes_only_a_finite_number_at_least_zero(command, value, capsys):
    """nan compares false with every estimate (and inf passes every one): both would disable the budget's refusal.
    Every command that takes the flag refuses them, and negative numbers, as an argparse error (exit code 2)."""
    argv = ["train", "--out", "never-created"] if command == "train" else ["estimate", "sample"]
    with pytest.raises(SystemExit) as exc:
        main([*argv, f"--max-qpu-seconds={value}"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --max-qpu-seconds: expected a finite number of seconds >= 0" in err and repr(value) in err


def test_the_budget_value_is_checked_in_the_library_too():
    est = {"jobs": 1, "pubs": 1, "circuits": 1, "shots": 10, "depth": 9, "two_qubit_gates": 2, "qpu_seconds": 1e9}
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite, non-negative"):
            check_budget(est, bad, real_device=True, what="x")
    from hybrid_attention.apps.train import TrainConfig

    with pytest.raises(ValueError, match="finite, non-negative"):
        TrainConfig(task="brackets", out="o", max_qpu_seconds=float("nan")).validate()


@pytest.mark.parametrize(
    "argv, fake",
    [
        (["estimate", "sample", "--sampler", "ibm", "--backend", "ibm_torino", "--n", "3"], "fake_torino"),
        (
            ["estimate", "train", "--sampler", "qemcmc", "--backend", "ibm_sherbrooke", "--block-size", "4"],
            "fake_sherbrooke",
        ),
        (["estimate", "sample", "--sampler", "ibm", "--backend", "ibm_nowhere", "--n", "3"], "fake_torino"),
    ],
)
def test_estimate_on_a_device_without_credentials_says_how_to_go_on(argv, fake, monkeypatch, capsys):
    """No traceback: exit code 2 and a message naming the fake backend of the same family and how to save an
    account (nothing is contacted: the credentials are checked first)."""
    from hybrid_attention.backends.ibm import devices as ibm_devices

    monkeypatch.setattr(ibm_devices, "has_credentials", lambda: False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("hybrid-attention estimate: error:")
    assert f"--backend {fake}" in err and "QiskitRuntimeService.save_account" in err


def test_estimate_command_counts_a_sample_call(capsys):
    argv = ["estimate", "sample", "--backend", "fake_manila", "--n", "3", "--problems", "5", "--shots", "100"]
    assert main([*argv, "--sampler-option", "chunk_size=2", "--json"]) == 0
    est = json.loads(capsys.readouterr().out)
    assert (est["jobs"], est["pubs"], est["circuits"], est["shots"]) == (3, 3, 5, 500) and est["qpu_seconds"] > 0
    assert (
        main(
            [
                "estimate",
                "train",
                "--backend",
                "fake_manila",
                "--block-size",
                "4",
                "--batch-size",
                "2",
                "--max-steps",
                "3",
                "--eval-exact",
                "--shots",
                "16",
                "--json",
            ]
        )
        == 0
    )
    est = json.loads(capsys.readouterr().out)
    assert est["forward_passes"] == 3 and est["circuits"] == 3 * 4 * 2 and est["shots"] == 3 * 4 * 2 * 16
    assert (
        main(["estimate", "fidelity", "--backend", "fake_manila", "--n", "2,3", "--shots", "100", "--problems", "4"])
        == 0
    )
    assert "2 points x 4 problems" in capsys.readouterr().out


def test_fidelity_mitigation_and_ledger(tmp_path, capsys):
    from hybrid_attention.apps.fidelity import FidelityConfig
    from hybrid_attention.apps.fidelity.command import command_line
    from hybrid_attention.apps.fidelity.sweep import mitigation_options

    assert mitigation_options("aer-noisy", ["readout", "twirling", "dd"]) == {"readout_mitigation": True, "twirling": 8}
    cfg = FidelityConfig(
        samplers=["ibm"], n=[2], shots=[200], steps=[2], problems=2, mitigation=["readout"], backend="fake_manila"
    )
    assert "--mitigation readout" in command_line(cfg, tmp_path)
    with pytest.raises(ValueError, match="unknown mitigation"):
        FidelityConfig(samplers=["ibm"], mitigation=["zne"])
    with pytest.raises(ValueError, match="noisy samplers"):
        FidelityConfig(samplers=["statevector"], mitigation=["readout"])
    out = tmp_path / "fid"
    argv = [
        "fidelity",
        "--samplers",
        "ibm",
        "--backend",
        "fake_manila",
        "--n",
        "2",
        "--shots",
        "200",
        "--steps",
        "2",
        "--problems",
        "2",
        "--mitigation",
        "readout",
        "--out",
        str(out),
        "--no-plots",
        "--no-progress",
    ]
    assert main(argv) == 0
    rows = [json.loads(x) for x in (out / "ibm_jobs.jsonl").read_text().splitlines()]
    # the calibration (2 PUBs), then the three tau points; the later points' samplers find the same calibration
    # PUBs in the ledger and read them instead of submitting them again
    assert [r["shots"] for r in rows if r["event"] == "submitted"] == [8192, 8192, 200, 200, 200]
    report = json.loads((out / "report.json").read_text())
    assert len(report["points"]) == 3
    for point in report["points"].values():
        assert point["sampler_info"]["mitigation_calibration_shots"] == 8192
    capsys.readouterr()
    assert main(["estimate", "sample", "--backend", "fake_manila", "--n", "2", "--out", str(out), "--json"]) == 0
    led = json.loads(capsys.readouterr().out)["ledger"]
    assert led["completed"] == 5 and led["submitted_not_collected"] == 0


def test_a_training_rerun_with_the_same_seed_submits_no_pub_twice(tmp_path):
    """Training reproduces its PUBs for a given seed, so a rerun (or a resumed run redoing steps after its last
    checkpoint) reads them from the ledger: a 4-step run on the 2-step run's ledger submits only steps 3 and 4 (one
    PUB per prefix length k = 1..4 per step)."""
    from collections import Counter

    from hybrid_attention.apps.train import TrainConfig, train

    kw = dict(
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
    train(TrainConfig(max_steps=2, out=str(tmp_path / "a"), **kw))
    ledger = tmp_path / "a" / "ibm_jobs.jsonl"

    def submitted():
        rows = [json.loads(x) for x in ledger.read_text().splitlines()]
        return Counter(r["pub_sha256"] for r in rows if r["event"] == "submitted")

    before = submitted()
    train(TrainConfig(max_steps=4, out=str(tmp_path / "b"), sampler_options={"ledger": str(ledger)}, **kw))
    after = submitted()
    assert max(after.values()) == 1 and sum(after.values()) - sum(before.values()) == 2 * 4
    assert not (tmp_path / "b" / "ibm_jobs.jsonl").exists()  # the ledger given is used, never a second one
