"""The ablation's learning-rate axis and its marker rule.

A directory without an lr axis has the run names and report files of a single-rate ablation (checked byte for byte
against the fixture ``test_ablate_data/before_lr``, a directory whose marker records no ``lrs``); such a directory
continued with ``lrs`` that include its learning rate reuses its runs; the best learning rate per (mode, T) is checked
against a brute-force recomputation from ``runs.csv``; a marker that does not record a model flag reads that flag as
its TrainConfig default.
"""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import statistics
from pathlib import Path

import pytest
import torch

import hybrid_attention.apps.ablate.runs as ablate_runs
from hybrid_attention.apps import cli
from hybrid_attention.apps.ablate import ablate, report, summarise, summarise_best_lr
from hybrid_attention.apps.ablate.grid import lr_tag, run_dir
from hybrid_attention.apps.train import TrainConfig, upgrade_saved

FIXTURE = Path(__file__).parent / "test_ablate_data" / "before_lr"
REPORT_FILES = ("runs.csv", "summary.csv", "summary.md", "couplings_by_distance.csv")
TINY = dict(task="brackets", n_embd=8, batch_size=8, warmup=2, eval_size=64, threads=1, progress=False)
GRID = (["softmax", "hj"], [4, 6], [0, 1])  # the fixture's modes, block sizes, seeds (lr 0.01)
CLI_TINY = ["--task", "brackets", "--n-embd", "8", "--batch-size", "8", "--warmup", "2", "--eval-size", "64"]
CLI_TINY += ["--steps", "30", "--eval-interval", "10", "--no-progress"]


@pytest.fixture(autouse=True)
def keep_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def base(out: Path, **kw) -> TrainConfig:
    return TrainConfig(**{"max_steps": 30, "eval_interval": 10, "lr": 1e-2, "out": str(out), **TINY, **kw})


def old_directory(tmp_path: Path) -> Path:
    """A copy of the fixture's runs and marker (no report files)."""
    d = tmp_path / "abl"
    shutil.copytree(FIXTURE / "runs", d / "runs")
    shutil.copy(FIXTURE / "ablation.json", d / "ablation.json")
    return d


def no_training(monkeypatch):
    monkeypatch.setattr(ablate_runs, "train", lambda cfg: pytest.fail(f"run {cfg.out} was trained again"))


def run_bytes(d: Path) -> dict[str, bytes]:
    return {p.parent.name: p.read_bytes() for p in sorted((d / "runs").glob("*/metrics.json"))}


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ---------------------------------------------------------------------- run names
@pytest.mark.parametrize("lr", [3e-3, 1e-3, 1e-2, 1.5e-3, 0.1 + 0.2, 1e-10, 2.5, 1.0, 7e-4, 0.012345678901234])
def test_lr_tag_round_trips_and_is_filesystem_safe(lr):
    tag = lr_tag(lr)
    assert float(tag) == lr and re.fullmatch(r"[0-9.e+-]+", tag)
    assert run_dir(Path("o"), "hj", 8, 2, lr) == Path(f"o/runs/hj_T8_lr{tag}_s2")


def test_run_names_without_an_lr_are_the_old_ones():
    assert run_dir(Path("o"), "hj", 8, 2) == Path("o/runs/hj_T8_s2")
    assert run_dir(Path("o"), "softmax", 4, 0, 3e-3) == Path("o/runs/softmax_T4_lr3e-03_s0")
    assert len({lr_tag(x) for x in (1e-3, 1.0000000000000002e-3, 3e-3, 0.003)}) == 3  # distinct floats, distinct tags
    for bad in (0.0, -1e-3, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite number > 0"):
            lr_tag(bad)


# ---------------------------------------------------------------------- one lr: the single-rate names and files
def test_report_with_one_lr_is_byte_identical_to_the_report_before_the_lr_axis(tmp_path):
    d = old_directory(tmp_path)
    rows = report(d, "brackets")
    assert len(rows) == 8 and {r["lr"] for r in rows} == {0.01}
    for name in REPORT_FILES:
        assert (d / name).read_bytes() == (FIXTURE / name).read_bytes(), name
    assert (d / "metric_vs_T.png").is_file() and not (d / "metric_vs_lr.png").exists()
    assert not (d / "summary_by_lr.csv").exists()


@pytest.mark.parametrize("lrs", [None, [0.01], [0.01, 1e-2]])
def test_one_lr_continues_an_old_directory_unchanged(tmp_path, monkeypatch, lrs):
    d = old_directory(tmp_path)
    before = run_bytes(d)
    no_training(monkeypatch)
    ablate(base(d), d, *GRID, lrs=lrs, progress=False)
    for name in REPORT_FILES:
        assert (d / name).read_bytes() == (FIXTURE / name).read_bytes(), name
    assert run_bytes(d) == before
    marker = json.loads((d / "ablation.json").read_text())
    assert marker["settings"]["lr"] == 0.01 and marker["lrs"] == [0.01] and marker["untagged_lr"] == 0.01
    old = json.loads((FIXTURE / "ablation.json").read_text())
    # a setting recorded under an older name (steps) is rewritten under today's (max_steps), with its value
    assert marker["settings"] == recorded_now(old["settings"])
    assert all(marker[k] == old[k] for k in ("modes", "block_sizes", "seeds"))


def test_another_single_lr_is_refused_and_names_the_lr_axis(tmp_path, monkeypatch):
    d = old_directory(tmp_path)
    marker = (d / "ablation.json").read_bytes()
    no_training(monkeypatch)
    with pytest.raises(ValueError, match=r"lr: existing 0\.01, now 0\.003 .*--lrs 0\.003 0\.01"):
        ablate(base(d, lr=3e-3), d, *GRID, progress=False)
    with pytest.raises(ValueError, match=r"lr: existing 0\.01, now 0\.003"):
        ablate(base(d), d, *GRID, lrs=[3e-3], progress=False)  # --lrs with one value is --lr
    assert (d / "ablation.json").read_bytes() == marker
    assert sorted(p.name for p in (d / "runs").iterdir()) == sorted(p.name for p in (FIXTURE / "runs").iterdir())


# ---------------------------------------------------------------------- an lr axis
def best_lr_oracle(runs: list[dict[str, str]]) -> dict[tuple[str, int], tuple[float, float]]:
    """Brute force from runs.csv: {(mode, T): (best lr, its mean accuracy in %)}, by the documented rule."""
    cells: dict[tuple[str, int, float], list[dict[str, str]]] = {}
    for r in runs:
        cells.setdefault((r["mode"], int(r["block_size"]), float(r["lr"])), []).append(r)
    best = {}
    for mode, T in {(m, t) for m, t, _ in cells}:
        cands = [(lr, rs) for (m, t, lr), rs in cells.items() if (m, t) == (mode, T)]
        most = max(len(rs) for _, rs in cands)
        scored = [
            (
                -statistics.fmean(100 * float(r["val_accuracy"]) for r in rs),
                statistics.fmean(float(r["val_loss"]) for r in rs),
                lr,
            )
            for lr, rs in cands
            if len(rs) == most
        ]
        s = min(scored)
        best[(mode, T)] = (s[2], -s[0])
    return best


def test_an_old_directory_continued_with_an_lr_axis_reuses_its_runs(tmp_path, monkeypatch):
    d = old_directory(tmp_path)
    before = run_bytes(d)
    trained = []
    real = ablate_runs.train

    def recording(cfg):
        trained.append(Path(cfg.out).name)
        return real(cfg)

    monkeypatch.setattr(ablate_runs, "train", recording)
    rows = ablate(base(d), d, GRID[0], [4], GRID[2], lrs=[0.01, 3e-3], progress=False)
    # the 0.01 runs are the old ones, untouched; only the new lr trains, in tagged directories
    assert sorted(trained) == sorted(f"{m}_T4_lr3e-03_s{s}" for m in GRID[0] for s in GRID[2])
    assert {k: v for k, v in run_bytes(d).items() if k in before} == before
    marker = json.loads((d / "ablation.json").read_text())
    assert marker["lrs"] == [3e-3, 0.01] and marker["untagged_lr"] == 0.01 and "lr" not in marker["settings"]
    assert marker["block_sizes"] == [4, 6] and marker["settings"]["max_steps"] == 30
    assert len(rows) == 12
    # the report: runs.csv with an lr column, the per-lr table, the best lr per (mode, T)
    runs = read_csv(d / "runs.csv")
    assert list(runs[0])[:4] == ["mode", "block_size", "lr", "seed"] and len(runs) == 12
    per_lr = read_csv(d / "summary_by_lr.csv")
    assert len(per_lr) == 6  # T=4: 2 modes x 2 lrs; T=6: 2 modes x the old lr
    for s in per_lr:
        vals = [
            100 * float(r["val_accuracy"])
            for r in runs
            if (r["mode"], r["block_size"], float(r["lr"])) == (s["mode"], s["block_size"], float(s["lr"]))
        ]
        assert int(s["n"]) == len(vals) == 2 and math.isclose(float(s["mean"]), statistics.fmean(vals), rel_tol=1e-12)
    summ = read_csv(d / "summary.csv")
    assert list(summ[0])[:5] == ["mode", "block_size", "lr", "lrs_tried", "n"] and len(summ) == 4
    oracle = best_lr_oracle(runs)
    for s in summ:
        lr, mean = oracle[(s["mode"], int(s["block_size"]))]
        assert float(s["lr"]) == lr and math.isclose(float(s["mean"]), mean, rel_tol=1e-12)
        assert int(s["lrs_tried"]) == (2 if s["block_size"] == "4" else 1)
    md = (d / "summary.md").read_text()
    assert "Best learning rate per (mode, T)" in md and "Per learning rate" in md and "| T | mode | lr |" in md
    assert "at the best learning rate per T" in md
    assert (d / "metric_vs_lr.png").stat().st_size > 1000
    # the coupling profile is that of the hj runs at hj's best lr per T
    best_hj = {T: oracle[("hj", T)][0] for T in (4, 6)}
    prof = read_csv(d / "couplings_by_distance.csv")
    assert {r["seeds"] for r in prof} == {"2"}
    assert prof == _profile_oracle(d, best_hj)
    # the same command again: nothing to do; a single lr of the axis (no --lrs) is accepted and trains nothing
    no_training(monkeypatch)
    ablate(base(d), d, GRID[0], [4], GRID[2], lrs=[3e-3, 0.01], progress=False)
    ablate(base(d, lr=3e-3), d, GRID[0], [4], GRID[2], progress=False)
    assert (d / "summary.csv").read_text().count("\n") == 5


def _profile_oracle(d: Path, lrs: dict[int, float]) -> list[dict[str, str]]:
    """couplings_by_distance.csv recomputed from the hj runs at the given lr per T."""
    from hybrid_attention.apps.ablate import coupling_profile

    return [
        {
            "block_size": str(T),
            "distance": str(p[0]),
            "mean_J": str(p[1]),
            "std_over_seeds": str(p[2]),
            "seeds": str(p[3]),
        }
        for T, pts in coupling_profile(d, lrs=lrs).items()
        for p in pts
    ] or pytest.fail("no hj couplings")


def test_a_fresh_grid_with_several_lrs_tags_every_run(tmp_path, capsys):
    out = tmp_path / "fresh"
    args = ["ablate", *CLI_TINY, "--modes", "softmax", "hj", "--block-sizes", "4", "--seeds", "0"]
    assert cli.main([*args, "--lrs", "0.01", "0.003", "--out", str(out)]) == 0
    assert sorted(p.name for p in (out / "runs").iterdir()) == [
        "hj_T4_lr1e-02_s0",
        "hj_T4_lr3e-03_s0",
        "softmax_T4_lr1e-02_s0",
        "softmax_T4_lr3e-03_s0",
    ]
    marker = json.loads((out / "ablation.json").read_text())
    assert marker["lrs"] == [0.003, 0.01] and marker["untagged_lr"] is None and "lr" not in marker["settings"]
    assert "Best learning rate per (mode, T)" in capsys.readouterr().out
    # a single lr into a directory with an lr axis joins the axis (tagged, never an untagged name)
    assert cli.main([*args, "--lr", "0.02", "--out", str(out)]) == 0
    assert (out / "runs" / "hj_T4_lr2e-02_s0" / "metrics.json").is_file()
    assert json.loads((out / "ablation.json").read_text())["lrs"] == [0.003, 0.01, 0.02]


# ---------------------------------------------------------------------- the best-lr rule on hand-made rows
def rows_of(cells: dict[tuple[str, float], list[float]], T: int = 8) -> list[dict]:
    """Runs with val_accuracy (fractions) per (mode, lr), seeds 0.. in order; val_loss = 1 - accuracy."""
    return [
        {
            "mode": m,
            "block_size": T,
            "lr": lr,
            "seed": s,
            "val_loss": 1 - a,
            "val_accuracy": a,
            "val_string_accuracy": a,
        }
        for (m, lr), accs in cells.items()
        for s, a in enumerate(accs)
    ]


def test_best_lr_needs_the_most_seeds_and_compares_with_softmax_at_its_own_best():
    rows = rows_of(
        {
            ("softmax", 1e-3): [0.50, 0.60, 0.70],
            ("softmax", 1e-2): [0.70, 0.80, 0.90],  # softmax's best: 80 %
            ("hj", 1e-3): [0.80, 0.90, 0.95],  # hj's best among complete lrs
            ("hj", 1e-2): [0.99],  # higher mean, but the other seeds diverged: not eligible
        }
    )
    best = {s["mode"]: s for s in summarise_best_lr(rows, "brackets")}
    assert (best["softmax"]["lr"], best["hj"]["lr"]) == (1e-2, 1e-3)
    assert best["hj"]["lrs_tried"] == 2 and best["hj"]["n"] == 3
    assert math.isclose(best["hj"]["mean"], 100 * (0.80 + 0.90 + 0.95) / 3)
    paired = [100 * (a - b) for a, b in zip([0.80, 0.90, 0.95], [0.70, 0.80, 0.90])]
    assert math.isclose(best["hj"]["paired_diff"], statistics.fmean(paired))
    assert math.isclose(best["hj"]["paired_std"], statistics.stdev(paired))
    assert best["hj"]["better_than_softmax"] == "3/3"
    per = {(s["mode"], s["lr"]): s for s in summarise(rows, "brackets", by_lr=True)}
    assert math.isclose(per[("hj", 1e-3)]["diff"], 100 * ((0.80 + 0.90 + 0.95) - (0.50 + 0.60 + 0.70)) / 3)
    assert per[("hj", 1e-2)]["n"] == 1 and per[("hj", 1e-2)]["better_than_softmax"] == "1/1"
    with pytest.raises(ValueError, match="several learning rates"):
        summarise(rows, "brackets")


def test_best_lr_ties_go_to_the_lower_loss_then_the_smaller_lr_and_perplexity_is_minimised():
    # the same mean accuracy (75 %, exact in binary) at all three lrs
    rows = rows_of({("hj", 1e-2): [0.5, 1.0], ("hj", 1e-3): [0.75, 0.75], ("hj", 3e-3): [0.75, 0.75]})
    for r in rows:
        r["val_loss"] = 0.125 if r["lr"] == 1e-2 else 0.25
    assert summarise_best_lr(rows, "brackets")[0]["lr"] == 1e-2  # the lowest validation loss
    for r in rows:
        r["val_loss"] = 0.25
    assert summarise_best_lr(rows, "brackets")[0]["lr"] == 1e-3  # equal loss too: the smaller lr
    shakes = [{**r, "val_perplexity": 8 * r["val_accuracy"] + r["lr"]} for r in rows]
    best = summarise_best_lr(shakes, "shakespeare")[0]
    assert best["lr"] == 1e-3 and best["mean"] == pytest.approx(6.001)  # the lowest perplexity


# ---------------------------------------------------------------------- markers written before a flag existed
LEGACY_SETTINGS = (  # MODEL_FLAGS of the first ablations (results/ablation/*/ablation.json)
    "task steps ffn n_layer n_head n_embd dropout beta learn_beta lr weight_decay batch_size eval_interval eval_size warmup"
).split()


def recorded_now(settings: dict) -> dict:
    """A marker's settings as the ablation records them today: those saved under an older name under today's, and the
    flags added after the marker was written (absent from it) at their TrainConfig defaults."""
    from hybrid_attention.apps.ablate.grid import _SETTINGS

    saved = upgrade_saved(settings)
    return {**{k: getattr(TrainConfig(), k) for k in _SETTINGS if k not in saved}, **saved}


def legacy_marker(d: Path) -> bytes:
    new = json.loads((FIXTURE / "ablation.json").read_text())
    old = {
        "settings": {k: new["settings"][k] for k in LEGACY_SETTINGS},
        **{k: new[k] for k in ("modes", "block_sizes", "seeds")},
    }
    (d / "ablation.json").write_text(json.dumps(old, indent=1))
    return (d / "ablation.json").read_bytes()


@pytest.mark.parametrize("flag, value", [("patience", 3), ("pointer", "attention"), ("source_length", 8)])
def test_an_old_marker_refuses_a_new_flag_away_from_its_default(tmp_path, monkeypatch, flag, value):
    d = old_directory(tmp_path)
    before = legacy_marker(d)
    no_training(monkeypatch)
    with pytest.raises(ValueError, match=rf"{flag}: existing .* \(not recorded: the default\), now {value!r}"):
        ablate(base(d, **{flag: value}), d, *GRID, progress=False)
    assert (d / "ablation.json").read_bytes() == before


def test_an_old_marker_continues_with_the_new_flags_at_their_defaults(tmp_path, monkeypatch):
    d = old_directory(tmp_path)
    legacy_marker(d)
    no_training(monkeypatch)
    ablate(base(d), d, *GRID, progress=False)  # accepted, not "holds an ablation with other settings"
    for name in REPORT_FILES:
        assert (d / name).read_bytes() == (FIXTURE / name).read_bytes(), name
    marker = json.loads((d / "ablation.json").read_text())
    fixture = json.loads((FIXTURE / "ablation.json").read_text())
    assert marker["settings"] == recorded_now(fixture["settings"])  # the missing keys now recorded, at their defaults
    assert marker["lrs"] == [0.01] and marker["untagged_lr"] == 0.01


# ---------------------------------------------------------------------- the command line
def test_cli_refuses_lr_and_lrs_that_disagree_before_any_run(tmp_path, capsys):
    out = tmp_path / "bad"
    args = ["ablate", *CLI_TINY, "--modes", "hj", "--block-sizes", "4", "--seeds", "0", "--out", str(out)]
    assert cli.main([*args, "--lr", "0.01", "--lrs", "0.003", "0.01"]) == 2
    err = capsys.readouterr().err
    assert "--lr 0.01 and --lrs 0.003 0.01 disagree" in err and "--lr X alone is the same as --lrs X" in err
    with pytest.raises(SystemExit) as info:  # refused by the parser (hybrid_attention/apps/cli_types.py)
        cli.main([*args, "--lrs", "0.01", "-1"])
    assert info.value.code == 2
    assert "argument --lrs: expected a finite number > 0, got '-1'" in capsys.readouterr().err
    assert not out.exists()


def test_cli_lr_with_the_same_single_lrs_continues_an_old_directory(tmp_path, monkeypatch, capsys):
    d = old_directory(tmp_path)
    no_training(monkeypatch)
    args = ["ablate", *CLI_TINY, "--modes", "softmax", "hj", "--block-sizes", "4", "6", "--seeds", "0", "1"]
    assert cli.main([*args, "--lr", "0.01", "--lrs", "0.01", "--out", str(d)]) == 0
    assert (d / "summary.md").read_bytes() == (FIXTURE / "summary.md").read_bytes()
    assert cli.main([*args, "--out", str(d)]) == 2  # the default lr 0.003 is another single lr
    assert "lr: existing 0.01, now 0.003" in capsys.readouterr().err


def test_ablate_help_shows_the_lr_default(capsys):
    with pytest.raises(SystemExit):
        cli.main(["ablate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--lr LR peak learning rate (warmup, then cosine decay to 10 %) (default: 0.003)" in out
    assert "--lrs LR [LR ...]" in out
