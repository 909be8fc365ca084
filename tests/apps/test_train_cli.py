"""The train and ablate commands: smoke runs on both tasks, run-directory safety, resume, bad arguments, make_sampler."""

from __future__ import annotations

import json

import pytest
import torch

from hybrid_attention import exact
from hybrid_attention.apps import cli
from hybrid_attention.apps import train as tr
from hybrid_attention.apps.train import loop
from hybrid_attention.backends import registry

TINY = ["--n-embd", "8", "--batch-size", "8", "--no-progress", "--warmup", "2"]


@pytest.fixture(autouse=True)
def one_thread():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)  # train() sets the thread count from --threads


@pytest.fixture
def corpus(tmp_path):
    f = tmp_path / "corpus.txt"
    f.write_text("First Citizen:\nBefore we proceed any further, hear me speak.\n" * 40)
    return f


def read(d, name):
    return json.loads((d / name).read_text())


def test_brackets_smoke(tmp_path):
    out = tmp_path / "b"
    rc = cli.main(
        [
            "train",
            "--task",
            "brackets",
            "--attention",
            "hj",
            "--block-size",
            "6",
            "--steps",
            "6",
            "--eval-interval",
            "3",
            "--out",
            str(out),
            *TINY,
        ]
    )
    assert rc == 0
    m = read(out, "metrics.json")
    assert m["finished"] and m["step"] == 6 and len(m["train_loss"]) == 6 and [e["step"] for e in m["evals"]] == [3, 6]
    assert (
        0.0 <= m["val_accuracy"] <= 1.0 and 0.0 <= m["val_string_accuracy"] <= m["val_accuracy"] and m["val_loss"] > 0
    )
    cfg = read(out, "config.json")
    assert cfg["run"]["attention"] == "hj" and cfg["model"]["head"] == "position" and cfg["model"]["block_size"] == 6
    J = torch.tensor(read(out, "couplings.json")["J"][0])
    assert J.shape == (1, 6, 6) and torch.equal(J, J.transpose(1, 2))
    assert (out / "checkpoint.pt").is_file() and not list(out.glob(".*"))  # no temporary files left


@pytest.mark.parametrize("mode", ["softmax", "h"])
def test_shakespeare_smoke(tmp_path, corpus, mode, capsys):
    out = tmp_path / "s"
    rc = cli.main(
        [
            "train",
            "--task",
            "shakespeare",
            "--attention",
            mode,
            "--block-size",
            "8",
            "--steps",
            "4",
            "--eval-interval",
            "2",
            "--eval-size",
            "16",
            "--data",
            str(corpus),
            "--out",
            str(out),
            *TINY,
        ]
    )
    assert rc == 0
    m = read(out, "metrics.json")
    assert m["val_perplexity"] == pytest.approx(torch.tensor(m["val_loss"]).exp().item())
    assert read(out, "config.json")["model"]["vocab_size"] == len(set(corpus.read_text()))
    assert "val_perplexity" in capsys.readouterr().out


def test_existing_directory_is_never_overwritten(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    rc = cli.main(["train", "--task", "brackets", "--block-size", "4", "--steps", "2", "--out", str(out), *TINY])
    assert rc == 2
    assert "--resume" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_resume_after_interruption_matches_uninterrupted_run(tmp_path, monkeypatch):
    args = [
        "train",
        "--task",
        "brackets",
        "--attention",
        "hj",
        "--block-size",
        "6",
        "--steps",
        "8",
        "--eval-interval",
        "3",
        *TINY,
    ]
    assert cli.main([*args, "--out", str(tmp_path / "full")]) == 0
    full = read(tmp_path / "full", "metrics.json")

    real_lr = loop._lr_at

    def killed(step, cfg):  # the process dies during step 5 (after the checkpoint at step 3)
        if step == 5:
            raise KeyboardInterrupt
        return real_lr(step, cfg)

    monkeypatch.setattr(loop, "_lr_at", killed)
    assert cli.main([*args, "--out", str(tmp_path / "cut")]) == 130
    part = read(tmp_path / "cut", "metrics.json")
    assert part["step"] == 3 and not part["finished"]  # lost at most one evaluation interval
    monkeypatch.setattr(loop, "_lr_at", real_lr)
    assert cli.main([*args, "--out", str(tmp_path / "cut")]) == 2  # no --resume: refused
    assert cli.main([*args, "--out", str(tmp_path / "cut"), "--resume"]) == 0
    done = read(tmp_path / "cut", "metrics.json")
    assert done["finished"] and done["train_loss"] == full["train_loss"]
    assert done["val_loss"] == pytest.approx(full["val_loss"], rel=1e-6)
    assert [e["step"] for e in done["evals"]] == [3, 6, 8]
    # resuming with different settings is refused
    assert cli.main([*args, "--n-embd", "16", "--out", str(tmp_path / "cut"), "--resume"]) == 2


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--attention", "hj", "--block-size", str(exact.MAX_SPINS + 2)], "exact-enumeration limit"),
        (["--task", "brackets", "--block-size", "7"], "even block size"),
        (["--steps", "0"], "argument --max-steps/--steps: expected an integer >= 1, got '0'"),
        (["--lr", "-1"], "argument --lr: expected a finite number > 0, got '-1'"),
        (["--sampler", "nosuch"], "unknown sampler"),
        (["--attention", "softmax", "--sampler", "exact", "--n-embd", "10", "--n-head", "3"], "divisible"),
        (["--task", "shakespeare", "--data", "/nonexistent/tiny.txt"], "--data"),
    ],
)
def test_bad_arguments_fail_before_training(tmp_path, capsys, extra, message):
    out = tmp_path / "never"
    base = ["train", "--task", "brackets", "--block-size", "4", "--steps", "3", "--out", str(out)]
    try:
        rc = cli.main([*base, *extra])
    except SystemExit as exc:  # refused by the parser (hybrid_attention/apps/cli_types.py)
        rc = exc.code
    assert rc == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_unknown_mode_is_an_argparse_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["train", "--attention", "hjj", "--out", str(tmp_path / "x")])
    assert info.value.code == 2 and "invalid choice: 'hjj'" in capsys.readouterr().err


def test_python_train_callable(tmp_path):
    m = tr.train(
        tr.TrainConfig(
            task="brackets",
            attention="j",
            block_size=4,
            max_steps=2,
            eval_interval=2,
            n_embd=8,
            batch_size=4,
            out=str(tmp_path / "py"),
            progress=False,
        )
    )
    assert m["finished"] and "val_accuracy" in m


def test_make_sampler_passes_the_dqa_schedule(monkeypatch):
    from hybrid_attention.circuits import DQASchedule

    calls = []
    monkeypatch.setattr(registry, "get_sampler", lambda name, **kw: calls.append((name, kw)) or name)
    assert registry.make_sampler("aer", tau=0.5, trotter_steps=7, optimization_level=1) == "aer"
    name, kw = calls[-1]
    assert kw["schedule"] == DQASchedule(tau=0.5, steps=7) and kw["optimization_level"] == 1
    registry.make_sampler("gibbs")
    assert calls[-1] == ("gibbs", {})
    registry.make_sampler("qemcmc", trotter_steps=3)  # its own option of that name: the proposal's Trotter steps
    assert calls[-1] == ("qemcmc", {"trotter_steps": 3})
    with pytest.raises(TypeError, match="takes no tau"):
        registry.make_sampler("gibbs", tau=0.5)  # nothing would use it


def test_make_sampler_exact_from_registry():
    s = registry.make_sampler("exact")
    assert s.properties["exact"]


def test_ablate_smoke_and_resume(tmp_path, monkeypatch, capsys):
    out = tmp_path / "abl"
    args = [
        "ablate",
        "--task",
        "brackets",
        "--modes",
        "softmax",
        "hj",
        "--block-sizes",
        "4",
        "6",
        "--seeds",
        "0",
        "1",
        "--steps",
        "3",
        "--eval-interval",
        "3",
        "--out",
        str(out),
        *TINY,
    ]
    assert cli.main(args) == 0
    md = (out / "summary.md").read_text()
    assert "| 6 | hj |" in md and "diff to softmax" in md and "key distance" in md
    assert len((out / "runs.csv").read_text().strip().splitlines()) == 1 + 8
    rows = (out / "summary.csv").read_text().splitlines()
    assert rows[0].startswith("mode,block_size,n,mean,std") and len(rows) == 1 + 4
    assert (out / "metric_vs_T.png").stat().st_size > 1000 and (out / "couplings_by_distance.png").is_file()
    import hybrid_attention.apps.ablate.runs as ab

    monkeypatch.setattr(ab, "train", lambda cfg: pytest.fail(f"finished run {cfg.out} was run again"))
    assert cli.main(args) == 0  # everything finished: nothing re-run
    assert cli.main([*args, "--steps", "5"]) == 2  # other settings into the same DIR
    assert "other settings" in capsys.readouterr().err
    assert cli.main(["ablate", "--task", "brackets", "--out", str(out), "--report-only"]) == 0


def test_training_through_a_dqa_sampler(tmp_path):
    pytest.importorskip("hybrid_attention.bridge")
    out = tmp_path / "dqa"
    rc = cli.main(
        [
            "train",
            "--task",
            "brackets",
            "--attention",
            "hj",
            "--block-size",
            "4",
            "--steps",
            "2",
            "--eval-interval",
            "2",
            "--sampler",
            "statevector",
            "--shots",
            "32",
            "--tau",
            "1.0",
            "--trotter-steps",
            "4",
            "--eval-exact",
            "--out",
            str(out),
            *TINY,
        ]
    )
    assert rc == 0
    m = read(out, "metrics.json")
    assert m["finished"] and all(torch.isfinite(torch.tensor(m["train_loss"])))
    assert read(out, "config.json")["run"]["sampler"] == "statevector"


# ---------------------------------------------------------------------- --sampler-option
GIBBS = [
    "train",
    "--task",
    "brackets",
    "--attention",
    "hj",
    "--block-size",
    "4",
    "--steps",
    "2",
    "--eval-interval",
    "2",
    "--sampler",
    "gibbs",
    "--shots",
    "8",
    *TINY,
]


@pytest.mark.parametrize(
    "item, expected",
    [
        ("burn_in=32", ("burn_in", 32)),
        ("ramp=0.25", ("ramp", 0.25)),
        ("x=1e-3", ("x", 1e-3)),
        ("flag=True", ("flag", True)),
        ("flag=false", ("flag", False)),
        ("num_chains=none", ("num_chains", None)),
        ("method = tap", ("method", "tap")),
    ],
)
def test_parse_sampler_option(item, expected):
    assert tr.parse_sampler_option(item) == expected


@pytest.mark.parametrize("item", ["burn_in", "=3", "burn_in=", "2x=1", "burn in=3"])
def test_parse_sampler_option_rejects_malformed_items(item):
    with pytest.raises(ValueError, match="KEY=VALUE") as info:
        tr.parse_sampler_option(item)
    assert repr(item) in str(info.value)


def test_sampler_options_reach_the_sampler_and_the_config(tmp_path, monkeypatch):
    from hybrid_attention.backends.mcmc.gibbs import GibbsSampler

    seen = []
    real = GibbsSampler._sample

    def spy(self, problem, **kw):
        ss = real(self, problem, **kw)
        seen.append((self.burn_in, self.thinning, self.num_chains, ss.info["burn_in"], ss.info["num_chains"]))
        return ss

    monkeypatch.setattr(GibbsSampler, "_sample", spy)
    out = tmp_path / "g"
    opts = ["--sampler-option", "burn_in=3", "--sampler-option", "num_chains=2", "--sampler-option", "thinning=5"]
    assert cli.main([*GIBBS, *opts, "--out", str(out)]) == 0
    assert seen and set(seen) == {(3, 5, 2, 3, 2)}
    assert read(out, "config.json")["run"]["sampler_options"] == {"burn_in": 3, "num_chains": 2, "thinning": 5}
    # a resume with the same options continues; other ones are refused with both values named (next test)
    assert cli.main([*GIBBS, *opts, "--steps", "3", "--out", str(out), "--resume"]) == 0
    assert read(out, "metrics.json")["step"] == 3


def test_resume_with_other_sampler_options_is_refused(tmp_path, capsys):
    out = tmp_path / "g"
    assert cli.main([*GIBBS, "--sampler-option", "burn_in=3", "--out", str(out)]) == 0
    capsys.readouterr()
    assert cli.main([*GIBBS, "--sampler-option", "burn_in=4", "--steps", "3", "--out", str(out), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "sampler_options: checkpoint {'burn_in': 3}, now {'burn_in': 4}" in err
    assert cli.main([*GIBBS, "--steps", "3", "--out", str(out), "--resume"]) == 2  # dropping them is a change too
    assert read(out, "metrics.json")["step"] == 2


def test_resume_of_a_checkpoint_written_before_sampler_options(tmp_path):
    out = tmp_path / "old"
    assert cli.main([*GIBBS, "--out", str(out)]) == 0
    blob = torch.load(out / "checkpoint.pt", weights_only=False)
    del blob["config"]["sampler_options"]  # a checkpoint whose config records no sampler_options
    torch.save(blob, out / "checkpoint.pt")
    saved = read(out, "config.json")
    del saved["run"]["sampler_options"]  # nor its config.json (both written by the same old version)
    (out / "config.json").write_text(json.dumps(saved))
    assert cli.main([*GIBBS, "--steps", "3", "--out", str(out), "--resume"]) == 0
    # no options recorded: the sampler's own burn-in, not today's default for persistent chains
    assert torch.load(out / "checkpoint.pt", weights_only=False)["config"]["sampler_options"] == {"burn_in": 256}


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["--sampler-option", "nosuch=1"],
            "sampler 'gibbs' does not accept option(s) ['nosuch']; accepted: ['burn_in'",
        ),
        (["--sampler-option", "burn_in=-1"], "burn_in must be an integer >= 0, got -1"),
        (["--sampler-option", "burn_in=2", "--sampler-option", "burn_in=3"], "burn_in given twice"),
        (["--sampler", "exact", "--sampler-option", "burn_in=2"], "needs a sampler other than 'exact'"),
    ],
)
def test_bad_sampler_options_fail_before_training(tmp_path, capsys, extra, message):
    out = tmp_path / "never"
    assert cli.main([*GIBBS, *extra, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_malformed_sampler_option_is_an_argparse_error(tmp_path, capsys):
    out = tmp_path / "never"
    with pytest.raises(SystemExit) as info:
        cli.main([*GIBBS, "--sampler-option", "burn_in:3", "--out", str(out)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "KEY=VALUE" in err and "'burn_in:3'" in err
    assert not out.exists()


def test_runs_task_trains_with_the_attention_pointer(tmp_path):
    """``--task runs``: a pointer task (accuracy metrics), the attention weights may point; bracket-only settings
    are refused."""
    from hybrid_attention.apps.train import TrainConfig, train

    cfg = TrainConfig(task="runs", pointer="attention", attention="hj", block_size=8, max_steps=2, eval_interval=2,
                      n_embd=8, batch_size=4, progress=False, out=str(tmp_path / "r"))  # fmt: skip
    m = train(cfg)
    assert 0 <= m["val_accuracy"] <= 1 and "val_perplexity" not in m
    assert cfg.model_config().vocab_size == 16 and cfg.model_config().head == "attention"
    with pytest.raises(ValueError, match="apply to --task brackets"):
        TrainConfig(task="runs", bracket_types=2, out="x").validate()
    with pytest.raises(ValueError, match="too short"):
        TrainConfig(task="runs", block_size=4, out="x").validate()


def test_a_sampler_run_beyond_exact_enumeration_finishes_with_its_j0_evaluation(tmp_path):
    """hj at T = 26 (above the exact limit) with mean field: training, evaluation and the final J = 0 evaluation
    all run on the sampler, never on exact enumeration."""
    from hybrid_attention.apps.train import TrainConfig, train

    cfg = TrainConfig(task="runs", pointer="attention", attention="hj", block_size=26, max_steps=2, eval_interval=2,
                      n_embd=8, batch_size=2, sampler="meanfield", progress=False, out=str(tmp_path / "r"))  # fmt: skip
    m = train(cfg)
    assert m["finished"] and "j0_val_accuracy" in m


def test_runs_decoys_flag_is_checked_and_recorded(tmp_path):
    """``--decoys N`` holds the runs task's decoy count fixed; the default (-1) is recorded as the number it means;
    other tasks refuse it."""
    from hybrid_attention.apps.train import TrainConfig, load_task, train
    from hybrid_attention.apps.train.command import add_arguments
    from hybrid_attention.apps.train.flags import config_from_args

    parser = __import__("argparse").ArgumentParser()
    add_arguments(parser)
    cfg = config_from_args(parser.parse_args(["--task", "runs", "--block-size", "64", "--decoys", "2", "--out", "x"]))
    assert cfg.decoys == 2 and cfg.runs_decoys() == 2 and load_task(cfg)[0].decoys == 2
    assert TrainConfig(task="runs", block_size=64).runs_decoys() == 7
    assert TrainConfig(task="runs", block_size=64).resolved().decoys == 7
    assert TrainConfig(task="brackets").resolved().decoys == -1
    with pytest.raises(ValueError, match="--decoys applies to --task runs"):
        TrainConfig(task="brackets", decoys=2, out="x").validate()
    with pytest.raises(ValueError, match="too short"):
        TrainConfig(task="runs", block_size=16, decoys=5, out="x").validate()
    with pytest.raises(ValueError, match="decoys must be an integer"):
        TrainConfig(task="runs", decoys=-2, out="x").validate()
    out = tmp_path / "r"
    train(TrainConfig(task="runs", attention="softmax", block_size=16, max_steps=1, eval_interval=1, n_embd=8,
                      batch_size=4, progress=False, out=str(out)))  # fmt: skip
    assert read(out, "config.json")["run"]["decoys"] == 1  # (16 - 4) // 8, as the run used it


def test_mqar_task_trains_and_records_its_settings(tmp_path, capsys):
    """``--task mqar``: a language-model head scored by accuracy at the query positions; pairs and vocabulary
    default to the block size's and are recorded as numbers; they are refused for other tasks or when they cannot fit."""
    from hybrid_attention.apps.train import TrainConfig

    out = tmp_path / "m"
    rc = cli.main(["train", "--task", "mqar", "--attention", "softmax", "--block-size", "16", "--steps", "2",
                   "--eval-interval", "2", "--out", str(out), *TINY])  # fmt: skip
    assert rc == 0
    m, conf = read(out, "metrics.json"), read(out, "config.json")
    assert 0 <= m["val_accuracy"] <= 1 and "val_string_accuracy" in m and "val_perplexity" not in m
    assert (conf["run"]["kv_pairs"], conf["run"]["mqar_vocab"]) == (2, 64) and conf["model"]["vocab_size"] == 64
    assert conf["model"]["head"] == "lm"
    cfg = TrainConfig(task="mqar", attention="softmax", block_size=32, kv_pairs=5, mqar_vocab=100)
    assert cfg.mqar_settings() == (5, 100) and cfg.model_config().vocab_size == 100
    with pytest.raises(ValueError, match="--kv-pairs applies to --task mqar"):
        TrainConfig(task="brackets", kv_pairs=3, out="x").validate()
    with pytest.raises(ValueError, match="too short for 9 key-value pairs"):
        TrainConfig(task="mqar", attention="softmax", block_size=32, kv_pairs=9, out="x").validate()
    with pytest.raises(ValueError, match="vocab_size 8 has 3 key tokens"):
        TrainConfig(task="mqar", attention="softmax", block_size=32, mqar_vocab=8, out="x").validate()
    with pytest.raises(ValueError, match="--pointer to brackets and runs"):
        TrainConfig(task="mqar", pointer="attention", out="x").validate()


def test_evaluation_shows_a_progress_bar_unless_no_progress(tmp_path, capsys):
    """A sampled evaluation can take minutes: it shows a bar over the validation windows (stderr), which
    ``--no-progress`` turns off with the training bar."""
    from hybrid_attention.apps.train.data import evaluate

    base = ["train", "--task", "brackets", "--block-size", "4", "--steps", "1", "--n-embd", "8", "--batch-size", "2"]
    assert cli.main([*base, "--out", str(tmp_path / "bar")]) == 0
    assert "evaluating" in capsys.readouterr().err
    assert cli.main([*base, "--no-progress", "--out", str(tmp_path / "quiet")]) == 0
    assert "evaluating" not in capsys.readouterr().err
    from hybrid_attention.model import Transformer, TransformerConfig

    model = Transformer(TransformerConfig(vocab_size=65, block_size=4, n_embd=8))
    x = torch.randint(0, 65, (10, 4))
    quiet = evaluate(model, x, x, "shakespeare", chunk=4)
    assert evaluate(model, x, x, "shakespeare", chunk=4, progress=True) == quiet  # the bar changes no number
    assert "evaluating" in capsys.readouterr().err
