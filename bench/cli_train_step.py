"""Per-step time of ``hybrid-attention train`` through the command line, sampler runs beside a baseline, ratios side by side.

Each command is the shortest one a user types (``--pair gibbs``: ``train --sampler gibbs --block-size 64`` beside
``train --attention softmax --block-size 64``; ``--pair qemcmc``: ``train --sampler qemcmc --block-size 12`` beside
``train --sampler exact --block-size 12``), with only the run length and a small validation set added; a step's time
is the difference of two run lengths' training-loop clocks (``elapsed_s`` of each run's ``metrics.json``;
``--clock wall``: the processes' wall times) over the step difference, so start-up, the cost projection's probe,
the evaluations and the first steps' warm-up cancel. Runs are interleaved (every command once per
repetition) and the table gives the median per-step time over ``--reps``, the ratio of medians to the baseline and the
median (and spread) of the per-repetition ratios. Targets (issue #44): gibbs with its training defaults (8 reads, the
conditional estimator, 8 persistent chains) at most 8x the softmax step at T = 64; qemcmc with its training defaults
(8 fresh chains from the mean-field start, 1 move of a 2-step proposal, Rao-Blackwellised) at most 5x the exact step
at T = 12. The qemcmc pair also runs the same command with the proposal draw's torch kernel
(``--sampler-option kernel=torch``) instead of the compiled one that numba gives by default.

    python -m bench.cli_train_step --block-size 64 --short 2 --long 22 --reps 5 --out results/bench/cli_train_step.md
    nice -n 10 python -m bench.cli_train_step --pair qemcmc --block-size 12 --reps 5 --out results/bench/cli_train_step_qemcmc.md
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: ``--pair`` -> arms (the first is the baseline): gibbs against softmax (issue #44: at most 8x at T = 64), qemcmc
#: against the exact step (issue #44: at most 5x at T = 12)
PAIRS = {
    "gibbs": {"softmax": ["--attention", "softmax"], "gibbs (train --sampler gibbs)": ["--sampler", "gibbs"]},
    "qemcmc": {
        "exact (train)": ["--sampler", "exact"],
        "qemcmc (train --sampler qemcmc)": ["--sampler", "qemcmc"],
        "qemcmc-torch (the same, --sampler-option kernel=torch)": [
            "--sampler",
            "qemcmc",
            "--sampler-option",
            "kernel=torch",
        ],
    },
}
ARMS = PAIRS["gibbs"]


def _wall(argv: list[str], clock: str = "wall") -> float:
    """Seconds of one command: its wall time, or (``clock="loop"``) the training loop's own clock, ``elapsed_s``
    of the run's ``metrics.json`` (start-up, the cost probe and evaluations excluded: a process's start-up varies by
    about a second between runs, more than ten softmax steps take)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "hybrid_attention.apps", *argv], check=True, capture_output=True)
    wall = time.perf_counter() - t0
    if clock == "wall":
        return wall
    return float(json.loads((Path(argv[argv.index("--out") + 1]) / "metrics.json").read_text())["elapsed_s"])


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
    p.add_argument("--pair", choices=tuple(PAIRS), default="gibbs", help="which arms (module docstring)")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument(
        "--clock", choices=("loop", "wall"), default="loop", help="loop: the run's elapsed_s; wall: the process's"
    )
    args = p.parse_args(argv)
    arms = PAIRS[args.pair]
    per_step: dict[str, list[float]] = {name: [] for name in arms}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for name, arm in arms.items():
                t = {}
                for steps in (args.short, args.long):
                    out = os.path.join(tmp, f"{rep}-{len(t)}-{name.split()[0]}")
                    t[steps] = _wall(_command(arm, args.block_size, steps, out), args.clock)
                per_step[name].append((t[args.long] - t[args.short]) / (args.long - args.short))
    base_name = next(iter(arms))
    base = statistics.median(per_step[base_name])
    cmds = [" ".join(["hybrid-attention", *_command(arm, args.block_size, args.long, "DIR")]) for arm in arms.values()]
    lines = [
        f"Command: `python -m bench.cli_train_step --block-size {args.block_size} --short {args.short} --long "
        f"{args.long} --reps {args.reps} --pair {args.pair} --clock {args.clock}`",
        "",
        "Runs (and the same with --steps " + str(args.short) + "): " + "; ".join(f"`{c}`" for c in cmds),
        "",
        f"T = {args.block_size}; per-step time = ({args.clock}({args.long} steps) - {args.clock}({args.short} steps)) / "
        f"{args.long - args.short}; median of {args.reps} interleaved repetitions; load average at the end "
        f"{', '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores",
        "",
        f"| command | ms/step (median) | min - max | / {base_name} | per-rep ratio, median (min - max) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, xs in per_step.items():
        med = statistics.median(xs)
        r = [x / b for x, b in zip(xs, per_step[base_name])]
        lines.append(
            f"| {name} | {1e3 * med:.0f} | {1e3 * min(xs):.0f} - {1e3 * max(xs):.0f} | {med / base:.2f}x | "
            f"{statistics.median(r):.2f} ({min(r):.2f} - {max(r):.2f}) |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
