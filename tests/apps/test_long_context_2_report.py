"""Round 2's report (experiments/long_context_2/report.py) on planted run directories: the chosen rate's cells
(sweep seeds 0-2 with main seeds 3-9), the strongest baseline, each verdict of the protocol's rules, the thesis."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from experiments.long_context_2 import plan
from experiments.long_context_2 import report as r2
from hybrid_attention.apps.claims.runner import plan_runs, run_state

LRS = (1e-3, 3e-3, 1e-2)


def fake_run(d, arm, T, seed, lr, metric, val_loss, *, task):
    """A finished run directory whose report metric is ``metric`` (perplexity, or accuracy in %)."""
    d.mkdir(parents=True)
    key = "val_perplexity" if task == "shakespeare" else "val_accuracy"
    metric = metric if task == "shakespeare" else metric / 100  # train records accuracy as a fraction; ``metric`` in %
    m = {key: metric, "val_loss": val_loss, "finished": True, "step": 2000, "max_steps": 2000, "elapsed_s": 2.0}
    m["evals"] = [{"step": 100 * (i + 1), "val_loss": val_loss, key: metric} for i in range(8)]
    (d / "metrics.json").write_text(json.dumps(m))
    cfg = {"attention": "hj", "block_size": T, "seed": seed, "lr": lr, "task": task, "ffn": True, "max_steps": 2000}
    (d / "config.json").write_text(json.dumps({"run": cfg}))


def plant(root, task, T, means, *, sd=0.01, best_lr=3e-3, seeds=range(10)):
    """Every primary arm of (task, T): sweep seeds 0-2 at three rates (``best_lr`` has the lowest loss) and main
    seeds 3-9 at ``best_lr`` (those of ``seeds``); metric = ``means[arm]`` plus seed noise shared across arms
    (paired) and a little own."""
    rng = np.random.default_rng(T)
    shared = {s: rng.normal(0, sd) for s in range(10)}
    study = plan.STUDIES[f"{task}_T{T}"]
    for arm in study.modes:
        for seed in seeds:
            metric = means[arm] + shared[seed] + rng.normal(0, sd / 10)
            for lr in LRS if seed < 3 else (best_lr,):
                kind = "sweep" if seed < 3 else "runs"
                loss = 1.0 + (0 if lr == best_lr else 0.1)
                d = root / study.name / kind / f"{arm}_T{T}_lr{lr:g}_s{seed}"
                fake_run(d, arm, T, seed, lr, metric if lr == best_lr else metric * 1.5, loss, task=task)


def test_planted_cells_verdicts_and_thesis(tmp_path):
    base = {"softmax": 6.0, "softmax-2L": 5.8, "bias": 5.9}
    # T = 64: band4 2 % better than softmax-2L (the strongest), band8 equal, full 3 % worse; T = 128: band4 6 % better
    plant(tmp_path, "shakespeare", 64, {**base, "hj-band4": 5.8 * 0.98, "hj-band8": 5.8, "hj-full": 5.8 * 1.03})
    plant(tmp_path, "shakespeare", 128, {**base, "hj-band4": 5.8 * 0.94, "hj-band8": 5.8, "hj-full": 5.8 * 1.03})
    studies = {k: v for k, v in plan.STUDIES.items() if k.startswith("shakespeare_T") and "secondary" not in k}
    cells = [r2.cell_table(tmp_path, studies, "shakespeare", T, 10) for T in (64, 128)]
    r2.decide(cells)
    c64, c128 = cells
    assert c64["base"] == c128["base"] == "softmax-2L"
    assert {arm: v["lr"] for arm, v in c64["arms"].items()} == {arm: 3e-3 for arm in plan.PRIMARY_ARMS}
    assert all(len(v["rows"]) == 10 for v in c64["arms"].values())
    x = c64["contrasts"]["hj-band4"]
    assert x["res"].n == 10 and x["res"].lo < 2.0 < x["res"].hi and x["later"].n == 7
    assert x["verdict"] == "hj better"
    assert c64["contrasts"]["hj-band8"]["verdict"] == "no practical gain"
    assert c64["contrasts"]["hj-full"]["verdict"] == "hj worse"
    assert c128["contrasts"]["hj-band4"]["verdict"] == "hj better"
    verdict, why = r2.thesis(cells)
    assert verdict == "supported" and why.startswith("hj-band4")
    both = {
        k: v for k, v in plan.STUDIES.items() if k.split("_T")[0] in ("shakespeare", "mqar") and "secondary" not in k
    }
    text, damaged = r2.report(tmp_path, both)  # MQAR's cells unplanted: pending rows below Shakespeare's
    assert not damaged and "| shakespeare | supported |" in text and "| mqar | 64 | pending |" in text
    # every table row follows a header and its separator (a row after a bullet list would print as plain text)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and not line.startswith("| ---"):
            j = i
            while j > 0 and lines[j - 1].startswith("|"):
                j -= 1
            assert j + 1 < len(lines) and lines[j + 1].startswith("| ---"), f"a table row without a header: {line}"


def test_a_cell_short_of_seeds_is_pending_and_so_is_the_thesis(tmp_path):
    base = {"softmax": 6.0, "softmax-2L": 5.8, "bias": 5.9, "hj-band4": 5.7, "hj-band8": 5.7, "hj-full": 5.7}
    plant(tmp_path, "shakespeare", 64, base)
    cells = [r2.cell_table(tmp_path, plan.STUDIES, "shakespeare", 64, 10)]
    r2.decide(cells)
    assert cells[0]["contrasts"]["hj-band4"]["verdict"] == "hj better"
    assert r2.thesis(cells)[0] == "pending"
    # a main seed missing: that arm's contrast is pending
    shutil.rmtree(tmp_path / "shakespeare_T64" / "runs" / "hj-band8_T64_lr0.003_s9")
    cells = [r2.cell_table(tmp_path, plan.STUDIES, "shakespeare", 64, 10)]
    r2.decide(cells)
    assert cells[0]["contrasts"]["hj-band8"]["verdict"] == "pending (9 seeds)"


def test_an_accuracy_task_with_its_baseline_at_the_ceiling_is_untestable(tmp_path):
    means = {"softmax": 99.9, "softmax-2L": 99.95, "bias": 99.0, "hj-band4": 99.9, "hj-band8": 99.9, "hj-full": 99.9}
    plant(tmp_path, "mqar", 64, means, sd=0.01)
    cells = [r2.cell_table(tmp_path, plan.STUDIES, "mqar", 64, 10)]
    r2.decide(cells)
    assert cells[0]["base"] == "softmax-2L"
    assert all(x["verdict"].startswith("untestable") for x in cells[0]["contrasts"].values())


def _scheduled(root, name):
    runs, _ = plan_runs([plan.STUDIES[name]], root)
    return [r for r in runs if run_state(r.out) not in ("finished", "diverged")]


def test_an_mqar_cell_with_every_arm_at_chance_is_untestable_and_runs_no_main_seed(tmp_path):
    """PROTOCOL.md change 5 (the floor rule) at T = 64: main seeds wait for the whole sweep, run only when some arm's
    mean accuracy at its chosen rate is more than 2 points from chance (12.5 %), and the report calls a cell at
    chance untestable, its thesis too."""
    at_chance = {arm: 12.5 - 1.5 for arm in plan.PRIMARY_ARMS}  # every arm 1.5 points below chance
    plant(tmp_path, "mqar", 64, {**at_chance, "hj-full": 12.5}, seeds=range(3))
    shutil.rmtree(tmp_path / "mqar_T64" / "sweep" / "hj-full_T64_lr0.003_s2")  # one arm's sweep unfinished
    assert plan.at_floor(plan.STUDIES["mqar_T64"], tmp_path) is None
    left = _scheduled(tmp_path, "mqar_T64")  # the missing sweep run alone: no main seed of any arm yet
    assert [(r.kind, r.out.name) for r in left] == [("sweep", "hj-full_T64_lr0.003_s2")]
    fake_run(tmp_path / "mqar_T64" / "sweep" / "hj-full_T64_lr0.003_s2", "hj-full", 64, 2, 3e-3, 12.4, 1.0, task="mqar")
    assert plan.at_floor(plan.STUDIES["mqar_T64"], tmp_path) is True
    assert _scheduled(tmp_path, "mqar_T64") == []
    cells = [r2.cell_table(tmp_path, plan.STUDIES, "mqar", T, 10) for T in (64, 128)]
    r2.decide(cells)
    assert cells[0]["base"] is not None and len(cells[0]["contrasts"]) == 3
    assert all(x["verdict"] == r2.FLOOR_VERDICT for x in cells[0]["contrasts"].values())
    assert r2.thesis(cells)[0] == r2.FLOOR_VERDICT
    assert "floor rule: every arm at chance" in r2.report(tmp_path)[0]
    # one seed in three of one arm far above chance: its mean (18.5 + 11 + 11) / 3 = 13.5 is 1 point above, at chance
    bias = tmp_path / "mqar_T64" / "sweep"

    def replant(seed, accuracy):
        shutil.rmtree(bias / f"bias_T64_lr0.003_s{seed}")
        fake_run(bias / f"bias_T64_lr0.003_s{seed}", "bias", 64, seed, 3e-3, accuracy, 1.0, task="mqar")

    replant(0, 18.5)
    assert plan.at_floor(plan.STUDIES["mqar_T64"], tmp_path) is True and _scheduled(tmp_path, "mqar_T64") == []
    replant(1, 18.5)  # (18.5 + 18.5 + 11) / 3 = 16: 3.5 points above chance, the cell is testable
    assert plan.at_floor(plan.STUDIES["mqar_T64"], tmp_path) is False
    left = _scheduled(tmp_path, "mqar_T64")
    assert len(left) == 6 * 7 and {r.kind for r in left} == {"main"}


def test_mqar_at_t128_first_runs_sweep_seed_0_alone(tmp_path):
    """Change 5 at T = 128: seed 0 at the starting grid first; every arm at chance (6.25 %) ends the cell there, an
    arm beyond it opens the rest of the sweep."""
    first = _scheduled(tmp_path, "mqar_T128")
    assert len(first) == 6 * 3 and {(r.kind, r.config.seed) for r in first} == {("sweep", 0)}
    plant(tmp_path, "mqar", 128, {arm: 6.0 for arm in plan.PRIMARY_ARMS}, seeds=(0,))
    assert _scheduled(tmp_path, "mqar_T128") == []
    cells = [r2.cell_table(tmp_path, plan.STUDIES, "mqar", 128, 10)]
    r2.decide(cells)
    assert cells[0]["floor"] is True and {x["verdict"] for x in cells[0]["contrasts"].values()} == {r2.FLOOR_VERDICT}
    d = tmp_path / "mqar_T128" / "sweep" / "hj-band8_T128_lr0.003_s0"
    shutil.rmtree(d)
    fake_run(d, "hj-band8", 128, 0, 3e-3, 6.25 + 2.5, 1.0, task="mqar")
    rest = _scheduled(tmp_path, "mqar_T128")
    assert len(rest) == 6 * 3 * 2 and {r.config.seed for r in rest} == {1, 2}


def test_welch_interval_matches_scipy():
    from scipy import stats

    a, b = [1.0, 2.0, 3.5, 2.2], [0.5, 0.7, 0.2, 0.9, 1.1]
    d, lo, hi = r2.welch(a, b)
    res = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert d == pytest.approx(np.mean(a) - np.mean(b)) and (lo, hi) == pytest.approx((res.low, res.high))
