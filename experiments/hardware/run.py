"""What device noise does to the DQA and qemcmc samplers, on the noise models of two IBM fake backends of different
generations (Heron r1 ``fake_torino``, Eagle r3 ``fake_sherbrooke``): the runner behind ``results/hardware/``.

Points (one JSON file each under ``--out/points/``; an existing file is kept, so an interrupted run resumes):

* ``dqa``: :func:`hybrid_attention.apps.noise_study.dqa_noise`, ``--dqa-n`` spins, ``--problems`` SK problems,
  ``--shots`` reads, the default anneal (tau = 1, 20 Trotter steps); variants noiseless, noisy, readout mitigation,
  project-side twirling, both;
* ``qemcmc-exact``: :func:`~hybrid_attention.apps.noise_study.qemcmc_stationary_bias` per problem, ``--exact-n``
  spins (n <= 6), fixed proposal (gamma 0.45, t 6, 2 Trotter steps: the training setting's depth);
* ``qemcmc-sampled``: :func:`~hybrid_attention.apps.noise_study.qemcmc_sampled_bias`, ``--sampled-n`` spins.

Run (the committed results; about 3 hours on a busy 2-core machine, most of it the n = 8 and n = 10 DQA points):

    nice -n 5 python -m experiments.hardware.run --out results/hardware
    python -m experiments.hardware.report --out results/hardware
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from hybrid_attention.apps import noise_study as ns
from hybrid_attention.backends.ibm.sampler import fake_backend

BACKENDS = ("fake_torino", "fake_sherbrooke")


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/hardware")
    ap.add_argument("--backends", default=",".join(BACKENDS))
    ap.add_argument("--dqa-n", default="4,6,8,10")
    ap.add_argument("--exact-n", default="3,4,5,6")
    ap.add_argument("--sampled-n", default="8")
    ap.add_argument("--problems", type=int, default=4)
    ap.add_argument("--exact-problems", type=int, default=3)
    ap.add_argument("--shots", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    pts = Path(args.out) / "points"
    pts.mkdir(parents=True, exist_ok=True)
    jobs = []
    for name in args.backends.split(","):
        for n in _ints(args.exact_n):
            for k in range(args.exact_problems):
                jobs.append((f"{name}_qemcmc-exact_n{n}_p{k}", name, "qemcmc-exact", n, k))
        for n in _ints(args.dqa_n):
            jobs.append((f"{name}_dqa_n{n}", name, "dqa", n, None))
        for n in _ints(args.sampled_n):
            jobs.append((f"{name}_qemcmc-sampled_n{n}", name, "qemcmc-sampled", n, None))
    backends: dict[str, object] = {}
    for key, name, kind, n, k in jobs:
        path = pts / f"{key}.json"
        if path.exists():
            continue
        backend = backends.setdefault(name, fake_backend(name))
        t0 = time.perf_counter()
        if kind == "dqa":
            res = ns.dqa_noise(backend, ns.sk_problems(n, args.problems, args.seed), shots=args.shots, seed=args.seed)
        elif kind == "qemcmc-exact":
            problem = ns.sk_problems(n, args.exact_problems, args.seed)[k]
            res = ns.qemcmc_stationary_bias(problem, backend)
        else:
            res = ns.qemcmc_sampled_bias(backend, ns.sk_problems(n, 2, args.seed), seed=args.seed)
        res.update(backend=name, kind=kind, seconds_total=time.perf_counter() - t0, problem_index=k)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1))
        tmp.replace(path)
        print(f"{key}: {res['seconds_total']:.1f} s", flush=True)


if __name__ == "__main__":
    main()
