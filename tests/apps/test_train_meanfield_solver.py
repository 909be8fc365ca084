"""Which mean-field solver a run trains with: new runs the per-row solver (the training default), runs that recorded
no ``solver`` (started before the option existed) the legacy damped iteration when they resume."""

from __future__ import annotations

import json

import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.apps import cli
from hybrid_attention.apps.run_files import load_checkpoint
from hybrid_attention.apps.train import TrainConfig, build_sampling
from hybrid_attention.apps.train.resume import load_resume_state


def command(out, steps):
    return [
        "train", "--task", "brackets", "--attention", "hj", "--sampler", "meanfield", "--block-size", "4",
        "--steps", str(steps), "--eval-interval", "1", "--n-embd", "8", "--batch-size", "3", "--eval-size", "8",
        "--warmup", "1", "--no-progress", "--out", str(out),
    ]  # fmt: skip


def test_new_runs_record_the_rows_solver_and_old_runs_resume_with_the_damped_one(tmp_path):
    assert build_sampling(TrainConfig(sampler="meanfield")).sampler.solver == "rows"
    assert build_sampling(TrainConfig(sampler="meanfield", sampler_options={"solver": "damped"})).sampler.solver == (
        "damped"
    )
    new, old = tmp_path / "new", tmp_path / "old"
    assert cli.main(command(new, 1)) == 0
    assert json.loads((new / "config.json").read_text())["run"]["sampler_options"] == {"solver": "rows", "damping": 1.0}
    state, cfg = load_resume_state(TrainConfig.from_saved({**_saved(new), "resume": True, "max_steps": 2}), new)
    assert (build_sampling(cfg).sampler.solver, build_sampling(cfg).sampler.damping) == ("rows", 1.0)  # as recorded
    # an old run: written before the option existed, its settings name no solver
    assert cli.main(command(old, 1)) == 0
    _forget_options(old)
    state, cfg = load_resume_state(TrainConfig.from_saved({**_saved(old), "resume": True, "max_steps": 2}), old)
    assert cfg.sampler_options == {"solver": "damped", "damping": 0.5}
    sampler = build_sampling(cfg).sampler
    assert (sampler.solver, sampler.damping, sampler.max_iter, sampler.tol) == ("damped", 0.5, 500, None)
    # the command a user types to resume it (no sampler option) resumes it with the legacy solver too
    assert cli.main([*command(old, 2), "--resume"]) == 0
    assert load_checkpoint(old / "checkpoint.pt")["config"]["sampler_options"] == {"solver": "damped", "damping": 0.5}


def _forget_options(out):
    """Make the run in ``out`` look written before the option existed: its settings name no sampler option."""
    blob = load_checkpoint(out / "checkpoint.pt")
    blob["config"]["sampler_options"] = {}
    torch.save(blob, out / "checkpoint.pt")
    saved = json.loads((out / "config.json").read_text())
    saved["run"]["sampler_options"] = {}
    (out / "config.json").write_text(json.dumps(saved))


def _saved(out):
    return {k: v for k, v in json.loads((out / "config.json").read_text())["run"].items() if k != "resume"}


def test_trainings_solver_runs_the_compiled_loops_and_kernel_torch_the_torch_ones(tmp_path):
    """``train --sampler meanfield`` (numba installed, as the test extra has it): the rows solver's compiled loops;
    ``--sampler-option kernel=torch`` the torch loops, recorded with the run's options (a resume keeps it)."""
    pytest.importorskip("numba")
    sampler = build_sampling(TrainConfig(sampler="meanfield")).sampler
    assert sampler.kernel == "auto"
    p = IsingProblem(torch.randn(3, 4), 0.1 * torch.ones(4, 4).triu(1) + 0.1 * torch.ones(4, 4).triu(1).T)
    sampler.differentiable_marginals(p)
    assert sampler.last_info["kernel"] == "compiled"
    out = tmp_path / "torch"
    assert cli.main([*command(out, 1), "--sampler-option", "kernel=torch"]) == 0
    saved = json.loads((out / "config.json").read_text())["run"]["sampler_options"]
    assert saved == {"solver": "rows", "damping": 1.0, "kernel": "torch"}
    sampler = build_sampling(TrainConfig(sampler="meanfield", sampler_options=saved)).sampler
    sampler.differentiable_marginals(p)
    assert sampler.last_info["kernel"] == "torch"


def test_a_run_that_recorded_no_solver_resumes_under_the_round1_pin_and_a_real_difference_is_refused(tmp_path):
    """Round 2's plan writes the damped solver into its mean-field arms (experiments/long_context_2/plan.py); runs of
    those arms started before the pin recorded ``{}`` and must resume under it, while a run that trained with the
    rows solver must not."""
    import pytest

    from experiments.long_context_2.plan import ONE_LAYER_ARMS, ROUND1_MEANFIELD, SECONDARY_ARMS

    assert ONE_LAYER_ARMS["hj-full"]["sampler_options"] == ROUND1_MEANFIELD == {"solver": "damped", "damping": 0.5}
    assert SECONDARY_ARMS["hj-band4-mf"]["sampler_options"] == ROUND1_MEANFIELD
    old = tmp_path / "old"
    assert cli.main(command(old, 1)) == 0
    _forget_options(old)
    pinned = TrainConfig.from_saved(
        {**_saved(old), "resume": True, "max_steps": 2, "sampler_options": ROUND1_MEANFIELD}
    )
    state, cfg = load_resume_state(pinned, old)
    assert state["step"] == 1 and cfg.sampler_options == ROUND1_MEANFIELD
    new = tmp_path / "new"  # trained with the rows solver (the training default): the pin is a real difference
    assert cli.main(command(new, 1)) == 0
    with pytest.raises(ValueError, match="sampler_options"):
        load_resume_state(
            TrainConfig.from_saved(
                {**_saved(new), "resume": True, "max_steps": 2, "sampler_options": ROUND1_MEANFIELD}
            ),
            new,
        )


def test_the_long_context_studies_mean_field_runs_resolve_to_the_damped_iteration_at_the_samplers_tolerance():
    """Every mean-field arm of the long-context round-2 studies resolves to exactly the options it gives,
    ``{"solver": "damped", "damping": 0.5}``, new or resumed, and builds the sampler at its own tolerance
    (``tol=None``: 1000 float32 eps), whatever ``train``'s mean-field training default is."""
    from experiments.long_context_2.plan import ROUND1_MEANFIELD, STUDIES

    studied = 0
    for study in STUDIES.values():
        for arm in study.mode_base.values():
            if arm.get("sampler") != "meanfield":
                continue
            cfg = TrainConfig(**{**study.base, **arm, "block_size": study.block_sizes[0]})
            assert cfg.resolved().sampler_options == ROUND1_MEANFIELD == {"solver": "damped", "damping": 0.5}
            assert cfg.pinned_options().sampler_options == ROUND1_MEANFIELD  # as a resumed run of the study
            sampler = build_sampling(cfg).sampler
            assert (sampler.solver, sampler.damping, sampler.tol) == ("damped", 0.5, None)
            studied += 1
    assert studied > 0
