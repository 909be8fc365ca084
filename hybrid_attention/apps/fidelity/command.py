"""``hybrid-attention fidelity``: the subcommand's flags, the command line a report records, and :func:`run`."""

from __future__ import annotations

import argparse
import logging
import shlex
from pathlib import Path
from typing import Any

from hybrid_attention.apps.cli_types import (
    non_negative_int,
    non_negative_ints,
    positive_float,
    positive_floats,
    positive_int,
    positive_ints,
)
from hybrid_attention.apps.distributed import add_cluster_arguments
from hybrid_attention.backends.registry import available_samplers

from .config import AXES, READOUTS, FidelityConfig
from .plots import band_table, summary_table
from .projection import PROJECTION
from .report import REPORT, SUMMARY, run_sweep
from .sweep import BAND_SAMPLERS, OPT_IN_SAMPLERS, SAMPLER_KINDS

__all__ = ["add_arguments", "run", "command_line"]


def _base(s: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in filter(None, s.split(",")):
        k, _, v = item.partition("=")
        if k not in (*AXES, "budget") or not v:
            raise argparse.ArgumentTypeError(
                f"--base takes axis=value items with axis in {(*AXES, 'budget')}, got {item!r}"
            )
        out[k] = float(v) if k == "tau" else int(v)
    return out


def command_line(cfg: FidelityConfig, out: str | Path) -> str:
    """The ``hybrid-attention fidelity`` command that reproduces ``cfg`` (recorded in the report)."""
    j = lambda xs: ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in xs)  # noqa: E731
    parts = [
        "hybrid-attention fidelity",
        f"--samplers {','.join(cfg.samplers)}",
        f"--n {j(cfg.n)}",
        f"--shots {j(cfg.shots)}",
        f"--tau {j(cfg.tau)}",
        f"--steps {j(cfg.steps)}",
        "--base " + ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in cfg.base.items()),
        f"--problems {cfg.problems}",
        f"--calibration {cfg.calibration}",
        f"--seed {cfg.seed}",
        f"--scale {cfg.scale:g}",
        f"--beta {cfg.beta:g}",
    ]
    if cfg.band:
        parts.append(f"--band {cfg.band}")
    if cfg.ensemble in ("sk", "layden", "coupling"):
        parts.append(f"--ensemble {cfg.ensemble}")
    if cfg.ensemble == "coupling":
        parts.append(f"--coupling {cfg.coupling:g}")
    if cfg.budget:
        parts.append(f"--budget {j(cfg.budget)}")
    if cfg.readout != "exact":
        parts.append(f"--readout {cfg.readout}")
    if cfg.backend is not None:
        parts.append(f"--backend {shlex.quote(cfg.backend)}")
    if cfg.mitigation:
        parts.append(f"--mitigation {','.join(cfg.mitigation)}")
    if cfg.ensemble == "model":
        parts += [
            f"--ensemble model --checkpoint {shlex.quote(str(cfg.checkpoint))}",
            f"--layer {cfg.layer}",
            f"--head {cfg.head}",
        ]
    return " ".join(parts + [f"--out {shlex.quote(str(out))}"])


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--samplers",
        default=None,
        help="comma-separated samplers (default: every available one of exact,statevector,aer,aer-noisy,pennylane,"
        "gibbs,anneal,meanfield,qemcmc,qemcmc-k0,mh-local,mh-uniform, and with --band also aer-mps,meanfield-tap; "
        "ibm, qemcmc-aer, qemcmc-aer-noisy, aer-mps-noisy only when named)",
    )
    p.add_argument("--n", type=positive_ints, default=[3, 4, 5], help="problem sizes (default: 3,4,5)")
    p.add_argument(
        "--band",
        type=non_negative_int,
        default=0,
        metavar="W",
        help="device scale: chain problems with couplings in a band of width W (1 <= W < n), compared by their "
        "marginals with the exact transfer-matrix marginals at any n up to aer-mps's 100 qubits; samplers that "
        "cannot reach n are skipped with the reason (default 0: all-to-all problems, n <= 12)",
    )
    p.add_argument(
        "--shots", type=positive_ints, default=[256, 1024, 4096], help="shots / reads (default: 256,1024,4096)"
    )
    p.add_argument("--tau", type=positive_floats, default=[0.5, 1.0, 2.0], help="DQA anneal times (default: 0.5,1,2)")
    p.add_argument("--steps", type=positive_ints, default=[10, 40], help="Trotter steps (default: 10,40)")
    p.add_argument(
        "--base",
        type=_base,
        default={},
        help="base point, e.g. n=4,shots=1024,tau=1,steps=40 (default: the lower median of each list)",
    )
    p.add_argument(
        "--budget",
        type=non_negative_ints,
        default=[],
        help="work per chain swept for the Markov-chain samplers (moves for qemcmc, mh-local, mh-uniform; sweeps "
        "for gibbs, anneal), e.g. 0,4,16,64: each sampler traces an error-vs-cost curve (default: not swept)",
    )
    p.add_argument("--problems", type=positive_int, default=8, help="problems in the ensemble")
    p.add_argument(
        "--ensemble",
        choices=("random", "sk", "layden", "coupling", "model"),
        default="random",
        help="random: h, J ~ N(0, scale^2); sk: J ~ N(0, scale^2/(n-1)); layden: h, J ~ N(0, 1) at beta 1 (Layden et "
        "al.'s spin glasses); coupling: J ~ N(0, (coupling*scale)^2); model: a trained model's layer (--checkpoint)",
    )
    p.add_argument(
        "--coupling",
        type=float,
        default=1.0,
        help="rms J / rms h of --ensemble coupling (trained attention layers: about 0.1; spin glass: 1)",
    )
    p.add_argument(
        "--checkpoint", default=None, help="trained model directory (hybrid-attention train --out) for --ensemble model"
    )
    p.add_argument("--layer", type=non_negative_int, default=0)
    p.add_argument("--head", type=non_negative_int, default=0)
    p.add_argument("--scale", type=positive_float, default=1.0, help="std of random h and J")
    p.add_argument("--beta", type=positive_float, default=1.0, help="target inverse temperature")
    p.add_argument(
        "--calibration",
        choices=("none", "leading", "compensated", "fitted"),
        default="none",
        help="DQA schedules: none = the default program (Gamma = lambda = 1); leading = energy scale set so the "
        "leading-order output temperature equals the problems' beta; compensated = also fields doubled so "
        "beta_J = beta_h; fitted = compensated, then the energy scale bisected on the fitted temperature "
        "of an independent random ensemble",
    )
    p.add_argument(
        "--readout",
        choices=READOUTS,
        default="exact",
        help="exact-output samplers (statevector): exact = their output distribution, no shots axis; shots = "
        "sampled with --shots like the others",
    )
    p.add_argument(
        "--backend",
        default=None,
        metavar="NAME",
        help="the ibm sampler's fake backend, e.g. fake_torino (default: fake_guadalupe; offline, local mode)",
    )
    p.add_argument(
        "--mitigation",
        default="",
        metavar="LIST",
        help="comma-separated error suppression / mitigation of the noisy samplers (aer-noisy, ibm): readout "
        "(mthree readout mitigation), twirling (ibm: the runtime's gate and measurement twirling; aer-noisy: 8 "
        "project-side gate twirls), dd (ibm: XY4 dynamical decoupling)",
    )
    p.add_argument("--seed", type=non_negative_int, default=0)
    p.add_argument(
        "--out",
        required=True,
        help="report directory (resumed if it holds a report with the same ensemble and base point)",
    )
    p.add_argument("--overwrite", action="store_true", help="start a fresh report even if --out holds one")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    add_cluster_arguments(p)


def _default_samplers(band: int = 0) -> list[str]:
    avail = available_samplers()
    skip = OPT_IN_SAMPLERS if band else (*OPT_IN_SAMPLERS, *BAND_SAMPLERS)
    return [s for s, (reg, _) in SAMPLER_KINDS.items() if avail.get(reg) and s not in skip]


def run(args: argparse.Namespace) -> int:
    samplers = (
        [s.strip() for s in args.samplers.split(",") if s.strip()] if args.samplers else _default_samplers(args.band)
    )
    if PROJECTION.getEffectiveLevel() > logging.INFO:  # the projected time is said before the first point
        PROJECTION.setLevel(logging.INFO)
    cfg = FidelityConfig(
        samplers=samplers,
        n=args.n,
        shots=args.shots,
        tau=args.tau,
        steps=args.steps,
        base=args.base,
        problems=args.problems,
        seed=args.seed,
        scale=args.scale,
        beta=args.beta,
        ensemble=args.ensemble,
        checkpoint=args.checkpoint,
        layer=args.layer,
        head=args.head,
        calibration=args.calibration,
        readout=args.readout,
        backend=args.backend,
        mitigation=[m.strip() for m in args.mitigation.split(",") if m.strip()],
        budget=args.budget,
        coupling=args.coupling,
        band=args.band,
    )
    command = command_line(cfg, args.out)
    report = run_sweep(
        cfg,
        args.out,
        overwrite=args.overwrite,
        plots=not args.no_plots,
        command=command,
        progress=not args.no_progress,
        scheduler=args.scheduler,
        workers=args.workers,
    )
    table = band_table(report) if cfg.band else summary_table(report)
    print(table)
    (Path(args.out) / SUMMARY).write_text(f"`{command}`\n\n{table}\n")  # the base point's table, next to the plots
    for k, why in report.get("skipped", {}).items():
        print(f"skipped {k}: {why}")
    print(f"\nreport: {Path(args.out) / REPORT}; table: {Path(args.out) / SUMMARY}")
    for name in report.get("plots", []):  # the whole sweep, one figure per swept axis
        print(f"plot: {Path(args.out) / name}")
    return 0
