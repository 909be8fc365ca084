"""Per-step time of ``hybrid-attention train`` through the command line, sampler runs beside softmax, ratios side by side.

Each command is the shortest one a user types (``train --sampler gibbs --block-size 64`` and ``train --attention
softmax --block-size 64``), with only the run length and a small validation set added; a step's time is the
difference of two run lengths' wall times (``--short`` and ``--long`` steps) over the step difference, so start-up,
the cost projection's probe and the final evaluations cancel. Runs are interleaved (every command once per
repetition) and the table gives the median per-step time over ``--reps`` and the ratio of medians to softmax.
Target (issue #44): gibbs with its training defaults (8 reads, the conditional estimator, 8 persistent chains) at most
8x the softmax step at T = 64.

    nice -n 10 python -m bench.cli_train_step --block-size 64 --reps 3 --out results/bench/cli_train_step.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARMS = {
    "softmax": ["--attention", "softmax"],
    "gibbs (train --sampler gibbs)": ["--sampler", "gibbs"],
}


def _wall(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "hybrid_attention.apps", *argv], check=True, capture_output=True)
    return time.perf_counter() - t0


def _command(arm: list[str], T: int, steps: int, out: str) -> list[str]:
    return ["train", *arm, "--block-size", str(T), "--steps", str(steps), "--eval-size", "64", "--no-progress"] + [
        "--out",
        out,
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--short", type=int, default=2, help="steps of the short run")
    p.add_argument("--long", type=int, default=12, help="steps of the long run")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    per_step: dict[str, list[float]] = {name: [] for name in ARMS}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for name, arm in ARMS.items():
                t = {}
                for steps in (args.short, args.long):
                    out = os.path.join(tmp, f"{rep}-{len(t)}-{name.split()[0]}")
                    t[steps] = _wall(_command(arm, args.block_size, steps, out))
                per_step[name].append((t[args.long] - t[args.short]) / (args.long - args.short))
    base = statistics.median(per_step["softmax"])
    cmds = [" ".join(["hybrid-attention", *_command(arm, args.block_size, args.long, "DIR")]) for arm in ARMS.values()]
    lines = [
        f"Command: `python -m bench.cli_train_step --block-size {args.block_size} --short {args.short} --long "
        f"{args.long} --reps {args.reps}`",
        "",
        "Runs (and the same with --steps " + str(args.short) + "): " + "; ".join(f"`{c}`" for c in cmds),
        "",
        f"T = {args.block_size}; per-step time = (wall({args.long} steps) - wall({args.short} steps)) / "
        f"{args.long - args.short}; median of {args.reps} interleaved repetitions; load average at the end "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores",
        "",
        "| command | ms/step (median) | min - max | / softmax |",
        "| --- | --- | --- | --- |",
    ]
    for name, xs in per_step.items():
        med = statistics.median(xs)
        lines.append(f"| {name} | {1e3 * med:.0f} | {1e3 * min(xs):.0f} - {1e3 * max(xs):.0f} | {med / base:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
