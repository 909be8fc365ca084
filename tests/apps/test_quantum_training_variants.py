"""experiments/quantum_training: the ``gibbs-persistent`` row trains with exactly what ``train --sampler gibbs``
resolves to with no other flag, and ``qemcmc-1move`` with what ``train --sampler qemcmc`` resolves to with one move,
so each row decides the default it is named after."""

from __future__ import annotations

import argparse

from experiments.quantum_training import run as qt
from hybrid_attention.apps.train import TrainConfig


def test_the_gibbs_persistent_row_is_the_train_default():
    fields = {
        k: v for k, v in qt.variant_settings("gibbs-persistent", argparse.Namespace()).items() if k != "eval_exact"
    }
    row = TrainConfig(attention="hj", **fields).resolved()
    default = TrainConfig(attention="hj", sampler="gibbs").resolved()
    keys = ("sampler", "shots", "estimator", "persistent_chains", "sampler_options")
    assert {k: getattr(row, k) for k in keys} == {k: getattr(default, k) for k in keys}
    fresh = TrainConfig(
        attention="hj", **qt.variant_settings("gibbs", argparse.Namespace(chain_reads=32, qemcmc_shots=8))
    ).resolved()
    assert fresh.persistent_chains == 0 and row.persistent_chains == 8


def test_the_qemcmc_1move_row_is_the_train_default_with_one_move():
    fields = {k: v for k, v in qt.variant_settings("qemcmc-1move", argparse.Namespace()).items() if k != "eval_exact"}
    row = TrainConfig(attention="hj", **fields).resolved()
    one_move = TrainConfig(attention="hj", sampler="qemcmc", sampler_options={"burn_in": 1}).resolved()
    keys = ("sampler", "shots", "estimator", "persistent_chains", "sampler_options")
    assert {k: getattr(row, k) for k in keys} == {k: getattr(one_move, k) for k in keys}
    # the committed qemcmc row it halves: the same settings with two moves
    two = TrainConfig(
        attention="hj", **qt.variant_settings("qemcmc", argparse.Namespace(qemcmc_shots=8, burn_in=2, proposal_steps=2))
    ).resolved()
    assert two.sampler_options == {**row.sampler_options, "burn_in": 2}


def test_circuits_per_step_follow_the_moves_a_row_runs():
    args = argparse.Namespace(
        qemcmc_shots=8, burn_in=2, proposal_steps=2, persistent_burn_in=4, chains=4, dqa_shots=256, tau=1.0,
        trotter_steps=20,
    )  # fmt: skip
    problems = qt.COMMON["batch_size"] * 8  # one problem per query of each sequence, T = 8

    def count(variant):
        return qt.executions_per_step(qt.variant_settings(variant, args), 8)

    assert count("qemcmc") == (problems * 8 * 2,) * 2  # 8 chains x 2 moves, one shot each
    assert count("qemcmc-1move") == (problems * 8,) * 2
    assert count("qemcmc-k0") == (0, 0)  # zero moves: the mean-field start runs no circuit
    assert count("qemcmc-persistent") == (problems * 4 * (4 + 1),) * 2  # 4 chains x (4 moves + a 2nd record)
    assert count("dqa-shots") == (problems, problems * 256)
    assert count("exact") == (0, 0)
