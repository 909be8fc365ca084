"""Tables and plots of ``experiments/hardware/run.py``'s points: ``--out/README.md`` (its tables section between the
markers), ``--out/summary.json``, ``--out/dqa_noise.png``, ``--out/qemcmc_bias.png``.

    python -m experiments.hardware.report --out results/hardware
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

BEGIN, END = "<!-- tables: begin (experiments/hardware/report.py) -->", "<!-- tables: end -->"
GEN = {"fake_torino": "Heron r1", "fake_sherbrooke": "Eagle r3"}


def load(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "points").glob("*.json"))]


def dqa_table(points: list[dict]) -> str:
    rows = [
        "| backend | n | 2q gates | variant | TV to noiseless circuit | mean marginal error (shot s.e.) | "
        "TV to Boltzmann |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in sorted((p for p in points if p["kind"] == "dqa"), key=lambda p: (p["backend"], p["n"])):
        for name, v in p["variants"].items():
            rows.append(
                f"| {p['backend']} ({GEN.get(p['backend'], '?')}) | {p['n']} | {p['two_qubit_gates']} | {name} | "
                f"{v['tv_circuit']:.3f} | {v['marginal_error']:.3f} ({v['marginal_se']:.3f}) | "
                f"{v['tv_boltzmann']:.3f} |"
            )
    return "\n".join(rows)


def floor_table(points: list[dict]) -> str:
    """The sampled TVs of the DQA table beside their computed shot-noise floors (``experiments/hardware/floor.py``)
    and, where computed, the exact (no-shot) TV of the noisy output."""
    floors = {(p["backend"], p["n"]): p for p in points if p["kind"] == "dqa-floor"}
    rows = [
        "| backend | n | shots | noiseless, sampled TV | its floor E[TV] (exact) | noisy, sampled TV | noisy, exact TV "
        "(density matrix, no shots) | floor of the noisy output |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in sorted((p for p in points if p["kind"] == "dqa"), key=lambda p: (p["backend"], p["n"])):
        f = floors.get((p["backend"], p["n"]))
        if f is None:
            continue
        ex = {k: f"{f[k]:.3f}" if k in f else "not computed" for k in ("tv_exact", "floor_noisy")}
        rows.append(
            f"| {p['backend']} | {p['n']} | {p['shots']} | {p['variants']['noiseless']['tv_circuit']:.3f} | "
            f"{f['floor_noiseless']:.3f} | {p['variants']['noisy']['tv_circuit']:.3f} | {ex['tv_exact']} | "
            f"{ex['floor_noisy']} |"
        )
    return "\n".join(rows)


def exact_summary(points: list[dict]) -> dict:
    agg: dict = defaultdict(list)
    for p in points:
        if p["kind"] == "qemcmc-exact":
            agg[(p["backend"], p["n"])].append(p)
    return {
        k: {
            f: float(np.mean([q[f] for q in v]))
            for f in ("tv_as_run", "tv_ideal", "tv_mh_noisy", "asymmetry", "marginal_error")
        }
        | {"problems": len(v), "tv_as_run_max": float(max(q["tv_as_run"] for q in v))}
        for k, v in sorted(agg.items())
    }


def exact_table(summary: dict) -> str:
    rows = [
        "| backend | n | problems | TV(stationary, Boltzmann) as run: mean (max) | ideal proposal | full MH on the "
        "noisy Q | max abs(Q - Q^T) | max marginal error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (b, n), v in summary.items():
        rows.append(
            f"| {b} ({GEN.get(b, '?')}) | {n} | {v['problems']} | {v['tv_as_run']:.4f} ({v['tv_as_run_max']:.4f}) | "
            f"{v['tv_ideal']:.1e} | {v['tv_mh_noisy']:.1e} | {v['asymmetry']:.4f} | {v['marginal_error']:.4f} |"
        )
    return "\n".join(rows)


def sampled_table(points: list[dict]) -> str:
    rows = [
        "| backend | n | variant | mean marginal error | max z (ESS s.e.) | rms z | mean ESS |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in sorted((p for p in points if p["kind"] == "qemcmc-sampled"), key=lambda p: (p["backend"], p["n"])):
        for name, v in p["variants"].items():
            rows.append(
                f"| {p['backend']} | {p['n']} | {name} | {v['marginal_error']:.3f} | {v['z_max']:.2f} | "
                f"{v['z_rms']:.2f} | {v['ess']:.0f} |"
            )
    return "\n".join(rows)


def plots(points: list[dict], summary: dict, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    dqa = [p for p in points if p["kind"] == "dqa"]
    if dqa:
        backends = sorted({p["backend"] for p in dqa})
        fig, axes = plt.subplots(1, len(backends), figsize=(5 * len(backends), 3.6), squeeze=False)
        for ax, b in zip(axes[0], backends):
            pts = sorted((p for p in dqa if p["backend"] == b), key=lambda p: p["n"])
            for name in pts[0]["variants"]:
                ax.plot([p["n"] for p in pts], [p["variants"][name]["tv_circuit"] for p in pts], "o-", label=name)
            ax.set_title(f"DQA on {b} ({GEN.get(b, '?')}) noise")
            ax.set_xlabel("n (spins)")
            ax.set_ylabel("TV to the noiseless circuit")
            ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "dqa_noise.png", dpi=120)
        plt.close(fig)
        made.append("dqa_noise.png")
    if summary:
        fig, ax = plt.subplots(figsize=(5, 3.6))
        for b in sorted({b for b, _ in summary}):
            ns = [n for bb, n in summary if bb == b]
            ax.plot(ns, [summary[(b, n)]["tv_as_run"] for n in ns], "o-", label=f"{b} as run")
            ax.plot(ns, [summary[(b, n)]["tv_mh_noisy"] for n in ns], "x:", label=f"{b} full MH")
        ax.set_yscale("log")
        ax.set_xlabel("n (spins)")
        ax.set_ylabel("TV(stationary law, Boltzmann)")
        ax.set_title("qemcmc stationary bias under noise (exact)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "qemcmc_bias.png", dpi=120)
        plt.close(fig)
        made.append("qemcmc_bias.png")
    return made


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/hardware")
    out = Path(ap.parse_args().out)
    points = load(out)
    summary = exact_summary(points)
    made = plots(points, summary, out)
    tables = "\n\n".join(
        [
            "### DQA under device noise\n\n" + dqa_table(points),
            "### Shot-noise floors of the DQA table (computed)\n\n"
            "A histogram of N shots of a distribution p sits at an expected TV E[TV(p_N, p)] from p (exact, "
            "`hybrid_attention.metrics.expected_tv`); a sampled TV to another distribution lies within about that "
            "much of the exact one. Floors and exact noisy TVs: `python -m experiments.hardware.floor`.\n\n"
            + floor_table(points),
            "### qemcmc stationary bias, exact (n <= 6)\n\n" + exact_table(summary),
            "### qemcmc sampled marginals against Boltzmann (effective-sample-size error bars)\n\n"
            + sampled_table(points),
            "Plots: " + ", ".join(f"[{m}]({m})" for m in made),
        ]
    )
    (out / "summary.json").write_text(
        json.dumps(
            {
                "qemcmc_exact": {f"{b}|n={n}": v for (b, n), v in summary.items()},
                "points": len(points),
            },
            indent=1,
        )
    )
    readme = out / "README.md"
    text = readme.read_text() if readme.exists() else f"# Hardware noise\n\n{BEGIN}\n{END}\n"
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    readme.write_text(f"{head}{BEGIN}\n{tables}\n{END}{tail}")
    print(f"wrote {readme}")


if __name__ == "__main__":
    main()
