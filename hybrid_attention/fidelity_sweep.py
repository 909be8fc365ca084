"""Sampler-fidelity sweeps: problem ensembles, sampler construction and one measured sweep point.

Owns the measurement behind ``hybrid-attention fidelity`` (:mod:`hybrid_attention.fidelity` holds the sweep loop,
the report file and the CLI; :mod:`hybrid_attention.fidelity_plots` the figures). Depends on numpy and torch at
import time; the DQA samplers (qiskit, pennylane) are imported through the registry only when a sweep uses them.

A *sweep point* is ``(sampler, n, shots, tau, steps)``. At each point every problem of the ensemble is sampled
once and compared with

* ``target``: the exact Boltzmann distribution of the problem at its ``beta`` (what attention needs), and, for
  DQA samplers,
* ``circuit``: the ideal output of the same Trotterized anneal (the sampler's ``reference_probabilities``:
  the independent numpy statevector of :mod:`hybrid_attention.circuits.reference`; isolates shot noise, hardware noise and emitter errors from the
  physics of the anneal), and the effective-temperature fit of that ideal output
  (:func:`hybrid_attention.metrics.fit_effective_beta`) with the distance to its best-fit Boltzmann form.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from . import exact, metrics
from .ising import IsingProblem

__all__ = ["SAMPLER_KINDS", "CALIBRATIONS", "SweepPoint", "UnreachableTemperature", "random_problems", "problems_from_model", "make_schedule",
           "build_sampler", "measure_point", "expected_shot_tv"]

logger = logging.getLogger(__name__)

#: sweep name -> (registry name, kind). ``dqa``: Trotterized anneal (tau, steps apply); ``dqa-exact``: a DQA
#: sampler returning exact output probabilities (no shots); ``classical``: reads only; ``exact``: exact samples.
SAMPLER_KINDS: dict[str, tuple[str, str]] = {
    "exact": ("exact", "exact"),
    "statevector": ("statevector", "dqa-exact"),
    "aer": ("aer", "dqa"),
    "aer-noisy": ("aer", "dqa"),
    "pennylane": ("pennylane", "dqa"),
    "gibbs": ("gibbs", "classical"),
    "anneal": ("anneal", "classical"),
    "meanfield": ("meanfield", "classical"),
}

#: fake backend whose noise model ``aer-noisy`` uses (offline, from qiskit-ibm-runtime; 16 qubits, heavy-hex)
NOISY_BACKEND = "FakeGuadalupeV2"
#: how DQA schedules are set up (see :func:`make_schedule`)
CALIBRATIONS = ("none", "leading", "compensated", "fitted")


class UnreachableTemperature(ValueError):
    """The ``fitted`` calibration cannot reach the target temperature at this anneal time (the fitted ``beta``
    saturates as the energy scale grows); the sweep records the point as skipped."""


@dataclass(frozen=True)
class SweepPoint:
    """One measurement: sampler and its settings (``tau``/``steps`` are ``None`` for non-DQA samplers,
    ``shots`` is ``None`` for exact-output samplers)."""

    sampler: str
    n: int
    shots: int | None
    tau: float | None
    steps: int | None

    @property
    def key(self) -> str:
        """Stable string used as the JSON key (resume looks points up by it)."""
        return f"{self.sampler}|n={self.n}|shots={self.shots}|tau={self.tau}|steps={self.steps}"


# ---------------------------------------------------------------------- problem ensembles
def random_problems(n: int, count: int, *, seed: int = 0, scale: float = 1.0, beta: float = 1.0) -> IsingProblem:
    """``count`` random problems on ``n`` spins: ``h, J_jk ~ N(0, scale**2)`` i.i.d. (SPEC section 4's ensemble).

    Args:
        n: spins (>= 1); count: problems (>= 1); seed: int; scale: standard deviation; beta: inverse temperature.

    Returns:
        float64 :class:`IsingProblem` with ``h (count, n)`` and ``J (count, n, n)``. The stream depends only on
        ``(seed, n)``, so adding sizes to a sweep never changes the problems of the others.
    """
    if n < 1 or count < 1:
        raise ValueError(f"n and count must be >= 1, got n = {n}, count = {count}")
    rng = np.random.default_rng([int(seed), int(n)])
    h = scale * rng.standard_normal((count, n))
    U = np.triu(scale * rng.standard_normal((count, n, n)), 1)
    return IsingProblem(torch.from_numpy(h), torch.from_numpy(U + U.transpose(0, 2, 1)), beta=beta)


@torch.no_grad()
def problems_from_model(model: torch.nn.Module, idx: torch.Tensor, n: int, *, layer: int = 0, head: int = 0) -> IsingProblem:
    """The Ising problems a trained model's attention layer solves for query position ``i = n - 1``.

    Runs ``model`` on ``idx``, captures the input of attention layer ``layer`` with a forward hook, and rebuilds
    the fields ``h_j = q_i . k_j / sqrt(d_head)`` over the visible keys ``j <= i`` (SPEC section 3) with the
    layer's couplings ``J[head, :n, :n]`` and its ``beta``.

    Args:
        model: a :class:`hybrid_attention.model.Transformer` (anything with ``attention_layers`` whose items have
            ``c_attn``, ``n_head``, ``n_embd``, ``J``, ``beta``).
        idx: token ids ``(B, T)`` with ``T >= n``.
        n: number of visible keys (spins).

    Returns:
        float64 :class:`IsingProblem` with ``h (B, n)``, ``J (n, n)``.
    """
    layers = list(getattr(model, "attention_layers", []))
    if not layers:
        raise ValueError("model has no attention_layers; expected a hybrid_attention.model.Transformer")
    if not 0 <= layer < len(layers):
        raise ValueError(f"layer must be in [0, {len(layers)}), got {layer}")
    att = layers[layer]
    if not 0 <= head < att.n_head:
        raise ValueError(f"head must be in [0, {att.n_head}), got {head}")
    if idx.ndim != 2 or idx.shape[1] < n:
        raise ValueError(f"idx must have shape (B, T) with T >= n = {n}, got {tuple(idx.shape)}")
    seen: dict[str, torch.Tensor] = {}
    hook = att.register_forward_hook(lambda mod, inp, out: seen.setdefault("x", inp[0]))
    was_training = model.training
    try:
        model.eval()
        model(idx)
    finally:
        hook.remove()
        model.train(was_training)
    x = seen["x"]
    B, T, C = x.shape
    d = C // att.n_head
    q, k, _ = att.c_attn(x).split(att.n_embd, dim=2)
    q = q.view(B, T, att.n_head, d)[:, n - 1, head]  # (B, d)
    k = k.view(B, T, att.n_head, d)[:, :n, head]  # (B, n, d)
    h = torch.einsum("bd,bnd->bn", q, k) / math.sqrt(d)
    J = att.J[head, :n, :n] if att.J is not None else torch.zeros(n, n)
    beta = float(att.beta[head])
    return IsingProblem(h.double(), J.double(), beta=beta)


# ---------------------------------------------------------------------- samplers
def _noise_backend() -> Any:
    from qiskit_ibm_runtime import fake_provider

    return getattr(fake_provider, NOISY_BACKEND)()


def make_schedule(tau: float, steps: int, calibration: str = "none", *, beta: float = 1.0, n: int = 4) -> Any:
    """The DQA schedule of a sweep point.

    The DQA samplers encode ``beta * H_P`` (the problem's ``beta`` scales ``h`` and ``J``), so their output is
    Boltzmann at about ``beta * b`` where ``b`` is the schedule's own effective inverse temperature. Calibration
    therefore sets ``b = 1`` (to leading order), which makes the output temperature the problem's.

    Args:
        tau, steps: anneal time and Trotter steps.
        calibration: ``"none"`` (the SPEC program: ``Gamma = lambda = 1``), ``"leading"`` (``energy_scale`` set so
            that the leading-order field temperature is 1, :func:`hybrid_attention.circuits.temperature.calibrate`)
            or ``"compensated"`` (as ``leading``, with the fields doubled so that the couplings see the same
            temperature, :func:`~hybrid_attention.circuits.temperature.compensate`), or ``"fitted"`` (compensated,
            then ``energy_scale`` found by bisection so that the *fitted* field temperature of an independent
            random ensemble of ``n``-spin problems at ``beta`` equals ``beta``; raises ``ValueError`` when the anneal
            cannot reach it).
        beta, n: problem temperature and size (used by ``"fitted"`` only).
    """
    from .circuits import DQASchedule

    if calibration not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")
    sched = DQASchedule(tau=float(tau), steps=int(steps))
    if calibration == "none":
        return sched
    from .circuits.temperature import calibrate, compensate

    if calibration in ("compensated", "fitted"):
        sched = compensate(sched)
    sched = calibrate(1.0, sched, vary="energy_scale", method="leading")
    if calibration == "fitted":
        from .circuits.temperature import random_problems as unit_problems

        h, J = unit_problems(n=n, batch=32, seed=12345)  # independent of the measured ensemble
        try:
            sched = calibrate(1.0, sched, vary="energy_scale", method="fit", problems=(beta * h, beta * J), tol=1e-2)
        except ValueError as exc:
            raise UnreachableTemperature(
                f"target beta = {beta:g} is out of reach at tau = {tau:g}, steps = {steps} (the calibration runs on "
                f"beta-scaled problems, target 1 in their units): {exc}") from exc
    return sched


def build_sampler(name: str, *, schedule: Any = None, **kw: Any) -> Any:
    """Instantiate sweep sampler ``name`` (a key of :data:`SAMPLER_KINDS`).

    DQA samplers receive ``schedule=``; ``aer-noisy`` is the Aer sampler with ``noise_backend=`` the fake
    :data:`NOISY_BACKEND` (its noise model, gates and layout) simulated with ``method="density_matrix"`` (exact
    noisy output, all shots at once: fast for the few qubits of a sweep). ``kw`` go to the constructor.
    """
    from .backends import get_sampler

    if name not in SAMPLER_KINDS:
        raise ValueError(f"unknown sweep sampler {name!r}; choose from {sorted(SAMPLER_KINDS)}")
    reg, kind = SAMPLER_KINDS[name]
    args: dict[str, Any] = dict(kw)
    if kind in ("dqa", "dqa-exact"):
        if schedule is None:
            raise ValueError(f"sampler {name!r} needs schedule=")
        args["schedule"] = schedule
    if name == "aer-noisy":
        args.setdefault("noise_backend", _noise_backend())
        args.setdefault("method", "density_matrix")
    return get_sampler(reg, **args)


# ---------------------------------------------------------------------- measurement
def expected_shot_tv(p: np.ndarray, shots: int) -> np.ndarray:
    """Large-``N`` expectation of the total variation between ``N`` exact samples of ``p`` and ``p`` itself:
    ``E TV ~ 1/2 sum_c sqrt(2 p_c (1 - p_c) / (pi N))`` (the shot-noise floor every sampler sits on)."""
    return 0.5 * np.sqrt(2 * p * (1 - p) / (math.pi * shots)).sum(-1)


def _summ(x: Any) -> dict[str, float]:
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    fin = a[np.isfinite(a)]
    return {
        "mean": float(a.mean()) if fin.size == a.size else float("inf"),
        "median": float(np.median(a)),
        "std": float(fin.std()) if fin.size else float("nan"),
        "max": float(a.max()),
        "n_inf": int(a.size - fin.size),
    }


def _compare(p: np.ndarray, ref: np.ndarray, m: np.ndarray, m_ref: np.ndarray, c: np.ndarray, c_ref: np.ndarray) -> dict[str, Any]:
    d = metrics.compare_distributions(p, ref)
    out = {k: _summ(v) for k, v in d.items()}
    me = metrics.marginal_error(m, m_ref)
    ce = metrics.correlation_error(c, c_ref)
    ae = metrics.attention_weight_error(m, m_ref)
    out.update({
        "marginal_max": _summ(me.max), "marginal_mean": _summ(me.mean),
        "correlation_max": _summ(ce.max), "correlation_mean": _summ(ce.mean),
        "attention_max": _summ(ae["max"]), "attention_tv": _summ(ae["tv"]),
    })
    return out


def _stats(p: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    S = exact.enumerate_states(n, dtype=torch.float64).numpy()
    return p @ S, np.einsum("...c,cj,ck->...jk", p, S, S)


def measure_point(point: SweepPoint, problems: IsingProblem, *, seed: int = 0, calibration: str = "none") -> dict[str, Any]:
    """Sample every problem of the ensemble at ``point`` and compare with the references (module docstring).

    Args:
        point: the sweep point; ``problems``: a batch of ``n``-spin problems (batch shape ``(count,)``).
        seed: sampler seed (recorded).
        calibration: DQA schedule set-up (:func:`make_schedule`).

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
        schedule = make_schedule(point.tau, point.steps, calibration, beta=float(prob.beta_tensor().reshape(-1)[0]), n=point.n)
    sampler = build_sampler(point.sampler, schedule=schedule)
    t0 = time.perf_counter()
    try:
        ss = sampler.sample(prob, num_reads=point.shots, seed=seed)
        elapsed = time.perf_counter() - t0
        p_circ = _circuit_reference(sampler, prob, schedule) if schedule is not None else None
    finally:
        sampler.close()
    p = ss.probabilities()
    m, c = ss.marginals(), ss.correlations()
    mt, ct = _stats(p_target, point.n)
    res: dict[str, Any] = {"point": point.__dict__, "problems": int(p.shape[0]), "seconds": elapsed,
                           "sampler_info": {k: v for k, v in ss.info.items() if _jsonable(v)}}
    res["target"] = _compare(p, p_target, m, mt, c, ct)
    if point.shots:
        res["shot_noise_tv"] = float(expected_shot_tv(p_target, point.shots).mean())
    if schedule is not None:
        h, J = prob.dropped()
        res["schedule"] = {k: getattr(schedule, k) for k in ("tau", "steps", "gamma", "energy_scale", "field_scale",
                                                              "coupling_scale", "order", "shape")}
        mc, cc = _stats(p_circ, point.n)
        res["circuit"] = _compare(p, p_circ, m, mc, c, cc)
        if point.shots:
            res["circuit"]["shot_noise_tv"] = float(expected_shot_tv(p_circ, point.shots).mean())
        fit = metrics.fit_effective_beta(p_circ, h.numpy(), J.numpy())
        p_fit = _fitted_boltzmann(h.numpy(), J.numpy(), fit)
        res["fit"] = {"beta_h": _summ(fit.beta_h), "beta_J": _summ(fit.beta_J), "r": _summ(fit.r), "r2": _summ(fit.r2),
                      "rmse": _summ(fit.rmse), "tv_to_fit": _summ(metrics.total_variation(p_circ, p_fit))}
    return res


def _circuit_reference(sampler: Any, prob: IsingProblem, schedule: Any) -> np.ndarray:
    """Ideal output of the anneal the sampler runs (the circuit encodes ``beta * H_P``)."""
    if hasattr(sampler, "reference_probabilities"):
        return np.asarray(sampler.reference_probabilities(prob))
    from .circuits.reference import dqa_probabilities

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


def _jsonable(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool, type(None))) or (isinstance(v, (list, tuple)) and all(
        isinstance(x, (str, int, float, bool)) for x in v))
