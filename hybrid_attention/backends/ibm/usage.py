"""Measured usage: what the service reports a job used, set against what the cost model estimated for it.

When a job completes, :mod:`.jobs` asks it for its usage (``RuntimeJobV2.usage()``: the QPU seconds billed,
``metrics()["usage"]["qpu_charge_time_seconds"]`` of the service) and its metrics (``RuntimeJobV2.metrics()``:
timestamps and usage), and writes them on the job's ``completed`` ledger line beside the model's estimate for that
job (``estimate_seconds``), its circuits, shots and per-shot time (``shot_seconds``). Local-mode jobs report 0 s
(nothing is billed). From a ledger:

* :func:`usage_rows`: one row per completed job that reported its usage;
* :func:`compare`: estimate against actual, per job and in total;
* :func:`fit_overheads`: the model's two unpublished constants (``per_job_seconds``, ``per_circuit_seconds``,
  :mod:`.cost`) fitted by least squares to the reported usage once the shots' time is taken off; the result is
  what ``IBMSampler(qpu_model=...)`` takes.

Sources: IBM Quantum documentation, "Workload usage" (https://quantum.cloud.ibm.com/docs/guides/estimate-job-run-time)
and qiskit-ibm-runtime's ``RuntimeJobV2.usage`` / ``RuntimeJobV2.metrics``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np

__all__ = ["job_usage", "usage_rows", "compare", "fit_overheads"]

logger = logging.getLogger("hybrid_attention.backends.ibm.sampler")


def job_usage(job: Any) -> tuple[float | None, dict[str, Any] | None]:
    """``(usage seconds, metrics)`` a finished job reports (``None`` for what it cannot tell; never raises: the
    bits are already safe, and a missing figure must not fail the call)."""
    usage = metrics = None
    try:
        u = job.usage()
        usage = None if u is None else float(u)
    except Exception as exc:  # a job object without usage, or the service not answering
        logger.info("ibm: job usage unavailable (%s: %s)", type(exc).__name__, exc)
    try:
        m = job.metrics()
        metrics = json.loads(json.dumps(m, default=str)) if isinstance(m, dict) else None
    except Exception as exc:
        logger.info("ibm: job metrics unavailable (%s: %s)", type(exc).__name__, exc)
    return usage, metrics


def usage_rows(ledger: Any, backend: str | None = None) -> list[dict[str, Any]]:
    """``[{"job_id", "backend", "estimate", "actual", "circuits", "shots", "shot_seconds"}]`` of the ledger's
    completed jobs that reported a usage (on ``backend`` when given), in ledger order."""
    rows = []
    for e in ledger.entries():
        d = e.details
        if e.event != "completed" or d.get("usage_seconds") is None or (backend and e.backend != backend):
            continue
        rows.append(
            {
                "job_id": e.job_id,
                "backend": e.backend,
                "estimate": d.get("estimate_seconds"),
                "actual": float(d["usage_seconds"]),
                "circuits": d.get("circuits"),
                "shots": e.shots,
                "shot_seconds": d.get("shot_seconds"),
            }
        )
    return rows


def compare(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Estimate against actual: ``{"jobs": rows with "ratio" (actual / estimate), "estimate", "actual",
    "ratio"}`` over the rows that have both figures (totals: sums)."""
    both = [r for r in rows if r["estimate"] is not None and r["actual"] is not None]
    jobs = [{**r, "ratio": r["actual"] / r["estimate"] if r["estimate"] else None} for r in both]
    est = float(sum(r["estimate"] for r in both))
    act = float(sum(r["actual"] for r in both))
    return {"jobs": jobs, "estimate": est, "actual": act, "ratio": act / est if est else None}


def fit_overheads(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``per_job_seconds`` and ``per_circuit_seconds`` fitted (least squares, both >= 0) to
    ``actual - circuits * shots * shot_seconds = per_job + circuits * per_circuit`` over the jobs of ``rows``.

    Raises:
        ValueError: fewer than two usable jobs, or every job with the same number of circuits (the two overheads
            cannot be told apart then; run jobs of two sizes, e.g. two chunk sizes).

    Example:
        >>> rows = [{"actual": 2 + c * 0.01 + c * 100 * 3e-4, "circuits": c, "shots": 100, "shot_seconds": 3e-4}
        ...         for c in (1, 4, 9)]
        >>> {k: round(v, 6) for k, v in fit_overheads(rows).items() if k.endswith("seconds")}
        {'per_job_seconds': 2.0, 'per_circuit_seconds': 0.01}
    """
    use = [r for r in rows if r.get("circuits") and r.get("shot_seconds") is not None and r["actual"] is not None]
    if len(use) < 2:
        raise ValueError(f"fit_overheads: needs at least two completed jobs with a reported usage, got {len(use)}")
    c = np.array([float(r["circuits"]) for r in use])
    y = np.array([r["actual"] - r["circuits"] * r["shots"] * r["shot_seconds"] for r in use])
    if np.ptp(c) == 0:
        raise ValueError(
            f"fit_overheads: every job ran {int(c[0])} circuit(s): the per-job and per-circuit overheads cannot be "
            "told apart; fit a ledger with jobs of at least two sizes (e.g. two chunk sizes)"
        )
    A = np.stack([np.ones_like(c), c], axis=1)
    (a, b), *_ = np.linalg.lstsq(A, y, rcond=None)
    if a < 0:  # the non-negative least-squares solution lies on an edge
        a, b = 0.0, max(0.0, float(c @ y / (c @ c)))
    elif b < 0:
        a, b = max(0.0, float(y.mean())), 0.0
    resid = y - (a + b * c)
    return {
        "per_job_seconds": float(a),
        "per_circuit_seconds": float(b),
        "jobs": len(use),
        "residual_rms_seconds": float(np.sqrt(np.mean(resid**2))),
    }
