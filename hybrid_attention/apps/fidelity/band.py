"""Device-scale fidelity (``fidelity --band W``): sampler marginals against exact banded Boltzmann marginals.

With couplings in a band of width ``W`` (:func:`~hybrid_attention.apps.fidelity.problems.banded_problems`) the
target marginals ``<s_j>`` are exact at any ``n`` by the transfer matrix (:func:`hybrid_attention.exact.marginals`,
which dispatches banded ``J`` to :mod:`hybrid_attention.banded`); the distribution itself (``2**n`` entries) is not
formed, so a point here measures marginals only:

* ``target``: ``|m - m_exact|`` per spin, its max and mean over the spins (``marginal_max``, ``marginal_mean``),
  summarised over the ensemble's problems; ``target_conditional`` the same for the Rao-Blackwellised estimator of
  Boltzmann-read samplers (:data:`~hybrid_attention.apps.fidelity.sweep.ESTIMATOR`);
* ``shot_noise``: what ``shots`` exact Boltzmann samples would give (:func:`shot_noise_floor`), the number each
  error sits next to, and ``within_tolerance``: the fraction of problems whose every spin is within
  ``Z * sqrt((1 - m_exact**2) / shots)`` of the target;
* ``fit`` (DQA samplers): the inverse temperatures ``beta_h, beta_J`` at which the exact banded marginals of the
  problems' fields and couplings best match the measured marginals (least squares over all spins and problems),
  with the residual: DQA at the default schedule samples hot (docs/theory.md), and this says how hot at ``n = 64``.

A sampler that cannot reach ``n`` (its own validation refuses the problems: a qubit or spin limit, the memory of a
statevector) raises :class:`OutOfReach` with that reason, and the sweep records the point as skipped. Before
anything is measured, :func:`project` times one problem per sampler and size and projects the sweep's wall time.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np
import torch

from hybrid_attention import exact
from hybrid_attention.ising import IsingProblem

from . import sweep
from .projection import PROJECTION
from .sweep import SAMPLER_KINDS, SweepPoint

__all__ = ["OutOfReach", "measure_band_point", "shot_noise_floor", "fit_band_beta", "project", "Z", "PROJECTION"]

logger = logging.getLogger(__name__)
#: tolerance in standard errors of the mean spin: ``Z * sqrt((1 - m**2) / shots)`` (the tests' z)
Z = 5.0


class OutOfReach(ValueError):
    """The sampler cannot reach the point's ``n`` (the message says why); the sweep records the point as skipped."""


def shot_noise_floor(m: np.ndarray, shots: int, *, draws: int = 512) -> dict[str, float]:
    """Marginal errors of ``shots`` exact, independent samples of problems with marginals ``m (P, n)``.

    Per spin the error of a mean of ``shots`` ±1 reads has standard deviation ``sigma = sqrt((1 - m**2) / shots)``
    (at most ``sqrt(1 / shots)``); ``mean``: ``E mean_j |err_j| = sqrt(2 / pi) mean_j sigma_j`` (Gaussian limit),
    ``max``: ``E max_j |err_j|`` by ``draws`` Gaussian draws (seeded: deterministic), both averaged over problems;
    ``bound``: ``sqrt(1 / shots)``.
    """
    sigma = np.sqrt(np.clip(1 - m**2, 0, None) / shots)
    rng = np.random.default_rng(0)
    g = np.abs(rng.standard_normal((draws, *sigma.shape))) * sigma
    return {
        "mean": float(math.sqrt(2 / math.pi) * sigma.mean()),
        "max": float(g.max(-1).mean()),
        "bound": float(math.sqrt(1 / shots)),
    }


def _errors(m: np.ndarray, m_ref: np.ndarray) -> dict[str, Any]:
    err = np.abs(m - m_ref)
    return {"marginal_max": sweep.summarize(err.max(-1)), "marginal_mean": sweep.summarize(err.mean(-1))}


def fit_band_beta(m: np.ndarray, problems: Any) -> dict[str, float]:
    """``(beta_h, beta_J)`` whose exact banded marginals (fields ``beta_h h``, couplings ``beta_J J``) are closest to
    ``m (P, n)`` in least squares over every spin and problem (Nelder-Mead on the logs); ``rmse`` the residual."""
    from scipy.optimize import minimize

    h, J = problems.dropped()

    def marg(x: np.ndarray) -> np.ndarray:
        bh, bJ = np.exp(x)
        return exact.marginals(IsingProblem(h * bh, J * bJ, beta=1.0)).numpy()

    def loss(x: np.ndarray) -> float:
        return float(((marg(x) - m) ** 2).mean())

    b0 = float(problems.beta_tensor().reshape(-1)[0])
    res = minimize(loss, np.log([b0, b0]), method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-10})
    bh, bJ = np.exp(res.x)
    return {"beta_h": float(bh), "beta_J": float(bJ), "rmse": float(math.sqrt(res.fun))}


def _sampler(point: SweepPoint, n: int, calibration: str) -> tuple[Any, Any]:
    kind = SAMPLER_KINDS[point.sampler][1]
    schedule = sweep.make_schedule(point.tau, point.steps, calibration) if kind.startswith("dqa") else None
    extra: dict[str, Any] = {}
    if point.sampler == "aer-mps-noisy":  # the chain on a line of the device: band 1 needs no SWAP
        from hybrid_attention.backends.ibm.line_layout import line_layout
        from hybrid_attention.circuits.program import CircuitOptions

        backend = sweep.noise_backend(sweep.MPS_NOISE_BACKEND)
        try:
            line = line_layout(backend, n)
        except ValueError as exc:
            raise OutOfReach(str(exc)) from exc
        extra = {"noise_backend": backend, "options": CircuitOptions(layout=tuple(line))}
    return sweep.build_sampler(point.sampler, schedule=schedule, **extra), schedule


def reach(point: SweepPoint, problems: Any, *, calibration: str = "none") -> None:
    """Raise :class:`OutOfReach` (with the sampler's reason) when ``point.sampler`` cannot take ``problems``."""
    sampler, _ = _sampler(point, problems.n, calibration)
    try:
        sampler.validate(problems, num_reads=point.shots)
    except ValueError as exc:
        raise OutOfReach(f"{point.sampler} cannot reach n = {problems.n}: {exc}") from exc
    finally:
        sampler.close()


def measure_band_point(
    point: SweepPoint, problems: Any, *, seed: int = 0, calibration: str = "none", fit: bool = True
) -> dict[str, Any]:
    """Sample the banded ``problems`` at ``point`` and compare the marginals with the exact ones (module docstring).

    Raises:
        OutOfReach: the sampler refuses the problems (the reason in the message).
    """
    if problems.n != point.n:
        raise ValueError(f"problems have n = {problems.n}, point {point.key} needs n = {point.n}")
    prob = problems.to(torch.float64)
    m_ref = exact.marginals(prob).numpy()
    sampler, schedule = _sampler(point, point.n, calibration)
    try:
        try:
            sampler.validate(prob, num_reads=point.shots)
        except ValueError as exc:
            raise OutOfReach(f"{point.sampler} cannot reach n = {point.n}: {exc}") from exc
        t0 = time.perf_counter()
        ss = sampler.sample(prob, num_reads=point.shots, seed=seed)
        elapsed = time.perf_counter() - t0
    finally:
        sampler.close()
    m = ss.marginals()
    m = m.numpy() if isinstance(m, torch.Tensor) else np.asarray(m)
    res: dict[str, Any] = {
        "point": point.__dict__,
        "problems": int(m.shape[0]),
        "band": _band(prob),
        "seconds": elapsed,
        "sampler_info": {k: v for k, v in ss.info.items() if sweep.jsonable(v)},
        "target": _errors(m, m_ref),
        "estimator": sweep.ESTIMATOR.get(point.sampler, "reads"),
    }
    if res["estimator"] == "conditional":
        res["target_conditional"] = _errors(sweep.conditional_marginals(ss.spins, ss.weights, prob), m_ref)
    if point.shots:
        res["shot_noise"] = shot_noise_floor(m_ref, point.shots)
        sigma = np.sqrt(np.clip(1 - m_ref**2, 0, None) / point.shots)
        res["within_tolerance"] = float((np.abs(m - m_ref) <= Z * sigma + 1e-12).all(-1).mean())
    if schedule is not None:
        res["schedule"] = {k: getattr(schedule, k) for k in ("tau", "steps", "gamma", "energy_scale", "field_scale")}
        if fit:
            res["fit"] = fit_band_beta(m, prob)
    return res


def _band(prob: Any) -> int:
    from hybrid_attention import banded

    return banded.bandwidth(prob.J)


def _fmt(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def project(
    points: list[SweepPoint], problems_for: Any, *, seed: int = 0, calibration: str = "none"
) -> tuple[dict[str, str], float]:
    """Check every point's reach and time one problem per ``(sampler, n)``; log the projected wall time.

    The probe samples the first problem of the ensemble at the cheapest point of each ``(sampler, n)`` (fewest
    shots, then Trotter steps), after one untimed call per sampler at its smallest size (its one-off costs would
    otherwise be multiplied by every problem and point); a point is projected as ``probe seconds x problems x
    shots / probe shots x steps / probe steps`` (rough: a simulation's fixed cost does not grow with shots). Returns ``(skipped, seconds)``:
    the reasons of the points out of reach (by key) and the projected seconds of the rest.
    """
    skipped: dict[str, str] = {}
    groups: dict[tuple[str, int], list[SweepPoint]] = {}
    for pt in points:
        try:
            reach(pt, problems_for(pt.n), calibration=calibration)
        except (OutOfReach, ImportError) as exc:
            skipped[pt.key] = str(exc)
            continue
        groups.setdefault((pt.sampler, pt.n), []).append(pt)
    total, probe_s, warm = 0.0, 0.0, set()
    for (name, n), pts in sorted(groups.items()):
        probe = min(pts, key=lambda p: (p.shots or 0, p.steps or 0))
        first = problems_for(n)[:1]
        if name not in warm:  # one-off costs (imports, templates) at the sampler's smallest size: never multiplied
            t0 = time.perf_counter()
            measure_band_point(probe, first, seed=seed, calibration=calibration, fit=False)
            probe_s += time.perf_counter() - t0
            warm.add(name)
        t0 = time.perf_counter()
        measure_band_point(probe, first, seed=seed, calibration=calibration, fit=False)
        dt = time.perf_counter() - t0
        probe_s += dt
        count = problems_for(n).h.shape[0]
        for p in pts:
            scale = (p.shots or 1) / (probe.shots or 1) * (p.steps or 1) / (probe.steps or 1)
            total += dt * count * scale
    reachable = sum(len(v) for v in groups.values())
    PROJECTION.info(
        f"fidelity: {reachable} points to measure, projected {_fmt(total)} in all (probe: one problem per sampler and "
        f"size, {_fmt(probe_s)}); {len(skipped)} out of reach"
    )
    by_sampler: dict[tuple[str, int], list[str]] = {}
    for key, why in skipped.items():
        by_sampler.setdefault((key.split("|")[0], int(key.split("|")[1][2:])), []).append(why)
    for (name, n), whys in by_sampler.items():
        PROJECTION.info(f"  skipped {name} at n = {n} ({len(whys)} points): {whys[0]}")
    return skipped, total
