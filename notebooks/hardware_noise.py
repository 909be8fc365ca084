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
# # What your backend's noise does to the samplers
#
# Point `BACKEND` at your device: a fake backend by name (offline, e.g. `"fake_torino"` for a Heron, `"fake_sherbrooke"`
# for an Eagle), or your own device as an `IBMBackend` (`QiskitRuntimeService().backend("ibm_...")`: its calibrated
# noise model is built locally; nothing is submitted). Everything below is a local simulation of that noise model:
#
# 1. the DQA sampler's output under the noise, with and without readout mitigation (mthree) and gate twirling, against
#    the noiseless circuit and exact Boltzmann;
# 2. the qemcmc chain's stationary bias, exactly: the noisy proposal matrix from density-matrix simulation of every
#    basis-state input, the chain's transition matrix as the sampler runs it (Metropolis acceptance, which assumes a
#    symmetric proposal) and its stationary law's distance to Boltzmann;
# 3. what a run on the device would cost (`estimate`), before you pay for it.
#
# The committed report for two fake backends is `results/hardware/README.md` (made by `experiments/hardware/run.py`).

# %%
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from hybrid_attention.apps import noise_study as ns
from hybrid_attention.apps.notebook import QUICK, show
from hybrid_attention.backends import get_sampler
from hybrid_attention.backends.ibm import fake_backend

BACKEND = "fake_manila" if QUICK else "fake_torino"  # <- your backend (a fake name, or an IBMBackend object)
backend = fake_backend(BACKEND) if isinstance(BACKEND, str) else BACKEND
DQA_N = [3] if QUICK else [4, 6]
EXACT_N = [3] if QUICK else [3, 4, 5]
PROBLEMS, SHOTS = (2, 1024) if QUICK else (4, 4096)
print(backend.name, backend.num_qubits, "qubits")

# %% [markdown]
# ## 1. DQA under the noise model, with and without mitigation
#
# TV distances are averaged over random SK problems (`h ~ N(0, 1)`, `J ~ N(0, 1/(n-1))`, beta = 1). The noiseless row
# is the ideal circuit sampled with the same shots: its distance to the circuit is the shot-noise floor.

# %%
dqa = [ns.dqa_noise(backend, ns.sk_problems(n, PROBLEMS, 0), shots=SHOTS) for n in DQA_N]
rows = ["| n | 2q gates | variant | TV to noiseless circuit | mean marginal error (s.e.) |", "|---|---|---|---|---|"]
for r in dqa:
    for name, v in r["variants"].items():
        rows.append(
            f"| {r['n']} | {r['two_qubit_gates']} | {name} | {v['tv_circuit']:.3f} | "
            f"{v['marginal_error']:.3f} ({v['marginal_se']:.3f}) |"
        )
display(Markdown("\n".join(rows)))
fig, ax = plt.subplots(figsize=(5, 3.4))
for name in dqa[0]["variants"]:
    ax.plot([r["n"] for r in dqa], [r["variants"][name]["tv_circuit"] for r in dqa], "o-", label=name)
ax.set_xlabel("n (spins)")
ax.set_ylabel("TV to the noiseless circuit")
ax.set_title(f"DQA on {backend.name} noise")
ax.legend(fontsize=8)
show(fig)

# %% [markdown]
# ## 2. qemcmc: the stationary law under noise, exactly
#
# `as run`: the chain the sampler runs (noisy proposal, Metropolis acceptance). `ideal`: the noiseless proposal
# (symmetric, so the chain is exactly Boltzmann). `full MH`: Metropolis-Hastings with the noisy proposal's ratio
# `Q[s', s] / Q[s, s']`, unbiased again, but it needs `Q`, which a device does not give.

# %%
bias = {n: [ns.qemcmc_stationary_bias(ns.sk_problems(n, 2, 0)[k], backend) for k in range(2)] for n in EXACT_N}
rows = ["| n | TV as run | TV ideal | TV full MH | max abs(Q - Q^T) |", "|---|---|---|---|---|"]
for n, rs in bias.items():
    mean = {k: sum(r[k] for r in rs) / len(rs) for k in ("tv_as_run", "tv_ideal", "tv_mh_noisy", "asymmetry")}
    rows.append(
        f"| {n} | {mean['tv_as_run']:.4f} | {mean['tv_ideal']:.1e} | {mean['tv_mh_noisy']:.1e} | "
        f"{mean['asymmetry']:.4f} |"
    )
display(Markdown("\n".join(rows)))
fig, ax = plt.subplots(figsize=(5, 3.4))
ax.plot(list(bias), [sum(r["tv_as_run"] for r in rs) / len(rs) for rs in bias.values()], "o-", label="as run")
ax.plot(
    list(bias), [sum(r["tv_mh_noisy"] for r in rs) / len(rs) + 1e-16 for rs in bias.values()], "x:", label="full MH"
)
ax.set_yscale("log")
ax.set_xlabel("n (spins)")
ax.set_ylabel("TV(stationary, Boltzmann)")
ax.legend()
show(fig)

# %% [markdown]
# ## 3. What it would cost on the device
#
# `estimate` counts jobs, circuits and shots and the QPU seconds of the documented model
# (`hybrid_attention.backends.ibm.cost`), submitting nothing. Mitigation's calibration is included. (A real device needs
# `allow_hardware=True` to build the sampler at all; `estimate` still submits nothing.)

# %%
real = not isinstance(BACKEND, str)
ibm = get_sampler("ibm", backend=backend, readout_mitigation=True, allow_hardware=real)
est = ibm.estimate(ns.sk_problems(DQA_N[-1], PROBLEMS, 0), num_reads=SHOTS)
print({k: est[k] for k in ("jobs", "circuits", "shots", "depth", "two_qubit_gates")}, f"{est['qpu_seconds']:.1f} QPU s")
q = get_sampler(
    "qemcmc", engine="ibm", backend=backend, burn_in=2, trotter_steps=2, ibm_options={"allow_hardware": real}
)
print(
    "qemcmc, one call of 64 problems, 8 reads:",
    {k: q.estimate(ns.sk_problems(DQA_N[-1], 64, 0), 8)[k] for k in ("jobs", "circuits", "qpu_seconds")},
)
