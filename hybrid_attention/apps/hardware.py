"""What every command that can reach the IBM route shares: the job ledger in the run's ``--out`` directory by
default, and the QPU-time budget checked before anything is submitted to a real device.

* :func:`reaches_ibm`: whether a sampler name and its options run circuits through the IBM runtime (``ibm``, or
  ``qemcmc`` with ``engine="ibm"``).
* :func:`with_default_ledger`: those options with ``ledger=OUT/ibm_jobs.jsonl`` unless one is given
  (:mod:`hybrid_attention.backends.ibm.ledger`): a rerun of the command (``train --resume``, ``fidelity`` again) submits
  no PUB twice.
* :func:`with_session_default`: training's IBM options with ``mode="session"`` unless a mode is given (a training
  run is an iterative multi-job workload: every step's jobs wait on the last step's result; qemcmc's ibm engine
  defaults to a session itself);
* :func:`check_budget`: the cost estimate's line, and a refusal (``ValueError``, before any submission) when the
  estimated QPU seconds exceed ``--max-qpu-seconds`` on a real device.
* :func:`budget_seconds`: the ``--max-qpu-seconds`` value parser of every command that takes it (``train``,
  ``estimate``): a finite number ``>= 0``, else an argparse error (exit code 2). ``nan`` would compare false with
  every estimate and so disable the refusal; ``inf`` would disable it on purpose: both are refused.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

__all__ = [
    "LEDGER_NAME",
    "DEFAULT_MAX_QPU_SECONDS",
    "reaches_ibm",
    "with_default_ledger",
    "with_session_default",
    "check_budget",
    "estimate_line",
    "budget_seconds",
    "check_budget_value",
]

#: the ledger's file name in a run's ``--out`` directory
LEDGER_NAME = "ibm_jobs.jsonl"
#: ``--max-qpu-seconds`` default: one minute of estimated QPU time (a user raises it on purpose)
DEFAULT_MAX_QPU_SECONDS = 60.0


def check_budget_value(value: Any) -> float:
    """``value`` as a QPU-seconds budget: a finite real number ``>= 0`` (``ValueError``/``TypeError`` naming it
    otherwise; ``nan`` and ``inf`` are refused: either would let every estimate pass).

    Example:
        >>> check_budget_value(60), check_budget_value("0.5")
        (60.0, 0.5)
    """
    if isinstance(value, bool):
        raise TypeError(f"--max-qpu-seconds must be a number of seconds, got {value!r}")
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"--max-qpu-seconds must be a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"--max-qpu-seconds must be a finite, non-negative number of seconds, got {value!r}")
    return seconds


def budget_seconds(text: str) -> float:
    """The argparse ``type`` of ``--max-qpu-seconds``: :func:`check_budget_value`, its errors as argparse errors
    (``hybrid-attention ...: error: argument --max-qpu-seconds: ...``, exit code 2)."""
    try:
        return check_budget_value(text)
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds >= 0, got {text!r}") from exc


def reaches_ibm(sampler: str, options: dict[str, Any] | None = None) -> bool:
    """Whether sampler ``sampler`` with constructor ``options`` runs through the IBM runtime.

    Example:
        >>> reaches_ibm("ibm"), reaches_ibm("qemcmc", {"engine": "ibm"}), reaches_ibm("qemcmc")
        (True, True, False)
    """
    return sampler == "ibm" or (sampler == "qemcmc" and (options or {}).get("engine") == "ibm")


def with_default_ledger(sampler: str, options: dict[str, Any], out: str | Path | None) -> dict[str, Any]:
    """``options`` plus ``ledger=OUT/ibm_jobs.jsonl`` when the sampler reaches the IBM route, ``out`` is set and no
    ledger is given (in ``options`` or, for qemcmc, in ``options["ibm_options"]``).

    Example:
        >>> with_default_ledger("ibm", {"backend": "fake_torino"}, "runs/a")["ledger"]
        'runs/a/ibm_jobs.jsonl'
        >>> "ledger" in with_default_ledger("gibbs", {}, "runs/a")
        False
    """
    opts = dict(options)
    if out is None or not reaches_ibm(sampler, opts):
        return opts
    if "ledger" in opts or "ledger" in (opts.get("ibm_options") or {}):
        return opts
    opts["ledger"] = str(Path(out) / LEDGER_NAME)
    return opts


def with_session_default(sampler: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` of the ``ibm`` sampler with ``mode="session"`` unless a mode (or an ``execution`` value) is given;
    other samplers' options unchanged (qemcmc's ibm engine runs in a session by default on its own).

    Example:
        >>> with_session_default("ibm", {"backend": "fake_torino"})["mode"]
        'session'
        >>> with_session_default("ibm", {"mode": "batch"})["mode"], "mode" in with_session_default("gibbs", {})
        ('batch', False)
    """
    opts = dict(options)
    if sampler == "ibm" and "mode" not in opts and "execution" not in opts:
        opts["mode"] = "session"
    return opts


def estimate_line(est: dict[str, Any], what: str) -> str:
    """One line describing an estimate (:meth:`hybrid_attention.backends.ibm.sampler.IBMSampler.estimate` keys)."""
    return (
        f"{what}: {est['jobs']:,} job(s), {est['pubs']:,} PUB(s), {est['circuits']:,} circuit(s) (parameter bindings), "
        f"{est['shots']:,} shots; ISA depth {est['depth']}, {est['two_qubit_gates']} two-qubit gates per circuit; "
        f"estimated QPU time {est['qpu_seconds']:,.1f} s ({est['qpu_seconds'] / 3600:,.2f} h)"
        + (
            f", of which {est['overhead_seconds']:,.1f} s fixed overhead (per job and per circuit, assumptions of "
            f"the cost model) in {est['mode']} mode"
            if "overhead_seconds" in est
            else ""
        )
    )


def check_budget(est: dict[str, Any], max_qpu_seconds: float, *, real_device: bool, what: str) -> str:
    """The estimate's line; ``ValueError`` (before anything is submitted) when ``real_device`` and the estimate
    exceeds ``max_qpu_seconds``.

    Example:
        >>> est = {"jobs": 1, "pubs": 1, "circuits": 2, "shots": 2000, "depth": 30, "two_qubit_gates": 4,
        ...        "qpu_seconds": 90.0}
        >>> check_budget(est, 60, real_device=False, what="sample")[:30]
        'sample: 1 job(s), 1 PUB(s), 2 c'
    """
    max_qpu_seconds = check_budget_value(max_qpu_seconds)
    line = estimate_line(est, what)
    if real_device and est["qpu_seconds"] > max_qpu_seconds:
        raise ValueError(
            f"{line}: above --max-qpu-seconds {max_qpu_seconds:g}; nothing was submitted. Raise --max-qpu-seconds "
            "on purpose to run it (QPU time is billed)"
        )
    return line
