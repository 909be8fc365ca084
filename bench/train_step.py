"""Time per training step of Boltzmann (``hj``) against softmax attention at several block sizes.

Same model (one layer, one head by default), same batch, same optimiser; for each block size the modes are
measured side by side with interleaved repetitions (``softmax, hj, softmax, hj, ...``) so that machine load hits
both alike, and the table reports medians and the ratio of medians. Target: ``hj`` at T = 12 within 3x of softmax.

    python -m bench.train_step                      # T = 8 12 16, modes softmax hj, 1 thread
    python -m bench.train_step --modes softmax hj h j --block-sizes 4 8 12 16 --profile 12
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from hybrid_attention.model import Transformer, TransformerConfig
from hybrid_attention.sampling import Sampling


def make_step(mode: str, T: int, args: argparse.Namespace, sampling: Sampling | None = None):
    """One training step (forward, backward, AdamW) of a fixed model and batch; ``args`` gives ``n_embd``,
    ``n_head``, ``n_layer``, ``batch_size``. With ``sampling`` (a :class:`~hybrid_attention.Sampling`), attention
    marginals come through it (every step with its seed)."""
    torch.manual_seed(0)
    cfg = TransformerConfig(
        vocab_size=65,
        block_size=T,
        n_embd=args.n_embd,
        n_head=args.n_head,
        n_layer=args.n_layer,
        attention=mode,
        exact=sampling is None,
    )
    model = Transformer(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 65, (args.batch_size, T), generator=g)
    y = torch.randint(0, 65, (args.batch_size, T), generator=g)

    def step() -> None:
        _, loss = model(x, y, sampling=sampling)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def cli_step(cfg, checkpoint: str | None = None, sampling: Sampling | None = None):
    """One training step (forward, backward, clipping, AdamW at a negligible learning rate, so trained weights stay
    where their run left them) of the command line's model for the resolved ``TrainConfig`` ``cfg``, at the weights of
    a ``train`` run's ``checkpoint`` (``None``: its initialisation, seed 0), cycling over four fixed batches of the
    task of ``cfg.batch_size`` rows; ``sampling`` as :meth:`Transformer.forward` takes it (``None``: exact)."""
    from hybrid_attention.apps.train import load_task

    task, _ = load_task(cfg)
    torch.manual_seed(0)
    model = Transformer(cfg.model_config(task.vocab_size))
    if checkpoint:
        try:
            model.load_state_dict(torch.load(checkpoint, weights_only=False)["model"])
        except (RuntimeError, ValueError) as exc:  # another model shape, band or block size
            raise SystemExit(f"{checkpoint}: not a train run of this model ({exc})") from exc
    opt = torch.optim.AdamW(model.parameters(), lr=1e-12)
    gen = torch.Generator().manual_seed(5)
    T = cfg.block_size
    batches = [task.get_batch("train", cfg.batch_size, T, generator=gen) for _ in range(4)]
    count = [0]

    def step() -> None:
        x, y = batches[count[0] % 4]
        count[0] += 1
        _, loss = model(x, y, sampling=sampling)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return step


def time_steps(step, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - t) / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--block-sizes", type=int, nargs="+", default=[8, 12, 16])
    p.add_argument("--modes", nargs="+", default=["softmax", "hj"])
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--n-head", type=int, default=1)
    p.add_argument("--n-layer", type=int, default=1)
    p.add_argument("--reps", type=int, default=15, help="interleaved repetitions per mode")
    p.add_argument("--steps-per-rep", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--profile", type=int, default=None, metavar="T", help="also print a torch.profiler table for hj at this T"
    )
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"batch {args.batch_size}, n_embd {args.n_embd}, n_head {args.n_head}, n_layer {args.n_layer}, "
        f"threads {args.threads}, torch {torch.__version__}; median of {args.reps} interleaved reps x {args.steps_per_rep} steps"
    )
    base = args.modes[0]
    header = (
        "| T | "
        + " | ".join(f"{m} ms/step" for m in args.modes)
        + " | "
        + " | ".join(f"{m} / {base}" for m in args.modes[1:])
        + " |"
    )
    print(header)
    print("|" + " --- |" * (1 + 2 * len(args.modes) - 1))
    for T in args.block_sizes:
        steps = {m: make_step(m, T, args) for m in args.modes}
        for m in args.modes:  # warm-up
            time_steps(steps[m], 3)
        times: dict[str, list[float]] = {m: [] for m in args.modes}
        for _ in range(args.reps):
            for m in args.modes:
                times[m].append(time_steps(steps[m], args.steps_per_rep))
        med = {m: statistics.median(v) for m, v in times.items()}
        cells = [f"{1e3 * med[m]:.2f}" for m in args.modes] + [f"{med[m] / med[base]:.2f}x" for m in args.modes[1:]]
        print(f"| {T} | " + " | ".join(cells) + " |", flush=True)
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        step = make_step("hj", args.profile, args)
        time_steps(step, 3)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            time_steps(step, 10)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


if __name__ == "__main__":
    main()
