"""Sampler-fidelity measurement: the sweep's samplers and schedules, and one measured sweep point.

Owns the measurement behind ``hybrid-attention fidelity`` (:mod:`~hybrid_attention.apps.fidelity.problems` makes
the problem ensembles, :mod:`~hybrid_attention.apps.fidelity.report` runs the sweep into its report file,
:mod:`~hybrid_attention.apps.fidelity.plots` draws it). Depends on numpy and torch at import time; the DQA samplers
(qiskit, pennylane) are imported through the registry only when a sweep uses them.

A *sweep point* is ``(sampler, n, shots, tau, steps, budget)``. At each point every problem of the ensemble is sampled
once and compared with

* ``target``: the exact Boltzmann distribution of the problem at its ``beta`` (what attention needs), and, for
  DQA samplers,
* ``circuit``: the ideal output of the same Trotterized anneal (the sampler's ``reference_probabilities``:
  the independent numpy statevector of :mod:`hybrid_attention.circuits.reference`; isolates shot noise,
  hardware noise and emitter errors from the physics of the anneal), and the effective-temperature fit of that ideal output
  (:func:`hybrid_attention.metrics.fit_effective_beta`) with the distance to its best-fit Boltzmann form.

Samplers whose reads are Boltzmann samples (exact, Markov chains) are also compared through the Rao-Blackwellised
estimator of the marginals (``target_conditional``: the mean over reads of the conditional means
``tanh(beta (h_j + sum_k J_jk s_k))``, the estimator training uses); ``estimator`` names the one a frontier ranks the
point by (:data:`ESTIMATOR`). ``budget`` is the sampler's work per chain (:data:`BUDGET_OPTION`: Markov-chain moves
or sweeps); ``cost`` is what the point cost (:mod:`~hybrid_attention.apps.fidelity.cost`).

Points are independent: :func:`measure_points` runs them as Dask tasks (one per point, :func:`measure_task`) on a
scheduler or a local cluster (:mod:`hybrid_attention.apps.distributed`); a point measures the same numbers there as
in this process (its sampler seed is the sweep's).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from hybrid_attention import exact, metrics
from hybrid_attention.backends.registry import get_sampler, is_dqa
from hybrid_attention.circuits.reference import dqa_probabilities
from hybrid_attention.circuits.schedule import DQASchedule
from hybrid_attention.circuits.temperature import calibrate, compensate
from hybrid_attention.circuits.temperature import random_problems as unit_problems
from hybrid_attention.ising import IsingProblem

from .cost import point_cost

__all__ = [
    "SAMPLER_KINDS",
    "CALIBRATIONS",
    "SweepPoint",
    "UnreachableTemperature",
    "make_schedule",
    "build_sampler",
    "measure_point",
    "OPT_IN_SAMPLERS",
    "BAND_SAMPLERS",
    "summarize",
    "jsonable",
    "noise_backend",
    "expected_shot_tv",
    "measure_task",
    "measure_points",
    "conditional_marginals",
    "SWEEP_OPTIONS",
    "BUDGET_OPTION",
    "ESTIMATOR",
]

logger = logging.getLogger(__name__)

#: sweep name -> registry name (``aer-noisy``: Aer with the noise model of :data:`NOISY_BACKEND`)
SWEEP_SAMPLERS: dict[str, str] = {
    "exact": "exact",
    "statevector": "statevector",
    "aer": "aer",
    "aer-noisy": "aer",
    "pennylane": "pennylane",
    "gibbs": "gibbs",
    "anneal": "anneal",
    "meanfield": "meanfield",
    "ibm": "ibm",
    "qemcmc": "qemcmc",
    "qemcmc-k0": "qemcmc",
    "qemcmc-aer": "qemcmc",
    "qemcmc-aer-noisy": "qemcmc",
    "mh-local": "mh-local",
    "mh-uniform": "mh-uniform",
    "aer-mps": "aer-mps",
    "aer-mps-noisy": "aer-mps",
    "meanfield-tap": "meanfield",
}
#: constructor options of sweep samplers that are a registered sampler with other settings: the Markov chains start
#: at the naive mean-field product distribution (as training uses them); ``qemcmc-k0`` is ``qemcmc`` with zero
#: moves (the start and the estimator alone); ``qemcmc-aer`` runs the proposal circuits on qiskit-aer,
#: ``qemcmc-aer-noisy`` with the noise model and ISA transpilation of :data:`NOISY_BACKEND` (device noise makes the
#: proposal only approximately symmetric, so the chain only approximately Boltzmann)
SWEEP_OPTIONS: dict[str, dict[str, Any]] = {
    "qemcmc": {"start": "meanfield"},
    "qemcmc-k0": {"start": "meanfield", "burn_in": 0},
    "qemcmc-aer": {"start": "meanfield", "engine": "aer"},
    "qemcmc-aer-noisy": {"start": "meanfield", "engine": "aer"},
    "mh-local": {"start": "meanfield"},
    "mh-uniform": {"start": "meanfield"},
    "meanfield-tap": {"method": "tap"},
}
#: the per-call option a point's ``budget`` sets (work per chain: moves for qemcmc / mh, sweeps for gibbs / anneal)
BUDGET_OPTION: dict[str, str] = {
    "gibbs": "burn_in",
    "anneal": "num_sweeps",
    "qemcmc": "burn_in",
    "qemcmc-aer": "burn_in",
    "qemcmc-aer-noisy": "burn_in",
    "mh-local": "burn_in",
    "mh-uniform": "burn_in",
}
#: the estimator a frontier ranks each sampler by: ``conditional`` (Rao-Blackwellised) for Boltzmann reads
ESTIMATOR: dict[str, str] = {
    name: "conditional"
    for name in (
        "exact",
        "gibbs",
        "anneal",
        "qemcmc",
        "qemcmc-k0",
        "qemcmc-aer",
        "qemcmc-aer-noisy",
        "mh-local",
        "mh-uniform",
    )
}
#: sweep samplers measured only when asked for (``--samplers ...,ibm``): slow, and they need a backend
#: (``aer-mps-noisy``: one MPS trajectory per shot, about a second each at 16 spins)
OPT_IN_SAMPLERS = ("ibm", "qemcmc-aer", "qemcmc-aer-noisy", "aer-mps-noisy")
#: sweep samplers measured by default only in a banded (device-scale) sweep (``fidelity --band W``)
BAND_SAMPLERS = ("aer-mps", "meanfield-tap")
#: DQA samplers that return the exact output distribution of their circuit (no shots axis)
EXACT_OUTPUT = ("statevector",)


def _kind(registry_name: str) -> str:
    if registry_name == "exact":
        return "exact"
    if is_dqa(registry_name):  # the registry says which samplers run a DQA circuit
        return "dqa-exact" if registry_name in EXACT_OUTPUT else "dqa"
    return "classical"


#: sweep name -> (registry name, kind). ``dqa``: Trotterized anneal (tau, steps apply); ``dqa-exact``: a DQA
#: sampler returning exact output probabilities (no shots); ``classical``: reads only; ``exact``: exact samples.
SAMPLER_KINDS: dict[str, tuple[str, str]] = {name: (reg, _kind(reg)) for name, reg in SWEEP_SAMPLERS.items()}

#: fake backend whose noise model ``aer-noisy`` uses (offline, from qiskit-ibm-runtime; 16 qubits, heavy-hex)
NOISY_BACKEND = "FakeGuadalupeV2"
#: fake backend of ``aer-mps-noisy`` (133 qubits, heavy-hex; a band-1 chain on a line of it needs no SWAP)
MPS_NOISE_BACKEND = "FakeTorino"
#: the backend of the ``ibm`` sweep sampler when none is named (``--backend``): the same fake device, offline
IBM_BACKEND = "fake_guadalupe"
#: how DQA schedules are set up (see :func:`make_schedule`)
CALIBRATIONS = ("none", "leading", "compensated", "fitted")


class UnreachableTemperature(ValueError):
    """The ``fitted`` calibration cannot reach the target temperature at this anneal time (the fitted ``beta``
    saturates as the energy scale grows); the sweep records the point as skipped."""


@dataclass(frozen=True)
class SweepPoint:
    """One measurement: sampler and its settings (``tau``/``steps`` are ``None`` for non-DQA samplers,
    ``shots`` is ``None`` for exact-output samplers, ``budget`` ``None``: the sampler's default work per chain)."""

    sampler: str
    n: int
    shots: int | None
    tau: float | None
    steps: int | None
    budget: int | None = None

    @property
    def key(self) -> str:
        """Stable string used as the JSON key (resume looks points up by it)."""
        key = f"{self.sampler}|n={self.n}|shots={self.shots}|tau={self.tau}|steps={self.steps}"
        return key if self.budget is None else f"{key}|budget={self.budget}"


def noise_backend(name: str = NOISY_BACKEND) -> Any:
    """The fake backend ``name`` of ``qiskit_ibm_runtime.fake_provider`` (offline)."""
    from qiskit_ibm_runtime import fake_provider

    return getattr(fake_provider, name)()


def make_schedule(
    tau: float, steps: int, calibration: str = "none", *, beta: float | None = None, n: int | None = None
) -> Any:
    """The DQA schedule of a sweep point.

    The DQA samplers encode ``beta * H_P`` (the problem's ``beta`` scales ``h`` and ``J``), so their output is
    Boltzmann at about ``beta * b`` where ``b`` is the schedule's own effective inverse temperature. Calibration
    therefore sets ``b = 1`` (to leading order), which makes the output temperature the problem's.

    Args:
        tau, steps: anneal time and Trotter steps.
        calibration: ``"none"`` (the default program: ``Gamma = lambda = 1``), ``"leading"`` (``energy_scale`` set so
            that the leading-order field temperature is 1, :func:`hybrid_attention.circuits.temperature.calibrate`)
            or ``"compensated"`` (as ``leading``, with the fields doubled so that the couplings see the same
            temperature, :func:`~hybrid_attention.circuits.temperature.compensate`), or ``"fitted"`` (compensated,
            then ``energy_scale`` found by bisection so that the *fitted* field temperature of an independent
            random ensemble of ``n``-spin problems at ``beta`` equals ``beta``; raises ``ValueError`` when the anneal
            cannot reach it).
        beta, n: problem temperature and size of the ``"fitted"`` calibration (defaults 1 and 4); ``ValueError`` with
            any other calibration, which uses neither.
    """
    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")
    if calibration != "fitted" and (beta is not None or n is not None):
        raise ValueError(f"beta and n only apply to calibration='fitted', got them with calibration={calibration!r}")
    beta = 1.0 if beta is None else float(beta)
    n = 4 if n is None else int(n)
    sched = DQASchedule(tau=float(tau), steps=int(steps))
    if calibration == "none":
        return sched
    if calibration in ("compensated", "fitted"):
        sched = compensate(sched)
    sched = calibrate(1.0, sched, vary="energy_scale", method="leading")
    if calibration == "fitted":
        h, J = unit_problems(n=n, batch=32, seed=12345)  # independent of the measured ensemble
        try:
            sched = calibrate(1.0, sched, vary="energy_scale", method="fit", problems=(beta * h, beta * J), tol=1e-2)
        except ValueError as exc:
            raise UnreachableTemperature(
                f"target beta = {beta:g} is out of reach at tau = {tau:g}, steps = {steps} (the calibration runs on "
                f"beta-scaled problems, target 1 in their units): {exc}"
            ) from exc
    return sched


def build_sampler(
    name: str, *, schedule: Any = None, backend: str | None = None, mitigation: Any = (), **kw: Any
) -> Any:
    """Instantiate sweep sampler ``name`` (a key of :data:`SAMPLER_KINDS`).

    DQA samplers receive ``schedule=``; ``aer-mps-noisy`` is ``aer-mps`` with the noise model of the fake
    :data:`MPS_NOISE_BACKEND`; ``meanfield-tap`` is ``meanfield`` with ``method="tap"``; ``aer-noisy`` is the Aer sampler with ``noise_backend=`` the fake
    :data:`NOISY_BACKEND` (its noise model, gates and layout) simulated with ``method="density_matrix"`` (exact
    noisy output, all shots at once: fast for the few qubits of a sweep); ``ibm`` runs on ``backend`` (a fake
    backend name, default :data:`IBM_BACKEND`; local mode). ``kw`` go to the constructor.

    Raises:
        ValueError: an unknown name; a DQA sampler without ``schedule``, or ``schedule`` for a sampler that runs no
            DQA program.
    """
    if name not in SAMPLER_KINDS:
        raise ValueError(f"unknown sweep sampler {name!r}; choose from {sorted(SAMPLER_KINDS)}")
    reg, kind = SAMPLER_KINDS[name]
    args: dict[str, Any] = dict(kw)
    if kind in ("dqa", "dqa-exact"):
        if schedule is None:
            raise ValueError(f"sampler {name!r} needs schedule=")
        args["schedule"] = schedule
    elif schedule is not None:
        raise ValueError(f"sampler {name!r} runs no DQA program and takes no schedule, got schedule={schedule!r}")
    for k, v in SWEEP_OPTIONS.get(name, {}).items():
        args.setdefault(k, v)
    if name in ("aer-noisy", "qemcmc-aer-noisy"):
        args.setdefault("noise_backend", noise_backend())
    if name == "aer-mps-noisy":
        args.setdefault("noise_backend", noise_backend(MPS_NOISE_BACKEND))
    if name == "aer-noisy":
        args.setdefault("method", "density_matrix")
    if name == "ibm":
        args.setdefault("backend", backend or IBM_BACKEND)
    if mitigation and name in ("aer-noisy", "ibm"):
        args.update(mitigation_options(name, mitigation))
    return get_sampler(reg, **args)


#: error suppression and mitigation the noisy sweep samplers take (``fidelity --mitigation``)
MITIGATIONS = ("readout", "twirling", "dd")
#: random twirls per chunk of the aer-noisy sampler's project-side twirling
AER_TWIRLS = 8


def mitigation_options(name: str, mitigation: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Constructor options of the noisy sweep sampler ``name`` (``aer-noisy`` or ``ibm``) for the ``mitigation``
    names: ``readout`` (mthree readout mitigation), ``twirling`` (ibm: the runtime's gate and measurement twirling;
    aer-noisy: :data:`AER_TWIRLS` project-side gate twirls), ``dd`` (ibm only: XY4 dynamical decoupling; Aer runs no
    schedule, so aer-noisy ignores it).

    Example:
        >>> mitigation_options("ibm", ["readout", "dd"])
        {'readout_mitigation': True, 'dynamical_decoupling': 'XY4'}
    """
    bad = [m for m in mitigation if m not in MITIGATIONS]
    if bad:
        raise ValueError(f"unknown mitigation(s) {bad}; choose from {MITIGATIONS}")
    out: dict[str, Any] = {}
    if "readout" in mitigation:
        out["readout_mitigation"] = True
    if "twirling" in mitigation:
        out["twirling"] = True if name == "ibm" else AER_TWIRLS
    if "dd" in mitigation and name == "ibm":
        out["dynamical_decoupling"] = "XY4"
    return out


def expected_shot_tv(p: np.ndarray, shots: int) -> np.ndarray:
    """Large-``N`` expectation of the total variation between ``N`` exact samples of ``p`` and ``p`` itself:
    ``E TV ~ 1/2 sum_c sqrt(2 p_c (1 - p_c) / (pi N))`` (the shot-noise floor every sampler sits on)."""
    return 0.5 * np.sqrt(2 * p * (1 - p) / (math.pi * shots)).sum(-1)


def summarize(x: Any) -> dict[str, float]:
    """``mean``, ``median``, ``std``, ``max`` and ``n_inf`` of the values of ``x`` (JSON-ready floats)."""
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    fin = a[np.isfinite(a)]
    return {
        "mean": float(a.mean()) if fin.size == a.size else float("inf"),
        "median": float(np.median(a)),
        "std": float(fin.std()) if fin.size else float("nan"),
        "max": float(a.max()),
        "n_inf": int(a.size - fin.size),
    }


def _compare(
    p: np.ndarray, ref: np.ndarray, m: np.ndarray, m_ref: np.ndarray, c: np.ndarray, c_ref: np.ndarray
) -> dict[str, Any]:
    d = metrics.compare_distributions(p, ref)
    out = {k: summarize(v) for k, v in d.items()}
    me = metrics.marginal_error(m, m_ref)
    ce = metrics.correlation_error(c, c_ref)
    ae = metrics.attention_weight_error(m, m_ref)
    out.update(
        {
            "marginal_max": summarize(me.max),
            "marginal_mean": summarize(me.mean),
            "correlation_max": summarize(ce.max),
            "correlation_mean": summarize(ce.mean),
            "attention_max": summarize(ae["max"]),
            "attention_tv": summarize(ae["tv"]),
        }
    )
    return out


def _stats(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Marginals and correlations of probability tables ``p (..., 2**n)``."""
    return exact.table_marginals(p).numpy(), exact.table_correlations(p).numpy()


def measure_point(
    point: SweepPoint,
    problems: IsingProblem,
    *,
    seed: int = 0,
    calibration: str = "none",
    backend: str | None = None,
    ledger: str | None = None,
    mitigation: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:
    """Sample every problem of the ensemble at ``point`` and compare with the references (module docstring).

    Args:
        point: the sweep point; ``problems``: a batch of ``n``-spin problems (batch shape ``(count,)``).
        seed: sampler seed (recorded).
        calibration: DQA schedule set-up (:func:`make_schedule`).
        backend: the ``ibm`` sampler's backend name (:func:`build_sampler`).
        mitigation: error suppression / mitigation of the noisy samplers (:func:`mitigation_options`).
        ledger: the ``ibm`` sampler's job ledger (:mod:`hybrid_attention.backends.ibm.ledger`; ``fidelity`` keeps it in
            its ``--out`` directory): a rerun submits no PUB twice.

    Returns:
        JSON-ready dict: ``point`` fields, ``target`` metrics summaries (mean/median/std/max over problems),
        ``circuit`` metrics and ``fit`` (DQA samplers), ``shot_noise_tv`` (expected floor), timings.
    """
    if problems.n != point.n:
        raise ValueError(f"problems have n = {problems.n}, point {point.key} needs n = {point.n}")
    kind = SAMPLER_KINDS[point.sampler][1]
    prob = problems.to(torch.float64)
    p_target = exact.probabilities(prob).numpy()
    schedule = None
    if kind in ("dqa", "dqa-exact"):
        fitted = {"beta": float(prob.beta_tensor().reshape(-1)[0]), "n": point.n} if calibration == "fitted" else {}
        schedule = make_schedule(point.tau, point.steps, calibration, **fitted)
    extra = {"ledger": ledger} if ledger is not None and point.sampler == "ibm" else {}
    sampler = build_sampler(point.sampler, schedule=schedule, backend=backend, mitigation=mitigation, **extra)
    budget = {} if point.budget is None else {BUDGET_OPTION[point.sampler]: int(point.budget)}
    t0 = time.perf_counter()
    try:
        ss = sampler.sample(prob, num_reads=point.shots, seed=seed, **budget)
        elapsed = time.perf_counter() - t0
        p_circ = _circuit_reference(sampler, prob, schedule) if schedule is not None else None
    finally:
        sampler.close()
    p = ss.probabilities()
    m, c = ss.marginals(), ss.correlations()
    mt, ct = _stats(p_target)
    res: dict[str, Any] = {
        "point": point.__dict__,
        "problems": int(p.shape[0]),
        "seconds": elapsed,
        "sampler_info": {k: v for k, v in ss.info.items() if jsonable(v)},
    }
    res["target"] = _compare(p, p_target, m, mt, c, ct)
    res["estimator"] = ESTIMATOR.get(point.sampler, "reads")
    if res["estimator"] == "conditional":
        mc_ = conditional_marginals(ss.spins, ss.weights, prob)
        res["target_conditional"] = _marginal_errors(mc_, mt)
    res["cost"] = point_cost(
        point.sampler,
        kind,
        n=point.n,
        shots=point.shots,
        steps=point.steps,
        info=ss.info,
        wall_s=elapsed,
        problems=int(p.shape[0]),
    )
    if point.shots:
        res["shot_noise_tv"] = float(expected_shot_tv(p_target, point.shots).mean())
    if schedule is not None:
        h, J = prob.dropped()
        res["schedule"] = {
            k: getattr(schedule, k)
            for k in ("tau", "steps", "gamma", "energy_scale", "field_scale", "coupling_scale", "order", "shape")
        }
        mc, cc = _stats(p_circ)
        res["circuit"] = _compare(p, p_circ, m, mc, c, cc)
        if point.shots:
            res["circuit"]["shot_noise_tv"] = float(expected_shot_tv(p_circ, point.shots).mean())
        fit = metrics.fit_effective_beta(p_circ, h.numpy(), J.numpy())
        p_fit = _fitted_boltzmann(h.numpy(), J.numpy(), fit)
        res["fit"] = {
            "beta_h": summarize(fit.beta_h),
            "beta_J": summarize(fit.beta_J),
            "r": summarize(fit.r),
            "r2": summarize(fit.r2),
            "rmse": summarize(fit.rmse),
            "tv_to_fit": summarize(metrics.total_variation(p_circ, p_fit)),
        }
    return res


def measure_task(
    item: tuple[SweepPoint, IsingProblem],
    *,
    seed: int = 0,
    calibration: str = "none",
    backend: str | None = None,
    mitigation: list[str] | tuple[str, ...] = (),
) -> tuple[dict[str, Any] | None, str | None]:
    """One sweep point as a task (in a Dask worker): ``(result, None)`` from :func:`measure_point`, or
    ``(None, reason)`` when the point is skipped (a missing extra, an :class:`UnreachableTemperature`), so that a
    skip is not retried as a failure."""
    point, problems = item
    try:
        return measure_point(
            point, problems, seed=seed, calibration=calibration, backend=backend, mitigation=mitigation
        ), None
    except (ImportError, UnreachableTemperature) as exc:
        return None, str(exc)


def measure_points(
    items: list[tuple[SweepPoint, IsingProblem]],
    *,
    seed: int = 0,
    calibration: str = "none",
    scheduler: str | None = None,
    workers: int | None = None,
    client: Any = None,
    progress: bool = True,
    backend: str | None = None,
    mitigation: list[str] | tuple[str, ...] = (),
) -> Iterator[tuple[SweepPoint, tuple[dict[str, Any] | None, str | None]]]:
    """Measure ``(point, problems)`` items as Dask tasks; yield ``(point, measure_task(...))`` as they finish.

    Args:
        scheduler, workers: the cluster (:func:`hybrid_attention.apps.distributed.dask_client`), or
        client: an existing ``distributed.Client``.
    """
    from hybrid_attention.apps.distributed import dask_client, run_tasks

    with contextlib.nullcontext(client) if client is not None else dask_client(scheduler, workers) as c:
        for (pt, _), outcome in run_tasks(
            c,
            measure_task,
            items,
            name=lambda it: it[0].key.replace("|", "_"),
            progress=progress,
            desc="fidelity",
            seed=seed,
            calibration=calibration,
            backend=backend,
            mitigation=mitigation,
        ):
            yield pt, outcome


def conditional_marginals(spins: Any, weights: Any, problem: IsingProblem) -> np.ndarray:
    """The Rao-Blackwellised marginals of reads: ``sum_r w_r tanh(beta (h_j + sum_k J_jk s_rk))`` per spin.

    Args:
        spins: ``(B, R, n)`` ±1 reads; weights: ``(B, R)`` summing to 1; problem: the ``B`` problems (no mask).

    Returns:
        ``(B, n)`` float64 marginals (unbiased for Boltzmann reads, lower variance than the mean spin).
    """
    if problem.mask is not None:
        raise ValueError("conditional_marginals: masked problems are not supported here")
    s = np.asarray(spins, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    h = problem.h.detach().double().numpy().reshape(s.shape[0], -1)
    J = np.broadcast_to(problem.J.detach().double().numpy(), (s.shape[0], problem.n, problem.n))
    beta = problem.beta_tensor().detach().double().numpy().reshape(-1)
    beta = np.broadcast_to(beta, (s.shape[0],))
    phi = np.tanh(beta[:, None, None] * (h[:, None, :] + np.einsum("brk,bkj->brj", s, J)))
    return np.einsum("br,brj->bj", w, phi)


def _marginal_errors(m: np.ndarray, m_ref: np.ndarray) -> dict[str, Any]:
    me = metrics.marginal_error(m, m_ref)
    ae = metrics.attention_weight_error(m, m_ref)
    return {
        "marginal_max": summarize(me.max),
        "marginal_mean": summarize(me.mean),
        "attention_max": summarize(ae["max"]),
        "attention_tv": summarize(ae["tv"]),
    }


def _circuit_reference(sampler: Any, prob: IsingProblem, schedule: Any) -> np.ndarray:
    """Ideal output of the anneal the sampler runs (the circuit encodes ``beta * H_P``)."""
    if hasattr(sampler, "reference_probabilities"):
        return np.asarray(sampler.reference_probabilities(prob))
    h, J = prob.dropped()
    beta = prob.beta_tensor().double().numpy()
    J = np.broadcast_to(J.numpy(), (*prob.batch_shape, prob.n, prob.n))
    return dqa_probabilities(h.numpy() * beta[..., None], J * beta[..., None, None], schedule)


def _fitted_boltzmann(h: np.ndarray, J: np.ndarray, fit: metrics.EffectiveBeta) -> np.ndarray:
    Eh, EJ = metrics.energy_terms(h, J)
    logits = -np.asarray(fit.beta_h)[..., None] * Eh - np.asarray(fit.beta_J)[..., None] * EJ
    logits -= logits.max(-1, keepdims=True)
    w = np.exp(logits)
    return w / w.sum(-1, keepdims=True)


def jsonable(v: Any) -> bool:
    """Whether ``v`` goes into a report as it is (a scalar, or a list of scalars)."""
    return isinstance(v, (str, int, float, bool, type(None))) or (
        isinstance(v, (list, tuple)) and all(isinstance(x, (str, int, float, bool)) for x in v)
    )
