"""The long-context engine decision (experiments/long_context/validate_engines.py; PROTOCOL.md "The engine" and its
changes 1 and 4) on planted validation records: pass criteria, the ceiling rule, the per-task fallback, and models
whose reference did not converge counting neither way."""

from __future__ import annotations

import importlib

import pytest


@pytest.fixture(scope="module")
def ve():
    """experiments/long_context/validate_engines.py."""
    return importlib.import_module("experiments.long_context.validate_engines")


GOOD = {"c_attn": {"cosine": 0.99, "norm_ratio": 1.0}, "J_raw": {"cosine": 0.97, "norm_ratio": 1.1}}
BAD_GRAD = {"c_attn": {"cosine": 0.99, "norm_ratio": 1.0}, "J_raw": {"cosine": 0.5, "norm_ratio": 3.0}}


def record(model, task, T, ref, engines, *, converged=None):
    """A per-model file as ``validate`` writes it; ``ref``: the reference metric; ``engines``: {engine: (metric,
    gradient)}."""
    key = "val_perplexity" if task == "shakespeare" else "val_accuracy"
    reference = {"metric": {key: ref}}
    if converged is not None:
        reference.update(converged=converged, agreement=1.0 if converged else 50.0)
    return {
        "model": model,
        "task": task,
        "T": T,
        "largest_eigenvalue_beta_J": 2.0,
        "reference": reference,
        "engines": {
            e: {"metric": {key: m}, "gradient": g, "marginal_error_rms": 0.0, "marginal_error_max": 0.0}
            for e, (m, g) in engines.items()
        },
    }


def test_pass_criteria_and_ceiling(ve):
    # perplexity 0.3 % of 6.0 is 0.018: 6.017 passes, 6.019 fails; a bad coupling gradient fails
    r = record("exact_shakespeare_hj_T12", "shakespeare", 12, 6.0, {
        "meanfield": (6.017, GOOD), "gibbs-persistent": (6.019, GOOD), "tap": (6.0, BAD_GRAD)})  # fmt: skip
    assert ve.verdicts(r) == {"meanfield": True, "gibbs-persistent": False, "tap": False}
    # at the ceiling (accuracy >= 99.5 %) change 1 drops the gradient criterion, the first rules keep it
    c = record("exact_brackets_hj_T12", "brackets", 12, 0.999, {
        "meanfield": (0.9975, GOOD), "gibbs-persistent": (0.995, GOOD), "tap": (0.999, BAD_GRAD)})  # fmt: skip
    assert ve.at_ceiling(c) and not ve.at_ceiling(r)
    assert ve.verdicts(c) == {"meanfield": True, "gibbs-persistent": False, "tap": True}
    assert ve.verdicts(c, amended=False)["tap"] is False


def test_overall_then_per_task_fallback(ve):
    sh = record("exact_shakespeare_hj_T12", "shakespeare", 12, 6.0, {
        "meanfield": (6.0, GOOD), "gibbs-persistent": (6.1, GOOD), "tap": (6.0, GOOD)})  # fmt: skip
    br = record("exact_brackets_hj_T16", "brackets", 16, 0.98, {
        "meanfield": (0.95, GOOD), "gibbs-persistent": (0.97, GOOD), "tap": (0.9799, GOOD)})  # fmt: skip
    assert ve.choose([sh, br])["overall"] == "tap"  # meanfield fails brackets, tap passes both
    # tap also failing brackets: no overall engine; per task: meanfield for Shakespeare, the smallest largest
    # deviation (gibbs-persistent, 1 point) for brackets, engine-limited
    br2 = record("exact_brackets_hj_T16", "brackets", 16, 0.98, {
        "meanfield": (0.95, GOOD), "gibbs-persistent": (0.97, GOOD), "tap": (0.96, GOOD)})  # fmt: skip
    c = ve.choose([sh, br2])
    assert c["overall"] is None
    assert c["tasks"] == {"shakespeare": ("meanfield", False), "brackets": ("gibbs-persistent", True)}


def test_unconverged_reference_counts_neither_way(ve):
    """Change 4: a model whose reference did not converge does not fail (or pass) any engine, and a (task, T) whose
    pilot models all failed to converge is 'engine unvalidated' once none of them is pending."""
    ok = record("pilot_shakespeare_hj_T32_lr0.003_s0", "shakespeare", 32, 6.0, {
        "meanfield": (6.0, GOOD), "gibbs-persistent": (6.0, GOOD), "tap": (6.0, GOOD)}, converged=True)  # fmt: skip
    wild = {e: (9.0, BAD_GRAD) for e in ve.CANDIDATES}  # every engine far from the pooled chains
    nc32 = record("pilot_shakespeare_hj_T32_lr0.003_s1", "shakespeare", 32, 6.0, wild, converged=False)
    nc64 = [
        record(f"pilot_shakespeare_hj_T64_lr0.003_s{s}", "shakespeare", 64, 6.0, wild, converged=False) for s in (0, 1)
    ]
    rows = [ok, nc32, *nc64]
    assert not ve.converged(nc32) and ve.converged(ok)
    assert ve.converged(record("exact_x", "shakespeare", 12, 6.0, wild))  # exact enumeration: no flag, converged
    assert ve.choose(rows)["overall"] == "meanfield"  # as if the unconverged models were absent
    assert ve.choose([nc32, *nc64]) == {"overall": None, "tasks": {}}  # nothing judged, nothing chosen
    # the rules as first written had no change 4: there the unconverged models count, and every engine fails them
    first = ve.choose(rows, amended=False)
    assert first["overall"] is None and first["tasks"]["shakespeare"][1]
    assert ve.unvalidated(rows) == [("shakespeare", 64)]  # T = 32 has a converged model
    assert ve.unvalidated(rows, ["pilot_shakespeare_hj_T64_lr0.003_s2"]) == []  # one still pending at T = 64
    assert ve.task_of("pilot_runs_hj_T64_lr0.003_s1") == "runs"
    assert set(ve.pilot_cells()) == {(t, T) for t in ("shakespeare", "brackets", "runs") for T in (32, 64)}


def test_candidate_training_settings_are_valid_runs(ve, tmp_path):
    """Every candidate engine, as plan.py trains it, is a valid hj run of every task at T = 32 and 64."""
    from hybrid_attention.apps.train import TrainConfig

    plan = importlib.import_module("experiments.long_context.plan")
    assert set(plan.CANDIDATE_CONFIGS) == set(ve.CANDIDATES)
    for name, eng in plan.CANDIDATE_CONFIGS.items():
        for task in plan.TASKS.values():
            for T in (32, 64):
                cfg = {**plan.COMMON, **task, **eng, "attention": "hj", "block_size": T, "out": str(tmp_path / name)}
                TrainConfig(**cfg).validate()


def test_plan_engines_follow_the_committed_decision(ve):
    """No study engine before every validated model is in; once they are, plan.ENGINES is the decision's (taken over
    the decision's models only: the final models' ``final_*`` records do not count)."""
    plan = importlib.import_module("experiments.long_context.plan")
    rows, pending = ve.validated_rows()
    if pending:
        assert plan.ENGINES is None, "the study engine is set before the validation has finished"
        return
    c = ve.choose(rows)
    decided = {t: c["overall"] for t in plan.TASKS} if c["overall"] else {t: e for t, (e, _) in c["tasks"].items()}
    assert plan.ENGINES == decided


def test_engine_summary_marks_and_note(ve):
    """The report's marks: a task without a passing candidate is engine-limited at every T it ran; a (task, T) whose
    pilot models all failed to converge is engine unvalidated; the note names the engines and the unconverged."""
    ok = {e: (6.0, GOOD) for e in ve.CANDIDATES}
    sh = record("pilot_shakespeare_hj_T32_lr0.003_s0", "shakespeare", 32, 6.0, ok, converged=True)
    nc = [record(f"pilot_shakespeare_hj_T64_lr0.003_s{s}", "shakespeare", 64, 6.0, ok, converged=False) for s in (0, 1)]
    br = record("exact_brackets_hj_T16", "brackets", 16, 0.98, {
        "meanfield": (0.95, GOOD), "gibbs-persistent": (0.97, GOOD), "tap": (0.96, GOOD)})  # fmt: skip
    ran = {"shakespeare": (32, 64, 128), "brackets": (32, 64)}
    marks, note = ve.engine_summary([sh, *nc, br], [], ran, finals=[])
    assert marks == {
        ("shakespeare", 64): "engine unvalidated",
        ("brackets", 32): "engine-limited",
        ("brackets", 64): "engine-limited",
    }
    assert "shakespeare: meanfield; brackets: gibbs-persistent (engine-limited" in note
    assert "2 of 4 validated models" in note
    assert "provisional" in ve.engine_summary([sh], ["pilot_runs_hj_T32_lr0.003_s0"], {"shakespeare": (32,)}, [])[1]
    # the final models' check: a failing final model marks its cell engine-limited, an unconverged one unvalidated
    bad = {e: (6.5, GOOD) for e in ve.CANDIDATES}
    finals = [
        record("final_shakespeare_hj_T32_lr0.003_s0", "shakespeare", 32, 6.0, bad, converged=True),
        record("final_shakespeare_hj_T128_lr0.003_s0", "shakespeare", 128, 6.0, ok, converged=False),
        record("final_shakespeare_hj_T64_lr0.003_s0", "shakespeare", 64, 6.0, ok, converged=True),
    ]
    marks, note = ve.engine_summary([sh, *nc, br], [], ran, finals=finals)
    assert marks[("shakespeare", 32)] == "engine-limited" and marks[("shakespeare", 128)] == "engine unvalidated"
    assert marks[("shakespeare", 64)] == "engine unvalidated"  # the pilots' mark stands: the final model passes
    assert "final_shakespeare_hj_T32_lr0.003_s0: meanfield fails" in note
    # both marks: a task without a passing candidate whose pilots at one T all failed to converge (brackets T = 64)
    nb = [record(f"pilot_brackets_hj_T64_lr0.003_s{s}", "brackets", 64, 0.7, ok, converged=False) for s in (0, 1)]
    marks, _ = ve.engine_summary([sh, *nc, br, *nb], [], ran, finals=[])
    assert marks[("brackets", 64)] == "engine-limited, engine unvalidated"
    assert marks[("brackets", 32)] == "engine-limited"


def test_reference_cosine_ceiling_matches_simulated_noisy_references(ve):
    """An exact gradient G against a reference that is the mean of noisy rounds: the cosine it reaches is what the
    half-means' agreement predicts (within the spread of 200 simulated references)."""
    import numpy as np

    rng = np.random.default_rng(0)
    G = rng.normal(size=2000)
    for noise in (0.05, 0.15, 0.4):
        halves, exact = [], []
        for _ in range(200):
            rounds = G + rng.normal(scale=noise * np.sqrt(64), size=(64, G.size)) * np.abs(G).mean()
            even, odd = rounds[0::2].mean(0), rounds[1::2].mean(0)
            cos = lambda a, b: a @ b / np.linalg.norm(a) / np.linalg.norm(b)  # noqa: E731
            halves.append(cos(even, odd))
            exact.append(cos(G, rounds.mean(0)))
        pred = [ve.reference_cosine_ceiling(h) for h in halves]
        assert abs(np.mean(pred) - np.mean(exact)) < 3 * np.std(exact) / np.sqrt(200) + 2e-3
    assert ve.reference_cosine_ceiling(1.0) == 1.0 and ve.reference_cosine_ceiling(-0.2) == 0.0


def test_failed_criteria_name_the_misses_and_a_limiting_reference(ve):
    bad = {"meanfield": (6.0, BAD_GRAD), "tap": (6.1, GOOD), "gibbs-persistent": (6.0, GOOD)}
    r = record("final_shakespeare_hj_T32_lr0.001_s0", "shakespeare", 32, 6.0, bad, converged=True)
    assert ve.failed_criteria(r, "tap") == "metric off by 1.67 %"
    assert ve.failed_criteria(r, "meanfield") == "J_raw gradient cosine 0.500, norm ratio 3.00"
    r["reference"]["gradient_batch"] = {"half_mean_gradient_agreement": {"J_raw": {"cosine": 0.7}}}
    text = ve.failed_criteria(r, "meanfield")
    assert "reference-limited: its half-means agree to 0.700" in text and "about 0.907" in text
    ok = {e: (6.0, GOOD) for e in ve.CANDIDATES}
    pilot = record("pilot_shakespeare_hj_T32_lr0.003_s0", "shakespeare", 32, 6.0, ok, converged=True)
    marks, note = ve.engine_summary([pilot], [], {"shakespeare": (32,)}, finals=[r])
    assert marks == {("shakespeare", 32): "engine-limited"}  # the protocol's mark stands; the note explains it
    assert "final_shakespeare_hj_T32_lr0.001_s0: meanfield fails (J_raw gradient cosine 0.500" in note
    assert "an exact engine would reach a cosine of about 0.907" in note


def test_interrupted_reference_continues_to_the_uninterrupted_result(ve, tmp_path, monkeypatch):
    """The Gibbs reference keeps its chains after every burn-in round; a validation killed after a round continues
    from there and ends with the same marginals, reads and diagnostics as one that was never interrupted."""
    import torch

    monkeypatch.setattr(ve, "REF_BURN_IN", 4)
    monkeypatch.setattr(ve, "REF_MAX_BURN_IN", 64)
    T = 6
    g = torch.Generator().manual_seed(0)
    h = 0.1 * torch.randn(2, 1, T, T, generator=g)
    J = torch.full((1, T, T), 1.5) - 1.5 * torch.eye(T)  # strongly ferromagnetic: the opposite starts disagree
    beta = torch.ones(1)
    m0, reads0, info0, _ = ve.reference_reads(h, J, beta, seed=1)
    assert info0["rounds"] >= 3, "the planted problem must need several rounds"

    class Killed(Exception):
        pass

    class KilledAfterTwoRounds(ve.Progress):
        def save(self, key, obj):
            super().save(key, obj)
            if obj["rounds"] == 2:
                raise Killed

    with pytest.raises(Killed):
        ve.reference_reads(h, J, beta, seed=1, progress=KilledAfterTwoRounds(tmp_path / "p"))
    progress = ve.Progress(tmp_path / "p")
    assert progress.load("reads")["rounds"] == 2 and progress.seconds() > 0
    m1, reads1, info1, _ = ve.reference_reads(h, J, beta, seed=1, progress=progress)
    assert torch.equal(m0, m1) and torch.equal(reads0, reads1)
    assert info0 == info1
    # after its last round a call returns the saved result; the reads only if they were kept
    m2, reads2, info2, more = ve.reference_reads(h, J, beta, seed=1, progress=ve.Progress(tmp_path / "p"))
    assert torch.equal(m0, m2) and reads2 is None and info2 == info0 and more.state().shape == (2 * T, 32, T)
    progress.clear()
    assert not (tmp_path / "p").exists()


def test_interrupted_reference_gradient_continues_to_the_uninterrupted_result(ve, tmp_path, monkeypatch):
    """The reference gradient keeps its rounds and its chains; killed after a round, it continues to the same
    gradient and diagnostics as an uninterrupted run."""
    import torch

    from hybrid_attention.model import Transformer, TransformerConfig

    monkeypatch.setattr(ve, "REF_BURN_IN", 4)
    monkeypatch.setattr(ve, "REF_MAX_BURN_IN", 16)
    monkeypatch.setattr(ve, "GRAD_HALF_MIN", 1.01)  # never reached: every run takes GRAD_MAX_ROUNDS rounds
    monkeypatch.setattr(ve, "GRAD_MAX_ROUNDS", 12)
    torch.manual_seed(0)
    T = 6
    model = Transformer(TransformerConfig(vocab_size=7, block_size=T, n_layer=1, n_head=1, n_embd=8, attention="hj"))
    x, y = torch.randint(0, 7, (2, T)), torch.randint(0, 7, (2, T))
    h, J, beta = ve.layer_problems(model, x)
    g0, info0 = ve.reference_gradient(model, x, y, h, J, beta, seed=2)
    assert info0["gradient_rounds"] == 12

    class Killed(Exception):
        pass

    class KilledAfterFiveRounds(ve.Progress):
        def save(self, key, obj):
            super().save(key, obj)
            if key == "gradient_rounds" and len(obj["gs"]) == 5:
                raise Killed

    with pytest.raises(Killed):
        ve.reference_gradient(model, x, y, h, J, beta, seed=2, progress=KilledAfterFiveRounds(tmp_path / "p"))
    g1, info1 = ve.reference_gradient(model, x, y, h, J, beta, seed=2, progress=ve.Progress(tmp_path / "p"))
    assert g0.keys() == g1.keys() and all(torch.equal(g0[k], g1[k]) for k in g0)
    assert info0 == info1
