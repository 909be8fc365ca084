"""Train our Toeplitz-band models and measure every engine against the exact one (results/banded_engines/).

Resumable: a finished training run is kept (an interrupted one continues with ``--resume``), a measurement with its
JSON file is skipped. Each measurement prints its projected cost first (from the rows and T) and logs progress.

    python -m experiments.banded_engines.run --round2 /path/to/long_context_2/shakespeare_T64/sweep
    python -m experiments.banded_engines.run --only tband4_T128:512     # one measurement
    python -m experiments.banded_engines.run --train-only
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import torch

from experiments import REPO, data_path
from experiments.banded_engines import plan


def train(name: str, data: Path) -> None:
    """Run (or continue) one of our training runs through the CLI."""
    d = plan.run_dir(name)
    metrics = d / "metrics.json"
    if metrics.is_file() and json.loads(metrics.read_text()).get("finished"):
        return
    resume = ["--resume"] if (d / "checkpoint.pt").is_file() else []
    cmd = [
        sys.executable,
        "-m",
        "hybrid_attention.apps",
        "train",
        *plan.train_flags(name),
        "--data",
        str(data),
        *resume,
    ]
    print("training:", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO)


def model_dir(model: str, round2: Path) -> Path:
    return round2 / plan.ROUND2_MODELS[model] if model in plan.ROUND2_MODELS else plan.run_dir(model)


def measure(model: str, T: int, round2: Path, data: Path) -> dict:
    from experiments.banded_engines.engines import compare, extend_model
    from hybrid_attention.apps.runs import load_run

    run = load_run(model_dir(model, round2), data=str(data))
    rows = plan.ROWS[T]
    # on the shared machine (load ~23): about 2 min of fixed cost (chain warm-ups, qemcmc), then the dense engines'
    # rows * T**3 (2 rows at T = 256 took about 3 min)
    minutes = 2 + 1.5 * rows * (T / 256) ** 3
    print(f"measuring {model} at T = {T} on {rows} row(s): projected about {minutes:.0f} min", flush=True)
    t0 = time.perf_counter()
    res = compare(
        extend_model(run.model, T), run.task(), T, rows, gibbs_full=T <= 128, qemcmc_rows=2 if T <= 128 else 0
    )
    res.update(model=model, run=str(model_dir(model, round2)), trained_T=run.config.block_size,
               band_shape=run.config.band_shape, train_steps=run.metrics.get("step") if run.metrics else None,
               seconds=round(time.perf_counter() - t0, 1))  # fmt: skip
    return res


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--round2", type=Path, default=plan.ROUND2, help="round 2's T = 64 sweep directory")
    p.add_argument("--data", default=None, help="Tiny Shakespeare (default: $HYBRID_ATTENTION_DATA)")
    p.add_argument("--only", nargs="*", default=None, help="MODEL:T measurements to run (default: every one)")
    p.add_argument("--train-only", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    data = data_path(args.data)
    jobs = plan.JOBS if args.only is None else [(m, int(t)) for m, t in (o.split(":") for o in args.only)]
    for m, _ in jobs:
        if m in plan.TRAIN:
            train(m, data)
    if args.train_only:
        return 0
    plan.OUT.mkdir(parents=True, exist_ok=True)
    for model, T in jobs:
        f = plan.result_file(model, T)
        if f.is_file():
            continue
        res = measure(model, T, args.round2, data)
        f.write_text(json.dumps(res, indent=1) + "\n")
        print(f"wrote {f.relative_to(REPO)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
