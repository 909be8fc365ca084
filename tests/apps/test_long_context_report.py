"""The long-context study's report (experiments/long_context/analysis.py) on planted run directories: each verdict of
the protocol's decision rules, the Holm family, the thesis per task, the Welch interval against scipy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats as sst

from experiments.long_context import analysis as lc
from hybrid_attention.apps.claims.report.load import scan


def fake_run(root, study, mode, T, seed, metric, *, task, j0=None):
    """A finished run directory as ``train`` writes it (the fields the report reads)."""
    d = root / study / "runs" / f"{mode}_T{T}_lr0.003_s{seed}"
    d.mkdir(parents=True)
    key = "val_perplexity" if task == "shakespeare" else "val_accuracy"
    m = {key: metric, "val_loss": 1.0, "finished": True, "step": 4000, "max_steps": 4000, "elapsed_s": 2.0}
    m["evals"] = [{"step": 100 * (i + 1), "val_loss": 1.0, key: metric} for i in range(8)]
    if j0 is not None:
        m[f"j0_{key}"] = j0
    (d / "metrics.json").write_text(json.dumps(m))
    cfg = {"attention": mode, "block_size": T, "seed": seed, "lr": 3e-3, "task": task, "ffn": True, "max_steps": 4000}
    (d / "config.json").write_text(json.dumps({"run": cfg}))


def plant(root, *, shakespeare_gain=(2.0, 4.0), runs_noise=0.05, seeds=range(10), t128_seeds=range(3)):
    """Tiny Shakespeare: hj better by the given % at T = 32, 64; brackets at the ceiling; runs: hj = softmax
    within ``runs_noise`` points; Shakespeare T = 128 with ``t128_seeds`` seeds."""
    rng = np.random.default_rng(0)
    for T, g in zip((32, 64), shakespeare_gain):
        for s in seeds:
            base = 6.0 + rng.normal(0, 0.02)
            fake_run(root, "shakespeare", "softmax", T, s, base, task="shakespeare")
            hj = base * (1 - g / 100) * (1 + rng.normal(0, 0.001))
            fake_run(root, "shakespeare", "hj", T, s, hj, task="shakespeare", j0=hj * 1.05)
            fake_run(root, "shakespeare", "h", T, s, base * 1.01, task="shakespeare")
        for s in seeds:
            fake_run(root, "brackets", "softmax", T, s, 0.999, task="brackets")
            fake_run(root, "brackets", "hj", T, s, 0.998, task="brackets")
            acc = 0.8 + rng.normal(0, 0.01)
            fake_run(root, "runs", "softmax", T, s, acc, task="runs")
            fake_run(root, "runs", "hj", T, s, acc + rng.normal(0, runs_noise / 100), task="runs")
    for s in t128_seeds:
        fake_run(root, "shakespeare_T128", "softmax", 128, s, 6.0, task="shakespeare")
        fake_run(root, "shakespeare_T128", "hj", 128, s, 5.9 + 0.01 * s, task="shakespeare")


def _cells(root):
    scanned = {s: scan(root, s)[0] for s in lc.TASK_STUDIES if (root / s / "runs").is_dir()}
    return {(c["task"], c["T"]): c for c in lc.primary_contrasts(scanned)}


def test_planted_verdicts_thesis_and_family(tmp_path):
    plant(tmp_path)
    cells = _cells(tmp_path)
    # the family: the six full contrasts (3 tasks x T = 32, 64); the T = 128 pilot (3 seeds) stays out
    assert sum(c["full"] for c in cells.values()) == 6 and not cells["shakespeare", 128]["full"]
    assert {c.get("family_size") for c in cells.values() if c["full"]} == {6}
    g = cells["shakespeare", 64]["res"]
    assert g.lo < 4.0 < g.hi  # the planted gain, in % perplexity
    v = {k: lc.cell_verdict(c) for k, c in cells.items()}
    assert v["shakespeare", 32] == v["shakespeare", 64] == "hj better"
    assert v["brackets", 32] == "not testable (ceiling)"
    assert v["runs", 32] == v["runs", 64] == "no practical gain"
    assert v["shakespeare", 128].startswith("pilot (3 seeds)")
    assert lc.thesis("shakespeare", list(cells.values()), v)[0] == "supported"
    assert lc.thesis("runs", list(cells.values()), v)[0] == "refuted"
    text, damaged = lc.long_context_report(tmp_path)
    assert not damaged
    for needle in ("T = 32", "T = 64", "T = 128", "| shakespeare | supported |", "| runs | refuted |"):
        assert needle in text
    assert "hj vs itself with J = 0" in text and "hj vs h" in text


def test_a_gain_that_does_not_grow_is_inconclusive_and_engine_limits_are_marked(tmp_path):
    plant(tmp_path, shakespeare_gain=(3.0, 3.0))
    cells = _cells(tmp_path)
    v = {k: lc.cell_verdict(c) for k, c in cells.items()}
    t, why = lc.thesis("shakespeare", list(cells.values()), v)
    assert t == "inconclusive" and "does not grow" in why
    assert lc.cell_verdict(cells["shakespeare", 64], "engine-limited") == "hj better (engine-limited)"
    text, _ = lc.long_context_report(tmp_path, engine_marks={("shakespeare", 64): "engine-limited"})
    assert "hj better (engine-limited)" in text
    marks = {("shakespeare", 64): "engine unvalidated"}
    text, _ = lc.long_context_report(tmp_path, engine_marks=marks, engine_note="## Engine\n\nhj ran on tap.")
    assert "hj better (engine unvalidated)" in text and "hj better (engine-limited)" not in text
    assert text.index("## Engine") < text.index("## Primary contrasts")


def test_noisy_runs_are_undecided_with_the_seeds_needed(tmp_path):
    plant(tmp_path, runs_noise=3.0)
    cells = _cells(tmp_path)
    c = cells["runs", 64]
    assert c["bonferroni"].hi > lc.MARGIN and lc.cell_verdict(c) == "undecided"
    line = next(x for x in lc.long_context_report(tmp_path)[0].splitlines() if x.startswith("| runs | T = 64 |"))
    assert int(line.rstrip(" |").split("|")[-1]) > 10  # more seeds than ran


def test_nothing_full_is_not_run(tmp_path):
    plant(tmp_path, seeds=range(3))
    cells = _cells(tmp_path)
    v = {k: lc.cell_verdict(c) for k, c in cells.items()}
    assert lc.thesis("runs", list(cells.values()), v) == ("not run", "no context length of this task ran in full")


@pytest.mark.parametrize("seed", range(3))
def test_welch_interval_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(1.0, 1.0, 7 + seed), rng.normal(0.2, 2.0, 5)
    d, lo, hi = lc.welch_interval(list(a), list(b))
    ci = sst.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert d == pytest.approx(a.mean() - b.mean()) and (lo, hi) == pytest.approx((ci.low, ci.high))
    with pytest.raises(ValueError, match="two values on each side"):
        lc.welch_interval([1.0], [1.0, 2.0])


def _sweep_run(root, study, mode, T, lr, seed, val_loss=None, diverged=False):
    """A sweep run directory: finished with ``val_loss``, diverged, or (neither) started and unfinished."""
    d = root / study / "sweep" / f"{mode}_T{T}_lr{lr:g}_s{seed}"
    d.mkdir(parents=True)
    m = {"mode": mode, "T": T, "lr": lr, "seed": seed}
    if diverged:
        m["diverged"] = True
    elif val_loss is not None:
        m.update(finished=True, val_loss=val_loss)
    (d / "metrics.json").write_text(json.dumps(m))


def test_learning_rate_table_shows_the_runner_choice_and_flags_edges(tmp_path):
    from hybrid_attention.apps.claims.runner import LRSweep, Study, chosen_lr

    plant(tmp_path)
    st = Study(
        "shakespeare", {"task": "shakespeare"}, ("softmax", "hj"), (32,), (0,), LRSweep((1e-3, 3e-3, 1e-2), None)
    )
    for seed, shift in ((100, 0.0), (101, 0.02)):
        # softmax: interior best at 3e-3; hj: best at the grid's low edge, one seed of 1e-2 diverged
        for lr, v in ((1e-3, 1.9), (3e-3, 1.8), (1e-2, 1.85)):
            _sweep_run(tmp_path, "shakespeare", "softmax", 32, lr, seed, v + shift)
        _sweep_run(tmp_path, "shakespeare", "hj", 32, 1e-3, seed, 1.7 + shift)
        _sweep_run(tmp_path, "shakespeare", "hj", 32, 3e-3, seed, 1.75 + shift)
    _sweep_run(tmp_path, "shakespeare", "hj", 32, 1e-2, 100, diverged=True)
    _sweep_run(tmp_path, "shakespeare", "hj", 32, 1e-2, 101, 1.9)
    summary = {r["mode"]: r for r in lc.sweep_summary(st, tmp_path)}
    assert summary["softmax"]["chosen"] == chosen_lr(st, "softmax", tmp_path, 32) == 3e-3
    assert not summary["softmax"]["edge"] and summary["softmax"]["losses"][3e-3] == pytest.approx(1.81)
    assert summary["hj"]["chosen"] == 1e-3 and summary["hj"]["edge"]
    assert summary["hj"]["losses"][1e-2] == float("inf")
    text, _ = lc.long_context_report(tmp_path, studies={"shakespeare": st})
    softmax = next(x for x in text.splitlines() if x.startswith("| shakespeare | T = 32 | softmax |"))
    hj = next(x for x in text.splitlines() if x.startswith("| shakespeare | T = 32 | hj |"))
    assert "**0.003: 1.8100**" in softmax and softmax.endswith("| 0.003 |")
    assert "0.01: diverged" in hj and hj.endswith("| 0.001 (edge) |")
    # an unfinished seed leaves the rate pending and the choice open
    (tmp_path / "shakespeare" / "sweep" / "softmax_T32_lr0.01_s101" / "metrics.json").write_text("{}")
    summary = {r["mode"]: r for r in lc.sweep_summary(st, tmp_path)}
    assert summary["softmax"]["losses"][1e-2] is None and summary["softmax"]["chosen"] is None


def test_best_checkpoint_gain_and_the_t128_design_are_reported(tmp_path):
    plant(tmp_path)
    for d in (tmp_path / "shakespeare" / "runs").glob("*_T64_*"):
        m = json.loads((d / "metrics.json").read_text())
        # the best checkpoint: softmax 1 % better than its last evaluation, hj unchanged
        factor = 0.99 if d.name.startswith("softmax") else 1.0
        m["best"] = {"val_perplexity": m["val_perplexity"] * factor, "val_loss": 1.0}
        (d / "metrics.json").write_text(json.dumps(m))
    text, _ = lc.long_context_report(tmp_path)
    row = next(x for x in text.splitlines() if x.startswith("| shakespeare | T = 64 |")).split(" | ")
    last, best = float(row[5].split()[0]), float(row[6].split()[0])
    assert last == pytest.approx(4.0, abs=0.2) and best == pytest.approx(last - 1.0, abs=0.1)
    row32 = next(x for x in text.splitlines() if x.startswith("| shakespeare | T = 32 |")).split(" | ")
    assert row32[6] == "-"  # no best checkpoint recorded
    assert "T = 128 (Tiny Shakespeare) ran as the pilot (3 seeds per mode); the protocol calls for the full" in text
    assert "0.3 %" in text


def test_a_pilot_still_running_says_how_many_of_its_seeds_are_in(tmp_path):
    """With the plan's studies given, a cell with fewer finished seeds than its study plans says so (verdict and the
    T = 128 sentence); one seed is "1 seed"."""
    from hybrid_attention.apps.claims.runner import Study

    plant(tmp_path, t128_seeds=range(1))
    studies = {
        "shakespeare": Study("shakespeare", {"task": "shakespeare"}, ("softmax", "hj"), (32, 64), tuple(range(10))),
        "shakespeare_T128": Study("shakespeare_T128", {"task": "shakespeare"}, ("softmax", "hj"), (128,), (0, 1, 2)),
    }
    text, _ = lc.long_context_report(tmp_path, studies=studies)
    row = next(x for x in text.splitlines() if x.startswith("| shakespeare | T = 128 |"))
    assert "pilot (1 of 3 seeds so far): no verdict" in row and "(1 seed)" in row
    assert "T = 128 (Tiny Shakespeare) is running as the pilot (1 of 3 seeds so far per mode)" in text
    t128 = next(c for c in lc.primary_contrasts(lc.load_studies(tmp_path)[0]) if c["T"] == 128)
    v = lc.cell_verdict({**t128, "planned": None})
    assert v == "pilot (1 seed): no verdict"


def test_gain_plot_points_and_file(tmp_path):
    pytest.importorskip("matplotlib")
    from hybrid_attention.apps.claims.report.plots import write_long_context_plot

    plant(tmp_path)
    rows, _ = lc.load_studies(tmp_path)
    pts = {(p["task"], p["mode"], p["T"]): p["res"] for p in lc.gain_points(rows)}
    # planted: hj 2 % / 4 % better at T = 32 / 64, h 1 % worse; no bias runs
    assert pts["shakespeare", "hj", 64].lo < 4.0 < pts["shakespeare", "hj", 64].hi
    assert pts["shakespeare", "h", 32].mean == pytest.approx(-1.0, abs=0.01)
    assert ("shakespeare", "hj", 128) in pts and not any(m == "bias" for _, m, _ in pts)
    assert write_long_context_plot(tmp_path / "gain.png", lc.gain_points(rows), lc.MARGIN)
    assert (tmp_path / "gain.png").stat().st_size > 10_000
    assert not write_long_context_plot(tmp_path / "none.png", [], lc.MARGIN) and not (tmp_path / "none.png").exists()
    text, _ = lc.long_context_report(tmp_path, figure="gain.png")
    assert "](gain.png)" in text and text.index("](gain.png)") < text.index("## The thesis")


def test_a_diverged_main_run_counts_at_its_last_evaluation(tmp_path):
    """PROTOCOL.md change 6: a main run whose training diverged stays in its cell (its last evaluation before the
    divergence), and the table counts it; dropping it would leave the cell short of the full design."""
    plant(tmp_path)
    d = tmp_path / "runs" / "runs" / "hj_T64_lr0.003_s3"
    m = json.loads((d / "metrics.json").read_text())
    m.update(finished=False, diverged={"step": 2264, "reason": "gradient norm inf", "checkpoint_step": 2200})
    m["val_accuracy"] = 0.5  # its last evaluation: far below the others
    (d / "metrics.json").write_text(json.dumps(m))
    rows, _ = lc.load_studies(tmp_path)
    hj = {r["seed"]: r for r in rows["runs"] if r["mode"] == "hj" and r["block_size"] == 64}
    assert len(hj) == 10 and hj[3]["diverged"] and hj[3]["metric"] == pytest.approx(50.0)
    assert sum(r["diverged"] for r in rows["runs"]) == 1
    cells = lc.primary_contrasts(rows)
    c = next(c for c in cells if c["task"] == "runs" and c["T"] == 64)
    assert c["full"] and c["res"].mean < -2.0  # the seed's 30-point loss pulls the mean gain down
    text, _ = lc.long_context_report(tmp_path)
    assert "| runs | T = 64 | 10 (1 hj diverged) |" in text
    assert scan(tmp_path, "runs")[0].__len__() == len(rows["runs"]) - 1  # the claims study's reading leaves it out
