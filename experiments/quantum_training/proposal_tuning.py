"""Which qemcmc proposal mixes fastest on real attention problems (the T = 12 gap of sample-based training), computed exactly.

Training runs only a few chain moves per optimiser step, so what matters is how far the chain's law is from Boltzmann
after ``k`` moves from its start, on the problems the attention layer actually poses. For problems of ``n <= 10``
spins this is computed exactly, without sampling:

* problems: the single ``hj`` attention layer of the exact-trained model of ``experiments/quantum_training/run.py``
  (``--model``: default Tiny Shakespeare, T = 12, seed 0, 600 steps, the run directory under ``--runs``), fed one
  training batch; the prefix problems of length ``n`` in ``--n`` (query ``n - 1`` sees keys ``0..n-1``) of the first
  ``--rows`` batch rows (fields ``h = q.k / sqrt(d)`` recomputed from the layer and checked against its attention
  weights, the learned ``J`` and ``beta``);
* kernels: the qemcmc transition matrix ``P`` of each proposal setting (:func:`transition_matrix`: proposal matrix
  from the simulated proposal unitary, Metropolis acceptance, random gamma and time averaged by Gauss-Legendre
  quadrature), and two classical references on the same problems: one random-scan heat-bath (Gibbs) update and one
  sweep of ``n`` of them (what one ``gibbs`` sweep costs);
* start: the chains' ``start="meanfield"`` law (independent spins at the naive mean-field magnetisations) and
  ``start="fields"`` (independent spins at ``tanh(beta h)``);
* measures after ``k`` moves (``p_k = p_0 P^k``): the bias of the Rao-Blackwellised marginals that training uses,
  ``sum_s (p_k(s) - pi(s)) tanh(beta (h_j + sum_l J_jl s_l))`` (root mean square over spins and problems), and the
  total-variation distance ``TV(p_k, pi)``; and the spectral gap ``1 - |lambda_2|`` of ``P`` (median over problems).

Run (repository root; a few minutes; trains the T = 12 exact model first when ``--runs`` does not hold it):

    nice -n 5 python -m experiments.quantum_training.proposal_tuning --overwrite

Writes ``results/quantum_training/proposal_tuning.md`` and ``proposal_tuning.json`` (the same numbers).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "results" / "quantum_training"

#: proposal settings compared: label -> ProposalParams fields (Layden's ranges with 2 Trotter steps is what
#: experiments/quantum_training/run.py trains with)
SETTINGS = {
    "Layden ranges, 2 steps (trained with)": {"gamma": (0.25, 0.6), "time": (2.0, 20.0), "steps": 2},
    "Layden ranges, 12 steps": {"gamma": (0.25, 0.6), "time": (2.0, 20.0), "steps": 12},
    "gamma 0.1-0.3, 2 steps": {"gamma": (0.1, 0.3), "time": (2.0, 20.0), "steps": 2},
    "gamma 0.6-0.9, 2 steps": {"gamma": (0.6, 0.9), "time": (2.0, 20.0), "steps": 2},
    "time 0.5-2, 2 steps": {"gamma": (0.25, 0.6), "time": (0.5, 2.0), "steps": 2},
    "time 1-4, 2 steps": {"gamma": (0.25, 0.6), "time": (1.0, 4.0), "steps": 2},
    "time 1-4, 4 steps": {"gamma": (0.25, 0.6), "time": (1.0, 4.0), "steps": 4},
    "reverse anneal, 2 steps": {"gamma": (0.25, 0.6), "time": (2.0, 20.0), "steps": 2, "shape": "reverse"},
}
MOVES = (1, 2, 4, 8, 16)


def model_run(args: argparse.Namespace) -> Path:
    """The exact-trained run directory (trained with run.py's settings when missing)."""
    import run as qt  # experiments/quantum_training/run.py

    task, T, seed = args.model
    out = Path(args.runs) / f"{task}_T{T}_exact_s{seed}"
    m = out / "metrics.json"
    if not (m.is_file() and json.loads(m.read_text()).get("finished")):
        print(f"training the exact model {out} ...", file=sys.stderr)
        qt.main(
            ["--task", task, "--block-size", str(T), "--variants", "exact", "--seeds", str(seed), "--runs", args.runs]
        )
    return out


def problems_of(args: argparse.Namespace) -> dict[int, list]:
    """``{n: [IsingProblem of one prefix problem, ...]}`` for the first ``--rows`` rows of one training batch."""
    from experiments.quantum_training.burn_in import layer_problem
    from hybrid_attention import IsingProblem
    from hybrid_attention.apps.runs import load_run
    from hybrid_attention.apps.train import TrainConfig, load_task

    run = model_run(args)
    r = load_run(run)
    model, conf = r.model, r.saved
    task, _ = load_task(TrainConfig.from_saved(conf["run"], resume=False))
    T = conf["run"]["block_size"]
    x, _ = task.get_batch("train", 64, T, generator=torch.Generator().manual_seed(args.batch_seed))
    h, J, beta = layer_problem(model, x[: args.rows])
    out = {}
    for n in args.n:
        if not 2 <= n <= T:
            raise ValueError(f"--n: expected prefix lengths in 2..{T}, got {n}")
        out[n] = [IsingProblem(h[r, n - 1, :n], J[:n, :n], beta=beta) for r in range(h.shape[0])]
    return out


def start_law(p, start: str) -> np.ndarray:  # noqa: ANN001
    """``(2**n,)`` product law of the chains' start (``"meanfield"`` or ``"fields"``) over the enumeration order."""
    from hybrid_attention.backends.mcmc.chain import start_magnetisations
    from hybrid_attention.exact import enumerate_states

    h = p.h.to(torch.float64)[None]
    J = p.J.to(torch.float64)[None]
    m = start_magnetisations(h, J, np.array([float(p.beta)]), None, start)[0]  # (n,)
    s = enumerate_states(p.n, dtype=torch.float64).numpy()  # (2**n, n)
    return np.prod((1 + s * m[None]) / 2, axis=1)


def measure(p, P_of: dict, starts: tuple[str, ...]) -> dict:  # noqa: ANN001
    """Per kernel: the spectral gap and, per start and move count, the RB-marginal bias vector and TV."""
    from hybrid_attention import exact
    from hybrid_attention.backends.mcmc import analysis as mcmc
    from hybrid_attention.exact import enumerate_states

    pi = exact.probabilities(p).numpy().astype(np.float64)
    s = enumerate_states(p.n, dtype=torch.float64).numpy()
    h, J, beta = p.h.double().numpy(), p.J.double().numpy(), float(p.beta)
    J = J - np.diag(np.diag(J))
    cond = np.tanh(beta * (h[None] + s @ J.T))  # (2**n, n): each spin's conditional mean given the others
    target = pi @ cond
    dev = float(np.abs(target - exact.marginals(p).numpy()).max())
    if dev > 1e-9:  # the conditional means average to the marginals under Boltzmann: checks the convention
        raise RuntimeError(f"conditional means do not reproduce the exact marginals (max deviation {dev:.2e})")
    res = {}
    for name, P in P_of.items():
        row = {"gap": mcmc.spectral_gap(P, pi)}
        for start in starts:
            q = start_law(p, start)
            done = 0
            for k in MOVES:
                for _ in range(k - done):
                    q = q @ P
                done = k
                row[(start, k)] = (q @ cond - target, 0.5 * float(np.abs(q - pi).sum()))
        res[name] = row
    return res


def kernels(p, nodes: int) -> dict[str, np.ndarray]:  # noqa: ANN001
    from hybrid_attention.backends.mcmc import analysis as mcmc
    from hybrid_attention.backends.mcmc.qemcmc import transition_matrix
    from hybrid_attention.circuits.proposal import ProposalParams
    from hybrid_attention.exact import enumerate_states

    E = p.energy(enumerate_states(p.n, dtype=torch.float64)).numpy()
    out = {label: transition_matrix(p, ProposalParams(**kw), nodes=nodes) for label, kw in SETTINGS.items()}
    G = mcmc.heat_bath_matrix(E, float(p.beta), p.n)
    out["gibbs: one heat-bath update"] = G
    out["gibbs: one sweep (n updates)"] = np.linalg.matrix_power(G, p.n)
    return out


def report(results: dict, args: argparse.Namespace, command: str, seconds: float) -> str:
    starts = ("meanfield", "fields")
    lines = [
        "# qemcmc proposals on real attention problems: exact bias after k moves (issue #12)",
        "",
        f"Command (repository root): `{command}`",
        "",
        f"Generated by `experiments/quantum_training/proposal_tuning.py` (its docstring gives the method) in "
        f"{seconds:.0f} s. Problems: the `hj` layer of the exact-trained {args.model[0]} model (T = {args.model[1]}, "
        f"seed {args.model[2]}), the first {args.rows} rows of one training batch, prefix lengths n = "
        f"{', '.join(map(str, args.n))}; Gauss-Legendre nodes per random parameter: {args.nodes}. Every number is "
        "exact (transition matrices from the simulated proposal unitaries; no sampling).",
        "",
        "One qemcmc move runs one proposal circuit per chain; one heat-bath update is one classical single-spin "
        "update, a sweep is n of them.",
        "",
    ]
    for n, res in results.items():
        labels = list(res[0])
        lines += [
            f"## n = {n} ({len(res)} problems)",
            "",
            "Bias of the Rao-Blackwellised marginals after k moves from the mean-field start (rms over spins and "
            "problems; 0 = Boltzmann), the same from the fields start, and the median spectral gap:",
            "",
            "| kernel | "
            + " | ".join(f"mf k={k}" for k in MOVES)
            + " | "
            + " | ".join(f"fields k={k}" for k in MOVES)
            + " | median gap |",
            "| --- |" + " --- |" * (2 * len(MOVES) + 1),
        ]
        for lab in labels:
            cells = []
            for start in starts:
                for k in MOVES:
                    b = np.concatenate([r[lab][(start, k)][0] for r in res])
                    cells.append(f"{float(np.sqrt(np.mean(b**2))):.4f}")
            gap = float(np.median([r[lab]["gap"] for r in res]))
            lines.append(f"| {lab} | " + " | ".join(cells) + f" | {gap:.4f} |")
        lines += [
            "",
            "Total-variation distance to Boltzmann after k moves from the mean-field start (mean over problems):",
            "",
            "| kernel | " + " | ".join(f"k={k}" for k in MOVES) + " |",
            "| --- |" + " --- |" * len(MOVES),
        ]
        for lab in labels:
            tv = [float(np.mean([r[lab][("meanfield", k)][1] for r in res])) for k in MOVES]
            lines.append(f"| {lab} | " + " | ".join(f"{x:.4f}" for x in tv) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--model",
        nargs=3,
        default=["shakespeare", "12", "0"],
        metavar=("TASK", "T", "SEED"),
        help="the exact-trained model of run.py (default: shakespeare 12 0)",
    )
    p.add_argument("--n", type=int, nargs="+", default=[8, 10], help="prefix lengths (spins), at most 10")
    p.add_argument("--rows", type=int, default=16, help="batch rows (problems per n)")
    p.add_argument("--batch-seed", type=int, default=7)
    p.add_argument("--nodes", type=int, default=4, help="Gauss-Legendre nodes per random proposal parameter")
    p.add_argument("--runs", default="/tmp/quantum_training_runs", help="run directories of run.py")
    p.add_argument("--overwrite", action="store_true", help="replace an existing proposal_tuning.md")
    args = p.parse_args(argv)
    args.model = [args.model[0], int(args.model[1]), int(args.model[2])]
    if args.model[0] not in ("shakespeare", "brackets"):
        p.error(f"--model: expected task shakespeare or brackets, got {args.model[0]!r}")
    if any(n > 10 for n in args.n):
        p.error(f"--n: exact transition matrices need n <= 10, got {args.n}")
    md = OUT / "proposal_tuning.md"
    if md.exists() and not args.overwrite:
        p.error(f"{md} exists; pass --overwrite to replace it")
    command = "nice -n 5 python -m experiments.quantum_training.proposal_tuning " + shlex.join(
        [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--overwrite"] + ["--overwrite"]
    )
    from tqdm.auto import tqdm

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    probs = problems_of(args)
    results = {}
    for n, ps in probs.items():
        results[n] = [measure(q, kernels(q, args.nodes), ("meanfield", "fields")) for q in tqdm(ps, desc=f"n = {n}")]
    text = report(results, args, command, time.perf_counter() - t0)
    md.write_text(text + "\n")
    flat = {
        str(n): {
            lab: {
                "median_gap": float(np.median([r[lab]["gap"] for r in res])),
                **{
                    f"{st}_k{k}": {
                        "rb_bias_rms": float(np.sqrt(np.mean(np.concatenate([r[lab][(st, k)][0] for r in res]) ** 2))),
                        "tv_mean": float(np.mean([r[lab][(st, k)][1] for r in res])),
                    }
                    for st in ("meanfield", "fields")
                    for k in MOVES
                },
            }
            for lab in res[0]
        }
        for n, res in results.items()
    }
    (OUT / "proposal_tuning.json").write_text(json.dumps(flat, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
