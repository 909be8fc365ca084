"""Mean field's fixed-point iteration on causal attention problems: row blocks of similar width against the whole
width, side by side.

The bridge hands mean field one problem per (batch row, query): query ``i`` of a causal layer has ``i + 1`` active
keys, so a full-width iteration spends about half its products on masked spins. ``backends.meanfield.solve``
iterates rows sorted into blocks of similar width on the leading block of ``J`` (bit-identical results, checked
here on every case). Problems: one head, ``B`` batch rows, couplings ``J ~ N(0, c^2 / T)`` symmetric, fields
``N(0, 1)``, float32, one thread; a fixed number of iterations (``tol = 0``) so both paths do the same count.

A second part times whole training steps (forward and backward, one batch of the run's own size, its task) of
trained models against an earlier revision of ``hybrid_attention/backends/mcmc/meanfield.py`` (loaded from git), with the gradients'
agreement per parameter group:

    python -m bench.meanfield_blocks                       # T = 16 32 64 128, B = 16 64
    python -m bench.meanfield_blocks --block-sizes --models results/long_context/pilot_*/runs/* --against 28a15fd
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from hybrid_attention.backends.mcmc.meanfield import solve, width_blocks


def problems(B: int, T: int, c: float = 1.0, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    A = torch.randn(1, T, T, generator=g) * c / T**0.5
    J = A + A.transpose(1, 2)
    J.diagonal(dim1=1, dim2=2).zero_()
    mask = torch.ones(T, T).tril().repeat(B, 1)[None].contiguous()
    h = torch.randn(1, B * T, T, generator=g) * mask
    b = (torch.rand(1, B * T, generator=g) + 0.5)[..., None]
    return h, J, mask, b


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--block-sizes", type=int, nargs="*", default=[16, 32, 64, 128])
    p.add_argument("--batch", type=int, nargs="+", default=[16, 64])
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--models", nargs="*", default=[], help="trained run directories for the training-step part")
    p.add_argument(
        "--against",
        default=None,
        help="git revision of hybrid_attention/backends/mcmc/meanfield.py to time the steps against",
    )
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if args.block_sizes:
        solver_table(args)
    if args.models:
        if not args.against:
            p.error("--models needs --against REV (the revision to compare with)")
        step_table(args.models, args.against, args.reps)
    return 0


def _module_at(rev: str):
    """The mean-field module as it was at git revision ``rev``, imported under a private name (the file moved:
    ``backends/meanfield.py`` before the package layout of #40, ``hybrid_attention/backends/mcmc/meanfield.py`` after)."""
    root = Path(__file__).resolve().parents[1]
    for where in ("hybrid_attention/backends/mcmc/meanfield.py", "backends/meanfield.py"):
        got = subprocess.run(["git", "show", f"{rev}:{where}"], cwd=root, capture_output=True, text=True)
        if got.returncode == 0:
            break
    got.check_returncode()
    src = got.stdout
    path = Path(tempfile.mkdtemp()) / "meanfield_at.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("hybrid_attention.backends._meanfield_at", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def step_table(models: list[str], rev: str, reps: int) -> None:
    from experiments.long_context import validate_engines as ve
    from hybrid_attention import Sampling
    from hybrid_attention.backends.mcmc import meanfield

    old = _module_at(rev)
    print(
        f"\n| model | method | step at {rev} s | step now s | ratio | gradient cosine, norm ratio (c_attn / J / rest) |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for run in models:
        model, cfg, task = ve.load(Path(run))
        model.train()
        x, y = task.get_batch("train", cfg.batch_size, cfg.block_size, generator=torch.Generator().manual_seed(5))
        for method in ("naive", "tap"):
            times: dict[str, list[float]] = {"old": [], "new": []}
            grads = {}
            for _ in range(reps):  # interleaved
                for name, mod in (("old", old), ("new", meanfield)):
                    t = time.perf_counter()
                    grads[name] = ve.gradient(model, x, y, Sampling(mod.MeanFieldSampler(method=method)))
                    times[name].append(time.perf_counter() - t)
            ratio = statistics.median(o / n for o, n in zip(times["old"], times["new"]))
            agree = ve.compare_grads(grads["new"], grads["old"])
            print(
                f"| {run} | {method} | {statistics.median(times['old']):.3f} | {statistics.median(times['new']):.3f} "
                f"| {ratio:.2f} | "
                + " / ".join(f"{a['cosine']:.6f}, {a['norm_ratio']:.4f}" for a in agree.values())
                + " |",
                flush=True,
            )


def solver_table(args: argparse.Namespace) -> None:
    print("| T | B | method | full width ms/iter | blocked ms/iter | full / blocked | identical |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for T in args.block_sizes:
        for B in args.batch:
            h, J, mask, b = problems(B, T)
            for tap in (False, True):
                times: dict[bool, list[float]] = {True: [], False: []}
                out = {}
                for _ in range(args.reps):  # interleaved: full, blocked, full, blocked, ...
                    for blocked in (False, True):
                        t = time.perf_counter()
                        blocks = width_blocks(mask, T) if blocked else None
                        out[blocked] = solve(h, J, mask, tap, b, 0.5, args.iterations, 0.0, blocks)[0]
                        times[blocked].append((time.perf_counter() - t) / args.iterations * 1e3)
                ratios = [f / k for f, k in zip(times[False], times[True])]
                same = bool(torch.equal(out[False], out[True]))
                print(
                    f"| {T} | {B} | {'tap' if tap else 'naive'} | {statistics.median(times[False]):.3f} | "
                    f"{statistics.median(times[True]):.3f} | {statistics.median(ratios):.2f} | {same} |",
                    flush=True,
                )


if __name__ == "__main__":
    sys.exit(main())
