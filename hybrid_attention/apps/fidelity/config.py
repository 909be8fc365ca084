"""What a fidelity sweep measures: :class:`FidelityConfig` (validated on construction) and its sweep points."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .problems import BAND_ENSEMBLES, ENSEMBLES
from .sweep import BUDGET_OPTION, CALIBRATIONS, MITIGATIONS, SAMPLER_KINDS, SweepPoint

#: the largest ``n`` of a sweep without a band (exact references enumerate ``2**n`` configurations)
MAX_N = 12

__all__ = ["FidelityConfig", "sweep_points", "AXES", "BUDGET", "ENSEMBLE_KEYS", "GRID_KEYS", "READOUTS"]

#: configuration keys that define the problem ensemble (and the ibm sampler's backend): a report can only be resumed
#: if these agree
ENSEMBLE_KEYS = (
    "ensemble",
    "checkpoint",
    "problems",
    "seed",
    "scale",
    "beta",
    "layer",
    "head",
    "calibration",
    "backend",
    "mitigation",
    "coupling",
    "band",
)
#: how exact-output DQA samplers (statevector) are measured: their exact output, or shots drawn from it
READOUTS = ("exact", "shots")
AXES = ("n", "shots", "tau", "steps")
#: the cost axis (work per chain of the samplers in ``BUDGET_OPTION``); swept only when given
BUDGET = "budget"
#: configuration keys a resumed report may extend (the recorded configuration keeps the union)
GRID_KEYS = ("samplers", *AXES, BUDGET)


@dataclass
class FidelityConfig:
    """What a fidelity sweep measures (see the module docstring).

    Attributes:
        samplers: sweep sampler names (keys of :data:`hybrid_attention.apps.fidelity.sweep.SAMPLER_KINDS`).
        n, shots, tau, steps: values of each axis.
        base: base value per axis (default: lower median of each list).
        problems: problems per ensemble; seed: seeds problems and samplers; scale, beta: random ensemble.
        ensemble: ``random``, ``sk``, ``layden``, ``coupling``
            (:func:`~hybrid_attention.apps.fidelity.problems.ensemble_problems`) or ``model``; checkpoint: directory of a trained model (``model`` ensemble);
        layer, head: which attention layer/head the model problems come from.
        calibration: DQA schedule set-up, ``none | leading | compensated | fitted``
            (:func:`hybrid_attention.apps.fidelity.sweep.make_schedule`).
        readout: ``exact`` (exact-output samplers such as ``statevector`` are compared by their exact output
            distribution: no shots axis) or ``shots`` (they are sampled with the ``shots`` values like the others).
        backend: the ``ibm`` sampler's backend, a fake backend name (default
            :data:`~hybrid_attention.apps.fidelity.sweep.IBM_BACKEND`); only with ``ibm`` among the samplers.
        mitigation: error suppression / mitigation of the noisy samplers (``aer-noisy``, ``ibm``), names of
            :data:`~hybrid_attention.apps.fidelity.sweep.MITIGATIONS` (``readout``, ``twirling``, ``dd``; see
            :func:`~hybrid_attention.apps.fidelity.sweep.mitigation_options`).
        budget: work per chain swept for the samplers of
            :data:`~hybrid_attention.apps.fidelity.sweep.BUDGET_OPTION` (Markov-chain moves for ``qemcmc``/``mh-*``,
            sweeps for ``gibbs``/``anneal``); empty (default): their default settings, no budget axis.
        coupling: rms J / rms h of the ``coupling`` ensemble.
        band: ``0`` (default): all-to-all problems, ``n <= 12``, compared by their whole distribution; ``W >= 1``: a
            device-scale sweep of chain problems with couplings in a band of width ``W``
            (:func:`~hybrid_attention.apps.fidelity.problems.banded_problems`; ensembles ``random`` and
            ``coupling``), compared by their marginals with the exact transfer-matrix marginals at any ``n``
            (:mod:`~hybrid_attention.apps.fidelity.band`); ``W < n`` for every ``n``, and ``n`` at most ``aer-mps``'s
            ``max_qubits`` when an ``aer-mps`` sampler is swept.
    """

    samplers: list[str]
    n: list[int] = field(default_factory=lambda: [4])
    shots: list[int] = field(default_factory=lambda: [1024])
    tau: list[float] = field(default_factory=lambda: [1.0])
    steps: list[int] = field(default_factory=lambda: [20])
    base: dict[str, Any] = field(default_factory=dict)
    problems: int = 8
    seed: int = 0
    scale: float = 1.0
    beta: float = 1.0
    ensemble: str = "random"
    checkpoint: str | None = None
    layer: int = 0
    head: int = 0
    calibration: str = "none"
    readout: str = "exact"
    backend: str | None = None
    mitigation: list[str] = field(default_factory=list)
    budget: list[int] = field(default_factory=list)
    coupling: float = 1.0
    band: int = 0

    def __post_init__(self) -> None:
        bad = [m for m in self.mitigation if m not in MITIGATIONS]
        if bad:
            raise ValueError(f"unknown mitigation(s) {bad}; choose from {MITIGATIONS}")
        if self.mitigation and not {"aer-noisy", "ibm"} & set(self.samplers):
            raise ValueError(f"--mitigation acts on the noisy samplers aer-noisy and ibm, got samplers {self.samplers}")
        self.mitigation = sorted(set(self.mitigation))
        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {self.calibration!r}")
        if not self.samplers:
            raise ValueError("no samplers to sweep")
        if self.readout not in READOUTS:
            raise ValueError(f"readout must be one of {READOUTS}, got {self.readout!r}")
        if self.backend is not None:
            if "ibm" not in self.samplers:
                raise ValueError(f"--backend applies to the ibm sampler (--samplers ...,ibm), got {self.samplers}")
            from hybrid_attention.backends.ibm.sampler import (  # only when a name is given
                fake_backend,
                is_fake_backend_name,
            )

            if not is_fake_backend_name(self.backend):
                raise ValueError(
                    f"the fidelity sweep runs offline: --backend must name a fake backend, got {self.backend!r}"
                )
            fake_backend(self.backend)  # ValueError listing close matches for an unknown name
        bad = [s for s in self.samplers if s not in SAMPLER_KINDS]
        if bad:
            raise ValueError(f"unknown sampler(s) {bad}; choose from {sorted(SAMPLER_KINDS)}")
        for ax, lo in (("n", 1), ("shots", 1), ("steps", 1)):
            vals = getattr(self, ax)
            if not vals or any(isinstance(v, bool) or int(v) != v or v < lo for v in vals):
                raise ValueError(f"{ax} must be a non-empty list of integers >= {lo}, got {vals}")
            setattr(self, ax, sorted({int(v) for v in vals}))
        if any(isinstance(v, bool) or int(v) != v or v < 0 for v in self.budget):
            raise ValueError(f"budget must be a list of integers >= 0, got {self.budget}")
        self.budget = sorted({int(v) for v in self.budget})
        if not self.tau or any(not (float(t) > 0) for t in self.tau):
            raise ValueError(f"tau must be a non-empty list of positive numbers, got {self.tau}")
        self.tau = sorted({float(t) for t in self.tau})
        self._check_band()
        if self.problems < 1:
            raise ValueError(f"problems must be >= 1, got {self.problems}")
        if self.ensemble not in ("model", *ENSEMBLES):
            raise ValueError(f"ensemble must be one of {('model', *ENSEMBLES)}, got {self.ensemble!r}")
        if not (self.coupling >= 0 and math.isfinite(self.coupling)):
            raise ValueError(f"coupling must be a finite number >= 0, got {self.coupling}")
        if self.ensemble == "model" and not self.checkpoint:
            raise ValueError("ensemble 'model' needs checkpoint= (a directory written by hybrid-attention train --out)")
        if not (self.scale > 0 and self.beta > 0):
            raise ValueError(f"scale and beta must be > 0, got {self.scale} and {self.beta}")
        axes = (*AXES, BUDGET) if self.budget else AXES
        base = {ax: _lower_median(getattr(self, ax)) for ax in axes}
        for k, v in self.base.items():
            if k not in axes:
                raise ValueError(f"base keys must be among {axes}, got {k!r}")
            if v not in getattr(self, k):
                raise ValueError(f"base {k} = {v} is not one of the swept values {getattr(self, k)}")
            base[k] = v
        self.base = base

    def _check_band(self) -> None:
        """The band and the sizes it allows (before any work; messages name the expected and the received value)."""
        if isinstance(self.band, bool) or not isinstance(self.band, int):
            raise TypeError(f"band must be an int (the coupling band width W), got {self.band!r}")
        if self.band < 0:
            raise ValueError(
                f"band must be >= 0 (0: all-to-all problems; W >= 1: couplings in a band), got {self.band}"
            )
        if self.band == 0:
            if max(self.n) > MAX_N:
                raise ValueError(
                    f"n above {MAX_N} is too large for exact references in a sweep, got {max(self.n)}; "
                    "a banded sweep (--band W) has exact marginals at any n"
                )
            return
        if min(self.n) <= self.band:
            raise ValueError(
                f"band = {self.band} must be below every n (a band of width >= n - 1 is a full J), got n = {self.n}"
            )
        if self.ensemble not in BAND_ENSEMBLES:
            raise ValueError(f"a banded sweep takes ensemble in {BAND_ENSEMBLES}, got {self.ensemble!r}")
        if self.calibration == "fitted":
            raise ValueError(
                "calibration 'fitted' needs exact DQA output at n (2**n amplitudes); a banded sweep takes none, "
                "leading or compensated"
            )
        mps = [s for s in self.samplers if SAMPLER_KINDS[s][0] == "aer-mps"]
        if mps:
            try:
                from hybrid_attention.backends.dqa.aer_mps import MAX_QUBITS
            except ImportError:  # no qiskit-aer: the sweep skips aer-mps with the install hint
                return
            if max(self.n) > MAX_QUBITS:
                raise ValueError(
                    f"n = {max(self.n)} is above aer-mps's max_qubits = {MAX_QUBITS} ({', '.join(mps)} swept); "
                    f"use n <= {MAX_QUBITS} or leave {', '.join(mps)} out"
                )


def _lower_median(vals: list) -> Any:
    return sorted(vals)[(len(vals) - 1) // 2]


def sweep_points(cfg: FidelityConfig) -> list[SweepPoint]:
    """The one-axis-at-a-time points of ``cfg`` (base point plus each axis's other values), per sampler.

    Axes that do not apply to a sampler are ``None``: ``tau``/``steps`` outside DQA, ``shots`` for exact-output
    samplers (``statevector``) unless ``cfg.readout`` is ``shots``, ``budget`` outside
    :data:`~hybrid_attention.apps.fidelity.sweep.BUDGET_OPTION` or when no budget is swept.
    """
    pts: list[SweepPoint] = []
    for name in cfg.samplers:
        kind = SAMPLER_KINDS[name][1]
        axes = {
            "n": cfg.n,
            "shots": cfg.shots if kind != "dqa-exact" or cfg.readout == "shots" else [None],
            "tau": cfg.tau if kind.startswith("dqa") else [None],
            "steps": cfg.steps if kind.startswith("dqa") else [None],
            BUDGET: cfg.budget if cfg.budget and name in BUDGET_OPTION else [None],
        }
        base = {ax: (cfg.base[ax] if axes[ax] != [None] else None) for ax in axes}
        for ax in axes:
            for v in axes[ax]:
                p = SweepPoint(name, **{**base, ax: v})
                if p not in pts:
                    pts.append(p)
    return pts
