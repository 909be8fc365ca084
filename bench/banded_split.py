"""The banded block engine's transfer matrices applied dense or factorised over half-windows, side by side.

One forward and backward pass of :func:`hybrid_attention.banded.layer_log_alpha` (a causal layer, float32, one head,
random scores and couplings of the size a trained model has) per setting, in interleaved repetitions (dense,
factorised, dense, ...), with the factorisation forced on or off through ``hybrid_attention.banded_block.SPLIT_MIN_W``;
the table gives the medians and the median of the per-repetition ratios, and the largest difference of the results
(the two paths round differently, nothing else). It decides ``SPLIT_MIN_W``: the narrowest band where factorising pays.

    python -m bench.banded_split                      # W = 6, 7, 8 at T = 128, batch 64
    python -m bench.banded_split --bands 8 10 --block-size 256 --batch-size 8
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

from hybrid_attention import banded, banded_block


def make_pass(W: int, T: int, B: int, seed: int = 0):
    """One forward and backward pass at band ``W``: returns ``run() -> (log alpha, grad h, grad c)``."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(B, 1, T, T, generator=g).requires_grad_(True)
    c = (torch.randn(1, W, T, generator=g) * 0.3).requires_grad_(True)
    up = torch.randn(B, 1, T, T, generator=g).tril()
    beta = torch.ones(1)

    def run():
        la = banded.layer_log_alpha(h, c, beta)
        gh, gc = torch.autograd.grad((torch.softmax(la, -1) * up).sum(), (h, c))
        return la.detach(), gh, gc

    return run


def timed(run, split: bool) -> tuple[float, tuple]:
    old = banded_block.SPLIT_MIN_W
    banded_block.SPLIT_MIN_W = 2 if split else 99
    try:
        t = time.perf_counter()
        out = run()
        return time.perf_counter() - t, out
    finally:
        banded_block.SPLIT_MIN_W = old


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bands", type=int, nargs="+", default=[6, 7, 8])
    p.add_argument("--block-size", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    print(f"Command: `python -m bench.banded_split {' '.join(sys.argv[1:] if argv is None else argv)}`\n")
    print(f"T = {args.block_size}, batch {args.batch_size}, 1 head, float32, 1 thread, torch {torch.__version__}; "
          f"median of {args.reps} interleaved reps\n")  # fmt: skip
    print("| W | dense ms | factorised ms | dense / factorised | max diff log alpha | max rel diff grads |")
    print("| --- | --- | --- | --- | --- | --- |")
    for W in args.bands:
        run = make_pass(W, args.block_size, args.batch_size)
        _, ref = timed(run, False)  # warm-up and the results of both paths
        _, got = timed(run, True)
        vis = torch.isfinite(ref[0])
        dla = float((ref[0] - got[0])[vis].abs().max())
        dg = max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(got[1:], ref[1:]))
        dense, fact = [], []
        for _ in range(args.reps):
            dense.append(timed(run, False)[0])
            fact.append(timed(run, True)[0])
        ratio = statistics.median(d / f for d, f in zip(dense, fact))
        print(f"| {W} | {1e3 * statistics.median(dense):.0f} | {1e3 * statistics.median(fact):.0f} | {ratio:.2f}x | "
              f"{dla:.1e} | {dg:.1e} |", flush=True)  # fmt: skip
    print(f"\n{os.cpu_count()} cores, load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
