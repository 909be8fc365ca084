"""A ``qemcmc`` training step against the exact step (and the DQA-shots step), side by side.

Same model (one layer, one head, ``hj``), batch and optimiser for every row; interleaved repetitions so machine load
hits all rows alike; medians and ratios to the exact step. Two ``qemcmc`` steps, both on the statevector proposal
engine with ``--trotter-steps`` Trotter steps:

* ``qemcmc``, the setting that trains (``experiments/quantum_training``): ``--fresh-reads`` chains per problem, one
  read each, started from independent spins at the mean-field magnetisations (``start="meanfield"``) and moved
  ``--fresh-moves`` times,
  marginals by the Rao-Blackwellised estimator (``Sampling(..., estimator="conditional")``);
* ``qemcmc-persistent``: persistent chains (:class:`hybrid_attention.PersistentChains`): every (row, head,
  prefix) problem continues its ``--chains`` chains for ``--moves`` moves and records ``--records`` states per chain.

The table also reports the circuit executions (= shots: one measured proposal each) per optimiser step. Target
(issue "speed where the work is"): qemcmc within 10x of the exact step at T = 12.

Where the time goes, measured in the same run: ``qemcmc-k0`` is the ``qemcmc`` step with zero moves (the mean-field
start and the Rao-Blackwellised estimator alone: the model, the bridge and the sampler's per-call work), so
``qemcmc - qemcmc-k0`` is the proposals' time. Their floor is the arithmetic the statevector engine must do: per move,
for every chain of every prefix problem (``B`` rows x ``--fresh-reads`` chains, ``n = 1..T`` spins), the middle driver
layer (every Kronecker block) and the last layer's most significant block (``hybrid_attention/backends/mcmc/qemcmc_draw.py``), as GEMMs of
the engine's own shapes and sub-chunks, timed alone (interleaved with the steps; medians).

    nice -n 5 python -m bench.qemcmc --out results/bench/qemcmc.md
    python -m bench.qemcmc --block-sizes 8 --reps 3 --chains 8 --moves 2 --trotter-steps 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from bench.train_step import make_step
from hybrid_attention.backends import get_sampler
from hybrid_attention.circuits import DQASchedule
from hybrid_attention.circuits.proposal import ProposalParams
from hybrid_attention.sampling import PersistentChains, Sampling


def proposal_gemms(T: int, rows: int, moves: int, steps: int):
    """A callable running the GEMMs the statevector proposals of one training step must do (module docstring): for
    each prefix length ``n``, ``rows`` chains, ``moves`` moves of ``steps`` Trotter steps (``steps - 1`` full driver
    layers between the analytic first and the last layer, of which only the top block), on cache-sized sub-chunks as
    the engine runs them."""
    from hybrid_attention.backends.dqa.rotating_frame import apply_block, rotated_blocks

    work = []
    for n in range(1, T + 1):
        size = 1 << n
        per_rows = max(1, (2 << 20) // (size * 8 * 3))  # the engine's sub-chunk (problems x chains), in rows
        sub = min(rows, per_rows)
        blocks = rotated_blocks(n, 4, 0.3, torch.complex64)
        layer = blocks * (steps - 1) + blocks[-1:]
        cur = torch.randn(sub, size, dtype=torch.complex64)
        work.append((cur, torch.empty_like(cur), layer, -(-rows // sub) * moves))

    def run() -> None:
        for cur, buf, layer, times in work:
            for _ in range(times):
                for block in layer:
                    apply_block(cur, buf, block)

    return run


def _timed(step, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - t) / n


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--block-sizes", type=int, nargs="+", default=[8, 12])
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--chains", type=int, default=8, help="persistent chains per problem")
    p.add_argument("--moves", type=int, default=2, help="moves per chain before the first record of a step")
    p.add_argument("--records", type=int, default=2, help="recorded states per chain per step (thinning 1)")
    p.add_argument("--fresh-reads", type=int, default=8, help="qemcmc: chains (= reads) per problem")
    p.add_argument("--fresh-moves", type=int, default=2, help="qemcmc: moves of each chain from its mean-field start")
    p.add_argument("--trotter-steps", type=int, default=2, help="Trotter steps of the proposal circuit")
    p.add_argument("--shots", type=int, default=256, help="DQA shots per problem of the dqa-shots row")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="also write the table (markdown) here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    shape = argparse.Namespace(n_embd=64, n_head=1, n_layer=1, batch_size=args.batch_size)
    reads = args.chains * args.records
    per_call_moves = args.moves + args.records - 1
    lines = [
        f"Command: `python -m bench.qemcmc {' '.join(argv if argv is not None else sys.argv[1:])}`",
        "",
        f"hj, 1 layer, 1 head, n_embd 64, batch {args.batch_size}, {args.threads} thread(s), torch {torch.__version__};"
        f" {args.trotter_steps} Trotter steps, Layden's random gamma and t; qemcmc: {args.fresh_reads} chains x 1 read"
        f" after {args.fresh_moves} moves from the mean-field start, Rao-Blackwellised; qemcmc-persistent:"
        f" {args.chains} persistent chains x ({args.moves} moves + {args.records} records); dqa-shots: statevector DQA"
        f" (tau 1, 20 steps), {args.shots} shots + covariance backward; median of {args.reps} interleaved reps",
        "",
        "| T | exact ms/step | qemcmc ms/step | qemcmc / exact | qemcmc per-rep min - max | qemcmc-persistent / exact |"
        " persistent per-rep min - max | dqa-shots / exact | qemcmc circuits (= shots) per step |"
        " qemcmc-persistent circuits per step | qemcmc-k0 / exact | proposals ms (qemcmc - k0) |"
        " proposal GEMM floor ms | proposals / floor |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    print("\n".join(lines), flush=True)
    for T in args.block_sizes:
        chains = PersistentChains(num_chains=args.chains, seed=0)
        params = ProposalParams(steps=args.trotter_steps)
        qs = get_sampler("qemcmc", params=params, burn_in=args.moves)
        fresh = get_sampler("qemcmc", params=params, burn_in=args.fresh_moves, start="meanfield")
        sv = get_sampler("statevector", schedule=DQASchedule(tau=1.0, steps=20))
        k0 = get_sampler("qemcmc", params=params, burn_in=0, start="meanfield")
        steps = {
            "exact": make_step("hj", T, shape),
            "qemcmc": make_step("hj", T, shape, Sampling(fresh, args.fresh_reads, estimator="conditional", seed=0)),
            "qemcmc-persistent": make_step("hj", T, shape, Sampling(qs, reads, chains=chains, seed=0)),
            "dqa-shots": make_step("hj", T, shape, Sampling(sv, args.shots, readout="shots", seed=0)),
            "qemcmc-k0": make_step("hj", T, shape, Sampling(k0, args.fresh_reads, estimator="conditional", seed=0)),
            "floor": proposal_gemms(T, args.batch_size * args.fresh_reads, args.fresh_moves, args.trotter_steps),
        }
        for f in steps.values():
            f()  # warm-up (the qemcmc chains also make their first moves from random states)
        times: dict[str, list[float]] = {k: [] for k in steps}
        for _ in range(args.reps):
            for k, f in steps.items():
                times[k].append(_timed(f, 1))
        med = {k: statistics.median(v) for k, v in times.items()}
        problems = args.batch_size * 1 * T  # rows x heads x prefixes
        executions = problems * args.fresh_reads * args.fresh_moves  # chains x moves per problem
        persistent = problems * args.chains * per_call_moves
        r = {k: med[k] / med["exact"] for k in med}

        def spread(k: str) -> str:
            per = [t / e for t, e in zip(times[k], times["exact"])]
            return f"{min(per):.1f} - {max(per):.1f}"

        prop = med["qemcmc"] - med["qemcmc-k0"]
        row = (
            f"| {T} | {1e3 * med['exact']:.1f} | {1e3 * med['qemcmc']:.1f} | {r['qemcmc']:.1f}x | {spread('qemcmc')} | "
            f"{r['qemcmc-persistent']:.1f}x | {spread('qemcmc-persistent')} | {r['dqa-shots']:.1f}x | "
            f"{executions:,} | {persistent:,} | {r['qemcmc-k0']:.1f}x | {1e3 * prop:.1f} | {1e3 * med['floor']:.1f} | "
            f"{prop / med['floor']:.1f}x |"
        )
        lines.append(row)
        print(row, flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("# qemcmc training step vs exact\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
