"""Layouts and fractional RZZ gates of the DQA circuit on IBM fake backends, scored exactly: ``results/device_gates``.

Points (one JSON file each under ``--out/points/``; an existing file is kept, so an interrupted run resumes), all on
chain (band-1) problems (:func:`hybrid_attention.apps.device_gates.chain_problems`), the default anneal (tau = 1,
20 Trotter steps), exact noisy output by density matrix (:func:`~hybrid_attention.apps.device_gates.dqa_point`):

* ``layout``: ``--backends`` x layouts ``default`` / ``line`` / ``line-t1t2`` x ``--layout-n`` x ``--problems``;
* ``gates``: on ``fake_torino`` with the ``line`` layout, the CZ decomposition (``fake_torino``) against IBM's
  fractional RZZ (``fake_torino_fractional``: :mod:`hybrid_attention.backends.ibm.fractional`), bound angles folded
  by the transpiler (one RZZ per coupling) and the sampler's folded pair (two RZZ per coupling), ``--gates-n``.

Run (repository root), then the tables:

    nice -n 5 python -m experiments.device_gates.run --out results/device_gates
    python -m experiments.device_gates.run --out results/device_gates --report
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from hybrid_attention.apps import device_gates as dg
from hybrid_attention.backends.ibm.sampler import fake_backend

#: gate sets of the ``gates`` part: name -> (backend name, fold_rzz)
GATES = {
    "cz": ("fake_torino", False),
    "fractional": ("fake_torino_fractional", False),
    "fractional-folded": ("fake_torino_fractional", True),
}
#: rough seconds per point on a loaded 2-core machine (density matrix of 2**n x 2**n), for the projection
SECONDS = {6: 30, 8: 120, 10: 900}


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def jobs(args: argparse.Namespace) -> list[tuple[str, str, str, bool, int, int]]:
    """``(key, backend, layout, fold_rzz, n, problem)`` of every point."""
    out = []
    for n in _ints(args.layout_n):
        for b in args.backends.split(","):
            for lay in dg.LAYOUTS:
                out += [(f"layout_{b}_{lay}_n{n}_p{k}", b, lay, False, n, k) for k in range(args.problems)]
    for n in _ints(args.gates_n):
        for g, (b, fold) in GATES.items():
            out += [(f"gates_{g}_n{n}_p{k}", b, "line", fold, n, k) for k in range(args.problems)]
    return out


def run(args: argparse.Namespace) -> None:
    pts = Path(args.out) / "points"
    pts.mkdir(parents=True, exist_ok=True)
    todo = [j for j in jobs(args) if not (pts / f"{j[0]}.json").exists()]
    print(f"{len(todo)} points to run, projected {sum(SECONDS.get(j[4], 900) for j in todo) / 60:.0f} min", flush=True)
    backends: dict[str, object] = {}
    for i, (key, b, lay, fold, n, k) in enumerate(todo):
        backend = backends.setdefault(b, fake_backend(b))
        t0 = time.perf_counter()
        res = dg.dqa_point(
            dg.chain_problems(n, args.problems, args.seed)[k : k + 1], backend, layout=lay, fold_rzz=fold
        )
        res.update(backend=b, problem=k, seed=args.seed)
        tmp = (pts / f"{key}.json").with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1))
        tmp.replace(pts / f"{key}.json")
        print(f"[{i + 1}/{len(todo)}] {key}: {time.perf_counter() - t0:.1f} s", flush=True)


def _row(label: str, ps: list[dict]) -> str:
    s = dg.summarize(ps)
    tv = [p["tv_circuit"] for p in ps]
    return (
        f"| {label} | {s['problems']} | {s['two_qubit_gates']:.0f} | {s['two_qubit_depth']:.0f} | "
        f"{s['duration_s'] * 1e6:.1f} | {s['tv_circuit']:.3f} ({min(tv):.3f}-{max(tv):.3f}) | {s['floor_4096']:.3f} | "
        f"{s['tv_boltzmann']:.3f} |"
    )


HEAD = (
    "| n | problems | 2q gates | 2q depth | duration (us) | exact TV to noiseless circuit, mean (range) | "
    "+ shot floor at 4096 shots | TV to Boltzmann |\n| --- | --- | --- | --- | --- | --- | --- | --- |"
)


def report(out: Path) -> str:
    groups: dict[tuple, list] = defaultdict(list)
    for p in sorted((out / "points").glob("*.json")):
        part = p.name.split("_")[0]
        d = json.loads(p.read_text())
        name = (
            d["layout"] if part == "layout" else next(g for g, v in GATES.items() if v == (d["backend"], d["fold_rzz"]))
        )
        groups[(part, d["backend"] if part == "layout" else "fake_torino", name, d["n"])].append(d)
    lines = []
    for part, title in (("layout", "Layouts"), ("gates", "Two-qubit gates on fake_torino (line layout)")):
        keys = sorted(k for k in groups if k[0] == part)
        for b in sorted({k[1] for k in keys}):
            lines += [
                f"\n### {title}: {b}\n",
                HEAD.replace("| n |", "| n, " + ("layout" if part == "layout" else "gates") + " |"),
            ]
            for k in sorted((k for k in keys if k[1] == b), key=lambda k: (k[3], k[2])):
                lines.append(_row(f"{k[3]}, {k[2]}", groups[k]).replace(f"| {k[3]}, {k[2]} |", f"| {k[3]}, `{k[2]}` |"))
        if part == "layout":
            lines.append(
                "\nPer problem, TV of each layout minus `default` (negative: better than the transpiler's choice):\n"
            )
            for k in sorted(k for k in keys if k[2] != "default"):
                base = {p["problem"]: p["tv_circuit"] for p in groups[(part, k[1], "default", k[3])]}
                d = [p["tv_circuit"] - base[p["problem"]] for p in groups[k] if p["problem"] in base]
                lines.append(
                    f"* {k[1]}, n = {k[3]}, `{k[2]}`: "
                    + ", ".join(f"{x:+.3f}" for x in d)
                    + f" (mean {np.mean(d):+.3f})"
                )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/device_gates")
    ap.add_argument("--backends", default="fake_torino,fake_sherbrooke")
    ap.add_argument("--layout-n", default="6,8")
    ap.add_argument("--gates-n", default="6,8,10")
    ap.add_argument("--problems", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--report", action="store_true", help="print the tables of the points present")
    args = ap.parse_args()
    if args.report:
        print(report(Path(args.out)))
    else:
        run(args)


if __name__ == "__main__":
    main()
