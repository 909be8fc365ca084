"""``hybrid-attention mixing``: how fast each Markov chain mixes on your problems, before you pay for hardware.

Takes problems from a trained checkpoint (``--checkpoint DIR``: the fields and couplings one attention layer and head
solve for the last query of ``--n`` keys on validation inputs), a dimod model (``--bqm FILE``: a JSON file of
``dimod.BinaryQuadraticModel.to_serializable()``), or a synthetic ensemble (``--ensemble sk|layden|coupling|random``
with ``--n`` a list of sizes), and reports for each chain of :data:`hybrid_attention.backends.mcmc.analysis.KERNELS`
(``qemcmc``: quantum proposals; ``local``: ``mh-local``; ``uniform``: ``mh-uniform``; ``heat-bath``: Gibbs):

* ``n <= 12``: the exact spectral gap ``1 - |lambda_2|`` and the exact integrated autocorrelation time of the energy
  (:func:`~hybrid_attention.backends.mcmc.analysis.exact_integrated_time`), per problem, from the exact transition matrices;
* ``n > 12`` (up to 16): integrated autocorrelation times of the energy estimated from chains of the samplers
  (``qemcmc``, ``mh-local``, ``mh-uniform``; ``--chains`` chains of ``--moves`` moves, Sokal's window), per problem.

Times are in steps of each chain (one proposal; for ``heat-bath`` one spin update), not in cost: a ``qemcmc`` step is
a circuit execution. With several sizes the report fits ``gap ~ 2**(-k n)`` per chain (:func:`fit_exponent`: least
squares of ``log2`` of the per-size median gap against ``n``, error bar from a bootstrap over instances), the form
Layden et al. (Nature 619, 282 (2023)) report their scaling in.

With ``--noise BACKEND`` (a fake IBM backend, ``n <= 6``) each problem also gets ``qemcmc-noisy``: the chain whose
proposal is the circuit run under the backend's Aer noise model (density matrix of the ISA circuit for every
basis-state input, read-out errors applied, ``--readout-asymmetry`` to make them asymmetric), accepted with
``min(1, exp(-beta dE))`` as the sampler runs it; its gap ``1 - |lambda_2|`` (general eigendecomposition: the chain is
not reversible), the TV of its stationary law to Boltzmann (the bias), and their errors from a bootstrap over the
``--noise-draws`` parameter draws (:func:`hybrid_attention.backends.mcmc.noisy.noisy_kernel`). The summary then holds
the advantage over the uniform proposal (per-instance gap ratio, median and a 95 % bootstrap interval over
instances), noiseless and noisy side by side.

Writes ``mixing.json`` (every problem's numbers, the summary per size and chain, the fits, the command) and prints a
table. Python API: :func:`mixing_report`.

Example:
    hybrid-attention mixing --ensemble layden --n 4,5,6 --problems 8 --out mixing-report
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from .cli_types import non_negative_int, positive_float, positive_int, positive_ints

__all__ = [
    "add_arguments",
    "run",
    "mixing_report",
    "check_sizes",
    "fit_exponent",
    "problems_for",
    "advantage",
    "project",
    "REPORT",
]

logger = logging.getLogger(__name__)

REPORT = "mixing.json"
#: largest size (spins) the command takes
MAX_SIZE = 16
#: fewest moves per chain that give an autocorrelation estimate (the sampler discards the first half of the moves and
#: estimates from the rest only when at least 8 remain)
MIN_MOVES = 15
#: chains estimated by sampling above the exact limit: kernel name -> registry sampler
SAMPLED = {"qemcmc": "qemcmc", "local": "mh-local", "uniform": "mh-uniform"}
#: the row name of the noisy quantum chain (``--noise``)
NOISY = "qemcmc-noisy"


#: per-size statistics of the instances' gaps a fit may use
STATS = {"median": np.median, "mean": np.mean}


def _slope(ns: np.ndarray, per_size: list[np.ndarray], stat: str) -> tuple[float, float]:
    y = np.log2([max(float(STATS[stat](g)), 1e-300) for g in per_size])
    b, a = np.polyfit(ns, y, 1)
    return -b, 2.0**a


def fit_exponent(ns: Any, gaps: Any, *, boots: int = 500, seed: int = 0, stat: str = "median") -> dict[str, float]:
    """Fit ``gap ~ c 2**(-k n)``: least squares of ``log2(stat(gaps))`` against ``n``.

    Args:
        ns: sizes ``(S,)``; gaps: per size a 1-D array of the instances' gaps.
        boots: bootstrap resamples of the instances (per size) for the error bar.
        stat: the per-size statistic of the instances' gaps, ``"median"`` or ``"mean"``.

    Returns:
        ``{"k", "k_err", "c"}``: exponent, its bootstrap standard deviation, prefactor.
    """
    ns = np.asarray(ns, dtype=np.float64)
    if len(ns) < 2:
        raise ValueError(f"fit_exponent needs at least two sizes, got {len(ns)}")
    if stat not in STATS:
        raise ValueError(f"stat must be one of {sorted(STATS)}, got {stat!r}")
    k, c = _slope(ns, [np.asarray(g) for g in gaps], stat)
    rng = np.random.default_rng(seed)
    ks = [_slope(ns, [rng.choice(np.asarray(g), len(g)) for g in gaps], stat)[0] for _ in range(boots)]
    return {"k": float(k), "k_err": float(np.std(ks)), "c": float(c)}


def exponent_ratio(
    ns: Any, gaps_num: Any, gaps_den: Any, *, boots: int = 500, seed: int = 0, stat: str = "median"
) -> dict[str, float]:
    """The ratio ``k_num / k_den`` of two chains' fitted exponents on the same instances (a speedup ``gap_den ~
    gap_num ** (1 / ratio)``: ratio 3 is a cubic speedup of chain ``den`` over chain ``num``), with a bootstrap that
    resamples instances jointly (the same instances for both chains, per size).

    Args:
        ns: sizes ``(S,)``; gaps_num, gaps_den: per size a 1-D array of the instances' gaps, instance ``i`` of both
            the same problem.

    Returns:
        ``{"ratio", "ratio_err", "k_num", "k_den"}``.
    """
    ns = np.asarray(ns, dtype=np.float64)
    num = [np.asarray(g) for g in gaps_num]
    den = [np.asarray(g) for g in gaps_den]
    if [len(g) for g in num] != [len(g) for g in den]:
        raise ValueError(
            f"both chains need the same instances per size, got {[len(g) for g in num]} and {[len(g) for g in den]}"
        )
    if len(ns) < 2:
        raise ValueError(f"exponent_ratio needs at least two sizes, got {len(ns)}")
    kn, kd = _slope(ns, num, stat)[0], _slope(ns, den, stat)[0]
    rng = np.random.default_rng(seed)
    rs = []
    for _ in range(boots):
        idx = [rng.integers(0, len(g), len(g)) for g in num]
        rs.append(
            _slope(ns, [g[i] for g, i in zip(num, idx)], stat)[0]
            / _slope(ns, [g[i] for g, i in zip(den, idx)], stat)[0]
        )
    return {"ratio": float(kn / kd), "ratio_err": float(np.std(rs)), "k_num": float(kn), "k_den": float(kd)}


def problems_for(args: argparse.Namespace, n: int) -> Any:
    """The problems of one size from the command's source (checkpoint, BQM or ensemble)."""
    from hybrid_attention.apps.fidelity.problems import ensemble_problems, problems_from_model
    from hybrid_attention.ising import IsingProblem

    if args.checkpoint:
        from hybrid_attention.apps.fidelity.model import model_inputs

        model, idx = model_inputs(args.checkpoint, args.problems, seed=args.seed)
        return problems_from_model(model, idx, n, layer=args.layer, head=args.head)
    if args.bqm:
        import dimod

        with open(args.bqm) as f:
            bqm = dimod.BinaryQuadraticModel.from_serializable(json.load(f))
        p = IsingProblem.from_bqm(bqm, beta=args.beta)
        return IsingProblem(p.h[None], p.J, beta=p.beta)
    return ensemble_problems(
        args.ensemble, n, args.problems, seed=args.seed, scale=args.scale, beta=args.beta, coupling=args.coupling
    )


def _exact_rows(
    problem: Any, proposals: tuple[str, ...], nodes: Any, noise: Any = None, which: range | None = None
) -> list[dict[str, Any]]:
    """The exact rows of the problems ``which`` (default: all) of the batch ``problem``."""
    from hybrid_attention.backends.mcmc import analysis as mcmc

    rows = []
    flat = problem.detach().flatten()
    for b in which if which is not None else range(flat.h.shape[0]):
        Ps, E, pi = mcmc.kernel_matrices(flat[b : b + 1], proposals, nodes=nodes)
        row: dict[str, Any] = {"problem": b, "method": "exact"}
        for name, P in Ps.items():
            row[name] = {"gap": mcmc.spectral_gap(P, pi), "iat_energy": mcmc.exact_integrated_time(P, pi, E)}
        if noise is not None:
            from hybrid_attention.backends.mcmc.noisy import noisy_kernel

            k = noisy_kernel(flat[b : b + 1], noise, nodes=nodes)
            pn = mcmc.stationary_distribution(k["P"])
            row[NOISY] = {
                **{key: k[key] for key in ("gap", "gap_err", "tv_bias", "tv_bias_err", "asymmetry", "acceptance")},
                "iat_energy": mcmc.exact_integrated_time(k["P"], pn, E),
            }
        rows.append(row)
    return rows


def advantage(rows: list[dict[str, Any]], chain: str, *, boots: int = 2000, seed: int = 0) -> dict[str, float]:
    """``chain``'s gap over the ``uniform`` chain's on the same instances: the median of the per-instance ratios, and
    a 95 % percentile interval from a bootstrap over instances."""
    r = np.array([x[chain]["gap"] / x["uniform"]["gap"] for x in rows])
    rng = np.random.default_rng(seed)
    meds = np.median(r[rng.integers(0, len(r), (boots, len(r)))], axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return {"median": float(np.median(r)), "ci_low": float(lo), "ci_high": float(hi), "instances": len(r)}


def _sampled_rows(problem: Any, proposals: tuple[str, ...], chains: int, moves: int, seed: int) -> list[dict]:
    from hybrid_attention.backends import get_sampler

    flat = problem.detach().flatten()
    out: list[dict[str, Any]] = [{"problem": b, "method": "chains"} for b in range(flat.h.shape[0])]
    for name in proposals:
        if name not in SAMPLED:
            continue
        s = get_sampler(SAMPLED[name], burn_in=moves, num_chains=chains)
        ss = s.sample(flat, num_reads=chains, seed=seed)
        for b, iat in enumerate(np.asarray(ss.info["iat"]).reshape(-1)):
            out[b][name] = {"gap": None, "iat_energy": float(iat), "moves": moves, "chains": chains}
    return out


def check_sizes(problems: dict[int, Any], *, proposals: tuple[str, ...], nodes: int, chains: int, moves: int) -> None:
    """Every size that drives an allocation, against the memory budget before any work (``ValueError`` naming the
    size, the estimate and the budget): the quadrature ``nodes`` of the exact ``qemcmc`` kernels, and above the exact
    limit each sampled chain's ``chains x moves`` (its sampler's own checks, on the problems it will sample)."""
    from hybrid_attention.backends import get_sampler
    from hybrid_attention.backends.mcmc.analysis import DEFAULT_NODES, MAX_EXACT_SPINS, check_nodes

    if "qemcmc" in proposals and any(n <= MAX_EXACT_SPINS for n in problems):
        check_nodes(DEFAULT_NODES if nodes is None else nodes)
    for n, prob in problems.items():
        if n <= MAX_EXACT_SPINS:
            continue
        for name in proposals:
            if name in SAMPLED:
                s = get_sampler(SAMPLED[name], burn_in=moves, num_chains=chains)
                s.validate(prob.detach().flatten(), num_reads=chains)


def project(
    problems: dict[int, Any], proposals: tuple[str, ...], nodes: Any, noise: Any, sampled: Any
) -> tuple[dict[int, list[dict[str, Any]]], float]:
    """Time a probe of the real work and log the projected wall time of the rest, before it starts.

    Exact sizes: the first problem of the smallest size is computed untimed (one-off costs: imports, quadrature
    nodes), then the next problem of every size is timed; both are kept (real work, not done again) and each size's
    remaining problems are projected at its timed one. Sampled sizes (``n > 12``): ``sampled(problem)`` on the first
    problem alone is timed (and discarded; the batch is sampled in one call) and scaled by the problem count.

    Returns:
        ``({n: the rows computed}, projected seconds of the rest)``.
    """
    from hybrid_attention.backends.mcmc.analysis import MAX_EXACT_SPINS

    from .timing import duration

    kept: dict[int, list[dict[str, Any]]] = {}
    total, t_start = 0.0, time.perf_counter()
    for i, (n, prob) in enumerate(sorted(problems.items())):
        count = prob.detach().flatten().h.shape[0]
        if n > MAX_EXACT_SPINS:
            t0 = time.perf_counter()
            sampled(prob.detach().flatten()[0:1])
            total += (time.perf_counter() - t0) * count
            continue
        kept[n] = _exact_rows(prob, proposals, nodes, noise, range(1)) if i == 0 and count > 1 else []
        t0 = time.perf_counter()
        kept[n] += _exact_rows(prob, proposals, nodes, noise, range(len(kept[n]), len(kept[n]) + 1))
        total += (time.perf_counter() - t0) * (count - len(kept[n]))
    logger.info(
        f"mixing: {len(problems)} size(s), projected {duration(total)} in all after a "
        f"{duration(time.perf_counter() - t_start)} probe (the first problems of each size, kept)"
    )
    return kept, total


def mixing_report(
    problems: dict[int, Any],
    *,
    proposals: tuple[str, ...] = ("qemcmc", "local", "uniform", "heat-bath"),
    nodes: Any = None,
    chains: int = 32,
    moves: int = 2000,
    seed: int = 0,
    progress: bool = True,
    noise: Any = None,
) -> dict[str, Any]:
    """Gaps and autocorrelation times of each chain on ``{n: problems}`` (module docstring).

    ``nodes``: the quadrature of the random ``qemcmc`` parameters (default
    :data:`~hybrid_attention.backends.mcmc.analysis.DEFAULT_NODES`); ``noise``: a
    :class:`~hybrid_attention.backends.mcmc.noisy.ProposalNoise` adds the ``qemcmc-noisy`` chain (``n <= 6``).

    Returns:
        ``{"rows": {n: [per-problem dicts]}, "summary": {n: {chain: {...}}}, "fits": {chain: {...}}}``.
    """
    from tqdm.auto import tqdm

    from hybrid_attention.backends.mcmc.analysis import MAX_EXACT_SPINS

    check_sizes(problems, proposals=proposals, nodes=nodes, chains=chains, moves=moves)
    if noise is not None:
        from hybrid_attention.backends.mcmc.noisy import MAX_NOISY_SPINS

        if max(problems) > MAX_NOISY_SPINS or not {"qemcmc", "uniform"} <= set(proposals):
            raise ValueError(
                f"the noisy chain needs n <= {MAX_NOISY_SPINS} and the qemcmc and uniform chains, got sizes "
                f"{sorted(problems)} and chains {list(proposals)}"
            )
    rows: dict[str, list] = {}
    summary: dict[str, dict] = {}
    kept, _ = project(problems, proposals, nodes, noise, lambda p: _sampled_rows(p, proposals, chains, moves, seed))
    for n, prob in tqdm(sorted(problems.items()), desc="mixing", disable=not progress, unit="size"):
        t0 = time.perf_counter()
        if n <= MAX_EXACT_SPINS:
            done = kept[n]
            r = done + _exact_rows(prob, proposals, nodes, noise, range(len(done), prob.detach().flatten().h.shape[0]))
        else:
            r = _sampled_rows(prob, proposals, chains, moves, seed)
        rows[str(n)] = r
        summary[str(n)] = {"seconds": time.perf_counter() - t0, "problems": len(r)}
        for name in proposals + ((NOISY,) if noise is not None else ()):
            vals = [x[name] for x in r if name in x]
            if not vals:
                continue
            gaps = np.array([v["gap"] for v in vals if v["gap"] is not None])
            iats = np.array([v["iat_energy"] for v in vals])
            summary[str(n)][name] = {
                "gap_median": float(np.median(gaps)) if gaps.size else None,
                "gap_min": float(gaps.min()) if gaps.size else None,
                "iat_median": float(np.median(iats)),
                "iat_max": float(iats.max()),
            }
            if name == NOISY:
                tv = np.array([v["tv_bias"] for v in vals])
                summary[str(n)][name].update(
                    tv_bias_median=float(np.median(tv)),
                    tv_bias_max=float(tv.max()),
                    gap_err_max=float(max(v["gap_err"] for v in vals)),
                    gap_ratio_median=float(np.median([x[NOISY]["gap"] / x["qemcmc"]["gap"] for x in r])),
                )
        if noise is not None and n <= MAX_EXACT_SPINS:
            summary[str(n)]["advantage"] = {c: advantage(r, c, seed=seed) for c in ("qemcmc", NOISY)}
    fits = {}
    exact_ns = [int(n) for n in rows if int(n) <= MAX_EXACT_SPINS]
    if len(exact_ns) >= 2:
        for name in proposals:
            gaps = [np.array([x[name]["gap"] for x in rows[str(n)]]) for n in exact_ns]
            fits[name] = {**fit_exponent(exact_ns, gaps, seed=seed), "sizes": exact_ns, "instances": len(gaps[0])}
    return {"rows": rows, "summary": summary, "fits": fits}


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--checkpoint", default=None, help="trained model directory (hybrid-attention train --out)")
    src.add_argument("--bqm", default=None, help="JSON file of dimod.BinaryQuadraticModel.to_serializable()")
    p.add_argument(
        "--ensemble",
        choices=("sk", "layden", "coupling", "random"),
        default="sk",
        help="synthetic problems when neither --checkpoint nor --bqm is given",
    )
    p.add_argument(
        "--n",
        type=positive_ints,
        default=[6],
        help=f"comma-separated sizes in [1, {MAX_SIZE}] (keys of the checkpoint's layer; ensemble sizes)",
    )
    p.add_argument("--problems", type=positive_int, default=8, help="problems per size (checkpoint: validation inputs)")
    p.add_argument("--layer", type=non_negative_int, default=0)
    p.add_argument("--head", type=non_negative_int, default=0)
    p.add_argument("--scale", type=positive_float, default=1.0, help="std of the ensemble's fields")
    p.add_argument("--coupling", type=float, default=1.0, help="rms J / rms h of --ensemble coupling")
    p.add_argument("--beta", type=positive_float, default=1.0, help="inverse temperature (ensembles and BQMs)")
    p.add_argument("--proposals", default="qemcmc,local,uniform,heat-bath", help="chains to analyse (comma-separated)")
    p.add_argument(
        "--nodes",
        type=positive_ints,
        default=None,
        help="Gauss-Legendre nodes for the random qemcmc parameters: one number for both, or gamma,time "
        "(default 8,32: converged, results/qemcmc_noise/README.md)",
    )
    p.add_argument(
        "--noise",
        default=None,
        metavar="BACKEND",
        help="add the noisy qemcmc chain under this fake backend's noise model (e.g. fake_torino; n <= 6)",
    )
    p.add_argument(
        "--readout-asymmetry",
        type=float,
        default=0.0,
        help="with --noise: split each qubit's mean read-out error e into p(0|1) = e(1+a), p(1|0) = e(1-a), "
        "a in [-1, 1] (0: the model's symmetric read-out)",
    )
    p.add_argument("--noise-draws", type=positive_int, default=16, help="with --noise: proposal-parameter draws (>= 2)")
    p.add_argument("--chains", type=positive_int, default=32, help="n > 12: chains per problem for the estimated times")
    p.add_argument(
        "--moves",
        type=positive_int,
        default=2000,
        help=f"n > 12: moves per chain for the estimated times (at least {MIN_MOVES}: the autocorrelation "
        "window needs that many after the discarded first half)",
    )
    p.add_argument("--seed", type=non_negative_int, default=0)
    p.add_argument("--out", default=None, help="directory for mixing.json (default: print only)")
    p.add_argument("--no-progress", action="store_true")


def _sizes(sizes: list[int]) -> list[int]:
    ns = sorted(set(sizes))
    if ns[-1] > MAX_SIZE:
        raise ValueError(f"--n must be sizes in [1, {MAX_SIZE}], got {','.join(map(str, sizes))}")
    return ns


def run(args: argparse.Namespace) -> int:
    from hybrid_attention.backends.mcmc.analysis import KERNELS, MAX_EXACT_SPINS

    proposals = tuple(x.strip() for x in args.proposals.split(",") if x.strip())
    bad = [x for x in proposals if x not in KERNELS]
    if bad or not proposals:
        raise ValueError(f"--proposals must be among {KERNELS}, got {args.proposals!r}")
    ns = _sizes(args.n)
    if args.moves < MIN_MOVES and ns[-1] > MAX_EXACT_SPINS:
        raise ValueError(
            f"--moves must be at least {MIN_MOVES} for sizes above {MAX_EXACT_SPINS} (the autocorrelation time is "
            f"estimated on the second half of each chain's moves), got {args.moves}"
        )
    out = Path(args.out) if args.out else None
    if out is not None and (out / REPORT).exists():
        raise FileExistsError(f"{out / REPORT} exists; choose another --out (a report is never overwritten)")
    noise = None
    if args.noise is not None:
        from hybrid_attention.backends.mcmc.noisy import ProposalNoise

        noise = ProposalNoise(
            backend=args.noise, readout_asymmetry=args.readout_asymmetry, draws=args.noise_draws, seed=args.seed
        )
    elif args.readout_asymmetry:
        raise ValueError("--readout-asymmetry needs --noise BACKEND")
    if logger.getEffectiveLevel() > logging.INFO:  # the projected time is said before the work
        logger.setLevel(logging.INFO)
    nodes = None if args.nodes is None else (args.nodes[0] if len(args.nodes) == 1 else tuple(args.nodes))
    problems = {}
    for n in ns:
        prob = problems_for(args, n)
        problems[prob.n] = prob
    report = mixing_report(
        problems,
        proposals=proposals,
        nodes=nodes,
        chains=args.chains,
        moves=args.moves,
        seed=args.seed,
        progress=not args.no_progress,
        noise=noise,
    )
    report["command"] = "hybrid-attention mixing " + " ".join(shlex.quote(a) for a in sys.argv[2:])
    print(summary_table(report))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / REPORT).write_text(json.dumps(report, indent=1))
        print(f"\nreport: {out / REPORT}")
    return 0


def summary_table(report: dict[str, Any]) -> str:
    """Markdown: per size and chain the median gap, smallest gap, median and largest energy autocorrelation time;
    then the fitted exponents."""
    f = lambda v: "-" if v is None else f"{v:.4g}"  # noqa: E731
    lines = [
        "| n | chain | median gap | min gap | median IAT (steps) | max IAT |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for n, s in report["summary"].items():
        for name, v in s.items():
            if isinstance(v, dict) and name != "advantage":
                lines.append(
                    f"| {n} | {name} | {f(v['gap_median'])} | {f(v['gap_min'])} | {f(v['iat_median'])} | "
                    f"{f(v['iat_max'])} |"
                )
    adv = {n: s["advantage"] for n, s in report["summary"].items() if "advantage" in s}
    if adv:
        lines += [
            "",
            "| n | qemcmc gap / uniform gap, noiseless (95 % CI) | noisy (95 % CI) | noisy / noiseless qemcmc gap "
            "(median) | stationary TV bias, median (max) |",
            "| --- | --- | --- | --- | --- |",
        ]
        for n, a in adv.items():
            q, z, s = a["qemcmc"], a[NOISY], report["summary"][n][NOISY]
            lines.append(
                f"| {n} | {q['median']:.3g} ({q['ci_low']:.3g}-{q['ci_high']:.3g}) | {z['median']:.3g} "
                f"({z['ci_low']:.3g}-{z['ci_high']:.3g}) | {s['gap_ratio_median']:.3g} | "
                f"{s['tv_bias_median']:.2g} ({s['tv_bias_max']:.2g}) |"
            )
    if report["fits"]:
        lines += [
            "",
            "| chain | k in gap ~ 2^(-k n) | +- | sizes | instances per size |",
            "| --- | --- | --- | --- | --- |",
        ]
        for name, fit in report["fits"].items():
            lines.append(
                f"| {name} | {fit['k']:.3f} | {fit['k_err']:.3f} | {fit['sizes'][0]}-{fit['sizes'][-1]} | "
                f"{fit['instances']} |"
            )
    return "\n".join(lines)
