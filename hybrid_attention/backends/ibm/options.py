"""The grouped settings of :class:`~hybrid_attention.backends.ibm.sampler.IBMSampler`, each a frozen value validated
when built: :class:`Mitigation` (error suppression and mitigation) and :class:`Execution` (execution mode, the
runtime's ``max_execution_time``, retries of transient service errors). The registry and ``--sampler-option`` keep
taking their fields as flat options (:data:`IBM_OPTION_GROUPS`: ``get_sampler("ibm", mode="batch", twirling=True)``
builds ``execution=Execution(mode="batch")`` and ``mitigation=Mitigation(twirling=True)``).

Sources for the execution settings (IBM Quantum documentation):

* [modes] "Introduction to execution modes" and "Execution modes FAQs"
  (https://quantum.cloud.ibm.com/docs/guides/execution-modes, .../guides/execution-modes-faq): job, batch and
  session modes; local testing mode accepts the syntax of every mode and ignores it;
* [open] "Execution modes using REST API" (https://quantum.cloud.ibm.com/docs/en/ibm-quantum-compute/execution-modes-rest-api):
  "Open Plan users cannot submit session jobs";
* [max] "Maximum execution time" (https://quantum.cloud.ibm.com/docs/en/guides/max-execution-time): a job's
  limit is the smaller of its ``max_execution_time`` and the service's maximum (three hours), counted in QPU usage,
  not wall-clock time; a job over it is cancelled and ``RuntimeJobMaxTimeoutError`` raised.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Any

import numpy as np

from hybrid_attention.checks import check_positive_int

__all__ = [
    "Mitigation",
    "Execution",
    "IBM_OPTION_GROUPS",
    "MODES",
    "DD_SEQUENCES",
    "SERVICE_MAX_EXECUTION_TIME",
]

#: execution modes: ``auto`` (a Batch per call of more than one chunk, else job mode), ``job``, ``batch``, ``session``
MODES = ("auto", "job", "batch", "session")
#: the runtime Sampler's dynamical-decoupling sequences
DD_SEQUENCES = ("XX", "XpXm", "XY4")
#: the service's own limit on one job's QPU usage, seconds (three hours) [max]
SERVICE_MAX_EXECUTION_TIME = 3 * 3600


@dataclasses.dataclass(frozen=True)
class Mitigation:
    """Error suppression and mitigation of the ``ibm`` sampler.

    Attributes:
        dynamical_decoupling: ``None`` (off) or ``"XX"``, ``"XpXm"``, ``"XY4"``: the runtime Sampler's
            ``dynamical_decoupling`` option (the client-side Sampler applies it in local mode too).
        twirling: Pauli twirling of two-qubit gates and measurements (the runtime Sampler's ``twirling`` option).
        readout_mitigation: mthree read-out mitigation (:mod:`.mitigation`); the calibration runs through the
            sampler's route (ledger, estimate).
        calibration_shots: shots per calibration circuit (2 circuits per measured qubit set).

    Example:
        >>> Mitigation(twirling=True).runtime_options({})
        {'twirling': {'enable_gates': True, 'enable_measure': True}}
    """

    dynamical_decoupling: str | None = None
    twirling: bool = False
    readout_mitigation: bool = False
    calibration_shots: int = 8192

    def __post_init__(self) -> None:
        if self.dynamical_decoupling is not None and self.dynamical_decoupling not in DD_SEQUENCES:
            raise ValueError(
                f"ibm: dynamical_decoupling must be None or one of {DD_SEQUENCES}, got {self.dynamical_decoupling!r}"
            )
        for name in ("twirling", "readout_mitigation"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"ibm: {name} must be True or False, got {getattr(self, name)!r}")
        object.__setattr__(
            self, "calibration_shots", check_positive_int(self.calibration_shots, "ibm: calibration_shots")
        )

    def runtime_options(self, opts: dict[str, Any]) -> dict[str, Any]:
        """``opts`` (the runtime Sampler's options) with this value's suppression options merged in; an option
        given in both places raises ``ValueError``."""
        opts = dict(opts)
        if self.dynamical_decoupling is not None:
            if "dynamical_decoupling" in opts:
                raise ValueError(
                    "ibm: give dynamical decoupling once: dynamical_decoupling= or sampler_options, not both"
                )
            opts["dynamical_decoupling"] = {"enable": True, "sequence_type": self.dynamical_decoupling}
        if self.twirling:
            if "twirling" in opts:
                raise ValueError("ibm: give twirling once: twirling=True or sampler_options['twirling'], not both")
            opts["twirling"] = {"enable_gates": True, "enable_measure": True}
        return opts


@dataclasses.dataclass(frozen=True)
class Execution:
    """How the ``ibm`` sampler's jobs are run and waited for.

    Attributes:
        mode: ``"auto"`` (a ``Batch`` per call of more than one chunk, else one job), ``"job"``, ``"batch"`` (one
            ``Batch`` kept until ``close()``) or ``"session"`` (one ``Session`` kept until ``close()``; not on the
            Open Plan [open], nor on a simulator). qemcmc (one job per chain step) and training default to
            ``"session"``: they are iterative multi-job workloads.
        max_execution_time: the runtime's per-job limit on QPU usage, whole seconds (``None``: the service's
            three hours [max]); a job whose estimate exceeds it is refused before submission.
        max_attempts: tries of one submission (or one wait for a result) when the service answers with a
            transient error (a network failure, HTTP 408/429/5xx); then :class:`~.jobs.IBMJobError`.
        backoff_seconds, max_backoff_seconds: the wait before try ``k + 1`` is drawn uniformly from
            ``[d / 2, d]`` with ``d = min(max_backoff_seconds, backoff_seconds * 2**k)`` (exponential backoff with
            jitter, so that clients that failed together do not retry together).

    Example:
        >>> Execution(mode="session", max_execution_time=600).mode
        'session'
    """

    mode: str = "auto"
    max_execution_time: int | None = None
    max_attempts: int = 5
    backoff_seconds: float = 1.0
    max_backoff_seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"ibm: mode must be one of {MODES}, got {self.mode!r}")
        if self.max_execution_time is not None:
            t = check_positive_int(self.max_execution_time, "ibm: max_execution_time")
            if t > SERVICE_MAX_EXECUTION_TIME:
                warnings.warn(
                    f"ibm: max_execution_time = {t} s is above the service's own limit of "
                    f"{SERVICE_MAX_EXECUTION_TIME} s (three hours): the service's limit applies",
                    stacklevel=3,
                )
            object.__setattr__(self, "max_execution_time", t)
        object.__setattr__(self, "max_attempts", check_positive_int(self.max_attempts, "ibm: max_attempts"))
        for name in ("backoff_seconds", "max_backoff_seconds"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"ibm: {name} must be a finite number of seconds >= 0, got {v!r}")

    def delay(self, attempt: int, rng: np.random.Generator) -> float:
        """Seconds to wait after failed try ``attempt`` (0-based): ``U[d/2, d]``, ``d = min(cap, base * 2**k)``."""
        d = min(float(self.max_backoff_seconds), float(self.backoff_seconds) * 2.0 ** min(attempt, 60))
        return d / 2 + float(rng.uniform(0, d / 2))


#: the flat spellings of the grouped constructor options (``Sampler.option_groups``)
IBM_OPTION_GROUPS: dict[str, tuple[str, str]] = {
    **{f.name: ("mitigation", f.name) for f in dataclasses.fields(Mitigation)},
    **{f.name: ("execution", f.name) for f in dataclasses.fields(Execution)},
}
