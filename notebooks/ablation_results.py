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
# # Ablation results and learned coupling structure
#
# The paper's four-way ablation (`softmax`, `hj`, `h`, `j`; `docs/theory.md` section 3) on Tiny Shakespeare (validation perplexity) and
# bracket matching (accuracy), produced by `hybrid-attention ablate` into `results/ablation/<task>/`. This notebook reads
# those runs (`hybrid_attention.apps.ablate.summarise`, `coupling_profile`); where none are present it says so.
# Finally it shows the learned couplings `J` as a function of key distance (paper: ferromagnetic at distance 2-4,
# antiferromagnetic at >= 6 on Shakespeare).

# %%
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display

# %%
from hybrid_attention.apps import ablate
from hybrid_attention.apps.ablate.plots import draw_coupling_profile
from hybrid_attention.apps.notebook import QUICK, ROOT, show

found = {}
for task in ("shakespeare", "brackets"):
    d = ROOT / "results" / "ablation" / task
    rows = ablate.collect_runs(d) if (d / "runs").is_dir() else []
    if not rows:
        print(f"{task}: no finished ablation runs in {d} (run: hybrid-attention ablate --task {task} --out {d})")
        continue
    found[task] = (d, rows)
    summ = ablate.summarise(rows, task)
    unit = "perplexity" if task == "shakespeare" else "accuracy (%)"
    lines = [
        f"**{task}** ({len(rows)} finished runs): {unit}, mean ± std over seeds, difference to softmax at the same T",
        "",
        "| T | mode | runs | mean | std | diff to softmax |",
        "|---|---|---|---|---|---|",
    ]
    for s in summ:
        lines.append(
            f"| {s['block_size']} | {s['mode']} | {s['n']} | {s['mean']:.3f} | {s['std']:.3f} | {s['diff']:+.3f} |"
        )
    display(Markdown("\n".join(lines)))

# %%
for task, (_, rows) in found.items():
    summ = ablate.summarise(rows, task)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for mode in ("softmax", "hj", "h", "j"):
        ss = [s for s in summ if s["mode"] == mode]
        if ss:
            ax.errorbar(
                [s["block_size"] for s in ss],
                [s["mean"] for s in ss],
                yerr=[0 if np.isnan(s["std"]) else s["std"] for s in ss],
                marker="o",
                capsize=3,
                label=mode,
            )
    ax.set_xlabel("block size T")
    ax.set_ylabel("val perplexity" if task == "shakespeare" else "val accuracy (%)")
    ax.set_title(task)
    ax.legend()
    show(fig)
if not found:
    print("no ablation results to plot")

# %% [markdown]
# ## Learned couplings by key distance
#
# `J_jk` of the `hj` runs averaged over pairs with the same distance `|j - k|` (and over heads, layers and seeds). If no
# `hj` run is available, a small `hj` model is trained here on the bracket task so the analysis still runs (clearly a
# stand-in, not the ablation's result).

# %%
profiles = {}
for task, (d, _) in found.items():
    prof = ablate.coupling_profile(d)
    if prof:
        profiles[task] = prof
if not profiles:
    import tempfile

    from hybrid_attention.apps.train import TrainConfig, train

    run = Path(tempfile.mkdtemp(prefix="hj-")) / "run"
    train(
        TrainConfig(
            task="brackets",
            attention="hj",
            block_size=8,
            max_steps=60 if QUICK else 600,
            out=str(run),
            progress=False,
            eval_interval=60 if QUICK else 200,
            eval_size=256,
            n_embd=32,
        )
    )
    stand_in = run.parent
    (stand_in / "runs").mkdir()
    run.rename(stand_in / "runs" / "hj_T8_s0")
    profiles["brackets (stand-in, trained here)"] = ablate.coupling_profile(stand_in)
    print("no hj ablation runs found: trained a small stand-in model in", stand_in)
for task, prof in profiles.items():
    fig, ax = plt.subplots(figsize=(5, 3.5))
    draw_coupling_profile(ax, prof, title=task, fontsize=8)
    for T, pts in prof.items():
        print(task, f"T={T}:", ", ".join(f"d={p[0]}: {p[1]:+.3f}" for p in pts))
    show(fig)

# %%
# the full coupling matrix of one hj run (the first one found)
import json

runs = sorted(
    p for task, (d, _) in found.items() for p in (d / "runs").glob("hj_T*_s*") if (p / "couplings.json").exists()
)
if not runs and "stand_in" in globals():
    runs = sorted((stand_in / "runs").glob("hj_T*_s*"))
if runs:
    Jm = np.array(json.loads((runs[-1] / "couplings.json").read_text())["J"][0][0])
    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    vmax = np.abs(Jm).max() or 1
    im = ax.imshow(Jm, cmap="RdBu_r", vmin=-vmax, vmax=vmax)
    fig.colorbar(im)
    ax.set_title(f"J of {runs[-1].name} (layer 0, head 0)", fontsize=9)
    ax.set_xlabel("key k")
    ax.set_ylabel("key j")
    show(fig)
else:
    print("no hj couplings available")
