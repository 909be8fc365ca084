"""The engine table: results/banded_engines/README.md and engines.png from the per-measurement JSON files.

python -m experiments.banded_engines.report
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from experiments.banded_engines import plan
from experiments.banded_engines.engines import ENGINES, QEMCMC_MAX_KEYS, READS

HEADER = """# Approximate engines against the exact banded engine (issue #41, item 3)

Every number below comes from `python -m experiments.banded_engines.run` (training and measurements, resumable; the
round-2 checkpoints are not in git: `--round2 DIR` points at them) and this file from
`python -m experiments.banded_engines.report`; one JSON per (model, T) in this directory. The reference is the
exact banded transfer matrix (`hybrid_attention.banded`, float64). Engines as in the long-context study
(`experiments/long_context/validate_engines.py`): naive mean field and TAP (differentiable fixed points), Gibbs with
8 persistent chains (warmed 64 sweeps, then 2 sweeps and {reads} reads per call, Rao-Blackwellised conditional
estimator), qemcmc (statevector proposals, {reads} reads, conditional estimator).

Columns: marginal error `|m - m_exact|` max / mean over every visible (row, query, key); attention-weight error
after the layer's row normalisation of `alpha = (1 + m) / 2`: max `|a - a_exact|` / mean total variation per row;
validation perplexity of the model with that engine in its attention layer (exact engine: the `exact` row);
cosine of the engine's loss gradient with the exact one on a training batch of the same size, for `c_attn` (the
projections that make the fields h) and `J_raw` (the couplings). `floor`: the same estimator on {reads}
independent exact reads per problem (forward filtering, backward sampling), on a random subset of the problems
(qemcmc: of its own subset), so a sampling engine's error above its floor is bias, at its floor noise. `s`: seconds
of that engine's measurements on the shared machine (load average 20-24 throughout).
"""


def _f(x, fmt: str = ".3g") -> str:
    return "-" if x is None else format(x, fmt)


def rows_of(res: dict) -> list[str]:
    """The table rows of one measurement."""
    label = (
        f"{res['model']} (band {res['band']} {res['band_shape']}, trained at T = {res['trained_T']}, "
        f"{res['train_steps']} steps)"
    )
    head = f"| {label} | {res['T']} | {res['rows']} |"
    out = [
        f"{head} exact | 0 / 0 | 0 / 0 | {res['exact']['val_perplexity']:.4f} | 1 / 1 | - | {res['exact']['seconds']:.0f} |"
    ]
    floor = res["noise_floor"]["conditional"]
    for name in ENGINES:
        e = res["engines"].get(name)
        if e is None:
            why = f" at this T (its problems, prefixes of <= {QEMCMC_MAX_KEYS} keys, recur from T = 128)"
            out.append(f"{head} {name} | not run{why if name == 'qemcmc' else ''} | | | | | |")
            continue
        cos = e.get("gradient_cosine")
        cos_s = "-" if cos is None else f"{cos['c_attn']:.4f} / {cos['J_raw']:.4f}"
        fl = "-"
        if name in ("gibbs-persistent", "qemcmc"):
            f = e["noise_floor"]["conditional"] if "noise_floor" in e else floor
            fl = f"{f['marginal_max']:.3g} / {f['marginal_mean']:.3g}"
        note = f" ({e['subset']})" if "subset" in e else ""
        out.append(
            f"{head} {name}{note} | {e['marginal_max']:.3g} / {e['marginal_mean']:.3g} | {e['weight_max']:.3g} / "
            f"{e['weight_tv_mean']:.3g} | {_f(e.get('val_perplexity'), '.4f')} | {cos_s} | {fl} | {e['seconds']:.0f} |"
        )
    return out


def load() -> list[dict]:
    order = {job: i for i, job in enumerate(plan.JOBS)}
    found = [json.loads(f.read_text()) for f in sorted(plan.OUT.glob("*_T*.json"))]
    return sorted(found, key=lambda r: order.get((r["model"], r["T"]), len(order)))


def plot(results: list[dict], path: Path) -> None:
    """Mean marginal error against T per engine and model, with the Gibbs noise floor."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    models = sorted({r["model"] for r in results})
    marks = dict(zip(models, "osd^v"))
    for name, colour in zip(ENGINES[:3], ("C0", "C1", "C2")):
        for m in models:
            rs = [r for r in results if r["model"] == m and name in r["engines"]]
            if rs:
                ax.plot([r["T"] for r in rs], [r["engines"][name]["marginal_mean"] for r in rs], marks[m] + "-",
                        color=colour, label=f"{name}, {m}")  # fmt: skip
    for m in models:
        rs = [r for r in results if r["model"] == m]
        ax.plot([r["T"] for r in rs], [r["noise_floor"]["conditional"]["marginal_mean"] for r in rs], marks[m] + ":",
                color="grey", label=f"floor ({READS} exact reads), {m}")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("T (evaluation length)")
    ax.set_ylabel("mean |m - m_exact|")
    ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(results: list[dict]) -> str:
    lines = [HEADER.format(reads=READS), "| model | T | rows | engine | marginal err max / mean | weight err max / "
             "mean TV | perplexity | grad cos c_attn / J_raw | floor max / mean | s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in results:
        lines += rows_of(r)
    missing = [f"{m} at T = {T}" for m, T in plan.JOBS if not plan.result_file(m, T).is_file()]
    if missing:
        lines += ["", "Not measured (yet): " + ", ".join(missing) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    results = load()
    notes = plan.OUT / "NOTES.md"  # the findings, written by hand after the numbers, appended as they are
    text = report(results) + ("\n" + notes.read_text() if notes.is_file() else "")
    (plan.OUT / "README.md").write_text(text)
    if results:
        plot(results, plan.OUT / "engines.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
