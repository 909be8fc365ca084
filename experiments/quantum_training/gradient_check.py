"""Sample-based training gradients against the exact gradient, on a trained model.

For one batch of a model trained with exact marginals (Tiny Shakespeare, T = 12 by default: the cell where two
qemcmc moves miss the target), the gradient of the training loss with respect to the attention layer's parameters is
computed with exact marginals and, for several samplers, from 8 reads per attention row with the Rao-Blackwellised
estimator (``Sampling(..., estimator="conditional")``), once per seed. Reported per sampler: the cosine between the mean of the per-seed
gradients and the exact gradient (1 for an unbiased estimator as seeds grow; the mean's remaining noise lowers it
equally for every sampler with the same spread), and the median and largest per-step gradient norm (the exact one
beside them). Exact Boltzmann reads (``exact`` sampler, 8 reads) are the reference for what 8 perfect reads give;
the first row gives the same reads with spin averages and spin covariances (``Sampling(..., readout="shots")``) instead.
The Rao-Blackwellised rows' coupling gradients use the conditional form too (``Cov(phi_j, s_k s_l)``); the per-step
cosines show what one optimiser step sees.

    nice -n 5 python -m experiments.quantum_training.gradient_check          # writes gradient_check.md beside it

The model is trained first (about a minute) unless its run directory exists (``--runs``, as run.py's).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

from experiments.quantum_training.run import COMMON, DATA, HARD, HERE  # run.py's exact model: the same run directory

PARAMS = ("blocks.0.attn.c_attn.weight", "blocks.0.attn.J_raw")


def samplers() -> dict:
    from hybrid_attention.backends import get_sampler
    from hybrid_attention.circuits.proposal import ProposalParams
    from hybrid_attention.sampling import Sampling

    P = ProposalParams(steps=2)

    def rb(sampler):  # 8 reads per problem through the Rao-Blackwellised estimator
        return Sampling(sampler, 8, estimator="conditional")

    return {
        "exact Boltzmann reads, spin covariances (no Rao-Blackwellisation)": lambda: Sampling(
            get_sampler("exact"), 8, readout="shots"
        ),
        "exact Boltzmann reads": lambda: rb(get_sampler("exact")),
        "gibbs (256 sweeps)": lambda: rb(get_sampler("gibbs")),
        "qemcmc, fields start, 2 moves": lambda: rb(get_sampler("qemcmc", burn_in=2, start="fields", params=P)),
        "qemcmc, mean-field start, 2 moves": lambda: rb(get_sampler("qemcmc", burn_in=2, start="meanfield", params=P)),
        "qemcmc, mean-field start, 8 moves": lambda: rb(get_sampler("qemcmc", burn_in=8, start="meanfield", params=P)),
    }


def model_and_batch(args: argparse.Namespace):
    from hybrid_attention.apps.run_files import load_checkpoint
    from hybrid_attention.apps.train import TrainConfig, train
    from hybrid_attention.apps.train.data import load_task
    from hybrid_attention.model import Transformer

    out = Path(args.runs) / f"{args.task}_T{args.block_size}_exact_s{args.seed}"
    cfg = TrainConfig(
        task=args.task,
        attention="hj",
        block_size=args.block_size,
        max_steps=600,
        seed=args.seed,
        out=str(out),
        eval_interval=100,
        eval_size=1024,
        data=str(DATA) if args.task == "shakespeare" else None,
        progress=False,
        threads=1,
        **COMMON,
        **(HARD if args.task == "brackets" else {}),
    )
    if not (out / "metrics.json").is_file():
        train(cfg, resume=(out / "checkpoint.pt").is_file())
    state = load_checkpoint(out / "checkpoint.pt")
    task, _ = load_task(cfg)
    model = Transformer(cfg.model_config(task.vocab_size))
    model.load_state_dict(state["model"])
    x, y = task.get_batch("train", 64, args.block_size, generator=torch.Generator().manual_seed(args.batch_seed))
    return model, x, y, out


def gradients(model, x, y, sampling, seed: int) -> dict[str, torch.Tensor]:
    """Gradients of the named parameters on ``(x, y)`` with ``sampling`` (``None``: exact) at ``seed``."""
    model.zero_grad(set_to_none=True)
    _, loss = model(x, y, sampling=None if sampling is None else sampling.with_seed(seed))
    loss.backward()
    named = dict(model.named_parameters())
    return {n: named[n].grad.detach().clone() for n in PARAMS}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=["shakespeare", "brackets"], default="shakespeare")
    p.add_argument("--block-size", type=int, default=12)
    p.add_argument("--seed", type=int, default=0, help="the trained model's seed")
    p.add_argument("--batch-seed", type=int, default=7)
    p.add_argument("--seeds", type=int, default=16, help="sampler seeds per sampler")
    p.add_argument("--runs", default="/tmp/quantum_training_runs")
    p.add_argument("--out", type=Path, default=HERE / "gradient_check.md")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    model, x, y, run = model_and_batch(args)
    ref = gradients(model, x, y, None, 0)
    lines = [
        "# Sample-based gradients against the exact gradient",
        "",
        "Command: `"
        + " ".join(["python -m experiments.quantum_training.gradient_check", *(argv or sys.argv[1:])])
        + "` (see the script's docstring).",
        "",
        f"Model: `hj`, trained with exact marginals ({args.task}, T = {args.block_size}, 600 steps, seed {args.seed}; "
        f"run directory `{run}`, not committed). One training batch of 64 windows; 8 reads per attention row, "
        f"Rao-Blackwellised unless stated; {args.seeds} sampler seeds per row. Parameters: the query/key/value projection "
        "`c_attn.weight` (W) and the couplings `J_raw` (J). Exact gradient norms: "
        + ", ".join(f"{n.split('.')[-1]} {float(ref[n].norm()):.3f}" for n in PARAMS)
        + ".",
        "",
        "| sampler | cosine(mean gradient, exact), W | cosine, J | per-step cosine, W: median | per-step cosine, J: "
        "median | per-step norm of W's gradient: median | largest |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, make in samplers().items():
        s = make()
        gs = [gradients(model, x, y, s, seed) for seed in range(args.seeds)]
        cos = []
        for n in PARAMS:
            mean, r = torch.stack([g[n] for g in gs]).mean(0), ref[n]
            cos.append(float((mean * r).sum() / (mean.norm() * r.norm())))
        norms = sorted(float(g[PARAMS[0]].norm()) for g in gs)
        step = [
            statistics.median(float((g[n] * ref[n]).sum() / (g[n].norm() * ref[n].norm())) for g in gs) for n in PARAMS
        ]
        row = (
            f"| {name} | {cos[0]:.3f} | {cos[1]:.3f} | {step[0]:.3f} | {step[1]:.3f} | {statistics.median(norms):.3f} "
            f"| {norms[-1]:.3f} |"
        )
        lines.append(row)
        print(row, flush=True)
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
