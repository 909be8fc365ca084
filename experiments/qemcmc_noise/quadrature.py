"""Convergence of the qemcmc gap in the quadrature of its random proposal parameters (gamma in [0.25, 0.6], t in
[2, 20], 12 Trotter steps): relative change of each instance's exact gap against a (12, 96) Gauss-Legendre rule.

    nice -n 10 python -m experiments.qemcmc_noise.quadrature --n 4,6 --instances 4
"""

from __future__ import annotations

import argparse

from hybrid_attention.apps.fidelity.problems import ensemble_problems
from hybrid_attention.backends.mcmc import analysis as mcmc

RULES = ((4, 4), (6, 6), (8, 8), (4, 96), (8, 96), (12, 24), (8, 32), (12, 32))
REFERENCE = (12, 96)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="4,6")
    ap.add_argument("--instances", type=int, default=4)
    args = ap.parse_args()
    print("| n | instance | gap (12, 96) | " + " | ".join(f"{g}x{t}" for g, t in RULES) + " |")
    print("| --- " * (3 + len(RULES)) + "|")
    for n in (int(x) for x in args.n.split(",")):
        p = ensemble_problems("layden", n, args.instances, seed=0).flatten()
        for i in range(args.instances):
            ref = float(mcmc.spectral_gaps(p[i : i + 1], ("qemcmc",), nodes=REFERENCE)["qemcmc"][0])
            rel = [float(mcmc.spectral_gaps(p[i : i + 1], ("qemcmc",), nodes=r)["qemcmc"][0]) / ref - 1 for r in RULES]
            print(f"| {n} | {i} | {ref:.5f} | " + " | ".join(f"{x:+.4f}" for x in rel) + " |", flush=True)


if __name__ == "__main__":
    main()
