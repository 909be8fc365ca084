"""Table of the long-sequence runs (results/long_sequence/runs/*): final validation metrics, wall time, learned J.
Runs are averaged per (task, attention, sampler), so mean-field and Gibbs-trained hj are separate rows.

    python -m experiments.long_sequence.summarize        # writes results/long_sequence/table.md
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[2] / "results" / "long_sequence"  # the outputs live in results/


def coupling_stats(run: Path) -> tuple[str, str]:
    f = run / "couplings.json"
    if not f.exists():
        return "", ""
    J = np.asarray(json.loads(f.read_text())["J"], dtype=float)  # (layers, heads, T, T)
    T = J.shape[-1]
    iu = np.triu_indices(T, 1)
    d = iu[1] - iu[0]
    vals = J[..., iu[0], iu[1]].reshape(-1, len(d)).mean(0)
    near = vals[(d >= 1) & (d <= 4)].mean()
    far = vals[d >= 6].mean()
    return f"{near:+.4f}", f"{far:+.4f}"


def main() -> int:
    rows = []
    for run in sorted((HERE / "runs").glob("*")):
        m = json.loads((run / "metrics.json").read_text()) if (run / "metrics.json").exists() else None
        c = json.loads((run / "config.json").read_text())["run"] if (run / "config.json").exists() else None
        if not m or not c:
            continue
        metric = "val_accuracy" if c["task"] == "brackets" else "val_perplexity"
        near, far = coupling_stats(run) if c["attention"] == "hj" else ("", "")
        value = m.get(metric)
        sampler = c["sampler"] if c["attention"] != "softmax" else "-"
        if sampler == "gibbs":
            o = c.get("sampler_options", {})
            sampler += (
                f" ({c['shots']} reads, {o.get('num_chains', c['shots'])} chains, burn-in {o.get('burn_in', 256)})"
            )
        rows.append(
            [
                c["task"],
                c["attention"],
                sampler,
                c["block_size"],
                c["seed"],
                m.get("step"),
                metric,
                f"{100 * value:.2f} %" if metric == "val_accuracy" else f"{value:.4f}",
                f"{m['val_string_accuracy'] * 100:.1f} %" if "val_string_accuracy" in m else "",
                f"{m.get('val_loss'):.4f}",
                f"{m.get('elapsed_s', 0) / 60:.1f}",
                near,
                far,
                "yes" if m.get("finished") else "no",
            ]
        )
    cols = [
        "task",
        "attention",
        "sampler",
        "T",
        "seed",
        "steps",
        "metric",
        "value",
        "whole-string",
        "val_loss",
        "minutes",
        "mean J (d=1-4)",
        "mean J (d>=6)",
        "finished",
    ]
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    lines += ["| " + " | ".join(str(v) for v in r) + " |" for r in rows]
    agg: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r[-1] != "yes":  # unfinished runs are listed above but not averaged
            continue
        v = float(r[7].rstrip(" %"))
        agg.setdefault((r[0], r[1], r[2]), []).append(v)
    lines += [
        "",
        "Mean over finished seeds (spread = standard deviation; n = number of seeds):",
        "",
        "| task | attention | sampler | metric | mean | spread | n |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for (task, mode, sampler), vals in sorted(agg.items()):
        metric = "val_accuracy %" if task == "brackets" else "val_perplexity"
        lines.append(
            f"| {task} | {mode} | {sampler} | {metric} | {np.mean(vals):.2f} | {np.std(vals):.2f} | {len(vals)} |"
        )
    text = "\n".join(lines)
    print(text)
    (HERE / "table.md").write_text(
        "Long-sequence runs (T = 64, beyond exact enumeration; hj and h trained and evaluated with the sampler named in the "
        "sampler column: naive mean field, or short-burn-in Gibbs chains, see README.md for their measured accuracy).\n\n"
        "Commands (from the repository root): `nice -n 5 bash experiments/long_sequence/run.sh` (mean field and softmax), "
        "`SAMPLER=gibbs nice -n 5 bash experiments/long_sequence/run.sh` (Gibbs), then `python -m experiments.long_sequence.summarize`\n\n"
        + text
        + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
