"""Measure the cost of every run of a plan, so the plan can be sized to sessions: per (study, mode, T) the training
milliseconds per step (one torch thread, AdamW step included) and the seconds of one evaluation, from a short timed
stretch of the real model on the real task; then the hours each study needs at its full step budget (an upper bound:
early stopping ends runs sooner) on one and on two workers.

    python -m experiments.claims.measure_costs --plan main --steps 15 --out results/claims/cost_estimate.md

The machine is shared, so the numbers include whatever else runs; the file records the load average at the start.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from experiments.claims.plan import PLANS, STUDIES
from hybrid_attention.apps.train.data import eval_set, evaluate, load_task  # noqa: E402
from hybrid_attention.model import Transformer  # noqa: E402


def measure(cfg, steps: int) -> tuple[float, float]:
    """``(ms per training step, s per evaluation)`` of the run ``cfg``."""
    task, _ = load_task(cfg)
    model = Transformer(cfg.model_config(task.vocab_size))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    g = torch.Generator().manual_seed(0)
    for i in range(steps + 2):  # two untimed warm-up steps
        if i == 2:
            t0 = time.perf_counter()
        x, y = task.get_batch("train", cfg.batch_size, cfg.block_size, generator=g)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    ms = 1000 * (time.perf_counter() - t0) / steps
    xv, yv = eval_set(task, cfg)
    t0 = time.perf_counter()
    evaluate(model, xv, yv, cfg.task)
    return ms, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", choices=sorted(PLANS), default="main")
    p.add_argument("--steps", type=int, default=15, help="timed steps per configuration")
    p.add_argument("--out", type=Path, default=Path("results/claims/cost_estimate.md"))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    load = os.getloadavg()[0]
    lines = [
        f"Cost estimate of `--plan {args.plan}` (command: `python -m experiments.claims.measure_costs --plan "
        f"{args.plan} --steps {args.steps}`; one torch thread; load average {load:.1f} on 2 cores at the start, so "
        "these include other processes' load).",
        "",
        "| study | mode | T | ms/step | s/eval | runs | run (min, full budget) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    totals = {}
    for name in PLANS[args.plan]:
        study = STUDIES[name]
        # every (mode, T) of the study, sweep block size included, counting its runs (sweep and main)
        n_sweep = len(study.sweep.lrs) * len(study.sweep.seeds) if study.sweep else 0
        cfgs = {}
        for T in study.block_sizes:
            for mode in study.modes:
                cfgs[(mode, T)] = study.config(mode, T, 0, study.base.get("lr", 3e-3), Path("/nonexistent-root"))
        total = 0.0
        for (mode, T), cfg in tqdm(cfgs.items(), desc=name):
            ms, ev = measure(cfg, args.steps)
            run_s = ms * cfg.max_steps / 1000 + ev * cfg.max_steps / cfg.eval_interval
            n = len(study.seeds) + (n_sweep if study.sweep and T in study.sweep.block_sizes(study.block_sizes) else 0)
            total += n * run_s
            lines.append(f"| {name} | {mode} | {T} | {ms:.0f} | {ev:.2f} | {n} | {run_s / 60:.1f} |")
        totals[name] = total
    lines += ["", "| study | hours on one worker | hours on two workers |", "| --- | --- | --- |"]
    for name, s in totals.items():
        lines.append(f"| {name} | {s / 3600:.1f} | {s / 7200:.1f} |")
    lines.append(f"| all | {sum(totals.values()) / 3600:.1f} | {sum(totals.values()) / 7200:.1f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
