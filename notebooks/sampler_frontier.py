# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The sampler frontier: when is a quantum sampler worth its cost?
#
# For a given set of Ising problems, which sampler gives the most faithful attention per unit of cost? This notebook
# draws the answer from the committed reports of `results/frontier/` (made by `experiments/frontier/run.py`):
#
# 1. **Mixing per step**: exact spectral gaps `1 - |lambda_2|` of the quantum-proposal chain (`qemcmc`) and the
#    classical ones (`mh-local`, `mh-uniform`, heat bath) against the number of spins on Layden et al.'s spin-glass
#    ensemble, with the fitted exponents of `gap ~ 2^(-k n)`;
# 2. **The crossover**: the same gaps against the coupling strength (rms J / rms h), from the strength of trained
#    attention layers (about 0.1) to spin glasses (1);
# 3. **Error against cost**: `hybrid-attention fidelity` points (attention-weight error against model evaluations),
#    with the Pareto frontier ringed.
#
# A small live example runs first (the same functions on a few tiny problems), so the notebook also shows how to ask
# the question of your own problems: `hybrid-attention mixing --checkpoint DIR` or `--bqm FILE`, and
# `hybrid-attention fidelity --budget ...`.

# %%
import json
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display

from hybrid_attention.apps.fidelity import FidelityConfig, ensemble_problems, run_sweep
from hybrid_attention.apps.fidelity.plots import plot_frontier
from hybrid_attention.apps.mixing import fit_exponent, mixing_report
from hybrid_attention.apps.notebook import QUICK, ROOT, show
from hybrid_attention.apps.scaling import gap_ratio_interval

CHAINS = ("qemcmc", "local", "uniform", "heat-bath")
RESULTS = ROOT / "results" / "frontier"

# %% [markdown]
# ## A live example: gaps and an error-vs-cost frontier on tiny problems
#
# Exact gaps of the four chains on `sk` problems of 3 to 5 spins, then a budget sweep of the Markov-chain samplers on
# 4-spin problems (reads fixed, moves per chain swept).

# %%
sizes = [3, 4, 5]
live = mixing_report(
    {n: ensemble_problems("sk", n, 3 if QUICK else 8, seed=0) for n in sizes}, nodes=2 if QUICK else 4, progress=False
)
display(
    Markdown(
        "| chain | fitted k | +- |\n| --- | --- | --- |\n"
        + "\n".join(f"| {c} | {f['k']:.3f} | {f['k_err']:.3f} |" for c, f in live["fits"].items())
    )
)
with tempfile.TemporaryDirectory() as tmp:
    cfg = FidelityConfig(
        samplers=["exact", "qemcmc", "qemcmc-k0", "mh-local", "mh-uniform", "gibbs"],
        n=[4],
        shots=[64 if QUICK else 256],
        budget=[0, 4, 16] if QUICK else [0, 2, 8, 32, 128],
        problems=2 if QUICK else 8,
        ensemble="coupling",
        coupling=0.5,
    )
    small = run_sweep(cfg, Path(tmp) / "frontier", plots=False, progress=False)
fig, ax = plt.subplots(figsize=(6, 4))
plot_frontier(small, 4, ax)
ax.legend(fontsize=7)
ax.set_title("live example: n = 4, rms J / rms h = 0.5", fontsize=9)
show(fig)

# %% [markdown]
# ## 1. Mixing per step against size (committed report)


# %%
def load(pattern):
    return [json.loads(p.read_text()) for p in sorted(RESULTS.glob(pattern))]


def gaps(rep, n, c):
    return np.array([row[c]["gap"] for row in rep["rows"][str(n)]])


fig, axs = plt.subplots(1, 2, figsize=(11, 4))
fit_rows = []
for ax, ens in zip(axs, ("layden", "sk")):
    reps = sorted(load(f"mixing/{ens}_n*.json"), key=lambda r: r["n"])
    if len(reps) < 2:
        ax.set_title(f"{ens}: no committed report")
        continue
    ns = [r["n"] for r in reps]
    for i, c in enumerate(CHAINS):
        g = [gaps(r, r["n"], c) for r in reps]
        med = [np.median(x) for x in g]
        lo = [np.percentile(x, 25) for x in g]
        hi = [np.percentile(x, 75) for x in g]
        ax.errorbar(ns, med, yerr=[np.subtract(med, lo), np.subtract(hi, med)], fmt="o-", color=f"C{i}", label=c)
        fit = fit_exponent(ns, g)
        fit_rows.append(f"| {ens} | {c} | {fit['k']:.3f} | {fit['k_err']:.3f} | {ns[0]}-{ns[-1]} | {len(g[0])} |")
    ax.set_yscale("log")
    ax.set_xlabel("spins n")
    ax.set_ylabel("spectral gap per step (median, IQR)")
    ax.set_title(f"ensemble {ens}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
plt.tight_layout()
show(fig)
display(
    Markdown(
        "| ensemble | chain | k (gap ~ 2^(-k n)) | bootstrap sd | sizes | instances |\n| --- | --- | --- | --- | --- | --- |\n"
        + "\n".join(fit_rows)
    )
)

# %% [markdown]
# ## 2. The crossover: gaps against coupling strength (committed report)
#
# The quantum chain's advantage per step is its median gap over the best classical chain's, with a 95 % interval from
# a bootstrap over the instances (`hybrid_attention.apps.scaling.gap_ratio_interval`). At equal *cost* a step
# of the quantum chain is a circuit execution: the dashed line is the ratio of the projected QPU seconds of one
# one-shot proposal circuit (a placeholder timing model, `hybrid_attention.backends.ibm.cost`) to the measured seconds
# of a classical Metropolis move on this machine; the quantum chain pays only above it.

# %%
reps = sorted(load("coupling/n*_r*.json"), key=lambda r: r["coupling"])
if reps:
    n = reps[0]["n"]
    rs = [r["coupling"] for r in reps]
    fig, axs = plt.subplots(1, 2, figsize=(11, 4))
    med = {c: [np.median(gaps(r, n, c)) for r in reps] for c in CHAINS}
    for i, c in enumerate(CHAINS):
        axs[0].plot(rs, med[c], "o-", color=f"C{i}", label=c)
    axs[0].set_xscale("log")
    axs[0].set_yscale("log")
    axs[0].set_xlabel("rms J / rms h")
    axs[0].set_ylabel("median spectral gap per step")
    axs[0].axvspan(0.03, 0.15, color="grey", alpha=0.2, label="trained attention layers (measured)")
    axs[0].legend(fontsize=7)
    ivs = [gap_ratio_interval(gaps(r, n, "qemcmc"), {c: gaps(r, n, c) for c in CHAINS if c != "qemcmc"}) for r in reps]
    adv = np.array([iv["ratio"] for iv in ivs])
    err = [adv - [iv["ci_low"] for iv in ivs], [iv["ci_high"] for iv in ivs] - adv]
    axs[1].errorbar(rs, adv, yerr=err, fmt="ko-", capsize=3, label="qemcmc gap / best classical gap (95 % CI)")
    axs[1].axhline(1, color="C0", label="equal model evaluations")
    cost = load(f"coupling/n{n}_step_cost.json")
    if cost:
        axs[1].axhline(
            cost[0]["qemcmc_step_qpu_s"] / cost[0]["classical_move_s"],
            color="C3",
            ls="--",
            label="equal projected cost",
        )
    axs[1].set_xscale("log")
    axs[1].set_yscale("log")
    axs[1].set_xlabel("rms J / rms h")
    axs[1].legend(fontsize=7)
    for a in axs:
        a.grid(alpha=0.3)
    fig.suptitle(f"n = {n}, {reps[0]['instances']} problems per strength", fontsize=9)
    plt.tight_layout()
    show(fig)
else:
    display(Markdown("No committed coupling sweep under `results/frontier/coupling/`."))

# %% [markdown]
# ## 3. Error against cost (committed `hybrid-attention fidelity` reports)

# %%
reports = sorted((RESULTS / "fidelity").glob("n*_r*/report.json"))
if reports:
    fig, axs = plt.subplots(1, len(reports), figsize=(4.2 * len(reports), 4), squeeze=False)
    for ax, path in zip(axs[0], reports):
        rep = json.loads(path.read_text())
        plot_frontier(rep, rep["config"]["n"][0], ax)
        ax.set_title(f"rms J / rms h = {rep['config']['coupling']:g}", fontsize=9)
    axs[0][0].legend(fontsize=6)
    plt.tight_layout()
    show(fig)
else:
    display(Markdown("No committed fidelity reports under `results/frontier/fidelity/`."))
