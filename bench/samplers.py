"""Sampler throughput benchmarks: problems per second, several samplers measured side by side in one run.

Run (about 2 minutes on one laptop core; results depend on the machine):

    nice -n 5 python -m bench.samplers --out results/bench/samplers.md

Structure: :data:`BENCHMARKS` is a list of row functions ``f(args) -> list[dict]``; each returns the rows of one
table (a ``"table"`` key names it). Each section (below the runner, above the ``__main__`` guard, which stays
last) defines its functions and appends them to the list; ``main`` runs them all and prints one markdown table
per name.

Section "aer": the toolkit's ``aer`` sampler (one parametrised circuit + a bindings array per chunk; both read-outs,
``probabilities`` and ``SamplerV2`` shots) against a per-problem loop of bound circuits on a plain ``AerSimulator``
(``bind`` then ``run``), for ``n`` spins with all-to-all couplings, 20 Trotter steps, 256 problems x 1024 shots.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.circuits import DQASchedule
from hybrid_attention.ising import bits_to_spins

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
    p.add_argument("--reps", type=int, default=7, help="interleaved repetitions (bench_statevector_vs_aer)")
    p.add_argument(
        "--threads", type=int, default=1, help="torch and Aer threads, 0: their defaults (bench_statevector_vs_aer)"
    )
    p.add_argument(
        "--no-pin",
        action="store_true",
        help="statevector's chunk threads not pinned to CPUs (backends.parallel.PIN_WORKERS off; bench_statevector_vs_aer)",
    )
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
    header = (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()} "
        f"({os.cpu_count()} cores, load average at the end {load}), torch {torch.__version__}.\n\n"
    )
    print(text)
    if args.out:
        from pathlib import Path

        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(
            header
            + "Command: `nice -n 5 python -m bench.samplers "
            + " ".join(sys.argv[1:] if argv is None else argv)
            + "`\n\n"
            + text
        )
    return 0


# ---------------------------------------------------------------------- section: aer
def bench_aer(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Toolkit ``aer`` sampler, both read-outs (``probabilities``: the default for ideal simulation; ``shots``:
    Aer ``SamplerV2``), vs a per-problem loop on ``AerSimulator`` (same circuits, same shots), run back to back.

    ``loop in Aer C++`` is the share of the loop's wall time spent inside Aer's own execution of the experiments
    (``Result.results[i].time_taken``: simulation plus shot sampling); ``1 / share`` bounds the speed-up of any
    path that runs the same simulations with the same shots."""
    from qiskit_aer import AerSimulator

    from hybrid_attention.backends import get_sampler
    from hybrid_attention.circuits import template_for

    rows = []
    schedule = DQASchedule(tau=1.0, steps=args.steps)
    for n in args.n:
        prob = random_problems(n, args.problems, seed=n)
        samplers = {r: get_sampler("aer", schedule=schedule, readout=r) for r in ("probabilities", "shots")}
        for s in samplers.values():
            s.sample(prob[:2], num_reads=8, seed=0)  # warm-up: template build, imports
        ss, t_prob = _timed(lambda: samplers["probabilities"].sample(prob, num_reads=args.shots, seed=1))
        ss_shots, t_shots = _timed(lambda: samplers["shots"].sample(prob, num_reads=args.shots, seed=1))

        sim = AerSimulator(method="statevector")
        tmpl = template_for(prob, schedule)
        values = tmpl.bindings(prob)
        sim.run(tmpl.bind(values[0]), shots=8).result()  # warm-up
        in_aer = [0.0]

        def loop() -> np.ndarray:
            out = np.empty((len(values), args.shots, n), dtype=np.int8)
            for i, v in enumerate(values):
                res = sim.run(tmpl.bind(v), shots=args.shots, seed_simulator=i, memory=True).result()
                in_aer[0] += sum(e.time_taken for e in res.results)
                bits = np.array([[c == "1" for c in s[::-1]] for s in res.get_memory()])  # qubit 0 rightmost
                out[i] = bits_to_spins(bits)
            return out

        spins_loop, t_loop = _timed(loop)
        # same circuits: the marginal estimates agree within shot noise (sanity check on the comparison)
        diff = max(float(np.abs(x.spins.mean(-2) - spins_loop.mean(-2)).max()) for x in (ss, ss_shots))
        rows.append(
            {
                "table": "aer: batched sampler vs per-problem loop",
                "n": n,
                "steps": args.steps,
                "problems": args.problems,
                "shots": args.shots,
                "batched (probabilities) problems/s": round(args.problems / t_prob, 1),
                "batched (SamplerV2 shots) problems/s": round(args.problems / t_shots, 1),
                "loop problems/s": round(args.problems / t_loop, 1),
                "speedup (probabilities)": round(t_loop / t_prob, 2),
                "speedup (shots)": round(t_loop / t_shots, 2),
                "loop in Aer C++": f"{100 * in_aer[0] / t_loop:.0f} %",
                "max marginal diff": round(diff, 3),
            }
        )
        print(rows[-1], flush=True)
    return rows


BENCHMARKS.append(bench_aer)


# ---------------------------------------------------------------------- section: native engines
#: sizes of the native-engine comparison: n = 10 and 14 spins, 512 problems, ``args.steps`` Trotter steps
NATIVE_N = (10, 14)
NATIVE_PROBLEMS = 512


def bench_native(args: argparse.Namespace) -> list[dict[str, Any]]:
    """``statevector`` (batched torch simulator) vs the toolkit's batched ``aer`` path vs ``pennylane``
    (lightning.qubit): the same problems, schedule and shots, measured one after the other in this run.
    The statevector sampler computes the exact output distribution and then draws the shots; its marginals are
    checked against the aer shots (max z-score). Every engine runs with its defaults on the whole machine: torch's
    intra-op threads for ``statevector``, parallel experiments for ``aer``, lightning's own threading. Each engine
    gets a small warm-up call, then the faster of two timed calls on the whole batch counts."""
    from hybrid_attention.backends import get_sampler

    rows = []
    schedule = DQASchedule(tau=1.0, steps=args.steps)
    for n in NATIVE_N:
        prob = random_problems(n, NATIVE_PROBLEMS, seed=100 + n)
        sv = get_sampler("statevector", schedule=schedule)
        sv.sample(prob[:4], num_reads=8, seed=0)
        t_sv = min(_timed(lambda: sv.sample(prob, num_reads=args.shots, seed=1))[1] for _ in range(2))
        m_exact = sv.marginals(prob).numpy()
        row = {
            "table": "native: statevector vs aer vs pennylane",
            "n": n,
            "steps": args.steps,
            "problems": NATIVE_PROBLEMS,
            "shots": args.shots,
            "torch threads": torch.get_num_threads(),
            "statevector problems/s": round(NATIVE_PROBLEMS / t_sv, 1),
        }
        for name, kw in (("aer", {}), ("pennylane", {"device": "lightning.qubit"})):
            try:
                s = get_sampler(name, schedule=schedule, **kw)
            except ImportError as exc:  # missing extra: report, do not fail the other rows
                row[f"{name} problems/s"] = f"n/a ({exc})"
                continue
            s.sample(prob[:2], num_reads=8, seed=0)
            (ss, t), (_, t2) = (_timed(lambda: s.sample(prob, num_reads=args.shots, seed=2)) for _ in range(2))
            t = min(t, t2)
            z = np.abs(ss.marginals() - m_exact) / np.sqrt(np.maximum(1 - m_exact**2, 1e-12) / args.shots)
            row[f"{name} problems/s"] = round(NATIVE_PROBLEMS / t, 1)
            row[f"speedup vs {name}"] = round(t / t_sv, 1)
            row[f"{name} max z"] = round(float(z.max()), 2)
        rows.append(row)
        print(row, flush=True)
    return rows


def bench_native_train_step(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The training-step rows of the native-engine section (one intra-op thread)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _bench_train_step(args)
    finally:
        torch.set_num_threads(threads)


def _bench_train_step(args: argparse.Namespace, T: int = 12, batch: int = 32, reps: int = 5) -> list[dict[str, Any]]:
    """One training step (forward, backward, AdamW) of a 1-layer, 1-head ``hj`` model at ``T = 12``, batch 32:
    exact enumeration vs DQA through the ``statevector`` sampler, either sampled (256 shots per problem and the
    bridge's covariance backward, what hardware would give) or exact (output marginals of the circuit with autograd
    through the simulation); interleaved repetitions, medians."""
    import statistics

    from bench.train_step import make_step
    from hybrid_attention.backends import get_sampler
    from hybrid_attention.sampling import Sampling

    shape = argparse.Namespace(n_embd=64, n_head=1, n_layer=1, batch_size=batch)
    sv = get_sampler("statevector", schedule=DQASchedule(tau=1.0, steps=args.steps))
    steps = {
        "exact": make_step("hj", T, shape),
        "statevector": make_step("hj", T, shape, Sampling(sv, seed=0)),
        "statevector shots": make_step("hj", T, shape, Sampling(sv, 256, readout="shots", seed=0)),
    }
    times: dict[str, list[float]] = {k: [] for k in steps}
    for f in steps.values():
        f()  # warm-up
    for _ in range(reps):
        for k, f in steps.items():
            times[k].append(_timed(f)[1])
    med = {k: statistics.median(v) for k, v in times.items()}
    row = {
        "table": "native: training step, hj, T = 12, batch 32",
        "T": T,
        "batch": batch,
        "trotter steps": args.steps,
        "exact s/step": round(med["exact"], 4),
        "DQA shots (256) + covariance backward s/step": round(med["statevector shots"], 4),
        "ratio shots/exact": round(med["statevector shots"] / med["exact"], 2),
        "DQA exact output + autograd s/step": round(med["statevector"], 4),
        "ratio autograd/exact": round(med["statevector"] / med["exact"], 2),
    }
    print(row, flush=True)
    return [row]


BENCHMARKS.append(bench_native)
BENCHMARKS.append(bench_native_train_step)


# ---------------------------------------------------------------------- section: statevector vs aer, side by side
def bench_statevector_vs_aer(args: argparse.Namespace) -> list[dict[str, Any]]:
    """``statevector`` against aer's batched paths (the ``aer`` sampler with ``readout="probabilities"`` and with
    ``readout="shots"``, SamplerV2), ``args.n`` spins, ``--problems`` problems, ``args.steps`` Trotter steps,
    ``args.shots`` shots, all in this process, repetitions interleaved (``statevector, aer probabilities, aer shots,
    ...``; medians, and the spread of the per-repetition ratios). Thread counts are equal and fixed: ``--threads``
    torch intra-op threads for ``statevector`` and the same ``max_parallel_threads`` for Aer (its OpenMP threads;
    ``max_parallel_experiments`` too, so Aer never runs more threads than statevector); ``--threads 0`` leaves every
    engine its defaults. With more than one torch thread, ``statevector`` is also timed at one intra-op thread in the
    same interleaving (the ``1 thread`` columns: its time at one thread over its time at these threads, per
    repetition, must never be below 1; every repetition's ratio is listed too). ``statevector CPU ms`` is the
    process's CPU time (all threads) per ``statevector`` call and CPU / wall how many cores the call got: on a shared machine the wall times follow the
    cores the scheduler grants, the CPU time the work done. The marginals of every engine are checked against the
    exact circuit output (max z-score over problems and spins). ``--no-pin`` leaves the chunk threads unpinned (the
    previous behaviour), for comparison."""
    from hybrid_attention.backends import get_sampler, parallel
    from hybrid_attention.backends.parallel import intra_op_threads

    if getattr(args, "no_pin", False):  # read when the chunk threads' pool is made (the first call with two threads)
        parallel.PIN_WORKERS = False
    rows = []
    schedule = DQASchedule(tau=1.0, steps=args.steps)
    threads = torch.get_num_threads()
    if args.threads:  # 0: every engine with its defaults (torch's intra-op threads; Aer's parallel experiments)
        torch.set_num_threads(args.threads)
    try:
        for n in args.n:
            prob = random_problems(n, args.problems, seed=200 + n)
            bo = (
                {"max_parallel_threads": args.threads, "max_parallel_experiments": args.threads} if args.threads else {}
            )
            engines = {"statevector": get_sampler("statevector", schedule=schedule)}
            for r in ("probabilities", "shots"):
                engines[f"aer {r}"] = get_sampler("aer", schedule=schedule, readout=r, backend_options=bo)
            m_exact = engines["statevector"].marginals(prob).numpy()
            calls = {k: (lambda s=s, rep=0: s.sample(prob, num_reads=args.shots, seed=rep)) for k, s in engines.items()}
            if torch.get_num_threads() > 1:  # statevector at one thread too: more threads must never be slower

                def one_thread(rep: int = 0, s: Any = engines["statevector"]) -> Any:
                    with intra_op_threads(1):
                        return s.sample(prob, num_reads=args.shots, seed=rep)

                calls["statevector 1 thread"] = one_thread
            times: dict[str, list[float]] = {k: [] for k in calls}
            cpu: dict[str, list[float]] = {k: [] for k in calls}  # the process's CPU time (every thread) per call
            z = {}
            for k, call in calls.items():  # warm-up (templates, imports), and the accuracy check
                err = np.abs(call().marginals() - m_exact) / np.sqrt(np.maximum(1 - m_exact**2, 1e-12) / args.shots)
                z[k] = float(err.max())
            for rep in range(args.reps):
                for k, call in calls.items():
                    c0 = time.process_time()
                    times[k].append(_timed(lambda: call(rep=rep + 1))[1])
                    cpu[k].append(time.process_time() - c0)
            med = {k: statistics.median(v) for k, v in times.items()}
            best = min(("aer probabilities", "aer shots"), key=lambda k: med[k])
            ratios = [a / b for a, b in zip(times[best], times["statevector"])]
            one = times.get("statevector 1 thread")
            rows.append(
                {
                    "table": "statevector vs aer's batched paths, interleaved, equal threads",
                    "n": n,
                    "problems": args.problems,
                    "steps": args.steps,
                    "shots": args.shots,
                    "threads (torch = Aer)": args.threads or f"defaults (torch {torch.get_num_threads()}, Aer's own)",
                    "statevector ms": round(1e3 * med["statevector"], 1),
                    "aer probabilities ms": round(1e3 * med["aer probabilities"], 1),
                    "aer shots ms": round(1e3 * med["aer shots"], 1),
                    "aer best / statevector": f"{med[best] / med['statevector']:.1f}x",
                    "per-rep ratio min - max": f"{min(ratios):.1f} - {max(ratios):.1f}",
                    "statevector CPU ms (CPU / wall)": f"{1e3 * statistics.median(cpu['statevector']):.1f} "
                    f"({statistics.median(c / t for c, t in zip(cpu['statevector'], times['statevector'])):.2f})",
                    "statevector 1 thread ms": "-" if one is None else round(1e3 * med["statevector 1 thread"], 1),
                    "speed-up over 1 thread (median of per-rep ratios, min - max)": "-"
                    if one is None
                    else _ratio_spread([b / a for a, b in zip(times["statevector"], one)]),
                    "speed-up over 1 thread, each repetition": "-"
                    if one is None
                    else " ".join(f"{b / a:.2f}" for a, b in zip(times["statevector"], one)),
                    "max z (sv, aer p, aer s)": ", ".join(f"{z[k]:.1f}" for k in engines),
                }
            )
            print(rows[-1], flush=True)
    finally:
        torch.set_num_threads(threads)
    return rows


def _ratio_spread(r: list[float]) -> str:
    """``median (min - max)`` of per-repetition ratios."""
    return f"{statistics.median(r):.2f} ({min(r):.2f} - {max(r):.2f})"


BENCHMARKS.append(bench_statevector_vs_aer)


# ---------------------------------------------------------------------- (new sections go here, above the guard)

if __name__ == "__main__":
    raise SystemExit(main())
