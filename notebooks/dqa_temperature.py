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
# # DQA effective temperature and the field/coupling imbalance
#
# `docs/theory.md` section 4: a short diabatic anneal from `|+>^n` with the linear schedule samples an approximately Boltzmann
# distribution at a high temperature. Expanding the Trotter product (`hybrid_attention.circuits.temperature`) gives, to
# leading order, `beta_h = Gamma lambda tau^2 / 6` for the fields and `beta_J = 2 beta_h` for the couplings. Here we
# fit `log p = c - beta_h E_h - beta_J E_J` to the exact circuit output (`metrics.fit_effective_beta`), compare with the
# leading-order relation, balance the two temperatures by doubling the fields, and calibrate a schedule to a target.

# %%

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Markdown, display

from hybrid_attention.apps.notebook import QUICK, show

# %%
from hybrid_attention.circuits import DQASchedule
from hybrid_attention.circuits.temperature import (
    calibrate,
    compensate,
    fit_temperature,
    leading_order_beta,
    random_problems,
)

n, batch = 4, (8 if QUICK else 32)
steps = 100 if QUICK else 400
taus = [0.2, 0.5, 1.0, 2.0] if QUICK else [0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 3.0]
h, J = random_problems(n=n, batch=batch, seed=0)
rows = []
for tau in taus:
    sch = DQASchedule(tau=tau, steps=steps)
    fit = fit_temperature(h, J, sch)
    lo_h, lo_J = leading_order_beta(sch)
    rows.append((tau, np.median(fit.beta_h), np.median(fit.beta_J), np.median(fit.r), lo_h, lo_J))
display(
    Markdown(
        "| tau | beta_h (fit) | beta_J (fit) | r | beta_h (leading) | beta_J (leading) |\n|---|---|---|---|---|---|\n"
        + "\n".join(f"| {t:g} | {a:.4f} | {b:.4f} | {r:.5f} | {c:.4f} | {d:.4f} |" for t, a, b, r, c, d in rows)
    )
)

# %% [markdown]
# Compare with `docs/theory.md` section 4 (4 spins, `K = 400`: `tau = 0.2 -> (0.0066, 0.0133, r = 0.99998)`, `0.5 -> (0.038, 0.082)`,
# `1.0 -> (0.128, 0.319)`, `2.0 -> (0.72, 1.14, r = 0.906)`; one problem set, so individual values scatter with the
# problems): at short `tau` the fit is excellent and equals the leading-order relation; as `tau` grows higher orders take
# over, the fitted `beta` falls below `tau^2 / 6`, `beta_J / beta_h` drops from 2 and the Boltzmann form degrades (`r`
# falls).

# %%
R = np.array(rows)
fig, axs = plt.subplots(1, 2, figsize=(10, 3.8))
axs[0].loglog(R[:, 0], R[:, 1], "o-", label="beta_h (fit)")
axs[0].loglog(R[:, 0], R[:, 2], "s-", label="beta_J (fit)")
axs[0].loglog(R[:, 0], R[:, 4], "k--", label="tau^2 / 6 (leading order)")
axs[0].loglog(R[:, 0], R[:, 5], "k:", label="tau^2 / 3 (leading order)")
axs[0].set_xlabel("tau")
axs[0].set_ylabel("effective inverse temperature")
axs[0].legend(fontsize=8)
axs[1].semilogx(R[:, 0], R[:, 2] / R[:, 1], "o-", label="beta_J / beta_h")
axs[1].semilogx(R[:, 0], R[:, 3], "^-", label="fit r")
axs[1].axhline(2, color="k", ls=":")
axs[1].set_xlabel("tau")
axs[1].legend(fontsize=8)
fig.suptitle(f"DQA output on {batch} random {n}-spin problems, K = {steps}")
show(fig)

# %% [markdown]
# ## Compensating the imbalance
#
# Couplings see twice the field inverse temperature because flipping a spin changes each coupling term twice as much.
# `compensate(schedule)` doubles the fields inside the circuit (`field_scale = 2`), so both see the same temperature.

# %%
comp_rows = []
for tau in taus:
    sch = DQASchedule(tau=tau, steps=steps)
    plain, comp = fit_temperature(h, J, sch), fit_temperature(h, J, compensate(sch))
    comp_rows.append(
        (tau, np.median(plain.beta_J / plain.beta_h), np.median(comp.beta_J / comp.beta_h), np.median(comp.r))
    )
display(
    Markdown(
        "| tau | beta_J/beta_h plain | beta_J/beta_h compensated | r compensated |\n|---|---|---|---|\n"
        + "\n".join(f"| {t:g} | {a:.3f} | {b:.3f} | {r:.5f} |" for t, a, b, r in comp_rows)
    )
)
C = np.array(comp_rows)
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.semilogx(C[:, 0], C[:, 1], "o-", label="plain (default program)")
ax.semilogx(C[:, 0], C[:, 2], "s-", label="fields doubled")
ax.axhline(1, color="k", ls=":")
ax.set_xlabel("tau")
ax.set_ylabel("beta_J / beta_h")
ax.legend()
show(fig)

# %% [markdown]
# ## Calibration to a target temperature
#
# `calibrate(target, schedule, vary=..., method=...)` picks `tau` (here) or the energy scale `lambda`:
# `method="leading"` from the closed form `beta_h = tau^2 / 6`, `method="fit"` by bisection on the fitted temperature
# of these problems. We then measure how close the ideal output is to the exact Boltzmann distribution at the target, with
# `metrics.total_variation`. A target the anneal cannot reach (the fitted `beta` saturates) raises `ValueError` instead of
# returning a wrong schedule (shown as `nan`).

# %%
from hybrid_attention import IsingProblem, exact, metrics
from hybrid_attention.circuits.reference import dqa_probabilities

targets = [0.1, 0.3] if QUICK else [0.05, 0.1, 0.2, 0.3, 0.5, 1.0]
base = compensate(DQASchedule(tau=0.5, steps=steps))
cal_rows = []
for target in targets:
    for method in ("leading", "fit"):
        try:
            sch = calibrate(target, base, vary="tau", method=method, problems=(h, J))
        except ValueError:
            cal_rows.append((target, method, float("nan"), float("nan"), float("nan"), float("nan")))
            continue
        p = dqa_probabilities(h, J, sch)
        fit = metrics.fit_effective_beta(p, h, J)
        p_target = exact.probabilities(IsingProblem(torch.from_numpy(h), torch.from_numpy(J), beta=target)).numpy()
        cal_rows.append(
            (
                target,
                method,
                sch.tau,
                np.median(fit.beta_h),
                np.median(fit.beta_J),
                float(np.mean(metrics.total_variation(p, p_target))),
            )
        )
display(
    Markdown(
        "| target beta | method | tau | beta_h (fit) | beta_J (fit) | TV to Boltzmann(target) |\n|---|---|---|---|---|---|\n"
        + "\n".join(f"| {t:g} | {m} | {l:.3g} | {a:.4f} | {b:.4f} | {tv:.4f} |" for t, m, l, a, b, tv in cal_rows)
    )
)

# %%
CR = [r for r in cal_rows if r[1] == "fit" and np.isfinite(r[5])]
CL = [r for r in cal_rows if r[1] == "leading" and np.isfinite(r[5])]
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.plot([r[0] for r in CL], [r[5] for r in CL], "o-", label="leading-order calibration")
ax.plot([r[0] for r in CR], [r[5] for r in CR], "s-", label="fit calibration")
ax.set_xlabel("target beta")
ax.set_ylabel("mean TV to exact Boltzmann")
ax.legend()
ax.set_title("compensated DQA, tau calibrated to a target temperature", fontsize=9)
show(fig)

# %% [markdown]
# **What this means for attention.** The calibrated, compensated anneal is close to Boltzmann at small target `beta`
# (hot attention) and drifts away as the target grows: reaching the layer's default `beta = 1` needs long anneals where
# the output is no longer Boltzmann (see the TV column). DQA-trained models therefore learn *at the sampler's effective
# temperature*: the bridge's gradients are a Boltzmann surrogate at `effective_beta()` (`docs/theory.md` section 3), and the learned
# fields and couplings absorb the scale.
