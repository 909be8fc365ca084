"""``hybrid-attention demo``: the main demonstration on local defaults (no account, no network, a few minutes).

1. The exact Boltzmann engine: closed-form checks and the causal attention kernel against a per-query loop.
2. Bracket matching (generated locally): trains softmax attention, Boltzmann attention (``hj``, exact marginals)
   and two Boltzmann models trained from samples only, with covariance-identity gradients: one on quantum-enhanced
   MCMC samples (``qemcmc``: Metropolis chains whose proposals are measured from a simulated circuit, ``--mcmc-reads``
   reads per attention row) and one on plain DQA measurements (the Trotterized anneal simulated by the
   ``statevector`` sampler, ``--shots`` measurements per attention row, ``readout="shots"``), with
   :func:`hybrid_attention.apps.train.train`, and prints a comparison table (the sample-trained models are evaluated
   both with their own sampler and with exact marginals).
3. Sampler fidelity on the Ising problems the trained ``hj`` layer actually solves: a small
   :func:`hybrid_attention.apps.fidelity.run_sweep` over the available samplers, with its table and plots.

Everything goes to ``--out`` (default: a new ``hybrid-attention-demo-<timestamp>``; an existing non-empty directory
is refused, and so is a directory another demo is writing to).
``--quick`` shrinks every stage to seconds (the test suite uses it).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import torch

from hybrid_attention import exact, kernels
from hybrid_attention.apps.cli_types import non_negative_int, positive_float, positive_int
from hybrid_attention.apps.fidelity import SAMPLER_KINDS, FidelityConfig, run_sweep
from hybrid_attention.apps.fidelity.plots import summary_table
from hybrid_attention.apps.run_files import is_empty, lock_directory
from hybrid_attention.apps.runs import load_run
from hybrid_attention.apps.train import TRAINING_DEFAULTS, TrainConfig, evaluate, train
from hybrid_attention.backends.registry import available_samplers
from hybrid_attention.ising import IsingProblem
from hybrid_attention.sampling import ReadNoiseWarning
from hybrid_attention.tasks.brackets import BracketTask

#: the qemcmc row's chain settings: ``train --sampler qemcmc``'s defaults (start, moves, Trotter steps)
_QEMCMC = TRAINING_DEFAULTS["qemcmc"]["sampler_options"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        default=None,
        help="output directory (must not exist or be empty; default: a new ./hybrid-attention-demo-<timestamp>, "
        "so running the demo again never touches an earlier run)",
    )
    p.add_argument("--quick", action="store_true", help="tiny settings (seconds instead of minutes), for tests")
    p.add_argument(
        "--steps", type=positive_int, default=None, help="training steps per model (default: 150; --quick: 6)"
    )
    p.add_argument(
        "--block-size", type=positive_int, default=None, help="bracket string length T, even (default: 8; --quick: 4)"
    )
    p.add_argument("--shots", type=positive_int, default=128, help="DQA measurements per attention row while training")
    p.add_argument(
        "--mcmc-reads",
        type=positive_int,
        default=8,
        help="qemcmc reads (one chain each) per attention row while training",
    )
    p.add_argument("--tau", type=positive_float, default=1.0, help="DQA anneal time of the sampler-trained model")
    p.add_argument("--trotter-steps", type=positive_int, default=10, help="Trotter steps of that anneal")
    p.add_argument("--seed", type=non_negative_int, default=0)
    p.add_argument("--skip-training", action="store_true", help="only the exact-engine checks")


# ---------------------------------------------------------------------- 1. exact engine
def exact_checks(B: int, T: int, seed: int) -> None:
    """Closed-form checks and the causal kernel's speed and agreement with a per-query loop (printed)."""
    g = torch.Generator().manual_seed(seed)
    print("1. the exact Boltzmann engine\n")
    h = torch.linspace(-2, 2, 5, dtype=torch.float64)[:, None]
    m = exact.marginals(IsingProblem(h))[:, 0]
    print("one free spin, <s> against tanh(beta h):")
    for hv, mv in zip(h[:, 0], m):
        print(f"  h = {hv:+.2f}   <s> = {mv:+.6f}   tanh = {torch.tanh(hv):+.6f}")
    J = torch.tensor([[0.0, 1.5], [1.5, 0.0]], dtype=torch.float64)
    c = exact.correlations(IsingProblem(torch.zeros(2, dtype=torch.float64), J))
    print(
        f"\ntwo spins, J = +1.5 (ferromagnetic): <s0 s1> = {c[0, 1]:.6f}, closed form tanh(1.5) = {torch.tanh(torch.tensor(1.5)):.6f}"
    )
    hs = torch.randn(B, 1, T, T, generator=g)
    Jr = 0.3 * torch.randn(1, T, T, generator=g)
    Jr = torch.triu(Jr, 1) + torch.triu(Jr, 1).transpose(-1, -2)
    kernels.causal_marginals(hs, Jr)  # warm-up: state tables and allocator caches are built on first use
    t0 = time.perf_counter()
    mk = kernels.causal_marginals(hs, Jr)
    tk = time.perf_counter() - t0
    nb = min(B, 4)
    t0 = time.perf_counter()
    ml = kernels.causal_marginals_loop(hs[:nb], Jr)
    tl = (time.perf_counter() - t0) * B / nb
    err = (mk[:nb] - ml).abs().max().item()
    print(f"\ncausal attention kernel, B = {B}, H = 1, T = {T} (float32):")
    print(
        f"  kernel {tk * 1e3:8.1f} ms   per-query loop {tl * 1e3:8.1f} ms (extrapolated from {nb} rows)   "
        f"speed-up {tl / tk:6.1f}x   max |difference| {err:.1e}"
    )


# ---------------------------------------------------------------------- 2. training
def train_models(
    out: Path,
    *,
    T: int,
    steps: int,
    shots: int,
    mcmc_reads: int,
    tau: float,
    trotter_steps: int,
    seed: int,
    quick: bool,
) -> list[dict]:
    """Train softmax, hj (exact), hj (qemcmc samples) and hj (DQA samples) on brackets of length ``T``; returns the
    table rows."""
    common = dict(
        task="brackets",
        block_size=T,
        max_steps=steps,
        seed=seed,
        n_embd=16 if quick else 32,
        batch_size=16 if quick else 64,
        eval_interval=steps,
        eval_size=64 if quick else 512,
        warmup=min(50, steps // 3),
        progress=not quick,
    )
    runs = [
        ("softmax", dict(attention="softmax")),
        ("hj (exact)", dict(attention="hj")),
        (
            "hj (qemcmc samples)",
            # one chain per read, started at the mean-field magnetisations and moved as `train --sampler qemcmc`
            # does by default (TRAINING_DEFAULTS: one move, validated by training; docs/theory.md §6)
            dict(
                attention="hj",
                sampler="qemcmc",
                shots=mcmc_reads,
                estimator="conditional",  # Rao-Blackwellised marginals from the reads
                sampler_options=dict(_QEMCMC),
            ),
        ),
        (
            "hj (DQA samples)",
            dict(
                attention="hj",
                sampler="statevector",
                readout="shots",
                shots=shots,
                tau=tau,
                trotter_steps=trotter_steps,
            ),
        ),
    ]
    dirs = {"softmax": "softmax", "hj (exact)": "hj", "hj (qemcmc samples)": "hj_qemcmc", "hj (DQA samples)": "hj_dqa"}
    rows = []
    for label, kw in runs:
        d = out / dirs[label]
        print(f"  training {label} on brackets T = {T} for {steps} steps ...", flush=True)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            # the DQA row trains on plain spin averages on purpose (the contrast the table shows); the library
            # warns about that setting everywhere else
            warnings.simplefilter("ignore", ReadNoiseWarning)
            m = train(TrainConfig(out=str(d), **common, **kw))
        row = {
            "model": label,
            "dir": d,
            "acc": m["val_accuracy"],
            "string_acc": m["val_string_accuracy"],
            "seconds": time.perf_counter() - t0,
            "acc_exact": None,
        }
        if "sampler" in kw:  # the same weights with exact marginals (the layer's beta = 1 target)
            model = load_run(d, exact=True).model
            task = BracketTask(T, val_size=common["eval_size"])
            row["acc_exact"] = evaluate(model, *task.val, "brackets")["val_accuracy"]
        rows.append(row)
    return rows


def print_table(
    rows: list[dict], T: int, steps: int, shots: int, mcmc_reads: int, tau: float, trotter_steps: int
) -> None:
    moves = f"{_QEMCMC['burn_in']} move" + ("s" if _QEMCMC["burn_in"] != 1 else "")
    print(
        f"\n| model (brackets, T = {T}, {steps} steps) | val accuracy | whole-string accuracy | "
        "accuracy with exact marginals | train + eval time |"
    )
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        ex = "-" if r["acc_exact"] is None else f"{100 * r['acc_exact']:.1f} %"
        print(
            f"| {r['model']} | {100 * r['acc']:.1f} % | {100 * r['string_acc']:.1f} % | {ex} | {r['seconds']:.0f} s |"
        )
    print(
        f"\nqemcmc samples: {mcmc_reads} reads per attention row, each the state of a Metropolis chain started at the "
        f"mean-field magnetisations after {moves} proposed by a simulated circuit ({_QEMCMC['trotter_steps']} Trotter "
        "steps; what train --sampler qemcmc does by default): close to Boltzmann "
        "at beta = 1 (exactly Boltzmann in the chains' stationary limit); marginals from the reads' conditional means "
        "and field gradients from their centred covariances (Rao-Blackwellised; docs/theory.md section 6).\n"
        f"DQA samples: statevector simulation of the Trotterized anneal (tau = {tau}, K = {trotter_steps}), {shots} "
        "shots per attention row, Boltzmann-surrogate gradients at the sampler's effective temperature (docs/theory.md "
        "sections 3-4): DQA output is not Boltzmann, so these gradients are biased, and its marginals are plain spin "
        "averages of the shots (a setting the library otherwise warns about).\n"
        "Own accuracy is measured with the training sampler, the next column with exact beta = 1 marginals."
    )


# ---------------------------------------------------------------------- 3. fidelity
def fidelity_on_model(out: Path, checkpoint: Path, *, T: int, seed: int, quick: bool) -> Path:
    """A small fidelity sweep over the trained layer's own Ising problems; returns the report directory."""
    avail = available_samplers()
    wanted = ("exact", "statevector", "aer", "gibbs", "meanfield")
    samplers = [s for s in wanted if avail.get(SAMPLER_KINDS[s][0])]
    ns = sorted({min(4, T), T}) if quick else sorted({4, 6, T})
    cfg = FidelityConfig(
        samplers=samplers,
        n=ns,
        shots=[128, 512] if quick else [256, 1024, 4096],
        tau=[0.5, 1.0] if quick else [0.5, 1.0, 2.0],
        steps=[10],
        problems=4 if quick else 8,
        seed=seed,
        ensemble="model",
        checkpoint=str(checkpoint),
        base={"n": min(ns)},
    )
    rep_dir = out / "fidelity"
    report = run_sweep(cfg, rep_dir, progress=not quick)
    print(summary_table(report))
    print(f"\nplots: {', '.join(str(rep_dir / f) for f in report['plots'])}")
    return rep_dir


def run(args: argparse.Namespace) -> int:
    T = args.block_size if args.block_size is not None else (4 if args.quick else 8)
    steps = args.steps if args.steps is not None else (6 if args.quick else 150)
    for name, v in (
        ("--steps", steps),
        ("--shots", args.shots),
        ("--mcmc-reads", args.mcmc_reads),
        ("--trotter-steps", args.trotter_steps),
    ):
        if v < 1:
            raise ValueError(f"{name} must be >= 1, got {v}")
    if T < 2 or T % 2:
        raise ValueError(f"--block-size must be an even number >= 2 (well-nested brackets), got {T}")
    if not args.tau > 0:
        raise ValueError(f"--tau must be > 0, got {args.tau}")
    out = Path(args.out) if args.out is not None else Path(time.strftime("hybrid-attention-demo-%Y%m%d-%H%M%S"))
    if not args.skip_training and out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"--out {out} exists and is not empty; choose another directory (nothing is overwritten)")
    t_start = time.perf_counter()
    print("hybrid-attention demo (local, no account, no network)\n")
    exact_checks(16 if args.quick else 64, 8 if args.quick else 12, args.seed)
    if args.skip_training:
        return 0
    out.mkdir(parents=True, exist_ok=True)
    with lock_directory(out):  # a second demo into the same directory is refused, not interleaved
        if not is_empty(out):
            raise ValueError(f"--out {out} exists and is not empty; choose another directory (nothing is overwritten)")
        print(f"\n2. softmax vs Boltzmann attention on bracket matching (runs in {out})\n")
        rows = train_models(
            out,
            T=T,
            steps=steps,
            shots=args.shots,
            mcmc_reads=args.mcmc_reads,
            tau=args.tau,
            trotter_steps=args.trotter_steps,
            seed=args.seed,
            quick=args.quick,
        )
        print_table(rows, T, steps, args.shots, args.mcmc_reads, args.tau, args.trotter_steps)
        print("\n3. sampler fidelity on the Ising problems of the trained hj layer (against exact enumeration)\n")
        fidelity_on_model(out, rows[1]["dir"], T=T, seed=args.seed, quick=args.quick)
    print(f"\ndone in {time.perf_counter() - t_start:.0f} s; everything is in {out}")
    return 0
