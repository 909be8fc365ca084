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
# # Sampler fidelity
#
# Boltzmann attention needs the spin marginals `m_j = <s_j>` of an Ising model; every sampler in the toolkit stands in for
# exact enumeration. This notebook measures how faithfully each one does it, with `hybrid_attention.metrics`:
#
# * distribution distances against the exact Boltzmann distribution: total variation `TV = 1/2 sum |p - q|`,
#   `KL(p || exact)` and `KL(exact || p)` (infinite when a histogram misses a state; see the `metrics` docstring),
#   Hellinger distance and classical fidelity `F = (sum sqrt(p q))^2`;
# * errors of the statistics attention uses: marginals, correlations, and the normalised attention weights
#   `a_j = alpha_j / sum_k alpha_k` with `alpha = (1 + m) / 2`.
#
# The sweep itself is `hybrid-attention fidelity` (Python: `hybrid_attention.apps.fidelity.run_sweep`).

# %%
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Image, Markdown, display

# %% [markdown]
# ## One problem, every sampler
#
# A 4-spin problem with unit-normal fields and couplings at `beta = 1`, sampled by each available sampler. DQA samplers
# run the documented program (`tau = 1`, `K = 20`), whose output is Boltzmann at a much *higher* temperature: their
# distance to the `beta = 1` target is mostly temperature, not noise (the second notebook calibrates it).
# %%
from hybrid_attention import exact, metrics
from hybrid_attention.apps.fidelity import SAMPLER_KINDS, build_sampler, make_schedule, random_problems
from hybrid_attention.apps.notebook import QUICK, ROOT, show
from hybrid_attention.backends import available_samplers

problem = random_problems(4, 1, seed=7)
p_exact = exact.probabilities(problem).numpy()[0]
avail = available_samplers()
# the Markov chains on Aer (qemcmc-aer, qemcmc-aer-noisy) run one simulator call per move: left to the frontier report
names = [s for s, (reg, _) in SAMPLER_KINDS.items() if avail.get(reg) and not s.startswith("qemcmc-aer")]
shots = 512 if QUICK else 4096
rows, dists = [], {}
for name in names:
    kind = SAMPLER_KINDS[name][1]
    sampler = build_sampler(name, schedule=make_schedule(1.0, 20) if kind.startswith("dqa") else None)
    ss = sampler.sample(problem, num_reads=None if kind == "dqa-exact" else shots, seed=1)
    p = ss.probabilities()[0]
    dists[name] = p
    d = metrics.compare_distributions(p, p_exact)
    a = metrics.attention_weight_error(ss.marginals()[0], exact.marginals(problem).numpy()[0])
    rows.append(
        f"| {name} | {float(d['tv']):.3f} | {float(d['kl_pq']):.3f} | {float(d['kl_qp']):.3f} | "
        f"{float(d['fidelity']):.3f} | {float(a['tv']):.3f} |"
    )
display(
    Markdown(
        "| sampler | TV | KL(p‖exact) | KL(exact‖p) | fidelity | attention-weight TV |\n|---|---|---|---|---|---|\n"
        + "\n".join(rows)
    )
)

# %%
fig, ax = plt.subplots(figsize=(10, 3.5))
width = 0.8 / (len(dists) + 1)
x = np.arange(16)
ax.bar(x, p_exact, width, color="k", label="exact (beta = 1)")
for i, (name, p) in enumerate(dists.items()):
    ax.bar(x + (i + 1) * width, p, width, label=name)
ax.set_xticks(x + 0.4, [format(c, "04b")[::-1] for c in range(16)], rotation=90, fontsize=7)
ax.set_xlabel("configuration (qubit 0 first)")
ax.set_ylabel("probability")
ax.legend(fontsize=7, ncol=3)
show(fig)

# %% [markdown]
# ## A small sweep
#
# One axis at a time around a base point (the lower median of each list): shots, Trotter steps `K`, anneal time `tau`
# and size `n`. Solid lines: distance to the exact Boltzmann target; dashed: distance to the *ideal* output of the same
# circuit (what is left is shot noise, hardware noise and emitter error); dotted: the expected shot-noise floor of exact
# samples. `aer-noisy` runs Aer with the noise model of the fake 16-qubit `FakeGuadalupeV2`.

# %%
import tempfile

from hybrid_attention.apps.fidelity import FidelityConfig, run_sweep
from hybrid_attention.apps.fidelity.plots import summary_table

sweep_samplers = [
    s for s in ("exact", "statevector", "aer", "aer-noisy", "pennylane", "gibbs", "anneal", "meanfield") if s in names
]
if QUICK:
    sweep_samplers = [s for s in sweep_samplers if s != "aer-noisy"]
    cfg = FidelityConfig(samplers=sweep_samplers, n=[3], shots=[256, 1024], tau=[0.5, 1.0], steps=[10], problems=3)
else:
    cfg = FidelityConfig(
        samplers=sweep_samplers, n=[3, 4, 5], shots=[256, 1024, 4096], tau=[0.5, 1.0, 2.0], steps=[10, 40], problems=8
    )
out = Path(tempfile.mkdtemp(prefix="fidelity-"))
report = run_sweep(cfg, out, progress=False)
display(Markdown(summary_table(report)))
for f in report["plots"]:
    display(Image(filename=str(out / f)))

# %% [markdown]
# ## The committed reports
#
# `results/fidelity/` holds larger sweeps, each made with the command recorded in its `report.json` (and listed in
# `results/fidelity/README.md`):
#
# * `random/`: every sampler on 16 random problems (`h, J ~ N(0, 1)`, `beta = 1`), the default DQA program (`Gamma = lambda = 1`);
# * `calibrated_beta0.2/`: DQA with compensated fields and the energy scale calibrated (fitted, on an independent
#   ensemble) to a hot target `beta = 0.2`;
# * `model_brackets_hj_T16/`: the Ising problems of a trained `hj` bracket model's attention layer
#   (`results/ablation/brackets/runs/hj_T16_s0`).
#
# The cells below read them and print the numbers the discussion refers to.

# %%
from hybrid_attention.apps.fidelity import load_report
from hybrid_attention.apps.fidelity.plots import path_getter as get
from hybrid_attention.apps.fidelity.plots import series

committed = ROOT / "results" / "fidelity"
reports = {}
for name in ("random", "calibrated_beta0.2", "model_brackets_hj_T16"):
    d = committed / name
    if not (d / "report.json").exists():
        print(f"no committed report at {d}")
        continue
    reports[name] = rep = load_report(d)
    display(Markdown(f"### {name}\n\n`{rep['commands'][-1]}`\n\n" + summary_table(rep)))
    for k, why in rep.get("skipped", {}).items():
        print("skipped:", k, "-", why[:160])
    # the committed PNGs are linked, not embedded (the rendered notebook stays small; Jupyter and GitHub show them)
    display(Markdown("\n".join(f"![{f}](../results/fidelity/{name}/{f})" for f in rep.get("plots", []))))

# %%
# headline numbers: how each sampler's distance to exact falls with shots, and the DQA temperatures
for name, rep in reports.items():
    print(f"== {name}")
    for s in dict.fromkeys(r["point"]["sampler"] for r in rep["points"].values()):
        x, y = series(rep, "shots", s, get("target", "tv", "mean"))
        xc, yc = series(rep, "shots", s, get("circuit", "tv", "mean"))
        if x:
            print(
                f"{s:12s} TV to exact vs shots: "
                + ", ".join(f"{a}: {b:.3f}" for a, b in zip(x, y))
                + ("" if not xc else "   | TV to ideal circuit: " + ", ".join(f"{a}: {b:.3f}" for a, b in zip(xc, yc)))
            )
    for s in ("statevector", "aer"):
        x, bh = series(rep, "tau", s, get("fit", "beta_h", "median"))
        _, bj = series(rep, "tau", s, get("fit", "beta_J", "median"))
        _, tv = series(rep, "tau", s, get("target", "tv", "mean"))
        if x:
            print(
                f"{s}: fitted (beta_h, beta_J) and TV to exact vs tau: "
                + ", ".join(f"tau={a:g}: ({b:.3f}, {c:.3f}) TV {d:.3f}" for a, b, c, d in zip(x, bh, bj, tv))
            )
            break

# %% [markdown]
# **Reading the numbers** (committed reports; the cells above print them).
#
# * *The floor.* `N` exact samples sit `~ 1/sqrt(N)` from the distribution they come from (dotted: the large-`N`
#   expectation). On `random` (n = 4), exact sampling gives TV 0.066 / 0.025 / 0.012 / 0.007 at 256 / 1024 / 4096 /
#   16384 shots; `gibbs` and `anneal` track it (0.045 ... 0.007 and 0.055 ... 0.009).
# * *Emitters are right; physics is the gap.* `aer` and `pennylane` are on the shot-noise floor *of their own ideal
#   circuit* (dashed: 0.096 ... 0.013 for `aer`), and `statevector` equals that ideal output to ~1e-7. Their distance to
#   the `beta = 1` target (about 0.54 at `tau = 1`) does not move with shots: the default program samples at a much higher
#   temperature (fitted `beta_h` 0.011 / 0.043 / 0.147 / 0.43 at `tau` = 0.25 / 0.5 / 1 / 2) with couplings at about twice
#   the field value (`beta_J` 0.022 / 0.083 / 0.27 / 0.64), so TV falls only as `tau` grows (0.69 to 0.33).
# * *Calibration closes most of the gap.* With the fields doubled and the energy scale fitted to a hot target
#   (`calibrated_beta0.2`), `statevector` is 0.054 from exact at `tau = 1` (no shots: all of it systematic) and `aer`
#   0.077 at 1024 shots, against 0.048 for exact samples. At `tau = 0.5` the target is out of reach (the fitted
#   temperature saturates; those points are reported as skipped); at longer `tau` the doubled fields over-compensate
#   (`beta_J` 0.18 / 0.14 / 0.10 at `tau` = 1 / 2 / 3 while `beta_h` stays at 0.2).
# * *Hardware noise is a bias, not noise.* `aer-noisy` (FakeGuadalupeV2 noise model, transpiled to its gates and layout)
#   stays 0.36-0.39 from its own ideal circuit at every shot count, and the gap grows with circuit depth (0.20 at
#   `K = 5`, 0.42 at `K = 40`) and size (0.29 at n = 3, 0.53 at n = 6): relaxation toward `|0>` (`s = +1`), gate
#   and readout errors.
# * *Mean field* is biased on strongly coupled random problems (TV 0.28 at n = 4, flat in shots) but close to exact on
#   the problems of a trained bracket model (`model_brackets_hj_T16`, TV 0.068 vs 0.056 for exact samples at n = 6),
#   whose learned couplings are weak.

# %% [markdown]
# ## Device scale: chains with an exact target
#
# With couplings in a band of width `W` (`J_jk = 0` for `|j - k| > W`) the exact Boltzmann marginals come from a
# transfer matrix at any `n` (`hybrid_attention.exact.marginals` dispatches banded `J`), so samplers can be measured
# against an exact target far past enumeration: `hybrid-attention fidelity --band W --n ...`
# (docs/banded.md, "Device-scale fidelity"). Only marginals are compared there (a distribution over `2**64` states is
# not formed). Below, a small banded sweep is run live (band 1, the largest marginal error per problem, mean over
# problems; dotted: what exact samples at the same shots give), then the committed report
# `results/banded_fidelity/band1` (n = 16 ... 100) is read.

# %%
from hybrid_attention.apps.fidelity.plots import band_table

band_out = Path(tempfile.mkdtemp()) / "band1"
band_cfg = FidelityConfig(
    samplers=[s for s in ("gibbs", "meanfield", "aer-mps") if available_samplers().get(SAMPLER_KINDS[s][0])],
    band=1,
    n=[12, 24] if QUICK else [16, 32, 64],
    shots=[512 if QUICK else 1024],
    tau=[1.0],
    steps=[4 if QUICK else 10],
    problems=2 if QUICK else 4,
)
band_report = run_sweep(band_cfg, band_out, plots=False, progress=False)
display(Markdown(band_table(band_report)))


def plot_band(rep, title):
    fig, ax = plt.subplots(figsize=(6, 4))
    names = list(dict.fromkeys(r["point"]["sampler"] for r in rep["points"].values()))
    for i, s in enumerate(names):
        x, y = series(rep, "n", s, get("target", "marginal_max", "mean"))
        if x:
            ax.plot(x, y, "o-", color=f"C{i}", label=s)
    for s in names:
        x, y = series(rep, "n", s, get("shot_noise", "max"))
        if x:
            ax.plot(x, y, "k:", label="shot-noise floor (exact samples)")
            break
    ax.set_xlabel("spins n")
    ax.set_ylabel("max_j |m_j - m_exact,j| (mean over problems)")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    show(fig)


plot_band(band_report, "band 1, live sweep: marginal error vs n")

# %%
band_dir = ROOT / "results" / "banded_fidelity" / "band1"
if (band_dir / "report.json").exists():
    committed_band = load_report(band_dir)
    display(Markdown(f"`{committed_band['commands'][-1]}`\n\n" + band_table(committed_band)))
    plot_band(committed_band, "band 1, committed report: marginal error vs n")
else:
    print(f"no committed report at {band_dir}")

# %% [markdown]
# **Reading the numbers.** Gibbs (and annealing) sit on the shot-noise floor at every `n`: their largest marginal
# error over 64 or 100 spins is what exact samples would give. Mean field is biased on these strongly coupled chains
# (`J ~ N(0, 1)`), and TAP does not converge on them. `aer-mps` runs the same DQA circuit as `aer`; its distance to
# the `beta = 1` target is the anneal's temperature (the fit `beta_h` about 0.15 at `tau = 1`, as at `n = 4`), not
# the simulator: at `n <= 12` it matches the exact circuit output within shot noise (`tests/backends/test_aer_mps.py`).
