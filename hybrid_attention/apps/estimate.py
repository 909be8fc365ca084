"""``hybrid-attention estimate``: what a run on the IBM route would submit and cost, without submitting anything.

Three workloads (the positional ``WHAT``), and the model's calibration:

* ``sample``: one sampler call on ``--problems`` problems of ``--n`` spins with ``--shots`` reads;
* ``train``: a training run, ``--max-steps`` forward passes (plus the evaluation passes unless ``--eval-exact``),
  each making per layer the attention bridge's sampler calls (one per prefix length ``k = 1..T`` on ``batch x heads``
  problems of ``k`` spins);
* ``fidelity``: a fidelity sweep of the ``ibm`` sampler over ``--n``/``--shots``/``--tau``/``--steps`` values with
  ``--problems`` problems per point.

The counts come from the sampler's own :meth:`~hybrid_attention.backends.ibm.sampler.IBMSampler.estimate` (qemcmc:
:meth:`~hybrid_attention.backends.mcmc.qemcmc.QEMCMCSampler.estimate`), the ISA circuit from the backend's transpiler, and
the QPU seconds from :mod:`hybrid_attention.backends.ibm.cost` (its model and assumptions are documented there).
Problems are taken with every coupling present (the deepest circuit of that size): an upper bound for sparser
attention problems. A device name needs credentials to read the device's target; a fake backend of the same family
(``fake_torino`` for Heron, ``fake_sherbrooke`` for Eagle) gives the same counts offline.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from .cli_types import positive_float, positive_floats, positive_int, positive_ints

__all__ = [
    "add_arguments",
    "run",
    "estimate_sample",
    "estimate_train",
    "estimate_fidelity",
    "add_budget_flag",
    "bridge_calls",
    "stub_problem",
    "check_problem_memory",
    "actual_usage",
    "actual_lines",
    "calibrate",
]

_KEYS = ("jobs", "pubs", "circuits", "shots", "qpu_seconds", "overhead_seconds")


def add_budget_flag(parser: argparse.ArgumentParser) -> None:
    """``--max-qpu-seconds`` (commands that can submit to a real device)."""
    from .hardware import DEFAULT_MAX_QPU_SECONDS, budget_seconds

    parser.add_argument(
        "--max-qpu-seconds",
        type=budget_seconds,
        default=DEFAULT_MAX_QPU_SECONDS,
        metavar="S",
        help="on a real IBM device: print the estimated QPU time first and refuse to start above S seconds "
        "(raise it on purpose: QPU time is billed); ignored offline",
    )


def _option(item: str) -> tuple[str, Any]:
    from .train.flags import parse_sampler_option

    try:
        return parse_sampler_option(item)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "what",
        choices=("sample", "train", "fidelity", "calibrate"),
        help="the workload to estimate, or calibrate: fit the cost model's per-job and per-circuit seconds to the "
        "usage reported for the jobs of the ledger in --out",
    )
    p.add_argument("--sampler", choices=("ibm", "qemcmc"), default="ibm", help="ibm (DQA) or qemcmc (engine ibm)")
    p.add_argument("--backend", default="fake_torino", metavar="NAME", help="fake backend or device name")
    p.add_argument(
        "--sampler-option",
        dest="sampler_options",
        action="append",
        type=_option,
        metavar="KEY=VALUE",
        help="a sampler constructor option, repeatable (e.g. burn_in=32, num_chains=8, chunk_size=256)",
    )
    p.add_argument("--tau", type=positive_float, default=1.0, help="DQA anneal time (ibm)")
    p.add_argument("--trotter-steps", type=positive_int, default=20, help="DQA Trotter steps (ibm)")
    p.add_argument(
        "--n", type=positive_ints, default=[8], help="sample/fidelity: spins per problem (fidelity: comma-separated)"
    )
    p.add_argument(
        "--shots",
        type=positive_ints,
        default=None,
        help="reads per call (fidelity: comma-separated; default 1024, qemcmc 8)",
    )
    p.add_argument(
        "--problems", type=positive_int, default=8, help="sample/fidelity: problems per call / per sweep point"
    )
    p.add_argument(
        "--tau-values",
        type=positive_floats,
        default=None,
        help="fidelity: comma-separated anneal times (default --tau)",
    )
    p.add_argument(
        "--steps-values",
        type=positive_ints,
        default=None,
        help="fidelity: comma-separated Trotter steps (default --trotter-steps)",
    )
    p.add_argument("--block-size", type=positive_int, default=None, help="train: sequence length T (default: train's)")
    p.add_argument("--batch-size", type=positive_int, default=None, help="train: rows per step (default: train's)")
    p.add_argument("--n-layer", type=positive_int, default=None, help="train: layers (default: train's)")
    p.add_argument("--n-head", type=positive_int, default=None, help="train: heads (default: train's)")
    p.add_argument("--max-steps", type=positive_int, default=None, help="train: optimiser steps (default: train's)")
    p.add_argument("--eval-exact", action="store_true", help="train: evaluations use exact marginals (not sampled)")
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="the run's directory: the PUBs its job ledger (DIR/ibm_jobs.jsonl) already holds are reported (a "
        "resumed run reads them instead of paying for them again)",
    )
    p.add_argument("--json", action="store_true", help="print the estimate as JSON")
    add_budget_flag(p)


def check_problem_memory(n: int, count: int) -> None:
    """Refuse (``ValueError``, before anything is built) ``count`` problems of ``n`` spins whose fields and couplings
    would not fit the memory budget (:func:`hybrid_attention.checks.check_memory`): ``count * n * (n + 1)`` float64
    values, the couplings counted per problem as a sampler's estimate may materialise them."""
    from hybrid_attention.checks import check_memory

    check_memory(
        8.0 * count * n * (n + 1),
        f"{count} problem(s) of n = {n} spins (fields and couplings: 8 * count * n * (n + 1) bytes)",
        hint="estimate fewer problems per call (--problems, --batch-size, --n-head) or fewer spins",
    )


def stub_problem(n: int, count: int) -> Any:
    """``count`` problems of ``n`` spins with every coupling present (the deepest circuit of that size), checked
    against the memory budget first (:func:`check_problem_memory`)."""
    import torch

    from hybrid_attention import IsingProblem

    check_problem_memory(n, count)
    J = torch.full((n, n), 0.5, dtype=torch.float64).fill_diagonal_(0.0)
    return IsingProblem(torch.full((count, n), 0.3, dtype=torch.float64), J.expand(count, n, n))


def bridge_calls(capabilities: Any, rows: int, block_size: int) -> list[tuple[int, int]]:
    """The sampler calls of one causal attention layer's forward pass on ``rows`` (batch x heads) rows of
    ``block_size`` keys, as ``(spins, problems)`` pairs (:func:`estimate_train` says how the bridge plans them)."""
    T = block_size
    if capabilities.pad_with_mask:
        return [(T, rows * T)]
    if capabilities.per_call_overhead is None:
        return [(k, rows) for k in range(1, T + 1)]
    from hybrid_attention.bridge import plan_groups

    return [(hi, rows * (hi - lo + 1)) for lo, hi in plan_groups(T, rows, float(capabilities.per_call_overhead))]


def _sampler(name: str, backend: str, options: dict[str, Any], tau: float, steps: int) -> Any:
    """The sampler whose ``estimate`` counts the work; a device it cannot reach (no credentials, a service that
    refuses) is a ``ValueError`` that says how to estimate offline on a fake backend or set up an account."""
    from hybrid_attention.backends.ibm.sampler import is_fake_backend_name
    from hybrid_attention.backends.registry import make_sampler

    opts = dict(options)
    real = not is_fake_backend_name(backend)
    try:
        if name == "ibm":
            return make_sampler("ibm", tau=tau, trotter_steps=steps, backend=backend, allow_hardware=real, **opts)
        ibm_options = {**opts.pop("ibm_options", {}), "allow_hardware": real} if real else opts.pop("ibm_options", None)
        return make_sampler("qemcmc", engine="ibm", backend=backend, ibm_options=ibm_options, **opts)
    except Exception as exc:
        ibm = any(c.__module__.startswith("qiskit_ibm_runtime") for c in type(exc).__mro__)
        if not real or not (isinstance(exc, RuntimeError) or ibm):
            raise
        fake = _fake_twin(backend)
        raise ValueError(
            f"cannot read the target of device {backend!r} ({' '.join(str(exc).split())}). An estimate needs no "
            f"account on a fake backend of the same family: --backend {fake} gives the same counts offline. For the "
            "device itself, save an IBM Quantum account once with QiskitRuntimeService.save_account(token=..., "
            "instance=...) (qiskit_ibm_runtime) or set QISKIT_IBM_TOKEN and QISKIT_IBM_INSTANCE"
        ) from exc


def _fake_twin(device: str) -> str:
    """The fake backend named after ``device`` (``ibm_torino`` -> ``fake_torino``) when there is one, else
    ``fake_torino`` (a Heron device)."""
    from hybrid_attention.backends.ibm.sampler import fake_backend

    twin = f"fake_{device.removeprefix('ibm_')}"
    try:
        fake_backend(twin)
    except (ValueError, ImportError):
        return "fake_torino"
    return twin


def _scale(est: dict[str, Any], times: int) -> dict[str, Any]:
    return {**est, **{k: est[k] * times for k in _KEYS if k in est}}


def _add(a: dict[str, Any] | None, b: dict[str, Any]) -> dict[str, Any]:
    if a is None:
        return dict(b)
    out = {**a, **{k: a[k] + b[k] for k in _KEYS if k in a and k in b}}
    for k in ("depth", "two_qubit_gates", "largest_job_seconds"):
        if k in a and k in b:
            out[k] = max(a[k], b[k])
    return out


def estimate_sample(sampler: Any, *, n: int, problems: int, shots: int) -> dict[str, Any]:
    """One ``sample`` call: ``problems`` problems of ``n`` spins, ``shots`` reads."""
    return sampler.estimate(stub_problem(n, problems), num_reads=shots)


def estimate_train(
    sampler: Any,
    *,
    block_size: int,
    batch_size: int,
    n_layer: int,
    n_head: int,
    max_steps: int,
    shots: int,
    eval_calls: int = 0,
) -> dict[str, Any]:
    """A training run: every forward pass makes, per layer, the sampler calls of the attention bridge
    (:mod:`hybrid_attention.bridge`): causal attention with a sampler that neither pads with a mask nor declares a
    per-call overhead makes one call per prefix length ``k = 1..block_size`` on ``batch_size x n_head`` problems of
    ``k`` spins (the backward pass reuses the reads). Forward passes: ``max_steps`` training steps plus
    ``eval_calls`` evaluation passes. Returns the totals plus ``forward_passes`` and ``per_pass`` (one pass's
    estimate)."""
    calls = bridge_calls(sampler.capabilities, batch_size * n_head, block_size)
    for n, count in calls:  # every call's problems fit, before the first estimate
        check_problem_memory(n, count)
    per_pass: dict[str, Any] | None = None
    for n, count in calls:
        per_pass = _add(per_pass, sampler.estimate(stub_problem(n, count), num_reads=shots))
    assert per_pass is not None
    per_pass = _scale(per_pass, n_layer)
    passes = max_steps + eval_calls
    return {**_scale(per_pass, passes), "forward_passes": passes, "per_pass": per_pass}


def estimate_fidelity(
    sampler_for: Any, *, n: list[int], shots: list[int], tau: list[float], steps: list[int], problems: int
) -> dict[str, Any]:
    """A fidelity sweep of the ``ibm`` sampler: the one-axis-at-a-time points of those axes (as ``fidelity``
    measures them), each one call on ``problems`` problems; ``sampler_for(tau, steps)`` builds the sampler."""
    from .fidelity.config import FidelityConfig, sweep_points

    cfg = FidelityConfig(samplers=["ibm"], n=n, shots=shots, tau=tau, steps=steps, problems=problems)
    total: dict[str, Any] | None = None
    pts = sweep_points(cfg)
    for pt in pts:  # every point's problems fit, before the first estimate
        check_problem_memory(pt.n, problems)
    for pt in pts:
        est = sampler_for(pt.tau, pt.steps).estimate(stub_problem(pt.n, problems), num_reads=pt.shots)
        total = _add(total, est)
    assert total is not None
    return {**total, "points": len(pts)}


def run(args: argparse.Namespace) -> int:
    """Print the estimate (one line, or JSON with ``--json``); exit code 0."""
    from hybrid_attention.backends.ibm.sampler import is_fake_backend_name

    from .hardware import estimate_line
    from .train.config import TrainConfig

    if args.what == "calibrate":
        return calibrate(args)
    options = dict(args.sampler_options or [])
    shots = args.shots or [8 if args.sampler == "qemcmc" else 1024]
    if args.what == "fidelity":
        if args.sampler != "ibm":
            raise ValueError(
                f"estimate fidelity: the sweep's IBM route is the ibm sampler (--sampler ibm), got {args.sampler!r}"
            )
        taus = args.tau_values or [args.tau]
        steps = args.steps_values or [args.trotter_steps]
        cache: dict[tuple, Any] = {}

        def sampler_for(tau: float, st: int) -> Any:
            if (tau, st) not in cache:
                cache[(tau, st)] = _sampler("ibm", args.backend, options, tau, st)
            return cache[(tau, st)]

        est = estimate_fidelity(sampler_for, n=args.n, shots=shots, tau=taus, steps=steps, problems=args.problems)
        what = f"fidelity sweep ({est['points']} points x {args.problems} problems)"
    elif args.what == "sample":
        check_problem_memory(args.n[0], args.problems)  # before the sampler (and its backend) is built
        sampler = _sampler(args.sampler, args.backend, options, args.tau, args.trotter_steps)
        est = estimate_sample(sampler, n=args.n[0], problems=args.problems, shots=shots[0])
        what = f"one sample call ({args.problems} problems of n = {args.n[0]}, {shots[0]} reads)"
    else:  # train, with train's defaults (and its validated qemcmc settings)
        from hybrid_attention.backends.registry import sampler_class

        d = TrainConfig(sampler=args.sampler, sampler_options=options)
        shots = args.shots or [d.resolved_shots()]
        T = args.block_size or d.block_size
        B, L, H = args.batch_size or d.batch_size, args.n_layer or d.n_layer, args.n_head or d.n_head
        for n, count in bridge_calls(sampler_class(args.sampler).capabilities, B * H, T):  # before the sampler
            check_problem_memory(n, count)
        sampler = _sampler(args.sampler, args.backend, d.resolved_sampler_options(), args.tau, args.trotter_steps)
        S = args.max_steps or d.max_steps
        evals = 0 if args.eval_exact else math.ceil(S / d.eval_interval) * math.ceil(d.eval_size / B)
        est = estimate_train(
            sampler, block_size=T, batch_size=B, n_layer=L, n_head=H, max_steps=S, shots=shots[0], eval_calls=evals
        )
        est.pop("per_pass")
        what = (
            f"train ({S} steps + {evals} evaluation pass(es), {L} layer(s) x {B} rows x {H} head(s) x prefix lengths "
            f"1..{T}, {shots[0]} reads)"
        )
    real = not is_fake_backend_name(args.backend)
    line = estimate_line(est, f"{args.sampler} on {args.backend}: {what}")
    if args.out is not None:
        from pathlib import Path

        from hybrid_attention.backends.ibm.ledger import JobLedger

        from .hardware import LEDGER_NAME

        path = Path(args.out) / LEDGER_NAME
        entries = JobLedger(path).entries() if path.exists() else []
        done = sum(e.event == "completed" for e in entries)
        pending = sum(e.event == "submitted" for e in entries)
        intents = sum(e.event == "intent" for e in entries)
        est["ledger"] = {
            "path": str(path),
            "completed": done,
            "submitted_not_collected": pending,
            "intents_not_settled": intents,
        }
        line += (
            f"\nledger {path}: {done} PUB(s) completed and {pending} submitted but not collected: a resumed run "
            "reads or collects them instead of submitting them again"
        )
        if intents:
            line += (
                f"; {intents} PUB(s) handed to the runtime without a job id recorded (a crash): a resumed run asks "
                "the service for their jobs by tag first"
            )
        if path.exists():
            actual = actual_usage(path)
            est["actual"] = actual
            line += "\n" + actual_lines(actual)
    if real and est["qpu_seconds"] > args.max_qpu_seconds:
        line += f"; above --max-qpu-seconds {args.max_qpu_seconds:g}: such a run is refused unless you raise it"
    print(json.dumps(est, indent=2) if args.json else line)
    return 0


def _ledger_path(args: argparse.Namespace) -> Any:
    from pathlib import Path

    from .hardware import LEDGER_NAME

    if args.out is None:
        raise ValueError("estimate calibrate: give the run's directory, --out DIR (its job ledger is fitted)")
    path = Path(args.out) / LEDGER_NAME
    if not path.is_file():
        raise ValueError(f"estimate calibrate: no job ledger at {str(path)!r}")
    return path


def actual_usage(path: Any) -> dict[str, Any]:
    """Estimate against the usage the service reported, per job and in total, for the ledger at ``path``
    (:func:`hybrid_attention.backends.ibm.usage.compare`)."""
    from hybrid_attention.backends.ibm.ledger import JobLedger
    from hybrid_attention.backends.ibm.usage import compare, usage_rows

    return compare(usage_rows(JobLedger(path)))


#: per-job lines printed before the rest is summed up
_SHOWN_JOBS = 20


def actual_lines(actual: dict[str, Any]) -> str:
    """The comparison as text: one line per job (the first :data:`_SHOWN_JOBS`), then the totals."""
    jobs = actual["jobs"]
    if not jobs:
        return "estimate against actual: no completed job of the ledger reported its usage yet"
    out = ["estimate against actual usage (QPU seconds), per job:"]
    for r in jobs[:_SHOWN_JOBS]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        out.append(
            f"  {r['job_id']}: estimate {r['estimate']:.3f} s, actual {r['actual']:.3f} s, actual/estimate {ratio}"
        )
    if len(jobs) > _SHOWN_JOBS:
        out.append(f"  ... and {len(jobs) - _SHOWN_JOBS:,} more job(s) (--json lists them all)")
    ratio = "-" if actual["ratio"] is None else f"{actual['ratio']:.3f}"
    out.append(
        f"total over {len(jobs):,} job(s): estimate {actual['estimate']:,.3f} s, actual {actual['actual']:,.3f} s, "
        f"actual/estimate {ratio}"
    )
    return "\n".join(out)


def calibrate(args: argparse.Namespace) -> int:
    """``estimate calibrate``: fit ``per_job_seconds`` and ``per_circuit_seconds`` to the ledger in ``--out``;
    print them (JSON with ``--json``) as the ``qpu_model`` to pass to the sampler."""
    from hybrid_attention.backends.ibm.cost import DEFAULT_MODEL
    from hybrid_attention.backends.ibm.ledger import JobLedger
    from hybrid_attention.backends.ibm.usage import fit_overheads, usage_rows

    path = _ledger_path(args)
    rows = [r for r in usage_rows(JobLedger(path)) if r["actual"] > 0]  # local-mode jobs bill (and report) 0 s
    fit = fit_overheads(rows)
    model = {k: fit[k] for k in ("per_job_seconds", "per_circuit_seconds")}
    if args.json:
        print(json.dumps({**fit, "qpu_model": model, "defaults": {k: DEFAULT_MODEL[k] for k in model}}, indent=2))
        return 0
    print(
        f"cost model fitted to {fit['jobs']} job(s) of {path}: per_job_seconds = {fit['per_job_seconds']:.4g} "
        f"(default {DEFAULT_MODEL['per_job_seconds']:g}, an assumption), per_circuit_seconds = "
        f"{fit['per_circuit_seconds']:.4g} (default {DEFAULT_MODEL['per_circuit_seconds']:g}, an assumption); "
        f"residual {fit['residual_rms_seconds']:.3g} s rms. Use it: IBMSampler(qpu_model={json.dumps(model)})"
    )
    return 0
