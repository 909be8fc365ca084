"""Our ``gibbs`` sampler against dwave-samplers' simulated annealing at a constant beta, side by side.

Needs dimod and dwave-samplers (``pip install 'hybrid-attention[ocean]'``; without them it exits with that message).
Run (about 4 minutes on a quiet core):

    nice -n 5 python -m bench.classical --out results/bench/classical.md

The comparison is like for like: the same Ising problems (dwave gets ``linear = -h``, ``quadratic = -J``, since dimod
energies are ``+`` where ours are ``-``), the same number of sweeps and reads, the same fixed beta (our
``GibbsSampler(burn_in=sweeps, ramp=0)``, no warm-up; dwave ``beta_schedule_type="custom"`` with a constant
``beta_schedule`` of ``sweeps`` entries), each read the final state of its own chain, one thread each. dwave runs both
of its update rules: ``Metropolis`` (its default) and ``Gibbs`` (heat bath, the rule ours uses). Repetitions are
interleaved (ours, dwave Metropolis, dwave Gibbs, ours, ...; each repetition of a call shorter than 0.1 s times
enough back-to-back calls to last about 0.1 s) and the tables report medians per call and ratios of medians
(``dwave / ours``: above 1 means ours is faster). ``ours`` is the default kernel (compiled with numba when installed,
named in the header); ``ours, torch kernel`` is the pure-torch fallback on the same calls.

* (a) one problem of ``n = 10`` spins per call (h ~ N(0, 1), SK couplings J ~ N(0, 1/n), beta = 1) at several
  sweep counts; dwave is called once per problem, as a user would loop.
* (b) the attention workload: what the bridge sends for one head (``attention_marginals`` with ``B`` sequences of
  length ``T``): the ``B x T`` causal prefix problems of sizes ``1..T`` sharing the head's ``J``. Ours is timed
  through ``attention_marginals`` itself (the bridge's one padded, causally masked call); dwave loops over the
  ``B x T`` prefix problems (each with its active spins only), and, as a stronger baseline, samples all of them in
  one call as one disjoint BQM (``dwave union``).
* accuracy: at ``n = 16`` (and for (b) at ``T = 16``) the marginals of both against exact enumeration with the same
  budget: max and mean absolute error, and the shot-noise level of an exact sampler with that many reads (mean
  ``sqrt(2/pi) sqrt((1 - m**2) / N)``, the expected mean absolute error; and ``max |err| / sigma``).
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

from hybrid_attention import IsingProblem, exact, kernels
from hybrid_attention.backends.mcmc.gibbs import GibbsSampler
from hybrid_attention.bridge import attention_marginals
from hybrid_attention.sampling import Sampling

INSTALL = (
    "bench.classical compares against dwave-samplers, which is not installed: "
    "pip install 'hybrid-attention[ocean]' (or pip install dimod dwave-samplers)"
)
CRITERIA = ("Metropolis", "Gibbs")


def sk(rng: np.random.Generator, n: int, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """``h (batch, n) ~ N(0, 1)`` and one symmetric ``J (n, n) ~ N(0, 1/n)`` per problem, zero diagonal."""
    U = np.triu(rng.normal(scale=1 / np.sqrt(n), size=(batch, n, n)), 1)
    return rng.normal(size=(batch, n)), U + np.swapaxes(U, -1, -2)


def _bqm(h: np.ndarray, J: np.ndarray, offset: int = 0) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """dimod vectors of one problem (variables ``offset..offset+n-1``): ``linear = -h``, ``quadratic = -J_{i<j}``."""
    i, j = np.triu_indices(len(h), 1)
    return -h, (i + offset, j + offset, -J[i, j])


def dwave_marginals(
    sa: Any, problems: list[tuple[np.ndarray, np.ndarray]], beta: float, sweeps: int, reads: int, seed: int, rule: str
) -> list[np.ndarray]:
    """Marginals ``(n_p,)`` of each problem ``(h (n_p,), J (n_p, n_p))`` from one dwave call per problem."""
    import dimod

    out = []
    for p, (h, J) in enumerate(problems):
        lin, quad = _bqm(h, J)
        bqm = dimod.BinaryQuadraticModel.from_numpy_vectors(lin, quad, 0.0, "SPIN")
        ss = sa.sample(
            bqm, num_reads=reads, beta_schedule_type="custom", beta_schedule=np.full(sweeps, beta),
            seed=seed + p, proposal_acceptance_criteria=rule,
        )  # fmt: skip
        order = np.argsort(np.asarray(ss.variables))
        out.append(ss.record.sample[:, order].mean(0))
    return out


def dwave_union_marginals(
    sa: Any, problems: list[tuple[np.ndarray, np.ndarray]], beta: float, sweeps: int, reads: int, seed: int, rule: str
) -> list[np.ndarray]:
    """The same, all problems in one call as one disjoint BQM (independent components, one sampler call)."""
    import dimod

    lins, rows, cols, vals, offs = [], [], [], [], [0]
    for h, J in problems:
        lin, (i, j, v) = _bqm(h, J, offs[-1])
        lins.append(lin), rows.append(i), cols.append(j), vals.append(v), offs.append(offs[-1] + len(h))
    quad = (np.concatenate(rows), np.concatenate(cols), np.concatenate(vals))
    bqm = dimod.BinaryQuadraticModel.from_numpy_vectors(np.concatenate(lins), quad, 0.0, "SPIN")
    ss = sa.sample(
        bqm, num_reads=reads, beta_schedule_type="custom", beta_schedule=np.full(sweeps, beta), seed=seed,
        proposal_acceptance_criteria=rule,
    )  # fmt: skip
    m = ss.record.sample[:, np.argsort(np.asarray(ss.variables))].mean(0)
    return [m[a:b] for a, b in zip(offs[:-1], offs[1:])]


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def _interleaved(fns: dict[str, Callable[[], Any]], reps: int, min_time: float = 0.1) -> dict[str, float]:
    """Median seconds per call of each function, repetitions interleaved. A warm-up call each first; then each
    repetition times enough back-to-back calls to last about ``min_time`` (the same count for every repetition of one
    function), so millisecond calls are not at the mercy of the scheduler's time slices on a shared machine."""
    calls = {k: max(1, int(np.ceil(min_time / max(_timed(f)[1], 1e-6)))) for k, f in fns.items()}
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            t = time.perf_counter()
            for _ in range(calls[k]):
                f()
            times[k].append((time.perf_counter() - t) / calls[k])
    return {k: statistics.median(v) for k, v in times.items()}


def _ms(t: float) -> str:
    return f"{1e3 * t:.1f}"


def bench_single(args: argparse.Namespace, sa: Any) -> list[str]:
    """(a): one n-spin problem per call, several sweep counts."""
    h, J = sk(np.random.default_rng(0), args.n, 1)
    prob = IsingProblem(torch.tensor(h), torch.tensor(J[0]), beta=args.beta)
    lines = [
        f"### (a) one problem of n = {args.n} spins per call, {args.reads} reads, beta = {args.beta}",
        "",
        "| sweeps | ours ms | ours, torch kernel ms | dwave Metropolis ms | dwave Gibbs ms | Metropolis / ours "
        "| Gibbs / ours | Metropolis / ours torch |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for sweeps in args.sweeps:
        fns = {}
        for name, kernel in (("ours", "auto"), ("torch", "torch")):
            g = GibbsSampler(burn_in=sweeps, ramp=0.0, kernel=kernel)
            fns[name] = lambda g=g: g.sample(prob, num_reads=args.reads, seed=1)
        for rule in CRITERIA:
            fns[rule] = lambda sw=sweeps, r=rule: dwave_marginals(sa, [(h[0], J[0])], args.beta, sw, args.reads, 1, r)
        t = _interleaved(fns, args.reps)
        lines.append(
            f"| {sweeps} | {_ms(t['ours'])} | {_ms(t['torch'])} | {_ms(t['Metropolis'])} | {_ms(t['Gibbs'])} | "
            f"{t['Metropolis'] / t['ours']:.2f}x | {t['Gibbs'] / t['ours']:.2f}x | {t['Metropolis'] / t['torch']:.2f}x |"
        )
    return lines + [""]


def prefix_problems(h: np.ndarray, J: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The bridge's causal problems of one head: ``h (B, T, T)`` and ``J (T, T)`` to ``B x T`` prefix problems."""
    B, T, _ = h.shape
    return [(h[b, i, : i + 1], J[: i + 1, : i + 1]) for b in range(B) for i in range(T)]


def bench_bridge(args: argparse.Namespace, sa: Any) -> tuple[list[str], list[str]]:
    """(b): the bridge's prefix problems of one head; accuracy against exact at T <= 16."""
    rows = [
        f"### (b) the bridge's workload: one head, B = {args.batch} sequences of length T, "
        f"{args.bridge_sweeps} sweeps, {args.reads} reads, beta = {args.beta}",
        "",
        "| T | problems | ours ms | ours, torch kernel ms | dwave Metropolis ms | dwave Gibbs ms "
        "| dwave union (Metropolis) ms | Metropolis / ours | Gibbs / ours | union / ours | Metropolis / ours torch |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    acc: list[str] = []
    for T in args.T:
        rng = np.random.default_rng(T)
        h = rng.normal(size=(args.batch, 1, T, T))
        J = sk(rng, T, 1)[1]
        ht, Jt = torch.tensor(h), torch.tensor(J)
        g = GibbsSampler(burn_in=args.bridge_sweeps, ramp=0.0)
        gt = GibbsSampler(burn_in=args.bridge_sweeps, ramp=0.0, kernel="torch")
        probs = prefix_problems(h[:, 0], J[0])
        sw, rd = args.bridge_sweeps, args.reads
        fns = {
            "ours": lambda g=g, ht=ht, Jt=Jt: attention_marginals(
                ht, Jt, args.beta, sampling=Sampling(g, num_reads=rd, seed=1)
            ),
            "torch": lambda ht=ht, Jt=Jt: attention_marginals(
                ht, Jt, args.beta, sampling=Sampling(gt, num_reads=rd, seed=1)
            ),
            "Metropolis": lambda p=probs: dwave_marginals(sa, p, args.beta, sw, rd, 1, "Metropolis"),
            "Gibbs": lambda p=probs: dwave_marginals(sa, p, args.beta, sw, rd, 1, "Gibbs"),
            "union": lambda p=probs: dwave_union_marginals(sa, p, args.beta, sw, rd, 1, "Metropolis"),
        }
        t = _interleaved(fns, args.reps)
        rows.append(
            f"| {T} | {len(probs)} | {_ms(t['ours'])} | {_ms(t['torch'])} | {_ms(t['Metropolis'])} | "
            f"{_ms(t['Gibbs'])} | {_ms(t['union'])} | {t['Metropolis'] / t['ours']:.2f}x | "
            f"{t['Gibbs'] / t['ours']:.2f}x | {t['union'] / t['ours']:.2f}x | {t['Metropolis'] / t['torch']:.2f}x |"
        )
        if T <= 16:  # accuracy of the same workload against exact causal marginals
            ref = kernels.causal_marginals(ht, Jt, torch.tensor([args.beta], dtype=torch.float64)).numpy()[:, 0]
            ours = fns["ours"]().detach().numpy()[:, 0]
            got = {"ours": np.concatenate([ours[b, i, : i + 1] for b in range(args.batch) for i in range(T)])}
            for rule in CRITERIA:
                got[f"dwave {rule}"] = np.concatenate(dwave_marginals(sa, probs, args.beta, sw, rd, 2, rule))
            m = np.concatenate([ref[b, i, : i + 1] for b in range(args.batch) for i in range(T)])
            acc += _accuracy_rows(f"(b) T = {T}, {len(probs)} prefix problems, {sw} sweeps", m, got, rd)
    return rows + [""], acc


def _accuracy_rows(label: str, m: np.ndarray, got: dict[str, np.ndarray], N: int) -> list[str]:
    sigma = np.sqrt(np.clip(1 - m**2, 1e-12, None) / N)
    out = []
    for name, mh in got.items():
        err = np.abs(mh - m)
        out.append(
            f"| {label} | {name} | {err.max():.4f} | {err.mean():.4f} | {np.sqrt(2 / np.pi) * sigma.mean():.4f} | "
            f"{(err / sigma).max():.2f} |"
        )
    return out


def bench_accuracy(args: argparse.Namespace, sa: Any) -> list[str]:
    """Marginals at n = 16 against exact enumeration, same sweeps and reads for both."""
    n, P = 16, args.accuracy_problems
    h, J = sk(np.random.default_rng(16), n, P)
    prob = IsingProblem(torch.tensor(h), torch.tensor(J), beta=args.beta)
    m = exact.marginals(prob).numpy().ravel()
    sw = args.accuracy_sweeps
    got = {"ours": GibbsSampler(burn_in=sw, ramp=0.0).sample(prob, num_reads=args.reads, seed=3).marginals().ravel()}
    for rule in CRITERIA:
        ms = dwave_marginals(sa, list(zip(h, J)), args.beta, sw, args.reads, 3, rule)
        got[f"dwave {rule}"] = np.concatenate(ms)
    return _accuracy_rows(f"n = 16, {P} SK problems, {sw} sweeps", m, got, args.reads)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=10, help="spins of the single problems of (a)")
    p.add_argument("--sweeps", type=int, nargs="+", default=[64, 256, 1024, 4096], help="sweep counts of (a)")
    p.add_argument("--reads", type=int, default=256, help="reads (= chains) per problem")
    p.add_argument("--beta", type=float, default=1.0)
    p.add_argument("--T", type=int, nargs="+", default=[16, 64], help="sequence lengths of (b)")
    p.add_argument("--batch", type=int, default=4, help="sequences B of (b) (B x T problems)")
    p.add_argument("--bridge-sweeps", type=int, default=128, help="sweeps of (b)")
    p.add_argument("--accuracy-sweeps", type=int, default=256)
    p.add_argument("--accuracy-problems", type=int, default=8)
    p.add_argument("--reps", type=int, default=5, help="interleaved repetitions (medians reported)")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--out", default=None, help="write the markdown here")
    args = p.parse_args(argv)
    for k in ("n", "reads", "batch", "bridge_sweeps", "accuracy_sweeps", "accuracy_problems", "reps", "threads"):
        if getattr(args, k) < 1:
            p.error(f"--{k.replace('_', '-')} must be a positive integer, got {getattr(args, k)}")
    if not args.beta > 0:
        p.error(f"--beta must be positive, got {args.beta}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import dimod
        from dwave.samplers import SimulatedAnnealingSampler
        from dwave.samplers import __version__ as dwave_version
    except ImportError:
        print(INSTALL, file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    sa = SimulatedAnnealingSampler()
    kernel = GibbsSampler().kernel
    text = bench_single(args, sa)
    rows, acc = bench_bridge(args, sa)
    text += rows
    text += [
        f"### Accuracy against exact enumeration ({args.reads} reads each)",
        "",
        "| problems | sampler | max abs err | mean abs err | shot-noise mean abs err | max err / sigma |",
        "| --- | --- | --- | --- | --- | --- |",
        *bench_accuracy(args, sa),
        *acc,
        "",
    ]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    header = (
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {platform.machine()} "
        f"({os.cpu_count()} cores, load average at the end {load}), {args.threads} torch thread(s), torch "
        f"{torch.__version__}, dimod {dimod.__version__}, dwave-samplers {dwave_version}, our gibbs kernel "
        f"'{kernel}'. Medians of {args.reps} interleaved repetitions.\n\n"
    )
    out = "\n".join(text)
    print(header + out)
    if args.out:
        from pathlib import Path

        cmd = "nice -n 5 python -m bench.classical " + " ".join(sys.argv[1:] if argv is None else argv)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(header + f"Command: `{cmd.strip()}`\n\n" + out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
