"""``hybrid-attention demo``: the main job on local defaults (no account, no network).

Today: a short demonstration of the exact Boltzmann engine (closed-form checks, the causal attention
kernel and its speed against a per-query loop)."""

from __future__ import annotations

import argparse
import time

import torch

from . import exact
from .ising import IsingProblem


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--block-size", type=int, default=12, help="sequence length T for the kernel timing (default 12)")
    p.add_argument("--batch-size", type=int, default=64, help="batch B for the kernel timing (default 64)")
    p.add_argument("--seed", type=int, default=0)


def _per_query_loop(h: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
    B, H, T, _ = h.shape
    out = torch.zeros_like(h)
    for b in range(B):
        for hd in range(H):
            for i in range(T):
                S = exact.enumerate_states(i + 1, dtype=h.dtype)
                Jm = J[hd, : i + 1, : i + 1]
                L = S @ h[b, hd, i, : i + 1] + 0.5 * ((S @ Jm) * S).sum(-1)
                out[b, hd, i, : i + 1] = torch.softmax(L, 0) @ S
    return out


def run(args: argparse.Namespace) -> int:
    if args.block_size < 1 or args.batch_size < 1:
        raise ValueError(f"--block-size and --batch-size must be >= 1, got {args.block_size} and {args.batch_size}")
    g = torch.Generator().manual_seed(args.seed)
    print("hybrid-attention demo: the exact Boltzmann engine\n")
    h = torch.linspace(-2, 2, 5, dtype=torch.float64)[:, None]
    m = exact.marginals(IsingProblem(h))[:, 0]
    print("one free spin, <s> against tanh(beta h):")
    for hv, mv in zip(h[:, 0], m):
        print(f"  h = {hv:+.2f}   <s> = {mv:+.6f}   tanh = {torch.tanh(hv):+.6f}")
    J = torch.tensor([[0.0, 1.5], [1.5, 0.0]], dtype=torch.float64)
    c = exact.correlations(IsingProblem(torch.zeros(2, dtype=torch.float64), J))
    print(f"\ntwo spins, J = +1.5 (ferromagnetic): <s0 s1> = {c[0, 1]:.6f}, closed form tanh(1.5) = {torch.tanh(torch.tensor(1.5)):.6f}")

    B, T = args.batch_size, args.block_size
    hs = torch.randn(B, 1, T, T, generator=g)
    Jr = 0.3 * torch.randn(1, T, T, generator=g)
    Jr = torch.triu(Jr, 1) + torch.triu(Jr, 1).transpose(-1, -2)
    t0 = time.perf_counter()
    mk = exact.causal_marginals(hs, Jr)
    tk = time.perf_counter() - t0
    nb = min(B, 4)
    t0 = time.perf_counter()
    ml = _per_query_loop(hs[:nb], Jr)
    tl = (time.perf_counter() - t0) * B / nb
    err = (mk[:nb] - ml).abs().max().item()
    print(f"\ncausal attention kernel, B = {B}, H = 1, T = {T} (float32):")
    print(f"  kernel {tk * 1e3:8.1f} ms   per-query loop {tl * 1e3:8.1f} ms (extrapolated from {nb} rows)   "
          f"speed-up {tl / tk:6.1f}x   max |difference| {err:.1e}")
    return 0
