"""``train --persistent-chains C`` (qemcmc chains kept between optimiser steps): stored in checkpoints, restored on
``--resume`` (a resumed run equals an uninterrupted one), untouched by evaluation, and refused where it cannot work."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import warnings
from pathlib import Path

import pytest
import torch

from hybrid_attention.apps import cli
from hybrid_attention.apps.run_files import load_checkpoint
from hybrid_attention.apps.train import TrainConfig

QEMCMC = ["--sampler", "qemcmc", "--shots", "4", "--persistent-chains", "2"]
QEMCMC += ["--sampler-option", "burn_in=1", "--sampler-option", "trotter_steps=2"]


def brackets(out, *extra, steps=2, eval_interval=2):
    return [
        "train", "--task", "brackets", "--attention", "hj", "--block-size", "4", "--steps", str(steps),
        "--eval-interval", str(eval_interval), "--n-embd", "8", "--batch-size", "3", "--eval-size", "8",
        "--warmup", "1", "--no-progress", *QEMCMC, *extra, "--out", str(out),
    ]  # fmt: skip


@pytest.fixture(autouse=True)
def _threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def _state(d):
    blob = load_checkpoint(d / "checkpoint.pt")
    return blob, blob["persistent_chains"]


def test_chains_are_checkpointed_and_a_resumed_run_equals_an_uninterrupted_one(tmp_path):
    assert cli.main(brackets(tmp_path / "straight", steps=4)) == 0
    assert cli.main(brackets(tmp_path / "resumed", steps=2)) == 0
    blob2, chains2 = _state(tmp_path / "resumed")
    assert blob2["config"]["persistent_chains"] == 2
    assert sorted(chains2) == ["layer0"]
    st = chains2["layer0"]
    assert st.dtype == torch.int8 and tuple(st.shape) == (3, 1, 4, 2, 4)  # (batch, heads, queries, chains, keys)
    assert set(st.unique().tolist()) <= {-1, 1}
    assert cli.main(["train", "--resume", "--out", str(tmp_path / "resumed"), "--steps", "4", "--no-progress"]) == 0
    a, ca = _state(tmp_path / "straight")
    b, cb = _state(tmp_path / "resumed")
    assert torch.equal(ca["layer0"], cb["layer0"])
    for k, v in a["model"].items():
        assert torch.equal(v, b["model"][k]), k


def test_a_checkpoint_written_before_the_sampling_value_resumes(tmp_path, monkeypatch):
    """A run directory written when the sampler was attached to the layers (tests/apps/data/README.md) resumes, and
    continues exactly like a run trained straight through by today's code: the refactor kept every number.

    The stored run drew its reads in one qemcmc call per prefix length; today's bridge sends qemcmc one padded call
    per layer (``capabilities.pad_with_mask``), whose chains follow the same law from another random stream
    (``tests/backends/test_qemcmc_groups.py``). The per-prefix calls, whose stream is unchanged, are restored here.

    The stored run was trained on another CPU, whose float kernels round differently, so its step-2 weights are
    compared with this machine's within a tolerance; the bit-for-bit check of the resume (determinism on one machine)
    runs on the old directory with this machine's step-2 tensors put in place of the stored ones, so that everything
    the old format decides (its configuration keys, format 2, the sampler read from the layers) is still exercised."""
    from hybrid_attention.backends.mcmc.qemcmc import QEMCMCSampler

    per_prefix = dataclasses.replace(QEMCMCSampler.capabilities, pad_with_mask=False)
    monkeypatch.setattr(QEMCMCSampler, "capabilities", per_prefix)
    old = tmp_path / "old"
    shutil.copytree(Path(__file__).parent / "data" / "checkpoint_v2_qemcmc", old)
    before = load_checkpoint(old / "checkpoint.pt")
    assert before["format"] == 2 and before["step"] == 2
    assert cli.main(brackets(tmp_path / "two", "--estimator", "reads", steps=2)) == 0
    here = load_checkpoint(tmp_path / "two" / "checkpoint.pt")
    # Two Adam steps move a weight by at most 2 lr (6e-3); another CPU's rounding changes a step's normalised update
    # far less than 1 % of that (measured: 2.8e-6 on J_raw, AMD AVX-512 against the machine that wrote the data).
    step_tol = 0.01 * 2 * here["config"]["lr"]
    for k, v in here["model"].items():
        torch.testing.assert_close(before["model"][k], v, rtol=0, atol=step_tol, msg=k)
    blob = torch.load(old / "checkpoint.pt", weights_only=True)
    for key in ("model", "optimizer", "generator", "persistent_chains"):
        blob[key] = torch.load(tmp_path / "two" / "checkpoint.pt", weights_only=True)[key]
    torch.save(blob, old / "checkpoint.pt")
    assert cli.main(["train", "--resume", "--out", str(old), "--steps", "4", "--no-progress"]) == 0
    assert cli.main(brackets(tmp_path / "straight", "--estimator", "reads", steps=4)) == 0
    a, ca = _state(tmp_path / "straight")
    b, cb = _state(old)
    assert b["step"] == 4 and torch.equal(ca["layer0"], cb["layer0"])
    for k, v in a["model"].items():
        assert torch.equal(b["model"][k], v), k  # one machine, one process: bit-identical


def test_a_resume_that_lost_its_chains_would_differ(tmp_path):
    """The check above can fail: chains restarted at random on resume give another trajectory."""
    assert cli.main(brackets(tmp_path / "straight", steps=4)) == 0
    assert cli.main(brackets(tmp_path / "cut", steps=2)) == 0
    ckpt = tmp_path / "cut" / "checkpoint.pt"
    blob = torch.load(ckpt, weights_only=True)
    blob["persistent_chains"] = {"layer0": -blob["persistent_chains"]["layer0"]}  # other chain states
    torch.save(blob, ckpt)
    assert cli.main(["train", "--resume", "--out", str(tmp_path / "cut"), "--steps", "4", "--no-progress"]) == 0
    assert not torch.equal(_state(tmp_path / "straight")[1]["layer0"], _state(tmp_path / "cut")[1]["layer0"])


def test_evaluation_does_not_move_the_training_chains(tmp_path):
    """Evaluating with the sampler (no --eval-exact) continues copies of the chains: evaluating every step or only
    at the end leaves the same chains and weights."""
    assert cli.main(brackets(tmp_path / "every", steps=3, eval_interval=1)) == 0
    assert cli.main(brackets(tmp_path / "end", steps=3, eval_interval=3)) == 0
    a, ca = _state(tmp_path / "every")
    b, cb = _state(tmp_path / "end")
    assert torch.equal(ca["layer0"], cb["layer0"])
    assert all(torch.equal(v, b["model"][k]) for k, v in a["model"].items())


def test_a_checkpoint_without_chains_is_refused_on_resume(tmp_path):
    assert cli.main(brackets(tmp_path / "r", steps=2)) == 0
    ckpt = tmp_path / "r" / "checkpoint.pt"
    blob = torch.load(ckpt, weights_only=True)
    del blob["persistent_chains"]
    torch.save(blob, ckpt)
    with pytest.raises(ValueError, match="does not fit this model.*persistent_chains"):
        from hybrid_attention.apps.train import train

        train(TrainConfig.from_saved(blob["config"], resume=True, max_steps=4, progress=False))


def test_sampler_options_named_like_the_anneal_flags_reach_the_sampler():
    """qemcmc's own trotter_steps (the proposal's) arrives through --sampler-option; --trotter-steps (DQA) does not
    touch it."""
    from hybrid_attention.apps.train import build_sampler

    s = build_sampler(TrainConfig(sampler="qemcmc", sampler_options={"trotter_steps": 3}, trotter_steps=7))
    assert s.params.steps == 3
    assert build_sampler(TrainConfig(sampler="qemcmc", trotter_steps=7)).params.steps == 2  # the training default
    dqa = build_sampler(TrainConfig(sampler="statevector", tau=2.0, trotter_steps=7))
    assert (dqa.schedule.tau, dqa.schedule.steps) == (2.0, 7)


def test_plain_sampler_qemcmc_trains_with_the_validated_settings_and_records_them(tmp_path):
    """``train --sampler qemcmc`` with no other flag: mean-field start, 1 move, 2-step proposals, 8 reads,
    Rao-Blackwellised (TRAINING_DEFAULTS); the sampler's generic defaults for arbitrary problems are unchanged, and a
    setting the run gives wins."""
    import json

    from hybrid_attention.apps.train import TRAINING_DEFAULTS, build_sampling
    from hybrid_attention.backends import get_sampler

    s = build_sampling(TrainConfig(sampler="qemcmc"))
    assert (s.num_reads, s.estimator, s.readout) == (8, "conditional", "shots")
    assert (s.sampler.burn_in, s.sampler.start, s.sampler.params.steps) == (1, "meanfield", 2)
    generic = get_sampler("qemcmc")
    assert (generic.burn_in, generic.start) == (128, "random")
    mine = build_sampling(TrainConfig(sampler="qemcmc", shots=16, estimator="reads", sampler_options={"burn_in": 4}))
    assert (mine.num_reads, mine.estimator, mine.sampler.burn_in, mine.sampler.start) == (16, "reads", 4, "meanfield")
    cmd = ["train", "--task", "brackets", "--block-size", "4", "--steps", "1", "--eval-interval", "1", "--n-embd", "8"]
    cmd += [
        "--batch-size",
        "2",
        "--eval-size",
        "4",
        "--no-progress",
        "--sampler",
        "qemcmc",
        "--out",
        str(tmp_path / "q"),
    ]
    assert cli.main(cmd) == 0
    run = json.loads((tmp_path / "q" / "config.json").read_text())["run"]
    want = TRAINING_DEFAULTS["qemcmc"]
    assert (run["shots"], run["estimator"], run["sampler_options"]) == (
        want["shots"],
        want["estimator"],
        want["sampler_options"],
    )
    assert build_sampling(TrainConfig(sampler="mh-local")).num_reads == 256  # no training default: 256 reads


def test_conditional_estimator_is_built_recorded_and_carried_by_the_chains(tmp_path):
    from hybrid_attention.apps.train import build_sampling

    assert build_sampling(TrainConfig(sampler="gibbs", estimator="conditional")).estimator == "conditional"
    sv = build_sampling(TrainConfig(sampler="statevector", readout="shots", estimator="conditional"))
    assert (sv.estimator, sv.readout) == ("conditional", "shots")
    assert cli.main(brackets(tmp_path / "rb", "--estimator", "conditional")) == 0
    blob, chains = _state(tmp_path / "rb")
    assert blob["config"]["estimator"] == "conditional" and blob["config"]["persistent_chains"] == 2
    assert chains["layer0"].shape == (3, 1, 4, 2, 4)
    for bad, match in (
        ({"estimator": "mean"}, "unknown estimator"),
        ({"estimator": "conditional", "sampler": "exact"}, "needs --sampler NAME with reads"),
        ({"estimator": "conditional", "sampler": "statevector"}, "readout 'exact'"),
    ):
        with pytest.raises(ValueError, match=match):
            TrainConfig(task="brackets", block_size=4, out=str(tmp_path / "x"), **bad).validate()


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"sampler": "anneal"}, "needs a Markov-chain sampler"),
        ({"sampler": "exact"}, "needs a Markov-chain sampler"),
        ({"shots": 2}, "needs --shots >= 4"),
        ({"sampler_options": {"num_chains": 8}}, "contradicts it"),
        ({"persistent_chains": -1}, "non-negative integer"),
    ],
)
def test_bad_persistent_chain_settings_are_refused_before_any_work(tmp_path, changes, match):
    base = {"sampler": "qemcmc", "shots": 8, "persistent_chains": 4, "out": str(tmp_path / "x")}
    with pytest.raises(ValueError, match=match):
        TrainConfig(task="brackets", block_size=4, **{**base, **changes}).validate()
    assert not (tmp_path / "x").exists()


def test_a_sampler_run_says_its_work_and_projected_time_before_its_first_step(tmp_path, caplog):
    """The count is the hand count: rows x layers x heads x queries x chains x moves (qemcmc's training default:
    8 chains, 1 move); the probe leaves the run as it was (a run with it equals the same run resumed)."""
    import logging

    from hybrid_attention.apps.train import build_sampling
    from hybrid_attention.apps.train.cost import step_work

    cfg = TrainConfig(sampler="qemcmc", task="brackets", block_size=6, batch_size=5, n_layer=2, n_head=2, n_embd=8)
    assert step_work(cfg, build_sampling(cfg)).count == 5 * 2 * 2 * 6 * 8 * 1
    chains = TrainConfig(sampler="gibbs", task="brackets", block_size=6, batch_size=5, persistent_chains=4, shots=4)
    chains = chains.resolved()
    w = step_work(chains, build_sampling(chains))
    assert (w.count, w.unit) == (5 * 6 * 4 * 2, "chain sweeps")  # persistent chains continue by 2 sweeps
    fresh = dataclasses.replace(chains, persistent_chains=0, sampler_options={}).resolved()
    assert step_work(fresh, build_sampling(fresh)).count == 5 * 6 * 4 * 256  # fresh chains: gibbs' 256 sweeps
    dqa = TrainConfig(sampler="statevector", readout="shots", shots=32, task="brackets", block_size=6, batch_size=5)
    assert step_work(dqa, build_sampling(dqa)).count == 5 * 6 * 32
    assert step_work(TrainConfig(), None) is None
    with caplog.at_level(logging.INFO, logger="hybrid_attention.apps.train.cost"):
        assert cli.main(brackets(tmp_path / "run", steps=2)) == 0
    line = next(r.message for r in caplog.records if r.name == "hybrid_attention.apps.train.cost")
    # 3 rows x 4 queries x 2 chains x (1 burn-in move + 1 move to the second of 4 / 2 records per chain)
    assert f"{3 * 4 * 2 * 2:,} proposal circuits per step" in line and "projected" in line


# ---------------------------------------------------------------- persistent chains and gibbs' training defaults
GIBBS = [
    "train", "--task", "brackets", "--block-size", "4", "--steps", "1", "--eval-interval", "1", "--n-embd", "8",
    "--batch-size", "2", "--eval-size", "4", "--warmup", "1", "--no-progress", "--sampler", "gibbs",
]  # fmt: skip


def test_persistent_chains_alone_continue_by_a_few_sweeps_and_an_explicit_burn_in_wins(tmp_path):
    """``--persistent-chains C`` without ``burn_in`` continues the chains by 2 sweeps per call (the setting the
    long-context candidate and its bench used), not gibbs' 256-sweep burn-in from scratch; the run records it; a given
    ``--sampler-option burn_in=N`` wins, and without persistent chains the sampler keeps its own burn-in."""
    from hybrid_attention.apps.train import PERSISTENT_BURN_IN, build_sampling

    assert PERSISTENT_BURN_IN == 2
    base = {"sampler": "gibbs", "shots": 8, "estimator": "conditional"}
    assert build_sampling(TrainConfig(**base, persistent_chains=8)).sampler.burn_in == 2
    assert build_sampling(TrainConfig(**base, persistent_chains=8, sampler_options={"burn_in": 7})).sampler.burn_in == 7
    assert build_sampling(TrainConfig(**base, persistent_chains=0)).sampler.burn_in == 256
    q = build_sampling(TrainConfig(sampler="mh-local", shots=4, estimator="conditional", persistent_chains=4))
    assert q.sampler.burn_in == 2  # any Markov-chain sampler with a burn-in
    assert cli.main([*GIBBS, "--persistent-chains", "2", "--shots", "2", "--out", str(tmp_path / "g")]) == 0
    run = json.loads((tmp_path / "g" / "config.json").read_text())["run"]
    assert (run["persistent_chains"], run["sampler_options"]) == (2, {"burn_in": 2})


def test_plain_sampler_gibbs_trains_with_few_reads_persistent_chains_and_no_warning(tmp_path, caplog):
    """``train --sampler gibbs`` alone: 8 reads from 8 persistent chains continued by 2 sweeps, Rao-Blackwellised;
    no warning on that path (neither ``warnings`` nor a logged one); the run records the settings; flags win."""
    from hybrid_attention.apps.train import build_sampling

    s = build_sampling(TrainConfig(sampler="gibbs"))
    assert (s.num_reads, s.estimator, s.readout, s.chains.num_chains, s.sampler.burn_in) == (
        8, "conditional", "shots", 8, 2,
    )  # fmt: skip
    with warnings.catch_warnings(), caplog.at_level(logging.INFO):
        warnings.simplefilter("error")
        assert cli.main([*GIBBS, "--out", str(tmp_path / "g")]) == 0
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    run = json.loads((tmp_path / "g" / "config.json").read_text())["run"]
    assert (run["shots"], run["estimator"], run["persistent_chains"], run["sampler_options"]) == (
        8, "conditional", 8, {"burn_in": 2},
    )  # fmt: skip
    fresh = build_sampling(TrainConfig(sampler="gibbs", persistent_chains=0))
    assert (fresh.chains, fresh.num_reads, fresh.sampler.burn_in) == (None, 8, 256)  # the quantum_training row
    assert build_sampling(TrainConfig(sampler="gibbs", shots=4)).chains.num_chains == 4  # at most one per read
    mine = TrainConfig(sampler="gibbs", shots=32, persistent_chains=2, sampler_options={"burn_in": 5})
    with pytest.warns(UserWarning, match="plain spin averages"):
        m = build_sampling(dataclasses.replace(mine, estimator="reads"))
    assert (m.num_reads, m.chains.num_chains, m.sampler.burn_in) == (32, 2, 5)


def test_a_gibbs_run_written_with_the_old_defaults_resumes_with_its_recorded_settings(tmp_path, caplog):
    """A run recorded before gibbs had training defaults (256 reads, spin averages, persistent chains continued by
    the sampler's 256-sweep burn-in: ``sampler_options`` empty) resumes with exactly those, not today's defaults."""
    out = tmp_path / "old"
    old = ["--shots", "2", "--estimator", "reads", "--persistent-chains", "2", "--out", str(out)]
    with pytest.warns(UserWarning, match="plain spin averages"):
        assert cli.main([*GIBBS, *old]) == 0
    for path in (out / "config.json", out / "checkpoint.pt"):  # as the old version recorded it
        if path.suffix == ".json":
            blob = json.loads(path.read_text())
            blob["run"]["sampler_options"] = {}
            path.write_text(json.dumps(blob))
        else:
            ckpt = torch.load(path, weights_only=True)
            ckpt["config"]["sampler_options"] = {}
            torch.save(ckpt, path)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="hybrid_attention.apps.train.cost"), pytest.warns(UserWarning):
        assert cli.main(["train", "--resume", "--out", str(out), "--steps", "2", "--no-progress"]) == 0
    line = next(r.message for r in caplog.records if r.name == "hybrid_attention.apps.train.cost")
    assert "2 chain(s) x 256 sweep(s)" in line  # the sampler's burn-in, as the run had
    cfg = load_checkpoint(out / "checkpoint.pt")["config"]
    assert (cfg["shots"], cfg["estimator"], cfg["persistent_chains"]) == (2, "reads", 2)
    assert cfg["sampler_options"] == {"burn_in": 256}  # recorded explicitly from now on
    with pytest.warns(UserWarning):
        assert cli.main(["train", "--resume", "--out", str(out), "--steps", "3", "--no-progress"]) == 0
