"""Mixing of quantum-enhanced MCMC against classical proposals, from exact transition matrices.

For random Ising problems of n = 3..8 spins it builds the exact transition matrix of each chain and reports its
spectral gap ``1 - |lambda_2|`` (larger mixes faster; one step = one proposal):

* ``qemcmc``: the ``qemcmc`` sampler's chain with Layden et al.'s random parameters (gamma in [0.25, 0.6], t in
  [2, 20], 12 palindromic Trotter steps; the average over the parameters by a Gauss-Legendre rule,
  ``--nodes`` per parameter, checked against twice as many nodes), from the simulated proposal unitary;
* ``qemcmc-fixed``: the same circuit with fixed gamma = 0.45, t = 6;
* ``qemcmc-reverse``: the annealing variant, a reverse-anneal segment (``shape="reverse"``) peaking at gamma in
  [0.25, 0.6] with t in [2, 20] (random, the same quadrature);
* ``local``: Metropolis with single-spin-flip proposals; ``gibbs``: random-scan heat bath (one spin per step);
* ``uniform``: Metropolis with uniformly random proposals.

Ensembles: ``layden`` (h, J ~ N(0, 1) all-to-all, beta = 1: Layden et al.'s instances) and ``sk`` (h ~ N(0, 1),
J ~ N(0, 1/(n-1)), beta = 1: the scale of the tests and of attention problems). It also checks every qemcmc matrix for
detailed balance and stationarity (= Boltzmann) and, with ``--marginals``, samples a few problems up to n = 16 with the
sampler and reports the marginal errors in units of their shot-derived standard error.

Run (about 15 minutes on a busy 2-core machine):

    nice -n 5 python -m experiments.qemcmc_mixing.run --marginals --out results/quantum_training/mixing
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from hybrid_attention import IsingProblem, exact
from hybrid_attention.backends.mcmc import analysis as mcmc
from hybrid_attention.backends.mcmc.chain import ChainSchedule
from hybrid_attention.backends.mcmc.qemcmc import QEMCMCSampler, transition_matrix
from hybrid_attention.circuits.proposal import ProposalParams
from hybrid_attention.exact import enumerate_states

METHODS = ("qemcmc", "qemcmc-fixed", "qemcmc-reverse", "local", "gibbs", "uniform")
FIXED = ProposalParams(gamma=0.45, time=6.0, steps=12)


def problem(ensemble: str, n: int, rng: np.random.Generator) -> IsingProblem:
    h = rng.normal(size=n)
    scale = 1.0 if ensemble == "layden" else 1.0 / np.sqrt(max(n - 1, 1))
    J = np.triu(rng.normal(scale=scale, size=(n, n)), 1)
    return IsingProblem(torch.tensor(h), torch.tensor(J + J.T), beta=1.0)


def matrices(p: IsingProblem, nodes: int) -> dict[str, np.ndarray]:
    E = p.energy(enumerate_states(p.n, dtype=torch.float64)).numpy()
    beta = float(p.beta)
    return {
        "qemcmc": transition_matrix(p, ProposalParams(), nodes=nodes),
        "qemcmc-fixed": transition_matrix(p, FIXED),
        "qemcmc-reverse": transition_matrix(p, ProposalParams(shape="reverse"), nodes=nodes),
        "local": mcmc.metropolis_matrix(mcmc.local_proposal(p.n), E, beta),
        "gibbs": mcmc.heat_bath_matrix(E, beta, p.n),
        "uniform": mcmc.metropolis_matrix(mcmc.uniform_proposal(p.n), E, beta),
    }


def gaps(args: argparse.Namespace) -> tuple[list[dict], dict]:
    rows, checks = [], {"detailed_balance": 0.0, "stationary_vs_boltzmann": 0.0, "quadrature": 0.0}
    rng = np.random.default_rng(args.seed)
    work = [(e, n, i) for e in ("layden", "sk") for n in args.n for i in range(args.instances)]
    for ensemble, n, i in tqdm(work, desc="transition matrices"):
        p = problem(ensemble, n, rng)
        pi = exact.probabilities(p).numpy()
        Ps = matrices(p, args.nodes)
        for method, P in Ps.items():
            rows.append(
                {"ensemble": ensemble, "n": n, "instance": i, "method": method, "gap": mcmc.spectral_gap(P, pi)}
            )
            if method.startswith("qemcmc"):
                checks["detailed_balance"] = max(checks["detailed_balance"], mcmc.detailed_balance_violation(P, pi))
                dev = float(np.abs(mcmc.stationary_distribution(P) - pi).max())
                checks["stationary_vs_boltzmann"] = max(checks["stationary_vs_boltzmann"], dev)
        if i == 0:  # the quadrature of the random parameters, against twice as many nodes
            fine = mcmc.spectral_gap(transition_matrix(p, ProposalParams(), nodes=2 * args.nodes), pi)
            checks["quadrature"] = max(checks["quadrature"], abs(fine - rows[-len(METHODS)]["gap"]))
    return rows, checks


def marginals(args: argparse.Namespace) -> list[dict]:
    """Sampled marginals against exact: max |error| / standard error over spins, per n."""
    out = []
    rng = np.random.default_rng(args.seed + 1)
    for n in tqdm((4, 8, 12, 16), desc="sampled marginals"):
        p = problem("sk", n, rng)
        chains, records = 32, 40
        s = QEMCMCSampler(params=ProposalParams(steps=4), chain=ChainSchedule(burn_in=200))
        t0 = time.perf_counter()
        ss = s.sample(p, num_reads=chains * records, num_chains=chains, thinning=3, seed=n)
        secs = time.perf_counter() - t0
        m = exact.marginals(p).numpy()
        se = np.sqrt(np.clip(1 - m**2, 1e-3, None) / ss.info["ess_spins"])
        out.append(
            {
                "n": n,
                "chains": chains,
                "reads": chains * records,
                "moves": ss.info["moves"],
                "circuit_executions": ss.info["circuit_executions"],
                "acceptance": float(ss.info["acceptance_rate"]),
                "min_ess": float(ss.info["ess_spins"].min()),
                "max_abs_error": float(np.abs(ss.marginals() - m).max()),
                "max_error_in_se": float((np.abs(ss.marginals() - m) / se).max()),
                "seconds": secs,
            }
        )
    return out


def summary(rows: list[dict], args: argparse.Namespace) -> tuple[str, dict]:
    lines, fits = [], {}
    for ensemble in ("layden", "sk"):
        lines += [
            f"\n### {ensemble}\n",
            "| n | " + " | ".join(METHODS) + " |",
            "| --- |" + " --- |" * len(METHODS),
        ]
        for n in args.n:
            cells = []
            for method in METHODS:
                g = np.array(
                    [r["gap"] for r in rows if r["ensemble"] == ensemble and r["n"] == n and r["method"] == method]
                )
                cells.append(f"{g.mean():.4f} ± {g.std():.4f}")
            lines.append(f"| {n} | " + " | ".join(cells) + " |")
        for method in METHODS:  # gap ~ 2^(-k n): k from a least-squares fit of log2(mean gap) against n
            means = [
                np.mean([r["gap"] for r in rows if r["ensemble"] == ensemble and r["n"] == n and r["method"] == method])
                for n in args.n
            ]
            k = -np.polyfit(np.array(args.n, dtype=float), np.log2(means), 1)[0]
            fits[f"{ensemble}/{method}"] = float(k)
        lines.append(
            "\nfitted k in gap ~ 2^(-k n): " + ", ".join(f"{m} {fits[f'{ensemble}/{m}']:.3f}" for m in METHODS)
        )
    return "\n".join(lines), fits


def plot(rows: list[dict], args: argparse.Namespace, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, ensemble in zip(axes, ("layden", "sk")):
        for method in METHODS:
            g = [
                [r["gap"] for r in rows if r["ensemble"] == ensemble and r["n"] == n and r["method"] == method]
                for n in args.n
            ]
            ax.errorbar(
                args.n, [np.mean(x) for x in g], yerr=[np.std(x) for x in g], marker="o", capsize=3, label=method
            )
        ax.set_yscale("log")
        ax.set_xlabel("n (spins)")
        ax.set_title(f"{ensemble} ensemble, beta = 1")
    axes[0].set_ylabel("spectral gap 1 - |lambda_2| (per step)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[3, 4, 5, 6, 7, 8])
    ap.add_argument("--instances", type=int, default=10)
    ap.add_argument("--nodes", type=int, default=12, help="Gauss-Legendre nodes per random proposal parameter")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--marginals", action="store_true", help="also sample n = 4, 8, 12, 16 against exact")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--overwrite", action="store_true")
    args = ap.parse_args(argv)
    if (args.out / "summary.json").exists() and not args.overwrite:
        sys.exit(f"{args.out} already holds results; pass --overwrite to replace them")
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    rows, checks = gaps(args)
    table, fits = summary(rows, args)
    with open(args.out / "gaps.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot(rows, args, args.out / "gaps.png")
    samp = marginals(args) if args.marginals else []
    command = "python -m experiments.qemcmc_mixing.run " + " ".join(argv if argv is not None else sys.argv[1:])
    report = {
        "command": command,
        "checks": checks,
        "fits": fits,
        "marginals": samp,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
    }
    (args.out / "summary.json").write_text(json.dumps(report, indent=1) + "\n")
    md = [
        f"# Spectral gaps of qemcmc vs classical proposals\n\nCommand: `{command}`\n",
        "Mean ± std over instances:",
        table,
    ]
    md += [
        "\n## Checks\n",
        f"* max detailed-balance violation of the qemcmc matrices: {checks['detailed_balance']:.2e}",
        f"* max |stationary - Boltzmann|: {checks['stationary_vs_boltzmann']:.2e}",
        f"* gap change from {args.nodes} to {2 * args.nodes} quadrature nodes (instance 0 of each n): "
        f"{checks['quadrature']:.2e}",
    ]
    if samp:
        md += [
            "\n## Sampled marginals vs exact (sk ensemble)\n",
            "| " + " | ".join(samp[0]) + " |",
            "|" + " --- |" * len(samp[0]),
        ]
        md += [
            "| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in r.values()) + " |" for r in samp
        ]
    (args.out / "summary.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
