"""The sampler frontier: mixing scaling on Layden's ensemble, and the coupling-strength crossover.

Parts (each resumable: one JSON file per point under ``--out``, skipped when present; ``table`` rebuilds the tables):

* ``layden``: exact spectral gaps of the ``qemcmc``, ``local`` (``mh-local``), ``uniform`` (``mh-uniform``) and
  ``heat-bath`` chains on the ``layden`` ensemble (``h_j, J_jk ~ N(0, 1)`` all-to-all, ``beta = 1``) and on the ``sk``
  ensemble (``J ~ N(0, 1/(n-1))``), ``n = 3..--max-n``, ``--instances`` problems per size
  (:func:`hybrid_attention.apps.mixing.mixing_report`); fits ``gap ~ 2**(-k n)`` with bootstrap error bars;
* ``coupling``: exact gaps at fixed ``n`` on the ``coupling`` ensemble (``h ~ N(0, 1)``, ``J ~ N(0, r**2)``) for ``r``
  from the measured rms |J| / rms |h| of trained attention layers (0.09, 0.14) to spin-glass strength (1);
  the crossover at equal model evaluations is the smallest ``r`` where the quantum chain's median gap per step
  exceeds the best classical chain's; at equal projected cost, where it exceeds it by the cost ratio of a step
  (projected QPU seconds of one one-shot proposal circuit, :mod:`hybrid_attention.backends.ibm.cost`, against the
  measured wall seconds of one classical Metropolis move on this machine);
* ``fidelity``: ``hybrid-attention fidelity`` on the ``coupling`` ensemble at each ``r`` with a ``--budget`` sweep
  (``qemcmc``, ``qemcmc-k0``, ``mh-local``, ``mh-uniform``, ``gibbs``, ``exact``): error against evaluations;
* ``model``: the ``model`` ensemble: for each trained checkpoint (``--checkpoints DIR ...``, made by the
  ``hybrid-attention train`` commands of ``results/frontier/README.md``; not committed) the exact gaps of its
  problems (``hybrid-attention mixing --checkpoint``) and a fidelity budget sweep (``--ensemble model``) at ``--n``;
* ``table``: ``results/frontier/README.md``'s tables from the files.

Run (repository root; a few minutes per part on a loaded 2-core machine at the defaults):

    nice -n 5 python -m experiments.frontier.run layden --max-n 9 --instances 16
    nice -n 5 python -m experiments.frontier.run coupling --n 7 --instances 16
    nice -n 5 python -m experiments.frontier.run fidelity --n 6 --problems 8
    python -m experiments.frontier.run table
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from hybrid_attention.apps.cli_types import positive_ints
from hybrid_attention.apps.fidelity.problems import ATTENTION_COUPLING_RATIOS, ensemble_problems
from hybrid_attention.apps.mixing import fit_exponent, mixing_report
from hybrid_attention.apps.scaling import crossover, exponent_ratio_interval, fit_windows, gap_ratio_interval
from hybrid_attention.backends.ibm.cost import qpu_seconds
from hybrid_attention.backends.mcmc.analysis import DEFAULT_NODES

OUT = Path("results/frontier")
RATIOS = (round(ATTENTION_COUPLING_RATIOS[8], 3), round(ATTENTION_COUPLING_RATIOS[12], 3), 0.25, 0.5, 0.75, 1.0)
CHAINS = ("qemcmc", "local", "uniform", "heat-bath")
#: fewest consecutive sizes in a fit window of the exponent intervals
MIN_SIZES = 5


def _save(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    tmp.replace(path)


def part_layden(args: argparse.Namespace) -> None:
    for ens in ("layden", "sk"):
        for n in range(3, args.max_n + 1):
            path = args.out / "mixing" / f"{ens}_n{n}.json"
            if path.exists():
                continue
            t0 = time.time()
            prob = ensemble_problems(ens, n, args.instances, seed=args.seed)
            rep = mixing_report({n: prob}, nodes=args.nodes, seed=args.seed, progress=False)
            _save(path, {"ensemble": ens, "n": n, "instances": args.instances, "nodes": list(args.nodes), **rep})
            print(f"{ens} n={n}: {time.time() - t0:.1f} s", flush=True)


def _classical_move_seconds(n: int) -> float:
    """Measured wall seconds of one Metropolis move of one chain (mh-uniform, many chains at once) at size ``n``."""
    from hybrid_attention.backends import get_sampler

    prob = ensemble_problems("coupling", n, 4, coupling=0.5)
    s = get_sampler("mh-uniform", burn_in=200, num_chains=256)
    t0 = time.perf_counter()
    s.sample(prob, num_reads=256, seed=0)
    return (time.perf_counter() - t0) / (4 * 256 * 200)


def part_coupling(args: argparse.Namespace) -> None:
    n = args.n
    for r in RATIOS:
        path = args.out / "coupling" / f"n{n}_r{r:g}.json"
        if path.exists():
            continue
        t0 = time.time()
        prob = ensemble_problems("coupling", n, args.instances, seed=args.seed, coupling=r)
        rep = mixing_report({n: prob}, nodes=args.nodes, seed=args.seed, progress=False)
        _save(
            path,
            {
                "ensemble": "coupling",
                "coupling": r,
                "n": n,
                "instances": args.instances,
                "nodes": list(args.nodes),
                **rep,
            },
        )
        print(f"coupling r={r:g} n={n}: {time.time() - t0:.1f} s", flush=True)
    cpath = args.out / "coupling" / f"n{n}_step_cost.json"
    if not cpath.exists():
        depth = 12 * (n + 1) + 1  # the proposal's 12 Trotter steps, n ZZ layers + a mixer layer each, + preparation
        _save(
            cpath,
            {
                "n": n,
                "classical_move_s": _classical_move_seconds(n),
                # the marginal cost of one more step inside a running job: no per-job overhead
                "qemcmc_step_qpu_s": qpu_seconds(circuits=1, shots=1, depth=depth, per_job_seconds=0.0),
                "depth": depth,
            },
        )


def part_fidelity(args: argparse.Namespace) -> None:
    samplers = "exact,qemcmc,qemcmc-k0,mh-local,mh-uniform,gibbs"
    for r in RATIOS:
        out = args.out / "fidelity" / f"n{args.n}_r{r:g}"
        if (out / "report.json").exists():
            continue
        cmd = [
            "hybrid-attention", "fidelity", "--samplers", samplers, "--n", str(args.n), "--shots", str(args.shots),
            "--budget", args.budget, "--ensemble", "coupling", "--coupling", f"{r:g}", "--problems",
            str(args.problems), "--seed", str(args.seed), "--out", str(out), "--no-progress",
        ]  # fmt: skip
        t0 = time.time()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        print(f"fidelity r={r:g}: {time.time() - t0:.1f} s", flush=True)


def part_model(args: argparse.Namespace) -> None:
    samplers = "exact,qemcmc,qemcmc-k0,mh-local,mh-uniform,gibbs"
    from hybrid_attention.apps.fidelity import problems_from_model
    from hybrid_attention.apps.fidelity.model import model_inputs

    for ck in args.checkpoints:
        name = Path(ck).name
        spath = args.out / "model" / f"{name}_n{args.n}_strength.json"
        if not spath.exists():  # where the checkpoint's problems sit on the coupling axis
            model, idx = model_inputs(ck, args.problems, seed=args.seed)
            prob = problems_from_model(model, idx, args.n)
            h, J = prob.h.numpy(), prob.J.numpy()
            iu = np.triu_indices(args.n, 1)
            rms_h, rms_j = float(np.sqrt((h**2).mean())), float(np.sqrt((J[iu] ** 2).mean()))
            _save(spath, {"checkpoint": ck, "n": args.n, "rms_h": rms_h, "rms_J": rms_j, "ratio": rms_j / rms_h})
        mix = args.out / "model" / f"{name}_n{args.n}_mixing"
        if not (mix / "mixing.json").exists():
            t0 = time.time()
            cmd = ["hybrid-attention", "mixing", "--checkpoint", ck, "--n", str(args.n), "--problems",
                   str(args.problems), "--nodes", ",".join(map(str, args.nodes)), "--out", str(mix), "--no-progress"]  # fmt: skip
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            print(f"mixing {name}: {time.time() - t0:.1f} s", flush=True)
        fid = args.out / "model" / f"{name}_n{args.n}_fidelity"
        if not (fid / "report.json").exists():
            t0 = time.time()
            cmd = [
                "hybrid-attention", "fidelity", "--samplers", samplers, "--n", str(args.n), "--shots", str(args.shots),
                "--budget", args.budget, "--ensemble", "model", "--checkpoint", ck, "--problems", str(args.problems),
                "--seed", str(args.seed), "--out", str(fid), "--no-progress",
            ]  # fmt: skip
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            print(f"fidelity {name}: {time.time() - t0:.1f} s", flush=True)


def _load(pattern: str, out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob(pattern))]


def _gaps(rep: dict, n: int, name: str) -> np.ndarray:
    return np.array([row[name]["gap"] for row in rep["rows"][str(n)]])


def table_layden(out: Path) -> list[str]:
    lines = []
    for ens in ("layden", "sk"):
        reps = sorted(_load(f"mixing/{ens}_n*.json", out), key=lambda r: r["n"])
        if len(reps) < MIN_SIZES:  # too few sizes for one fit window
            continue
        ns = [r["n"] for r in reps]
        lines += [
            f"\n### Ensemble `{ens}`: median exact spectral gap per step ({reps[0]['instances']} instances per size)\n",
            "| n | " + " | ".join(CHAINS) + " |",
            "| --- |" + " --- |" * len(CHAINS),
        ]
        for r in reps:
            lines.append(f"| {r['n']} | " + " | ".join(f"{np.median(_gaps(r, r['n'], c)):.4g}" for c in CHAINS) + " |")
        gaps = {c: [_gaps(r, r["n"], c) for r in reps] for c in CHAINS}
        lines += [
            "",
            "| chain | fitted k (gap ~ 2^(-k n)), median gap, +- s.d. over instances | k over fit windows "
            f"(>= {MIN_SIZES} sizes) | fitted k, mean gap | sizes |",
            "| --- | --- | --- | --- | --- |",
        ]
        for c in CHAINS:
            fm, fa = fit_exponent(ns, gaps[c]), fit_exponent(ns, gaps[c], stat="mean")
            kw = [fit_exponent(ns[i:j], gaps[c][i:j], boots=1)["k"] for i, j in fit_windows(ns, MIN_SIZES)]
            lines.append(
                f"| {c} | {fm['k']:.3f} +- {fm['k_err']:.3f} | {min(kw):.3f}-{max(kw):.3f} | "
                f"{fa['k']:.3f} +- {fa['k_err']:.3f} | {ns[0]}-{ns[-1]} |"
            )
        lines += [
            "",
            "Speedup exponent: a classical chain's k over the quantum chain's (3 means the quantum gap is the classical "
            "gap's cube root: a cubic speedup). 95 % percentile intervals from 2,000 bootstrap replicates that "
            "resample the instances of every size (both chains together) and, in the first interval, also the fit "
            f"window (uniformly among the runs of >= {MIN_SIZES} consecutive sizes); the last column is the ratio's "
            "range over the windows themselves (`experiments/frontier/run.py`, `hybrid_attention/apps/scaling.py`):",
            "",
            "| k ratio | statistic | all sizes | 95 % CI, instances and windows | 95 % CI, instances only | "
            "range over windows |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for c in CHAINS:
            if c == "qemcmc":
                continue
            for st in ("median", "mean"):
                r = exponent_ratio_interval(ns, gaps[c], gaps["qemcmc"], stat=st, min_sizes=MIN_SIZES)
                lo, hi = r["ci_instances"]
                lines.append(
                    f"| {c} / qemcmc | {st} gap | {r['ratio']:.2f} | {r['ci_low']:.2f}-{r['ci_high']:.2f} | "
                    f"{lo:.2f}-{hi:.2f} | {r['window_min']:.2f}-{r['window_max']:.2f} |"
                )
    return lines


def table_coupling(out: Path) -> list[str]:
    reps = sorted(_load("coupling/n*_r*.json", out), key=lambda r: r["coupling"])
    if not reps:
        return []
    n = reps[0]["n"]
    costs = _load(f"coupling/n{n}_step_cost.json", out)
    ratio = costs[0]["qemcmc_step_qpu_s"] / costs[0]["classical_move_s"] if costs else None
    lines = [
        f"\n### Coupling-strength sweep at n = {n}: median exact gap per step ({reps[0]['instances']} instances)\n",
        "`qemcmc / best classical`: the quantum chain's median gap over the largest classical median gap (chain "
        "named), with a 95 % percentile interval from 2,000 bootstrap replicates of the instances (all chains "
        "resampled together, the best classical chain re-chosen in each).\n",
        "| rms J / rms h | " + " | ".join(CHAINS) + " | qemcmc / best classical | 95 % CI | best classical |",
        "| --- |" + " --- |" * (len(CHAINS) + 3),
    ]
    points = []
    for r in reps:
        g = {c: _gaps(r, n, c) for c in CHAINS}
        iv = gap_ratio_interval(g["qemcmc"], {c: g[c] for c in CHAINS if c != "qemcmc"})
        points.append((r["coupling"], iv))
        lines.append(
            f"| {r['coupling']:g} | "
            + " | ".join(f"{np.median(g[c]):.4g}" for c in CHAINS)
            + f" | {iv['ratio']:.3g} | {iv['ci_low']:.3g}-{iv['ci_high']:.3g} | {iv['best']} |"
        )
    cross = crossover(points)
    lo, hi = cross["bracket"]
    fmt = lambda xs: ", ".join(f"{x:g}" for x in xs) or "none"  # noqa: E731
    lines += [
        "",
        f"Crossover at equal model evaluations (per step): the interval lies below 1 at rms J / rms h = "
        f"{fmt(cross['below'])}, contains 1 (a tie) at {fmt(cross['tie'])}, lies above 1 at {fmt(cross['above'])}; "
        + (
            f"so the crossover lies between {lo:g} and {hi:g}"
            if lo is not None and hi is not None
            else "no bracket within the range"
        )
        + (
            f" (the tie at {fmt([t for t in cross['tie'] if lo < t < hi])} cannot be placed)"
            if lo is not None and hi is not None and any(lo < t < hi for t in cross["tie"])
            else ""
        )
        + ".",
    ]
    if ratio is not None:
        cross_cost = next((s for s, iv in points if iv["ci_low"] > ratio), None)
        lines.append(
            f"\nCost of a step: projected QPU seconds of one one-shot proposal circuit (depth {costs[0]['depth']}, "
            f"hybrid_attention.backends.ibm.cost model, no per-job overhead) {costs[0]['qemcmc_step_qpu_s']:.3g} s "
            f"against a measured classical Metropolis move {costs[0]['classical_move_s']:.3g} s on this machine: "
            f"ratio {ratio:.3g}. Crossover at equal projected cost (interval above the cost ratio): "
            + (f"rms J / rms h = {cross_cost:g}" if cross_cost is not None else "none within the range")
        )
    return lines


def table_fidelity(out: Path) -> list[str]:
    from hybrid_attention.apps.fidelity.cost import error_of

    lines = []
    for d in [*sorted((out / "fidelity").glob("n*_r*")), *sorted((out / "model").glob("*_fidelity"))]:
        if not (d / "report.json").exists():
            continue
        rep = json.loads((d / "report.json").read_text())
        cfg = rep["config"]
        lines += [
            f"\n### Fidelity at n = {cfg['n'][0]}, "
            + (
                f"rms J / rms h = {cfg['coupling']:g}"
                if cfg["ensemble"] == "coupling"
                else f"model {cfg['checkpoint']}"
            )
            + f" ({cfg['problems']} problems, {cfg['shots'][0]} reads)\n",
            f"Command: `{rep['commands'][0]}`\n",
            "| sampler | budget | attention TV (estimator) | evaluations | wall s | QPU s (projected) | Pareto |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in rep["points"].values():
            c = r["cost"]
            q = "-" if c["qpu_seconds"] is None else f"{c['qpu_seconds']:.3g}"
            lines.append(
                f"| {r['point']['sampler']} | {r['point']['budget']} | {error_of(r):.4f} ({r['estimator']}) | "
                f"{c['evaluations']} | {c['wall_s']:.3g} | {q} | {r.get('pareto')} |"
            )
    return lines


def _err(r: dict) -> tuple[float, float]:
    """Mean attention-weight TV (the point's estimator) and its standard error over the problems."""
    from hybrid_attention.apps.fidelity.cost import error_of

    block = r["target_conditional"] if r.get("estimator") == "conditional" else r["target"]
    return error_of(r), block["attention_tv"]["std"] / np.sqrt(r["problems"])


def table_equal_evaluations(out: Path) -> list[str]:
    """Per coupling strength and qemcmc budget: qemcmc's error against the best classical point that used no more
    model evaluations (mh-local, mh-uniform, gibbs, qemcmc-k0 / budget 0 excluded: no quantum moves)."""
    lines = [
        "\n### Equal model evaluations: qemcmc against the best classical chain within the same evaluations\n",
        "Error: attention-weight TV, mean over problems (Rao-Blackwellised marginals) +- its standard error; "
        "`z` = (best classical - qemcmc) / combined standard error (positive: qemcmc better).\n",
        "| rms J / rms h | qemcmc moves | evaluations | qemcmc error | best classical (sampler, budget) | z |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for d in sorted((out / "fidelity").glob("n*_r*"), key=lambda d: float(d.name.split("_r")[1])):
        if not (d / "report.json").exists():
            continue
        rep = json.loads((d / "report.json").read_text())
        pts = list(rep["points"].values())
        classical = [r for r in pts if r["point"]["sampler"] in ("mh-local", "mh-uniform", "gibbs")]
        for q in sorted(
            (r for r in pts if r["point"]["sampler"] == "qemcmc" and r["point"]["budget"]),
            key=lambda r: r["point"]["budget"],
        ):
            ev = q["cost"]["evaluations"]
            pool = [r for r in classical if r["cost"]["evaluations"] <= ev]
            if not pool:
                continue
            best = min(pool, key=lambda r: _err(r)[0])
            (eq, sq), (ec, sc) = _err(q), _err(best)
            z = (ec - eq) / max(np.hypot(sq, sc), 1e-12)
            lines.append(
                f"| {rep['config']['coupling']:g} | {q['point']['budget']} | {ev} | {eq:.4f} +- {sq:.4f} | "
                f"{ec:.4f} +- {sc:.4f} ({best['point']['sampler']}, {best['point']['budget']}) | {z:+.2f} |"
            )
    return lines


def table_model(out: Path) -> list[str]:
    rows = []
    for sp in sorted((out / "model").glob("*_strength.json")):
        st = json.loads(sp.read_text())
        mix = sp.parent / sp.name.replace("_strength.json", "_mixing") / "mixing.json"
        if not mix.exists():
            continue
        summ = json.loads(mix.read_text())["summary"][str(st["n"])]
        name = Path(st["checkpoint"]).name
        rows.append(
            f"| {name} | {st['n']} | {st['rms_h']:.3f} | {st['rms_J']:.4f} | {st['ratio']:.3f} | "
            + " | ".join(f"{summ[c]['gap_median']:.4g}" for c in CHAINS)
            + " |"
        )
    if not rows:
        return []
    return [
        "\n### Trained attention layers (model ensemble): median exact gap per step\n",
        "| checkpoint | n | rms h | rms J | rms J / rms h | " + " | ".join(CHAINS) + " |",
        "| --- | --- | --- | --- | --- |" + " --- |" * len(CHAINS),
        *rows,
    ]


def part_table(args: argparse.Namespace) -> None:
    lines = (
        table_layden(args.out)
        + table_coupling(args.out)
        + table_model(args.out)
        + table_equal_evaluations(args.out)
        + table_fidelity(args.out)
    )
    path = args.out / "tables.md"
    path.write_text("<!-- generated by: python -m experiments.frontier.run table -->\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("part", choices=("layden", "coupling", "fidelity", "model", "table"))
    p.add_argument("--checkpoints", nargs="*", default=[], help="model part: trained run directories")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--max-n", type=int, default=9)
    p.add_argument("--n", type=int, default=7)
    p.add_argument("--instances", type=int, default=16)
    p.add_argument("--problems", type=int, default=8)
    p.add_argument("--shots", type=int, default=256)
    p.add_argument("--budget", default="0,2,8,32,128")
    p.add_argument(
        "--nodes",
        type=positive_ints,
        default=list(DEFAULT_NODES),
        help="Gauss-Legendre nodes of the qemcmc parameters, gamma,time (default: the converged DEFAULT_NODES)",
    )
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if len(args.nodes) not in (1, 2):
        p.error(f"--nodes takes one number or gamma,time, got {args.nodes}")
    args.nodes = tuple(args.nodes) * (3 - len(args.nodes))
    parts = {"layden": part_layden, "coupling": part_coupling, "fidelity": part_fidelity, "model": part_model}
    {**parts, "table": part_table}[args.part](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
