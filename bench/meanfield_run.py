"""Mean-field attention over a real training run: ``train --sampler meanfield`` beside softmax, old and new solver.

Part 1 (``runs``): the user's shortest commands, ``train --attention hj --sampler meanfield --block-size T`` (today
the per-row solver, ``solver=rows``), the same with ``--sampler-option solver=damped`` (the legacy whole-batch
damped iteration), the same with ``--sampler-option kernel=torch`` (the per-row solver in torch loops, as before its
compiled loops; arm ``torch``) and ``train --attention softmax --block-size T``, each for ``--steps`` steps with one evaluation
at the end (``--eval-interval`` = ``--steps``). A run's per-step time is its own ``elapsed_s / steps`` from
``metrics.json`` (the training loop's clock, which excludes evaluation, start-up and the cost probe): the average over
the run's first ``--steps`` steps. The commands of one repetition run back to back (softmax, rows, damped, ...), and
the table gives each arm's median per-step time and the median over repetitions of the per-repetition ratio to
softmax.

Part 3 (``weights``): training steps (forward and backward, one batch of 64) of given trained models, the legacy
(damped, 0.5) and the default (rows, damping 1) solver interleaved step by step, and each solver's marginals against
the damped iteration run to 5000 iterations (convergence, residual, largest difference).

Part 2 (``trace``): one training run in process (the CLI's configuration, model, optimiser, schedule and batches)
recording
each step's forward iterations, implicit-backward iterations, damped-iteration work, Newton rows and step time,
summarised by step ranges.

    python -m bench.meanfield_run runs --block-size 64 --steps 500 --reps 1
    python -m bench.meanfield_run trace --block-size 64 --steps 500 --solver rows
    python -m bench.meanfield_run weights RUN_DIR ... --reps 5
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARMS = {
    "softmax": ["--attention", "softmax"],
    "meanfield rows (default)": ["--attention", "hj", "--sampler", "meanfield"],
    "meanfield damped (legacy)": ["--attention", "hj", "--sampler", "meanfield", "--sampler-option", "solver=damped"],
    "meanfield rows, torch loops (torch)": [
        "--attention",
        "hj",
        "--sampler",
        "meanfield",
        "--sampler-option",
        "kernel=torch",
    ],
}
RANGES = ((0, 10), (10, 60), (60, 160), (160, 360), (360, 500))


def _run(arm: list[str], T: int, steps: int, out: str, tree: str | None = None) -> float:
    """Per-step seconds of one CLI run (its own clock over ``steps`` steps, evaluation excluded); ``tree``: run
    another checkout's code (``PYTHONPATH=tree``), else this one's."""
    argv = [*arm, "--block-size", str(T), "--steps", str(steps), "--eval-interval", str(steps)]
    argv += ["--eval-size", "256", "--no-progress", "--threads", "1", "--out", out]
    env = None if tree is None else {**os.environ, "PYTHONPATH": tree}
    cmd = [sys.executable, "-m", "hybrid_attention.apps", "train", *argv]
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=tree)
    metrics = json.loads((Path(out) / "metrics.json").read_text())
    return metrics["elapsed_s"] / metrics["step"]


def runs(args: argparse.Namespace) -> None:
    arms = {name: (arm, None) for name, arm in ARMS.items() if name.split()[-1].strip("()") in args.arms}
    if args.base_tree:  # the default arm on another checkout's code (before/after a change, interleaved)
        arms[f"meanfield rows (default) at {args.base_tree}"] = (ARMS["meanfield rows (default)"], args.base_tree)
    per: dict[str, list[float]] = {name: [] for name in arms}
    print(f"# T = {args.block_size}, {args.steps} steps, {args.reps} repetitions; load {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for i, (name, (arm, tree)) in enumerate(arms.items()):
                t0 = time.perf_counter()
                per[name].append(_run(arm, args.block_size, args.steps, os.path.join(tmp, f"{rep}-{i}"), tree))
                print(
                    f"rep {rep} {name}: {per[name][-1] * 1e3:.1f} ms/step ({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
    print("\n| T | arm | ms/step (median) | ratio to softmax (median of per-rep ratios) | load at the end |")
    print("| --- | --- | --- | --- | --- |")
    for name in arms:
        ratio = statistics.median(a / s for a, s in zip(per[name], per["softmax"]))
        med = statistics.median(per[name]) * 1e3
        print(f"| {args.block_size} | {name} | {med:.1f} | {ratio:.2f} | {os.getloadavg()[0]:.1f} |")


def _lr(step: int, cfg) -> float:
    """The training loop's schedule: linear warm-up, then cosine decay to 10 % of ``lr``."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    frac = min((step - cfg.warmup) / max(1, cfg.max_steps - cfg.warmup), 1.0)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def trace(args: argparse.Namespace) -> None:
    import torch

    from hybrid_attention import Transformer
    from hybrid_attention.apps.train import TrainConfig, build_sampling, load_task

    torch.set_num_threads(1)
    options = {"solver": "damped", "damping": 0.5} if args.solver == "damped" else {}  # legacy: as old runs resume
    cfg = TrainConfig(attention="hj", sampler="meanfield", block_size=args.block_size, sampler_options=options)
    cfg = cfg.resolved()
    sampling = build_sampling(cfg)
    task, _ = load_task(cfg)
    torch.manual_seed(cfg.seed)  # the training loop's model, optimiser and batches (apps/train/loop.py)
    model = Transformer(cfg.model_config(task.vocab_size))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.99))
    gen = torch.Generator().manual_seed(cfg.seed)
    log = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = _lr(step, cfg)
        x, y = task.get_batch("train", cfg.batch_size, cfg.block_size, generator=gen)
        _, loss = model(x, y, sampling=sampling)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        log.append({"s": time.perf_counter() - t0, **sampling.sampler.last_info})
    print(f"# T = {args.block_size}, solver {args.solver}: per-step means over step ranges")
    print(
        "| steps | forward iterations | forward iterations, max | backward iterations | work (full-width iterations) | "
        "Newton rows | s/step |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for lo, hi in RANGES + ((0, args.steps),):
        part = log[lo:hi]
        if not part:
            continue
        mean = lambda k: statistics.mean(float(x.get(k) or 0) for x in part)  # noqa: E731
        print(
            f"| {lo + 1}-{min(hi, len(log))} | {mean('iterations'):.1f} | {max(int(x['iterations']) for x in part)} | "
            f"{mean('backward_iterations'):.1f} | "
            f"{mean('work'):.1f} | {mean('newton_rows'):.1f} | {mean('s'):.3f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(log))


def weights(args: argparse.Namespace) -> None:
    import torch

    from experiments.long_context import validate_engines as ve
    from hybrid_attention import Sampling
    from hybrid_attention.backends import get_sampler

    torch.set_num_threads(1)
    print("| model | T | solver | step s (median) | damped / rows (median of pairs) | forward iterations | residual |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for path in args.models:
        model, cfg, task = ve.load(Path(path))
        model.train()
        x, y = task.get_batch("train", 64, cfg.block_size, generator=torch.Generator().manual_seed(5))
        agreement(model, x)
        warm_start(model, x, task.get_batch("train", 64, cfg.block_size, generator=torch.Generator().manual_seed(6))[0])
        if args.no_timing:
            continue
        times: dict[str, list[float]] = {"damped": [], "rows": []}
        info: dict[str, dict] = {}
        for _ in range(args.reps):  # interleaved: damped, rows, damped, rows, ...
            for solver in times:
                sampler = get_sampler("meanfield", solver=solver, damping=0.5 if solver == "damped" else 1.0)
                model.zero_grad(set_to_none=True)
                t0 = time.perf_counter()
                _, loss = model(x, y, sampling=Sampling(sampler))
                loss.backward()
                times[solver].append(time.perf_counter() - t0)
                info[solver] = dict(sampler.last_info)
        ratio = statistics.median(d / r for d, r in zip(times["damped"], times["rows"]))
        for solver in times:
            i = info[solver]
            print(
                f"| {path} | {cfg.block_size} | {solver} | {statistics.median(times[solver]):.3f} | {ratio:.2f} | "
                f"{i['iterations']} | {i['residual']:.1e} |",
                flush=True,
            )


def _grouped(model, x):
    import torch

    from hybrid_attention.grouping import Grouped
    from hybrid_attention.ising import IsingProblem

    (p,) = model.attention_problems(x, layers=[0])
    B, H, T, _ = p.h.shape
    mask = torch.ones(T, T, dtype=torch.bool).tril().expand(B, H, T, T)
    beta = p.beta.reshape(()) if p.beta.numel() == 1 else p.beta[None, :, None].expand(B, H, T)
    return Grouped(IsingProblem.derived(p.h, p.J[None, :, None], beta, mask))


def warm_start(model, x, x_prev) -> None:
    """The rows solver on ``x`` from ``tanh(beta h)`` and from its solution on the previous batch ``x_prev`` (what
    a warm start from the last training step would give): iterations, work, rows whose fixed point differs by 1e-2."""
    import torch

    from hybrid_attention.backends.mcmc import meanfield

    with torch.no_grad():
        prev, cur = _grouped(model, x_prev), _grouped(model, x)
        tol = 1000 * torch.finfo(cur.h.dtype).eps
        kw = dict(tol=tol, solver="rows", damping=1.0, warn=False)
        start, _ = meanfield.mean_field(prev.h, prev.J, prev.beta, prev.mask, **kw)
        cold, ic = meanfield.mean_field(cur.h, cur.J, cur.beta, cur.mask, **kw)
        warm, iw = meanfield.mean_field(cur.h, cur.J, cur.beta, cur.mask, start=start, **kw)
    moved = int(((warm - cold).abs().amax(-1) > 1e-2).sum())
    print(
        f"#   warm start from the previous batch's solution: iterations {iw['iterations']} (cold {ic['iterations']}), "
        f"work {iw['work']:.1f} (cold {ic['work']:.1f}), rows at another fixed point (> 1e-2): {moved} of "
        f"{cold.shape[1]}",
        flush=True,
    )


def agreement(model, x) -> None:
    """The layer's mean-field marginals on ``x`` by both solvers at the float32 tolerance, and by the damped iteration
    run to 5000 iterations (the reference where 500 do not converge): convergence, residual, largest difference."""
    import torch

    from hybrid_attention.backends.mcmc import meanfield

    with torch.no_grad():
        gp = _grouped(model, x)
        tol = 1000 * torch.finfo(gp.h.dtype).eps
        runs = {
            "damped 500": dict(solver="damped", damping=0.5, max_iter=500),
            "damped 5000": dict(solver="damped", damping=0.5, max_iter=5000),
            "rows (default)": dict(solver="rows", damping=1.0, max_iter=500),
        }
        got = {
            k: meanfield.mean_field(gp.h, gp.J, gp.beta, gp.mask, tol=tol, warn=False, **kw) for k, kw in runs.items()
        }
    ref = got["damped 5000"][0]
    for k, (m, info) in got.items():
        diff = float((m - ref).abs().max())
        print(
            f"#   {k}: converged {info['converged']}, iterations {info['iterations']}, residual {info['residual']:.1e}, "
            f"max |m - m(damped 5000)| {diff:.1e}",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="part", required=True)
    r = sub.add_parser("runs")
    t = sub.add_parser("trace")
    w = sub.add_parser("weights")
    w.add_argument("models", nargs="+", help="trained run directories (config.json and checkpoint.pt)")
    w.add_argument("--reps", type=int, default=5)
    w.add_argument("--no-timing", action="store_true", help="only the agreement and warm-start checks")
    for q in (r, t):
        q.add_argument("--block-size", type=int, default=64)
        q.add_argument("--steps", type=int, default=500)
    r.add_argument("--reps", type=int, default=1)
    r.add_argument(
        "--arms",
        nargs="+",
        default=["softmax", "default", "legacy"],
        help="softmax, default (rows), legacy (damped), torch (rows in the torch loops, not the compiled ones)",
    )
    r.add_argument("--base-tree", default=None, help="also run the default arm on this checkout's code (before/after)")
    t.add_argument("--solver", choices=("rows", "damped"), default="rows")
    t.add_argument("--json", default=None, help="write the per-step log here")
    args = p.parse_args(argv)
    {"runs": runs, "trace": trace, "weights": weights}[args.part](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
