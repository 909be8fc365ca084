"""Long-context training steps: hj through an approximate engine against softmax, with each engine's floor.

For each block size the engines run side by side (interleaved repetitions ``softmax, meanfield, gibbs, ...``) on
the same model shape (one layer, one head, width 64, batch 64, vocabulary 65: Tiny Shakespeare's) and batch, one
thread; the table reports the median milliseconds per optimiser step (forward, backward, AdamW) and the ratio to
softmax. Targets (issue "speed where the work is"): meanfield at most 2.5x softmax at T = 64 and 5x at T = 128;
persistent Gibbs with the Rao-Blackwellised estimator at most 20x softmax at T = 64.

The floor column is what the engine's attention part must compute at the matrix-product rate measured in the same
run (``--gemm`` size, float32, one thread), added to the softmax step (everything but the attention marginals):

* meanfield (``get_sampler("meanfield")``, the library's default: the damped solver over the whole batch): every
  iteration of the fixed point is one product of the ``(B T, T)`` magnetisations with the head's
  ``(T, T)`` couplings, ``2 B T^3`` flops, forward and (adjoint iteration) backward: ``2 B T^3 (k_fwd + k_bwd)``
  with the iteration counts the run reports;
* meanfield-train (the sampler ``train --sampler meanfield`` builds: ``solver="rows"``, each row stopping on its own,
  in compiled loops when numba is installed): no floor column (its rows stop at different iterations);
* tap (TAP mean field, ``get_sampler("meanfield", method="tap")``): as meanfield, the Onsager correction being
  elementwise;
* gibbs: a sweep updates every spin of every chain once: the local fields of all ``B T`` problems' ``C`` chains are
  one product with the couplings per spin update, ``2 B T C T^2`` flops per sweep (each spin's field is a length-T
  dot product), times the sweeps per step; the Rao-Blackwellised estimator adds ``2 B T R T^2`` for the conditional
  means of the reads.

    python -m bench.long_context                                   # T = 32 64 128: softmax, meanfield
    python -m bench.long_context --engines softmax meanfield gibbs --block-sizes 64 --out results/bench/long_context.md
    python -m bench.long_context --engines softmax meanfield meanfield-train tap gibbs --block-sizes 32 64 128 --reps 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from bench.train_step import make_step, time_steps
from hybrid_attention.apps.train import TRAINING_DEFAULTS
from hybrid_attention.backends import get_sampler
from hybrid_attention.sampling import PersistentChains, Sampling

#: engine -> how it samples (None: softmax attention, no sampler)
ENGINES = ("softmax", "meanfield", "meanfield-train", "tap", "gibbs")


def gemm_rate(n: int, reps: int = 20) -> float:
    """Float32 matrix-product rate (flop/s) of an ``(n, n) @ (n, n)`` product on this thread, best of ``reps``."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(reps))
    return 2 * n**3 / best


def _timed(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def sampling_for(engine: str, args: argparse.Namespace) -> Sampling | None:
    if engine == "softmax":
        return None
    if engine == "meanfield":
        return Sampling(get_sampler("meanfield"), seed=0)
    if engine == "meanfield-train":  # what train --sampler meanfield runs: per-row solver, compiled loops with numba
        return Sampling(get_sampler("meanfield", **TRAINING_DEFAULTS["meanfield"]["sampler_options"]), seed=0)
    if engine == "tap":
        return Sampling(get_sampler("meanfield", method="tap"), seed=0)
    if engine == "gibbs":
        chains = PersistentChains(num_chains=args.chains, seed=0)
        sampler = get_sampler("gibbs", burn_in=args.sweeps)
        return Sampling(sampler, args.chains, estimator="conditional", chains=chains, seed=0)
    raise ValueError(f"unknown engine {engine!r}; expected one of {ENGINES}")


def floor_ms(engine: str, T: int, args: argparse.Namespace, rate: float, info: dict) -> float | None:
    """Milliseconds of the engine's attention arithmetic at ``rate`` (module docstring); None for softmax."""
    B = args.batch_size
    if engine in ("meanfield", "tap"):  # TAP's iteration adds elementwise terms (the Onsager correction), no product
        k = info.get("iterations", 0) + info.get("backward_iterations", 0)
        return 1e3 * 2 * B * T**3 * k / rate
    if engine == "gibbs":
        return 1e3 * 2 * B * T * (args.chains * args.sweeps + args.chains) * T**2 / rate
    return None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--block-sizes", type=int, nargs="+", default=[32, 64, 128])
    p.add_argument("--engines", nargs="+", default=["softmax", "meanfield"], choices=ENGINES)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--chains", type=int, default=8, help="gibbs: persistent chains (= reads) per problem")
    p.add_argument("--sweeps", type=int, default=2, help="gibbs: sweeps per step")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--steps-per-rep", type=int, default=2)
    p.add_argument("--gemm", type=int, default=256, help="size of the square product that measures the GEMM rate")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="also write the table (markdown) here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    shape = argparse.Namespace(n_embd=64, n_head=1, n_layer=1, batch_size=args.batch_size)
    rate = gemm_rate(args.gemm)
    base = args.engines[0]
    lines = [
        f"Command: `python -m bench.long_context {' '.join(argv if argv is not None else sys.argv[1:])}`",
        "",
        f"1 layer, 1 head, n_embd 64, batch {args.batch_size}, vocabulary 65, {args.threads} thread(s), torch "
        f"{torch.__version__}; float32 GEMM rate {rate / 1e9:.1f} GFLOP/s ({args.gemm}^3); median of {args.reps} "
        f"interleaved reps x {args.steps_per_rep} steps; gibbs: {args.chains} persistent chains, {args.sweeps} "
        "sweeps per step, Rao-Blackwellised",
        "",
        "| T | engine | ms/step | / " + base + " | attention floor ms | step floor ms | step / floor |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    print("\n".join(lines), flush=True)
    for T in args.block_sizes:
        samplings = {e: sampling_for(e, args) for e in args.engines}
        steps = {e: make_step("softmax" if s is None else "hj", T, shape, s) for e, s in samplings.items()}
        for f in steps.values():
            time_steps(f, 2)  # warm-up (persistent chains also leave their random start)
        times: dict[str, list[float]] = {e: [] for e in steps}
        for _ in range(args.reps):
            for e, f in steps.items():
                times[e].append(time_steps(f, args.steps_per_rep))
        med = {e: statistics.median(v) for e, v in times.items()}
        rows = []
        for e in args.engines:
            s = samplings[e]
            info = getattr(s.sampler, "last_info", {}) if s is not None else {}
            fl = floor_ms(e, T, args, rate, info)
            soft = 1e3 * med.get("softmax", 0.0)
            step_floor = None if fl is None else fl + soft
            cells = [
                str(T),
                e,
                f"{1e3 * med[e]:.1f}",
                f"{med[e] / med[base]:.2f}x",
                "-" if fl is None else f"{fl:.1f}",
                "-" if step_floor is None else f"{step_floor:.1f}",
                "-" if step_floor is None else f"{1e3 * med[e] / step_floor:.2f}x",
            ]
            rows.append("| " + " | ".join(cells) + " |")
        print("\n".join(rows), flush=True)
        lines += rows
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
