"""A ``qemcmc`` training step against the exact step (and the DQA-shots step), side by side.

Same model (one layer, one head, ``hj``), batch and optimiser for every row; interleaved repetitions so machine load
hits all rows alike; medians and ratios to the exact step. Two ``qemcmc`` steps, both on the statevector proposal
engine with ``--trotter-steps`` Trotter steps:

* ``qemcmc``, the setting that trains: the :class:`~hybrid_attention.Sampling` value that ``train --sampler qemcmc``
  builds (:func:`hybrid_attention.apps.train.build_sampling` with the training defaults,
  ``hybrid_attention.apps.train.TRAINING_DEFAULTS["qemcmc"]``), with ``--fresh-moves`` as its ``burn_in``
  (``--sampler-option burn_in=K``; default: the training default's): one read from each of 8 fresh chains per
  problem, started from independent spins at the mean-field magnetisations and moved ``--fresh-moves`` times,
  marginals by the Rao-Blackwellised estimator; the table's header prints the value and the ``train`` options that
  give it;
* ``qemcmc-persistent``: persistent chains (:class:`hybrid_attention.PersistentChains`): every (row, head,
  prefix) problem continues its ``--chains`` chains for ``--moves`` moves and records ``--records`` states per chain.

With ``--checkpoint RUN_DIR/checkpoint.pt`` (a ``train`` run of ``hj`` at the same block size) every row runs the
command line's model at that run's weights on four fixed Tiny Shakespeare batches of ``--batch-size`` rows (as
``bench.meanfield_profile`` does), instead of the fresh one-layer model on random tokens: the speed at trained
weights, where the couplings (and the mean-field start's iterations) have grown.

The table also reports the circuit executions (= shots: one measured proposal each) per optimiser step. Target
(issue #44, item 3): the ``qemcmc`` training step at most 5x the exact step at T = 12.

The last two columns are CPU-time ratios (this thread's CPU time per step, the median over repetitions of the
ratio to the exact step of the same repetition): on a loaded machine they move less than the wall-clock ones.

Where the time goes, measured in the same run: ``qemcmc-k0`` is the ``qemcmc`` step with zero moves (the mean-field
start and the Rao-Blackwellised estimator alone: the model, the bridge and the sampler's per-call work), so
``qemcmc - qemcmc-k0`` is the proposals' time. ``qemcmc-torch`` is the ``qemcmc`` step with the proposal draw's torch
kernel (``--sampler-option kernel=torch``: :mod:`hybrid_attention.backends.mcmc.qemcmc_draw`'s GEMMs) instead of the
default compiled one (:mod:`hybrid_attention.backends.mcmc.qemcmc_kernel`, when numba is installed), so the last
columns compare the two kernels' proposals side by side.

    python -m bench.qemcmc --block-sizes 12 --reps 11 --fresh-moves 1 2
    python -m bench.qemcmc --block-sizes 12 --reps 11 --fresh-moves 1 --checkpoint RUN_DIR/checkpoint.pt
    python -m bench.qemcmc --block-sizes 8 --reps 3 --chains 8 --moves 2 --trotter-steps 4
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from bench.train_step import cli_step, make_step
from hybrid_attention.apps.train import TRAINING_DEFAULTS, TrainConfig, build_sampling
from hybrid_attention.backends import get_sampler
from hybrid_attention.circuits import DQASchedule
from hybrid_attention.circuits.proposal import ProposalParams
from hybrid_attention.sampling import PersistentChains, Sampling


def training_sampling(moves: int | None, T: int, kernel: str | None = None) -> tuple[Sampling, str]:
    """The :class:`Sampling` value ``train --sampler qemcmc --block-size T`` trains with when given
    ``--sampler-option burn_in=moves`` (``None``: the training default's burn-in) and ``--sampler-option
    kernel=kernel`` (``None``: the default), seeded 0, and the ``train`` options that give it."""
    options = {} if moves is None else {"burn_in": moves}
    if kernel is not None:
        options["kernel"] = kernel
    cfg = TrainConfig(sampler="qemcmc", block_size=T, sampler_options=options)
    flags = "--sampler qemcmc" + "".join(f" --sampler-option {k}={v}" for k, v in options.items())
    return build_sampling(cfg).with_seed(0), flags


def describe(sampling: Sampling) -> str:
    """The settings of a qemcmc :class:`Sampling` value that decide its draws, in one line."""
    s = sampling.sampler
    return (
        f"{sampling.num_reads} reads x 1 per chain, estimator {sampling.estimator!r}, burn_in {s.burn_in}, start "
        f"{s.start!r}, {s.params}, engine {s.engine!r}, mode {s.mode!r}, kernel {s.kernel!r}"
    )


def _timed(step, n: int) -> tuple[float, float]:
    """Seconds per call of ``step``: wall clock and this thread's CPU time (less sensitive to other processes)."""
    t, c = time.perf_counter(), time.thread_time()
    for _ in range(n):
        step()
    return (time.perf_counter() - t) / n, (time.thread_time() - c) / n


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--block-sizes", type=int, nargs="+", default=[8, 12])
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--chains", type=int, default=8, help="persistent chains per problem")
    p.add_argument("--moves", type=int, default=2, help="moves per chain before the first record of a step")
    p.add_argument("--records", type=int, default=2, help="recorded states per chain per step (thinning 1)")
    p.add_argument(
        "--fresh-moves",
        type=int,
        nargs="+",
        default=None,
        help="qemcmc: moves of each chain from its mean-field start (train's --sampler-option burn_in), one row each, "
        "measured in the same interleaved repetitions (default: the training default's)",
    )
    p.add_argument(
        "--trotter-steps",
        type=int,
        default=None,
        help="Trotter steps of the persistent rows' proposal (default: qemcmc's)",
    )
    p.add_argument("--shots", type=int, default=256, help="DQA shots per problem of the dqa-shots row")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, default=None, help="also write the table (markdown) to this new file")
    p.add_argument(
        "--checkpoint",
        default=None,
        help="a train run's checkpoint.pt (hj at the one --block-sizes value): every row at its weights (docstring)",
    )
    args = p.parse_args(argv)
    if args.out is not None and args.out.exists():
        p.error(f"--out {args.out} exists: give a new file (the results files keep their history)")
    moves_list = args.fresh_moves or [None]
    if args.checkpoint is not None and (len(args.block_sizes) != 1 or not Path(args.checkpoint).is_file()):
        p.error(
            f"--checkpoint needs one --block-sizes value and an existing file, got {args.block_sizes}, {args.checkpoint}"
        )
    if any(k < 1 for k in moves_list if k is not None):
        p.error(f"--fresh-moves must be >= 1 (the qemcmc-k0 row has none), got {args.fresh_moves}")
    torch.set_num_threads(args.threads)
    steps_default = TRAINING_DEFAULTS["qemcmc"]["sampler_options"]["trotter_steps"]
    args.trotter_steps = steps_default if args.trotter_steps is None else args.trotter_steps
    shape = argparse.Namespace(n_embd=64, n_head=1, n_layer=1, batch_size=args.batch_size)
    model = (
        f"the command line's hj model at the weights of {args.checkpoint}, Tiny Shakespeare batches"
        if args.checkpoint
        else "hj, 1 layer, 1 head, n_embd 64, random tokens"
    )
    lines = [
        f"Command: `python -m bench.qemcmc {' '.join(argv if argv is not None else sys.argv[1:])}`",
        "",
        f"{model}, batch {args.batch_size}, {args.threads} thread(s), torch {torch.__version__};",
    ]
    for k in moves_list:
        trained, flags = training_sampling(k, args.block_sizes[0])
        lines.append(f"qemcmc (moves {trained.sampler.burn_in}): the sampling of `train {flags}`: {describe(trained)};")
    lines += [
        f"qemcmc-k0: the same with burn_in 0; qemcmc-persistent: {args.trotter_steps} Trotter steps, {args.chains}"
        f" persistent chains x ({args.moves} moves + {args.records} records); dqa-shots: statevector DQA (tau 1, 20"
        f" steps), {args.shots} shots + covariance backward; median of {args.reps} interleaved reps",
        "",
        "| T | moves | exact ms/step | qemcmc ms/step | qemcmc / exact | qemcmc per-rep min - max |"
        " qemcmc-persistent / exact | persistent per-rep min - max | dqa-shots / exact |"
        " qemcmc circuits (= shots) per step | qemcmc-persistent circuits per step | qemcmc-k0 / exact |"
        " proposals ms (qemcmc - k0) | qemcmc / exact, CPU time | qemcmc-k0 / exact, CPU time |"
        " qemcmc-torch / exact | qemcmc-torch / exact, CPU time | proposals ms, torch kernel |"
        " proposals, torch / compiled |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    print("\n".join(lines), flush=True)
    for T in args.block_sizes:
        for row in _measure(T, moves_list, shape, args):
            lines.append(row)
            print(row, flush=True)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("# qemcmc training step vs exact\n\n" + "\n".join(lines) + "\n")


def _measure(T: int, moves_list: list, shape: argparse.Namespace, args: argparse.Namespace) -> list[str]:
    """The table's rows at block size ``T``, one per entry of ``moves_list``, from one set of interleaved
    repetitions."""
    chains = PersistentChains(num_chains=args.chains, seed=0)
    qs = get_sampler("qemcmc", params=ProposalParams(steps=args.trotter_steps), burn_in=args.moves)
    sv = get_sampler("statevector", schedule=DQASchedule(tau=1.0, steps=20))
    fresh = {k: training_sampling(k, T)[0] for k in moves_list}
    k0, _ = training_sampling(0, T)
    reads = args.chains * args.records

    def make(mode: str, T: int, shape: argparse.Namespace, sampling: Sampling | None = None):
        if args.checkpoint is None:
            return make_step(mode, T, shape, sampling)
        cfg = TrainConfig(attention="hj", sampler="exact", block_size=T, batch_size=args.batch_size).resolved()
        return cli_step(cfg, args.checkpoint, sampling)

    steps = {"exact": make("hj", T, shape)}
    for k, f in fresh.items():
        steps[f"qemcmc{k}"] = make("hj", T, shape, f)
        steps[f"torch{k}"] = make("hj", T, shape, training_sampling(k, T, kernel="torch")[0])
    steps["qemcmc-persistent"] = make("hj", T, shape, Sampling(qs, reads, chains=chains, seed=0))
    steps["dqa-shots"] = make("hj", T, shape, Sampling(sv, args.shots, readout="shots", seed=0))
    steps["qemcmc-k0"] = make("hj", T, shape, k0)
    for f in steps.values():
        f()  # warm-up (the persistent chains also make their first moves from random states)
    times: dict[str, list[float]] = {k: [] for k in steps}
    cpu: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(args.reps):
        for k, f in steps.items():
            wall, thread = _timed(f, 1)
            times[k].append(wall)
            cpu[k].append(thread)
    med = {k: statistics.median(v) for k, v in times.items()}
    # CPU time: the median over repetitions of each step's ratio to the exact step of the same repetition
    cpu_ratio = {k: statistics.median(c / e for c, e in zip(cpu[k], cpu["exact"])) for k in steps}
    problems = args.batch_size * 1 * T  # rows x heads x prefixes
    persistent = problems * args.chains * (args.moves + args.records - 1)
    r = {k: med[k] / med["exact"] for k in med}

    def spread(k: str) -> str:
        per = [t / e for t, e in zip(times[k], times["exact"])]
        return f"{min(per):.1f} - {max(per):.1f}"

    rows = []
    for k, f in fresh.items():
        q, tq = f"qemcmc{k}", f"torch{k}"
        executions = problems * f.num_reads * f.sampler.burn_in  # chains x moves per problem
        prop, prop_torch = med[q] - med["qemcmc-k0"], med[tq] - med["qemcmc-k0"]
        rows.append(
            f"| {T} | {f.sampler.burn_in} | {1e3 * med['exact']:.1f} | {1e3 * med[q]:.1f} | {r[q]:.1f}x | {spread(q)} | "
            f"{r['qemcmc-persistent']:.1f}x | {spread('qemcmc-persistent')} | {r['dqa-shots']:.1f}x | "
            f"{executions:,} | {persistent:,} | {r['qemcmc-k0']:.1f}x | {1e3 * prop:.1f} | {cpu_ratio[q]:.2f}x | "
            f"{cpu_ratio['qemcmc-k0']:.2f}x | {r[tq]:.1f}x | {cpu_ratio[tq]:.2f}x | {1e3 * prop_torch:.1f} | {prop_torch / prop:.1f}x |"
        )
    return rows


if __name__ == "__main__":
    main()
