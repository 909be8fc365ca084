"""The models and measurements of the engine table (results/banded_engines/README.md).

* Round 2's free-band Tiny Shakespeare models at T = 64 (read-only; seed 0 at the learning rate of lowest validation
  loss, 0.01 for both arms): evaluated at T = 64 only (a free band has one coupling per position, and the learned
  position embeddings end at 64).
* Our own Toeplitz-band models (one coupling per distance), trained exactly on Tiny Shakespeare (:data:`TRAIN`):
  band 4 at T = 128 (1000 steps), band 8 at T = 64 (300 steps: a band-8 step at T = 128 took about 20 s on the
  shared machine), evaluated at their own T and at every longer one of 128, 256, 512
  (:func:`experiments.banded_engines.engines.extend_model`: the couplings load as they are, position embeddings
  beyond the trained ones repeat the last trained one).

Rows per length (:data:`ROWS`) shrink with T because the Gibbs and mean-field engines work on the dense ``T x T``
couplings (about ``rows * T**3`` per sweep); above T = 128 Gibbs gives marginals only and qemcmc (statevector
proposals, prefixes of at most 12 keys) is not rerun: its problems are the same at every longer T.
"""

from __future__ import annotations

from pathlib import Path

from experiments import REPO

#: where the study writes (runs, per-measurement JSON, the README and the plot)
OUT = REPO / "results" / "banded_engines"
#: round 2's T = 64 sweep (read-only; its checkpoints are not in git: pass ``--round2`` to point at a copy)
ROUND2 = REPO / "results" / "long_context_2" / "shakespeare_T64" / "sweep"
ROUND2_MODELS = {"r2-band4": "hj-band4_T64_lr0.01_s0", "r2-band8": "hj-band8_T64_lr0.01_s0"}
#: training settings shared by our runs (round 2's, one thread)
COMMON = ["--task", "shakespeare", "--attention", "hj", "--sampler", "exact", "--band-shape", "toeplitz",
          "--n-layer", "1", "--n-head", "1", "--n-embd", "64", "--batch-size", "64", "--eval-interval", "100",
          "--warmup", "100", "--lr", "3e-3", "--seed", "0", "--threads", "1", "--no-progress"]  # fmt: skip
#: our runs: name -> (band, trained T, optimiser steps)
TRAIN = {"tband4_T128": (4, 128, 1000), "tband8_T64": (8, 64, 300)}
#: validation (and gradient) rows per evaluation length
ROWS = {64: 16, 128: 8, 256: 4, 512: 2}
#: the measurements, in the order they run: (model, T)
JOBS = [
    ("r2-band4", 64), ("r2-band8", 64), ("tband4_T128", 128), ("tband8_T64", 64), ("tband8_T64", 128),
    ("tband4_T128", 256), ("tband8_T64", 256), ("tband4_T128", 512), ("tband8_T64", 512),
]  # fmt: skip


def train_flags(name: str) -> list[str]:
    """The ``hybrid-attention train`` flags of one of our runs (:data:`TRAIN`), relative to the repository root."""
    band, T, steps = TRAIN[name]
    out = run_dir(name).relative_to(REPO)
    return [*COMMON, "--block-size", str(T), "--band", str(band), "--max-steps", str(steps), "--out", str(out)]


def run_dir(name: str) -> Path:
    return OUT / "runs" / name


def result_file(model: str, T: int) -> Path:
    return OUT / f"{model}_T{T}.json"
