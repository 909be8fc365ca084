"""Every size that drives an allocation goes through the memory budget (:func:`hybrid_attention.checks.check_memory`)
before any work: sampler options (``burn_in``), ``fidelity --budget``, ``mixing --nodes``/``--moves``, ``estimate``
sizes. The refusal names the size, the projected bytes and the budget; the command exits with status 2."""

from __future__ import annotations

import time

import pytest
import torch

from hybrid_attention import IsingProblem, checks
from hybrid_attention.apps import cli
from hybrid_attention.backends import get_sampler

BUDGET = "above the memory budget of 1 GiB"


@pytest.fixture(autouse=True)
def one_gib(monkeypatch):
    monkeypatch.setattr(checks, "MEMORY_BUDGET", 1 << 30)  # the same refusals on every machine


@pytest.mark.parametrize("name, option", [("qemcmc", "burn_in"), ("mh-local", "burn_in"), ("gibbs", "burn_in"),
                                          ("anneal", "num_sweeps")])  # fmt: skip
def test_a_sampler_refuses_work_per_chain_beyond_the_budget(name, option):
    problem = IsingProblem(torch.zeros(4, 5, dtype=torch.float64))
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=rf"{name}: .*1000000\d+ .*needs an estimated .*{BUDGET}"):
        get_sampler(name).sample(problem, num_reads=8, seed=0, **{option: 10**9})
    assert time.perf_counter() - t0 < 5  # refused, not started
    assert get_sampler(name).sample(problem, num_reads=8, seed=0, **{option: 4}).spins.shape == (4, 8, 5)


TRAIN = ["train", "--task", "brackets", "--block-size", "4", "--steps", "2", "--no-progress"]


@pytest.mark.parametrize(
    "argv, words",
    [
        ([*TRAIN, "--sampler", "qemcmc", "--sampler-option", "burn_in=1000000000"], "burn_in 1000000000"),
        ([*TRAIN, "--sampler", "gibbs", "--sampler-option", "burn_in=1000000000"], "1000000000 sweeps"),
        (
            [
                "fidelity",
                "--samplers",
                "gibbs",
                "--n",
                "3",
                "--shots",
                "64",
                "--tau",
                "1",
                "--steps",
                "10",
                "--budget",
                "4,1e9",
                "--no-plots",
                "--no-progress",
            ],
            "budget=1000000000: gibbs: the schedule of 1000000000 sweeps",
        ),
        (["mixing", "--nodes", "1e5", "--n", "3", "--no-progress"], "Gauss-Legendre rule of 100000 nodes"),
        (["mixing", "--n", "13", "--moves", "1e9", "--proposals", "local", "--no-progress"], "burn_in 1000000000"),
        (["estimate", "sample", "--problems", "1e9"], "1000000000 problem(s) of n = 8 spins"),
        (["estimate", "train", "--batch-size", "1e6", "--block-size", "64"], "1000000 problem(s) of n ="),
        (["estimate", "fidelity", "--n", "4,8", "--problems", "1e8"], "100000000 problem(s) of n = 4 spins"),
        (
            ["estimate", "sample", "--sampler", "qemcmc", "--shots", "1e9"],
            "a SampleSet of 8 problem(s) x 1000000000 reads",
        ),
    ],  # fmt: skip
)
def test_commands_refuse_sizes_beyond_the_budget_before_any_work(argv, words, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [*argv, "--out", str(out)] if argv[0] in ("train", "fidelity") else argv
    t0 = time.perf_counter()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "needs an estimated" in err and BUDGET in err, err
    assert time.perf_counter() - t0 < 60 and not out.exists()
