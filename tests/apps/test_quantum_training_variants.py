"""experiments/quantum_training: the ``gibbs-persistent`` row trains with exactly what ``train --sampler gibbs``
resolves to with no other flag, so the row decides the default it is named after."""

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
