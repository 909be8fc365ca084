"""Noiseless against noisy qemcmc gaps, from the ``hybrid-attention mixing --noise`` reports in results/qemcmc_noise/.

    python -m experiments.qemcmc_noise.table results/qemcmc_noise

Prints one markdown row per report and size: median gaps of the noiseless and noisy quantum chains and of the uniform
chain, the per-instance noisy / noiseless gap ratio (median, range), the advantage over uniform noiseless and noisy
(median of per-instance ratios, 95 % bootstrap interval over instances), the stationary TV bias (median, max) and the
largest bootstrap error of a noisy gap.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def rows(report: dict, label: str) -> list[str]:
    out = []
    for n, s in report["summary"].items():
        if "advantage" not in s:
            continue
        r = report["rows"][n]
        ratio = np.array([x["qemcmc-noisy"]["gap"] / x["qemcmc"]["gap"] for x in r])
        q, z = s["advantage"]["qemcmc"], s["advantage"]["qemcmc-noisy"]
        nz = s["qemcmc-noisy"]
        out.append(
            f"| {label} | {n} | {len(r)} | {s['qemcmc']['gap_median']:.4f} | {nz['gap_median']:.4f} | "
            f"{s['uniform']['gap_median']:.4f} | {np.median(ratio):.2f} ({ratio.min():.2f}-{ratio.max():.2f}) | "
            f"{q['median']:.2f} ({q['ci_low']:.2f}-{q['ci_high']:.2f}) | {z['median']:.2f} ({z['ci_low']:.2f}-"
            f"{z['ci_high']:.2f}) | {nz['tv_bias_median']:.4f} ({nz['tv_bias_max']:.4f}) | {nz['gap_err_max']:.4f} |"
        )
    return out


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "results/qemcmc_noise")
    print(
        "| noise | n | instances | qemcmc gap, noiseless (median) | noisy | uniform | noisy / noiseless qemcmc gap "
        "(median, range) | qemcmc / uniform noiseless (95 % CI) | noisy (95 % CI) | stationary TV bias median (max) "
        "| max gap error (bootstrap s.d.) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for f in sorted(root.glob("*/mixing.json")):
        for line in rows(json.loads(f.read_text()), f.parent.name):
            print(line)


if __name__ == "__main__":
    main()
