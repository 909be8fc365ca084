"""The shot-noise floor of ``results/hardware``'s DQA table, computed: for each backend and size, the expected TV of
a 4096-shot histogram of the noiseless circuit's exact output to that output
(:func:`hybrid_attention.metrics.expected_tv`, exact), and for ``--exact-n`` sizes the exact TV of the noisy output
(density matrix of the same ISA circuit, read-out applied:
:func:`hybrid_attention.apps.noise_study.exact_noisy_distribution`) to the noiseless one, beside the noisy output's
own floor. Points ``--out/points/<backend>_dqa-floor_n<n>.json`` (kind ``dqa-floor``; existing files kept), read by
``experiments/hardware/report.py``.

    nice -n 5 python -m experiments.hardware.floor --out results/hardware --n 4,6,8,10 --exact-n 4,6
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from hybrid_attention.apps import noise_study as ns
from hybrid_attention.backends.ibm.sampler import fake_backend
from hybrid_attention.metrics import expected_tv, total_variation


def floor_point(backend: object, n: int, *, problems: int, seed: int, shots: int, exact_noisy: bool) -> dict:
    """One backend and size: the floors, and the exact noisy TV when ``exact_noisy`` (module docstring)."""
    from qiskit_aer.noise import NoiseModel

    from hybrid_attention.backends import get_sampler
    from hybrid_attention.circuits import DQASchedule

    prob = ns.sk_problems(n, problems, seed)
    schedule = DQASchedule(tau=1.0, steps=20)  # dqa_noise's default anneal
    base = get_sampler(
        "aer",
        schedule=schedule,
        noise_backend=backend,
        method="density_matrix",
        backend_options={"noise_model": NoiseModel.from_backend(backend)},
    )
    p_circ = np.asarray(base.reference_probabilities(prob)).reshape(-1, 1 << n)
    out = {"n": n, "problems": problems, "shots": shots, "floor_noiseless": float(np.mean(expected_tv(p_circ, shots)))}
    if exact_noisy:
        flat = prob.flatten()
        tmpl = base._template(flat)
        isa = base.circuit_for(tmpl)
        values = tmpl.bindings(flat)  # (problems, P), columns in the ISA's parameter order (as the sampler binds)
        noisy = np.stack(
            [ns.exact_noisy_distribution(isa.assign_parameters(dict(zip(isa.parameters, v))), backend) for v in values]
        )
        out |= {
            "tv_exact": float(np.mean(total_variation(noisy, p_circ))),
            "floor_noisy": float(np.mean(expected_tv(noisy, shots))),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/hardware")
    ap.add_argument("--backends", default="fake_torino,fake_sherbrooke")
    ap.add_argument("--n", default="4,6,8,10")
    ap.add_argument("--exact-n", default="4,6")
    ap.add_argument("--problems", type=int, default=4)
    ap.add_argument("--shots", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    pts = Path(args.out) / "points"
    exact_n = {int(x) for x in args.exact_n.split(",") if x.strip()}
    for name in args.backends.split(","):
        backend = fake_backend(name)
        for n in (int(x) for x in args.n.split(",")):
            path = pts / f"{name}_dqa-floor_n{n}.json"
            if path.exists():
                continue
            t0 = time.perf_counter()
            res = floor_point(
                backend, n, problems=args.problems, seed=args.seed, shots=args.shots, exact_noisy=n in exact_n
            )
            res.update(backend=name, kind="dqa-floor", seconds_total=time.perf_counter() - t0)
            path.write_text(json.dumps(res, indent=1))
            print(f"{path.name}: {res['seconds_total']:.1f} s", flush=True)


if __name__ == "__main__":
    main()
