"""Where a mean-field training step spends its CPU time, beside softmax (issue #44 target 2).

One thread; the CLI's model, optimiser and batch size (``train`` defaults: one layer, one head, 64 wide, batch 64),
at initialisation or at a trained checkpoint's weights; every measurement is CPU time of this thread
(``time.thread_time``), so other processes on the machine slow it little.

``steps``: full training steps (forward, backward, gradient clipping, AdamW with a negligible learning rate so the
weights stay put), softmax and mean field interleaved step by step; prints each arm's median CPU ms per step and
the median of the per-pair ratios.

``lockstep``: two real training runs in one process, softmax and ``hj`` with the ``train`` default mean-field
sampler, the CLI's configuration, schedule (``--steps`` as ``max_steps``) and batches, their steps interleaved (one
softmax step, one mean-field step, ...): CPU ms per step of each over step ranges and the whole run, the ratio of the
means (the mean-field step averaged over the run against softmax's), and the mean-field solver's iterations.
``--sampler-option KEY=VALUE`` (repeatable, as ``train``'s flag) sets the mean-field arm's options over ``train``'s
defaults; ``--also KEY=VALUE[,KEY=VALUE]`` (repeatable) adds a further mean-field run with those options on top,
interleaved with the others (one softmax step, then one step of each mean-field run), a table each; ``--save
PREFIX`` writes each mean-field run's final weights to ``PREFIX<arm>.pt`` (arm 0 the first).

``profile``: the same step under ``cProfile`` (``timer=time.thread_time``), the mean-field step's time split into
the parts of its path (cumulative CPU ms per step of the functions named in :data:`PARTS`, which nest: read the
rows as a tree), softmax's step beside it. Profiling adds a per-call overhead, so the parts' absolute times are
inflated; compare rows of one table, and use ``steps`` for ratios.

    python -m bench.meanfield_profile steps --block-size 64 [--checkpoint RUN_DIR/checkpoint.pt]
    python -m bench.meanfield_profile profile --block-size 64 [--checkpoint RUN_DIR/checkpoint.pt]
    python -m bench.meanfield_profile lockstep --block-size 64 --steps 500 [--sampler-option tol=1e-3] [--also tol=3e-4]

Run it with ``PYTHONPATH`` set to another checkout to profile that checkout's code (before/after a change).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time

#: (label, file suffix, function name): cumulative CPU time per step of these functions
PARTS = (
    ("step (forward, backward, clip, AdamW)", "meanfield_profile.py", "step"),
    ("  model forward", "model.py", "forward"),
    ("    attention layer", "attention.py", "forward"),
    ("      attention weights", "attention.py", "attention_weights"),
    ("      bridge: attention_marginals", "bridge.py", "attention_marginals"),
    ("        sampler.differentiable_marginals", "meanfield.py", "differentiable_marginals"),
    ("          Grouped (regroup h, J, beta, mask)", "grouping.py", "__init__"),
    ("          mean_field", "meanfield.py", "mean_field"),
    ("            width_blocks", "meanfield.py", "width_blocks"),
    ("            solve_rows (forward iteration, Newton)", "fixed_point.py", "solve_rows"),
    ("              Newton rows", "mf_newton.py", "newton_free_energy"),
    ("            implicit step f(m*) with graph (legacy)", "meanfield.py", "implicit"),
    ("            RowsFixedPoint.forward", "mf_adjoint.py", "forward"),
    ("      marginals -> weights", "kernels.py", "normalised_weights"),
    ("  backward (autograd engine)", "graph.py", "_engine_run_backward"),
    ("    adjoint hook (legacy)", "meanfield.py", "hook"),
    ("    RowsFixedPoint.backward", "mf_adjoint.py", "backward"),
    ("      block_adjoint (adjoint solve)", "mf_adjoint.py", "block_adjoint"),
    ("  clip_grad_norm_", "clip_grad.py", "clip_grad_norm_"),
    ("  optimiser step", "adam.py", "step"),
)


def _setup(attention: str, T: int, checkpoint: str | None):
    """``(step, sampler)``: one training step of the CLI's model for ``attention`` (softmax or hj with the
    ``train`` default mean-field sampler) cycling over four fixed batches (:func:`bench.train_step.cli_step`)."""
    from bench.train_step import cli_step
    from hybrid_attention.apps.train import TrainConfig, build_sampling

    cfg = TrainConfig(attention=attention, sampler="meanfield" if attention == "hj" else "exact", block_size=T)
    cfg = cfg.resolved()
    sampling = build_sampling(cfg) if attention == "hj" else None
    step = cli_step(cfg, checkpoint if attention == "hj" else None, sampling)
    return step, (None if sampling is None else sampling.sampler)


def steps(args: argparse.Namespace) -> None:
    arms = {
        "softmax": _setup("softmax", args.block_size, None),
        "meanfield": _setup("hj", args.block_size, args.checkpoint),
    }
    for step, _ in arms.values():
        for _ in range(3):
            step()
    times: dict[str, list[float]] = {k: [] for k in arms}
    for _ in range(args.pairs):
        for name, (step, _) in arms.items():
            t0 = time.thread_time()
            step()
            times[name].append(time.thread_time() - t0)
    ratio = statistics.median(m / s for m, s in zip(times["meanfield"], times["softmax"]))
    info = arms["meanfield"][1].last_info
    print(f"# T = {args.block_size}, weights: {args.checkpoint or 'initial'}; {args.pairs} interleaved pairs")
    print(f"# mean field at the last step: {info}")
    print("| T | softmax CPU ms/step | meanfield CPU ms/step | meanfield / softmax (median of pairs) |")
    print("| --- | --- | --- | --- |")
    sm, mf = (statistics.median(times[k]) * 1e3 for k in ("softmax", "meanfield"))
    print(f"| {args.block_size} | {sm:.1f} | {mf:.1f} | {ratio:.2f} |")


def _parts(stats: pstats.Stats, n: int) -> dict[str, float]:
    out = {}
    for label, suffix, name in PARTS:
        hits = [v[3] for (file, _, func), v in stats.stats.items() if func == name and file.endswith(suffix)]  # type: ignore[attr-defined]
        total = max(hits, default=0.0)  # the outermost of nested functions of one name (e.g. forward)
        out[label] = total / n * 1e3
    return out


def profile(args: argparse.Namespace) -> None:
    got = {}
    for name, attention in (("softmax", "softmax"), ("meanfield", "hj")):
        step, _ = _setup(attention, args.block_size, args.checkpoint)
        for _ in range(3):
            step()
        prof = cProfile.Profile(timer=time.thread_time)
        prof.enable()
        for _ in range(args.steps):
            step()
        prof.disable()
        got[name] = _parts(pstats.Stats(prof), args.steps)
    print(f"# T = {args.block_size}, weights: {args.checkpoint or 'initial'}; {args.steps} steps under cProfile")
    print("| part (cumulative, nested) | softmax CPU ms/step | meanfield CPU ms/step |")
    print("| --- | --- | --- |")
    for label, *_ in PARTS:
        s, m = got["softmax"][label], got["meanfield"][label]
        if s or m:
            print(f"| {label.replace(' ', '&nbsp;', len(label) - len(label.lstrip()))} | {s:.1f} | {m:.1f} |")


def _trainer(attention: str, T: int, steps: int, options: dict | None = None):
    """``(step(i) -> CPU seconds, sampler, model)``: the CLI's training run (``train --attention ATTENTION [--sampler
    meanfield [--sampler-option KEY=VALUE ...]] --block-size T --steps STEPS``: model, AdamW, schedule, batches) one
    step at a time; ``options``: the mean-field sampler options given (over ``train``'s defaults)."""
    import torch

    from bench.meanfield_run import _lr
    from hybrid_attention import Transformer
    from hybrid_attention.apps.train import TrainConfig, build_sampling, load_task

    kw = {"sampler": "meanfield", "sampler_options": dict(options or {})} if attention == "hj" else {}
    cfg = TrainConfig(attention=attention, block_size=T, max_steps=steps, **kw).resolved()
    sampling = build_sampling(cfg) if attention == "hj" else None
    task, _ = load_task(cfg)
    torch.manual_seed(cfg.seed)  # the training loop's model, optimiser and batches (apps/train/loop.py)
    model = Transformer(cfg.model_config(task.vocab_size))
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.99))
    gen = torch.Generator().manual_seed(cfg.seed)

    def step(i: int) -> float:
        t0 = time.thread_time()
        for g in opt.param_groups:
            g["lr"] = _lr(i, cfg)
        x, y = task.get_batch("train", cfg.batch_size, T, generator=gen)
        _, loss = model(x, y, sampling=sampling)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        return time.thread_time() - t0

    return step, (None if sampling is None else sampling.sampler), model


def _arm_options(args: argparse.Namespace) -> list[dict]:
    """The mean-field runs' sampler options given: ``--sampler-option`` for the first, each ``--also`` on top."""
    from hybrid_attention.apps.train.flags import parse_sampler_option

    base = dict(parse_sampler_option(o) for o in args.sampler_option)
    also = [dict(parse_sampler_option(o) for o in a.split(",")) for a in args.also]
    return [base, *({**base, **a} for a in also)]


def lockstep(args: argparse.Namespace) -> None:
    import os

    import torch

    soft, _, _ = _trainer("softmax", args.block_size, args.steps)
    options = _arm_options(args)
    arms = [_trainer("hj", args.block_size, args.steps, o) for o in options]
    logs: list[list] = [[] for _ in arms]
    print(
        f"# T = {args.block_size}, {args.steps} steps, softmax and mean field interleaved step by step; "
        f"load {os.getloadavg()}",
        flush=True,
    )
    for i in range(args.steps):
        s = soft(i)
        for log, (mf, sampler, _) in zip(logs, arms):
            log.append((s, mf(i), dict(sampler.last_info)))
        if (i + 1) % 50 == 0:
            print(f"#   step {i + 1}", flush=True)
    for k, (log, o, (_, sampler, model)) in enumerate(zip(logs, options, arms)):
        print(f"\n## mean-field arm {k}: --sampler-option {o or '(none)'} -> {sampler!r}, tol {sampler.tol}")
        _lockstep_table(log, args.steps)
        if args.save:
            torch.save(model.state_dict(), f"{args.save}{k}.pt")
    print(f"# load at the end {os.getloadavg()}")


def _lockstep_table(log: list, steps: int) -> None:
    from bench.meanfield_run import RANGES

    print(
        "| steps | softmax CPU ms/step | meanfield CPU ms/step | ratio of means | forward iterations | "
        "forward iterations, max | backward iterations | Newton rows |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for lo, hi in RANGES + ((0, steps),):
        part = log[lo:hi]
        if not part:
            continue
        s, m = (statistics.mean(p[k] for p in part) * 1e3 for k in (0, 1))
        it = [
            statistics.mean(float(p[2].get(k) or 0) for p in part)
            for k in ("iterations", "backward_iterations", "newton_rows")
        ]
        top = max(int(p[2].get("iterations") or 0) for p in part)
        print(
            f"| {lo + 1}-{min(hi, len(log))} | {s:.1f} | {m:.1f} | {m / s:.2f} | {it[0]:.1f} | {top} | "
            + " | ".join(f"{v:.1f}" for v in it[1:])
            + " |"
        )


def main(argv: list[str] | None = None) -> int:
    import torch

    torch.set_num_threads(1)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="part", required=True)
    s, q, k = sub.add_parser("steps"), sub.add_parser("profile"), sub.add_parser("lockstep")
    k.add_argument("--block-size", type=int, default=64)
    k.add_argument("--steps", type=int, default=500)
    k.add_argument("--sampler-option", action="append", default=[], metavar="KEY=VALUE")
    k.add_argument("--also", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]")
    k.add_argument("--save", default=None, metavar="PREFIX", help="write each mean-field run's final weights")
    for a in (s, q):
        a.add_argument("--block-size", type=int, default=64)
        a.add_argument("--checkpoint", default=None, help="a trained hj run's checkpoint.pt (read only)")
    s.add_argument("--pairs", type=int, default=30)
    q.add_argument("--steps", type=int, default=20)
    args = p.parse_args(argv)
    {"steps": steps, "profile": profile, "lockstep": lockstep}[args.part](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
