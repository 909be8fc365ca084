"""The models of the engine table (results/banded_engines/README.md).

* Round 2's free-band Tiny Shakespeare models at T = 64 (read-only, ``results/long_context_2/shakespeare_T64/sweep``,
  seed 0 at the learning rate each arm's sweep picked as best by validation loss): evaluated at T = 64 only (a free
  band has one coupling per position, and the learned position embeddings end at 64).
* Our own Toeplitz-band models (one coupling per distance), trained exactly at T = 128 on Tiny Shakespeare
  (:data:`TRAIN`), evaluated at T = 128, 256 and 512 (:func:`experiments.banded_engines.engines.extend_model`: the
  couplings load as they are, the position embeddings beyond the trained 128 repeat the last trained one).
"""

from __future__ import annotations

from pathlib import Path

from experiments import REPO

#: where the study writes (runs, per-model JSON, the README)
OUT = REPO / "results" / "banded_engines"
#: round 2's T = 64 sweep (read-only)
ROUND2 = REPO / "results" / "long_context_2" / "shakespeare_T64" / "sweep"
#: training settings shared by our runs (round 2's COMMON, one thread)
COMMON = ["--task", "shakespeare", "--attention", "hj", "--sampler", "exact", "--band-shape", "toeplitz",
          "--block-size", "128", "--n-layer", "1", "--n-head", "1", "--n-embd", "64", "--batch-size", "64",
          "--eval-interval", "100", "--warmup", "100", "--lr", "3e-3", "--seed", "0", "--threads", "1",
          "--no-progress"]  # fmt: skip
#: our runs: name -> (band, optimiser steps)
TRAIN = {"tband4_T128": (4, 1000), "tband8_T128": (8, 500)}
#: evaluation lengths of our Toeplitz models
EVAL_T = (128, 256, 512)


def train_command(name: str) -> list[str]:
    """The ``hybrid-attention train`` flags of one of our runs (:data:`TRAIN`)."""
    band, steps = TRAIN[name]
    return [*COMMON, "--band", str(band), "--max-steps", str(steps), "--out", str(run_dir(name))]


def run_dir(name: str) -> Path:
    return OUT / "runs" / name
