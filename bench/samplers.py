"""Sampler throughput benchmarks: problems per second, several samplers measured side by side in one run.

Run (about 2 minutes on one laptop core; results depend on the machine):

    nice -n 5 python bench/samplers.py --out results/bench/samplers.md

Structure: :data:`BENCHMARKS` is a list of row functions ``f(args) -> list[dict]``; each returns the rows of one
table (a ``"table"`` key names it). Each section (below the runner, above the ``__main__`` guard, which stays
last) defines its functions and appends them to the list; ``main`` runs them all and prints one markdown table
per name.

Section "aer": the toolkit's ``aer`` sampler (one parametrised circuit + a bindings array per chunk, Aer
``SamplerV2``) against a per-problem loop of bound circuits on a plain ``AerSimulator`` (``bind`` then ``run``),
for ``n`` spins with all-to-all couplings, 20 Trotter steps, 256 problems x 1024 shots.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from typing import Any, Callable

import numpy as np
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.circuits import DQASchedule

BENCHMARKS: list[Callable[[argparse.Namespace], list[dict[str, Any]]]] = []


def random_problems(n: int, batch: int, seed: int = 0) -> IsingProblem:
    """``batch`` problems with unit-normal fields and per-problem all-to-all unit-normal couplings."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(batch, n, generator=g, dtype=torch.float64)
    U = torch.randn(batch, n, n, generator=g, dtype=torch.float64).triu(1)
    return IsingProblem(h, U + U.transpose(-1, -2))


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


# ---------------------------------------------------------------------- runner
def _markdown(rows: list[dict[str, Any]]) -> str:
    out = []
    for name in dict.fromkeys(r["table"] for r in rows):
        sel = [r for r in rows if r["table"] == name]
        cols = [c for c in sel[0] if c != "table"]
        out += [f"### {name}", "", "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
        out += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in sel]
        out.append("")
    return "\n".join(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[8, 10, 12], help="spin counts")
    p.add_argument("--steps", type=int, default=20, help="Trotter steps")
    p.add_argument("--problems", type=int, default=256)
    p.add_argument("--shots", type=int, default=1024)
    p.add_argument("--only", nargs="*", default=None, help="names of benchmark functions to run (default: all)")
    p.add_argument("--out", default=None, help="write the markdown tables here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows: list[dict[str, Any]] = []
    for fn in BENCHMARKS:
        if args.only and fn.__name__ not in args.only:
            continue
        rows += fn(args)
    text = _markdown(rows)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    header = (f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()} "
              f"({os.cpu_count()} cores, load average at the end {load}), torch {torch.__version__}.\n\n")
    print(text)
    if args.out:
        from pathlib import Path

        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(header + "Command: `nice -n 5 python bench/samplers.py " + " ".join(sys.argv[1:] if argv is None else argv) + "`\n\n" + text)
    return 0


# ---------------------------------------------------------------------- section: aer (issue 4)
def bench_aer(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Toolkit ``aer`` sampler vs a per-problem loop on ``AerSimulator`` (same circuits, same shots)."""
    from qiskit_aer import AerSimulator

    from hybrid_attention.backends import get_sampler
    from hybrid_attention.circuits import template_for

    rows = []
    schedule = DQASchedule(tau=1.0, steps=args.steps)
    for n in args.n:
        prob = random_problems(n, args.problems, seed=n)
        sampler = get_sampler("aer", schedule=schedule)
        sampler.sample(prob[:2], num_reads=8, seed=0)  # warm-up: template build, imports
        ss, t_batched = _timed(lambda: sampler.sample(prob, num_reads=args.shots, seed=1))

        sim = AerSimulator(method="statevector")
        tmpl = template_for(prob, schedule)
        values = tmpl.bindings(prob)
        sim.run(tmpl.bind(values[0]), shots=8).result()  # warm-up

        def loop() -> np.ndarray:
            out = np.empty((len(values), args.shots, n), dtype=np.int8)
            for i, v in enumerate(values):
                res = sim.run(tmpl.bind(v), shots=args.shots, seed_simulator=i, memory=True).result()
                bits = np.array([[c == "1" for c in s[::-1]] for s in res.get_memory()], dtype=np.int8)
                out[i] = 1 - 2 * bits
            return out

        spins_loop, t_loop = _timed(loop)
        # same circuits: both marginal estimates agree within shot noise (sanity check on the comparison)
        diff = float(np.abs(ss.spins.mean(-2) - spins_loop.mean(-2)).max())
        rows.append({"table": "aer: batched sampler vs per-problem loop", "n": n, "steps": args.steps, "problems": args.problems,
                     "shots": args.shots, "batched problems/s": round(args.problems / t_batched, 1),
                     "loop problems/s": round(args.problems / t_loop, 1), "speedup": round(t_loop / t_batched, 2),
                     "max marginal diff": round(diff, 3)})
        print(rows[-1], flush=True)
    return rows


BENCHMARKS.append(bench_aer)



# ---------------------------------------------------------------------- (new sections go here, above the guard)

if __name__ == "__main__":
    raise SystemExit(main())
