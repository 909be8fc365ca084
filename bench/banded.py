"""Training step of banded Boltzmann attention (``train --band W --sampler exact``) against the softmax step.

The models are built from the flags a user types (``hybrid-attention train --attention hj --band 4 ...``, parsed by
the ``train`` command's own parser into its ``TrainConfig``), then one step (forward, backward, AdamW) on a fixed
batch of Shakespeare-sized tokens (vocabulary 65) is timed for each setting in interleaved repetitions (``softmax,
band 4, band 8, softmax, ...``) so machine load hits all alike; the table gives medians and the ratio to softmax.
Targets (issue #41): ``--band 4`` within 3x and ``--band 8`` within 12x of softmax at T = 128.

Flop floors (docs/banded.md). The per-position sweeps: a query's chain of ``i + 1`` keys costs ``2 (i + 1) 2**W``
multiply-adds each way (two predecessors per window state), so a causal layer's forward and backward sweeps are
``sum_i 4 (i + 1) 2**W ~ 2 T**2 2**W`` multiply-adds per (batch, head) row, against softmax attention's ``QK^T`` and
``AV``, ``2 T**2 d`` (``d`` the head size); training differentiates through the sweeps, about 3x the forward
arithmetic. The table gives that training floor in milliseconds at the elementwise multiply-add rate measured in the
same run (``torch.addcmul`` over 2**22 contiguous float32 values), the engine's measured time (the banded step minus
the softmax step: the rest of the model is the same), and their ratio. The block engine that runs by default does
more arithmetic at matrix-product speed: ``T**2 / (2W)`` query-blocks per row, each applying a ``2**W x 2**W``
transfer matrix; dense (``W < 8``) training needs six ``4**W`` products per query-block (forward and backward
messages; in the adjoint ``M V``, ``M^T Y`` and the two outer products of the matrix's gradient), factorised over
half-windows (``W >= 8``) fourteen products of ``2**(3W/2)`` (``hybrid_attention.banded_block``): the column "block
GMACs" is that count for the batch, ``6 or 14 x rows x T**2/(2W) x (4**W or 2**(3W/2))``.

    python -m bench.banded                                   # T = 128, bands 4 and 8, batch 64
    python -m bench.banded --block-sizes 512 --bands 4 --batch-size 8
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

from bench.train_step import time_steps
from hybrid_attention.apps.train.command import add_arguments
from hybrid_attention.apps.train.flags import config_from_args
from hybrid_attention.model import Transformer


def user_flags(T: int, band: int | None, args: argparse.Namespace) -> list[str]:
    """The ``hybrid-attention train`` flags of one setting (``band=None``: softmax)."""
    mode = ["--attention", "softmax"] if band is None else ["--attention", "hj", "--band", str(band)]
    return [*mode, "--sampler", "exact", "--block-size", str(T), "--batch-size", str(args.batch_size),
            "--n-embd", str(args.n_embd), "--n-head", str(args.n_head), "--out", "unused"]  # fmt: skip


def make_step(flags: list[str]):
    """One training step (forward, backward, AdamW) of the model ``train`` would build from ``flags``."""
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cfg = config_from_args(parser.parse_args(flags))
    torch.manual_seed(0)
    model = Transformer(cfg.model_config(65))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 65, (cfg.batch_size, cfg.block_size), generator=g)
    y = torch.randint(0, 65, (cfg.batch_size, cfg.block_size), generator=g)

    def step() -> None:
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def block_macs(rows: int, T: int, W: int) -> float:
    """Multiply-adds of the block engine's matrix products in one training step of a causal layer (module
    docstring): dense below ``SPLIT_MIN_W``, factorised over half-windows from it."""
    from hybrid_attention.banded_block import split

    lo = split(W)
    per = 6 * 4**W if not lo else 14 * 2 ** (W - lo) * 2 ** (W - lo) * 2**lo
    return float(rows) * T * T / (2 * W) * per


def mac_rate(reps: int = 20) -> float:
    """Multiply-adds per second of ``torch.addcmul`` over ``2**22`` contiguous float32 values (best of ``reps``)."""
    a, b, c = (torch.rand(1 << 22) for _ in range(3))
    out = torch.empty_like(a)
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        torch.addcmul(a, b, c, out=out)
        best = min(best, time.perf_counter() - t)
    return a.numel() / best


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--block-sizes", type=int, nargs="+", default=[128])
    p.add_argument("--bands", type=int, nargs="+", default=[4, 8])
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--n-head", type=int, default=1)
    p.add_argument("--reps", type=int, default=7, help="interleaved repetitions per setting")
    p.add_argument("--steps-per-rep", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    d = args.n_embd // args.n_head
    print(f"Command: `python -m bench.banded {' '.join(sys.argv[1:] if argv is None else argv)}`\n")
    print(
        f"batch {args.batch_size}, n_embd {args.n_embd}, n_head {args.n_head} (d = {d}), 1 layer, vocabulary 65, "
        f"threads {args.threads}, torch {torch.__version__}; median of {args.reps} interleaved reps x "
        f"{args.steps_per_rep} steps\n"
    )
    rate = mac_rate()
    print(f"elementwise multiply-add rate (addcmul, float32, 1 thread): {rate / 1e9:.2f} G/s\n")
    print(
        "| T | setting | ms/step | / softmax | sweep / softmax-attention MACs | training floor ms | engine ms | "
        "engine / floor | block GMACs |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for T in args.block_sizes:
        settings = {"softmax": None, **{f"--band {W}": W for W in args.bands}}
        steps = {k: make_step(user_flags(T, W, args)) for k, W in settings.items()}
        for s in steps.values():
            time_steps(s, 1)  # warm-up
        times: dict[str, list[float]] = {k: [] for k in steps}
        for _ in range(args.reps):
            for k, s in steps.items():
                times[k].append(time_steps(s, args.steps_per_rep))
        med = {k: statistics.median(v) for k, v in times.items()}
        rows = args.batch_size * args.n_head  # (batch, head) rows of one layer
        for k, W in settings.items():
            if W is None:
                print(f"| {T} | softmax | {1e3 * med[k]:.1f} | 1.00x | - | - | - | - | - |")
                continue
            sweep = 2 * rows * T * T * 2**W  # forward and backward sweeps over the causal prefixes
            floor = 3 * sweep / rate  # with the gradient
            engine = med[k] - med["softmax"]
            print(
                f"| {T} | {k} | {1e3 * med[k]:.1f} | {med[k] / med['softmax']:.2f}x | {2**W / d:.2f} | "
                f"{1e3 * floor:.1f} | {1e3 * engine:.1f} | {engine / floor:.1f}x | {block_macs(rows, T, W) / 1e9:.1f} |",
                flush=True,
            )
    print(f"\n{os.cpu_count()} cores, load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
