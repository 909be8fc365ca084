"""How faithful the ``dimod`` sampler is: its marginals against exact enumeration, by beta mode and sweeps.

Needs the ``ocean`` extra (``pip install 'hybrid-attention[ocean]'``). Run (about a minute on a quiet core):

    nice -n 5 python -m bench.ocean --out results/bench/ocean.md

For couplings of growing strength (``J ~ N(0, c^2)``, ``h ~ N(0, 1)``, ``n = 6``, ``beta = 1``, ``P`` problems per
scale) each configuration samples the same batch with ``R`` reads and reports, over every spin of every problem,
``max |m - m_exact| / sigma`` and ``mean |m - m_exact| / sigma`` with ``sigma = sqrt((1 - m_exact^2) / R)`` (an exact
sampler gives a mean of ``sqrt(2 / pi) ~ 0.80`` and a max of about 3 for a few dozen spins), and the median wall time
per batch with its ratio to ``tree_decomposition`` (exact Boltzmann samples), timed side by side in one run
(repetitions interleaved). Fixed-beta simulated annealing (``beta_mode="schedule"``) is a set of Markov chains:
unbiased once mixed, so its error above shot noise measures mixing, which degrades as couplings grow.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

import numpy as np
import torch

from hybrid_attention import IsingProblem, exact


def problems(c: float, n: int, P: int, seed: int) -> IsingProblem:
    rng = np.random.default_rng(seed)
    U = np.triu(rng.normal(scale=c, size=(P, n, n)), 1)
    return IsingProblem(torch.from_numpy(rng.normal(size=(P, n))), torch.from_numpy(U + np.swapaxes(U, -1, -2)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="markdown file to write (default: print only)")
    ap.add_argument("--reads", type=int, default=2000)
    ap.add_argument("--problems", type=int, default=6)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    try:
        from hybrid_attention.backends.ocean.sampler import DimodSampler
    except ImportError:
        print("bench.ocean needs dimod and dwave-samplers: pip install 'hybrid-attention[ocean]'", file=sys.stderr)
        return 1
    configs = {
        "tree_decomposition": DimodSampler("tree_decomposition"),
        "SA 100 sweeps": DimodSampler("simulated_annealing", num_sweeps=100),
        "SA 1000 sweeps": DimodSampler("simulated_annealing", num_sweeps=1000),
        "SA 5000 sweeps": DimodSampler("simulated_annealing", num_sweeps=5000),
    }
    n, R = 6, args.reads
    rows = []
    for c in (0.5, 1.0, 1.5, 2.0):
        p = problems(c, n, args.problems, seed=int(10 * c))
        m_ref = exact.marginals(p).numpy()
        sigma = np.sqrt(np.clip(1 - m_ref**2, 1e-12, None) / R)
        times: dict[str, list[float]] = {k: [] for k in configs}
        errs: dict[str, list[np.ndarray]] = {k: [] for k in configs}
        for rep in range(args.repeats):  # interleaved: every config once per repetition
            for name, s in configs.items():
                t0 = time.perf_counter()
                m = s.sample(p, num_reads=R, seed=100 * rep + 1).marginals()
                times[name].append(time.perf_counter() - t0)
                errs[name].append(np.abs(m - m_ref) / sigma)
        base = statistics.median(times["tree_decomposition"])
        for name in configs:
            z = np.stack(errs[name])
            t = statistics.median(times[name])
            rows.append((c, name, float(z.max()), float(z.mean()), t, t / base))
    lines = [
        "# dimod sampler vs exact enumeration (bench/ocean.py)",
        "",
        f"Command: `python -m bench.ocean --reads {R} --problems {args.problems} --repeats {args.repeats}"
        + (f" --out {args.out}`" if args.out else "`"),
        f"Machine: {platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}; n = {n}, "
        f"beta = 1, {args.problems} problems x {R} reads per batch, {args.repeats} interleaved repetitions.",
        "",
        "| coupling scale c | sampler | max err / sigma | mean err / sigma | median s / batch | time / tree_decomposition |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {c} | {name} | {zmax:.2f} | {zmean:.2f} | {t:.3f} | {r:.2f} |" for c, name, zmax, zmean, t, r in rows]
    lines += [
        "",
        "An exact sampler: mean err / sigma ~ 0.80, max ~ 3-4 over these spins. Larger values are bias (for fixed-beta "
        "SA: chains that have not mixed).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
