"""``hybrid-attention fidelity``: how faithfully each sampler reproduces Boltzmann attention.

Sweeps samplers over problem ensembles against exact enumeration, one axis at a time around a base point:
``shots``, Trotter ``steps``, anneal time ``tau`` (DQA samplers only) and problem size ``n``. Writes
``report.json`` (every point's metrics, the configuration and the exact command) and PNG plots to ``--out``.

* Samplers (``--samplers``): ``exact`` (exact samples: the shot-noise floor), ``statevector`` (exact DQA output),
  ``aer``, ``aer-noisy`` (Aer with the noise model of a fake IBM backend), ``pennylane``, ``gibbs``, ``anneal``,
  ``meanfield``; default: every one whose dependencies are importable.
* Ensembles (``--ensemble``): ``random`` (``h, J ~ N(0, scale^2)``) or ``model`` (the fields and couplings of a
  trained model's attention layer on its task's validation inputs; ``--checkpoint DIR`` from
  ``hybrid-attention train --out DIR``).
* Each axis option takes a comma-separated list; the base value of an axis (held fixed while another axis is
  swept) is the lower median of its list unless ``--base`` says otherwise.
* Resumable: rerunning with the same ``--out`` skips points already in ``report.json``; ``--out`` is never
  overwritten silently: a directory holding something else, or a report with other settings (a different
  ensemble, :data:`ENSEMBLE_KEYS`, or another base point) is an error naming the differing settings, unless
  ``--overwrite`` is given. Other samplers or axis values extend the report (its configuration records the union).
* ``--out`` is locked while the sweep runs (:func:`hybrid_attention.run_files.lock_directory`): a second sweep into
  it is refused.

Python API: :func:`run_sweep` (:class:`FidelityConfig` -> report dict), :func:`sweep_points`, :func:`load_report`;
the measurement itself is :func:`hybrid_attention.fidelity_sweep.measure_point`.

Example:
    hybrid-attention fidelity --samplers exact,statevector,aer --n 3,4,5 --shots 256,1024,4096 \\
        --tau 0.5,1,2 --steps 10,40 --problems 8 --out fidelity-report
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .run_files import LOCK_NAME, lock_directory, write_json

logger = logging.getLogger(__name__)

REPORT = "report.json"
REPORT_VERSION = 1
#: configuration keys that define the problem ensemble: a report can only be resumed if these agree
ENSEMBLE_KEYS = ("ensemble", "checkpoint", "problems", "seed", "scale", "beta", "layer", "head", "calibration")
AXES = ("n", "shots", "tau", "steps")
#: configuration keys a resumed report may extend (the recorded configuration keeps the union)
GRID_KEYS = ("samplers", *AXES)


@dataclass
class FidelityConfig:
    """What a fidelity sweep measures (see the module docstring).

    Attributes:
        samplers: sweep sampler names (keys of :data:`hybrid_attention.fidelity_sweep.SAMPLER_KINDS`).
        n, shots, tau, steps: values of each axis.
        base: base value per axis (default: lower median of each list).
        problems: problems per ensemble; seed: seeds problems and samplers; scale, beta: random ensemble.
        ensemble: ``random`` or ``model``; checkpoint: directory of a trained model (``model`` ensemble);
        layer, head: which attention layer/head the model problems come from.
        calibration: DQA schedule set-up, ``none | leading | compensated | fitted``
            (:func:`hybrid_attention.fidelity_sweep.make_schedule`).
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

    def __post_init__(self) -> None:
        from .fidelity_sweep import CALIBRATIONS, SAMPLER_KINDS

        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"calibration must be one of {CALIBRATIONS}, got {self.calibration!r}")
        if not self.samplers:
            raise ValueError("no samplers to sweep")
        bad = [s for s in self.samplers if s not in SAMPLER_KINDS]
        if bad:
            raise ValueError(f"unknown sampler(s) {bad}; choose from {sorted(SAMPLER_KINDS)}")
        for ax, lo in (("n", 1), ("shots", 1), ("steps", 1)):
            vals = getattr(self, ax)
            if not vals or any(isinstance(v, bool) or int(v) != v or v < lo for v in vals):
                raise ValueError(f"{ax} must be a non-empty list of integers >= {lo}, got {vals}")
            setattr(self, ax, sorted({int(v) for v in vals}))
        if not self.tau or any(not (float(t) > 0) for t in self.tau):
            raise ValueError(f"tau must be a non-empty list of positive numbers, got {self.tau}")
        self.tau = sorted({float(t) for t in self.tau})
        if max(self.n) > 12:
            raise ValueError(f"n above 12 is too large for exact references in a sweep, got {max(self.n)}")
        if self.problems < 1:
            raise ValueError(f"problems must be >= 1, got {self.problems}")
        if self.ensemble not in ("random", "model"):
            raise ValueError(f"ensemble must be 'random' or 'model', got {self.ensemble!r}")
        if self.ensemble == "model" and not self.checkpoint:
            raise ValueError("ensemble 'model' needs checkpoint= (a directory written by hybrid-attention train --out)")
        if not (self.scale > 0 and self.beta > 0):
            raise ValueError(f"scale and beta must be > 0, got {self.scale} and {self.beta}")
        base = {ax: _lower_median(getattr(self, ax)) for ax in AXES}
        for k, v in self.base.items():
            if k not in AXES:
                raise ValueError(f"base keys must be among {AXES}, got {k!r}")
            if v not in getattr(self, k):
                raise ValueError(f"base {k} = {v} is not one of the swept values {getattr(self, k)}")
            base[k] = v
        self.base = base


def _lower_median(vals: list) -> Any:
    return sorted(vals)[(len(vals) - 1) // 2]


def sweep_points(cfg: FidelityConfig) -> list:
    """The one-axis-at-a-time points of ``cfg`` (base point plus each axis's other values), per sampler.

    Axes that do not apply to a sampler are ``None``: ``tau``/``steps`` outside DQA, ``shots`` for exact-output
    samplers (``statevector``).
    """
    from .fidelity_sweep import SAMPLER_KINDS, SweepPoint

    pts: list = []
    for name in cfg.samplers:
        kind = SAMPLER_KINDS[name][1]
        axes = {"n": cfg.n, "shots": cfg.shots if kind != "dqa-exact" else [None],
                "tau": cfg.tau if kind.startswith("dqa") else [None], "steps": cfg.steps if kind.startswith("dqa") else [None]}
        base = {ax: (cfg.base[ax] if axes[ax] != [None] else None) for ax in AXES}
        for ax in AXES:
            for v in axes[ax]:
                p = SweepPoint(name, **{**base, ax: v})
                if p not in pts:
                    pts.append(p)
    return pts


# ---------------------------------------------------------------------- report file
def load_report(out: str | Path) -> dict[str, Any]:
    """Read ``out/report.json``."""
    with open(Path(out) / REPORT) as f:
        return json.load(f)


def _save(out: Path, report: dict[str, Any]) -> None:
    write_json(out / REPORT, report)


def _open_report(out: Path, cfg: FidelityConfig, overwrite: bool, command: str | None) -> dict[str, Any]:
    """The report to continue in ``out`` (locked by the caller), or a fresh one; ``ValueError`` naming the settings
    that differ from a report already there."""
    fresh = {"version": REPORT_VERSION, "config": dataclasses.asdict(cfg), "commands": [command] if command else [], "points": {}}
    (out / (REPORT + ".tmp")).unlink(missing_ok=True)  # left by a kill in an earlier version
    if overwrite:
        for old in [out / REPORT, *out.glob("fidelity_vs_*.png")]:  # only files this command writes
            old.unlink(missing_ok=True)
        return fresh
    if not (out / REPORT).exists():
        if any(p.name != LOCK_NAME for p in out.iterdir()):
            raise ValueError(f"--out {out} exists, is not empty and holds no {REPORT}; choose another directory or pass --overwrite")
        return fresh
    try:
        old = load_report(out)
    except ValueError as exc:
        raise ValueError(f"--out {out}: {REPORT} is damaged ({exc}); choose another directory or pass --overwrite") from exc
    if old.get("version") != REPORT_VERSION:
        raise ValueError(f"--out {out} holds a report of format version {old.get('version')}, this version writes "
                         f"{REPORT_VERSION}; choose another directory or pass --overwrite")
    old_cfg = {**dataclasses.asdict(cfg), **old.get("config", {})}  # keys missing from an old report: as now
    diff = {k: (old_cfg[k], getattr(cfg, k)) for k in (*ENSEMBLE_KEYS, "base") if old_cfg[k] != getattr(cfg, k)}
    if diff:
        what = " and ".join(w for w, keys in (("a different ensemble", ENSEMBLE_KEYS), ("another base point", ("base",)))
                            if any(k in diff for k in keys))
        hint = " (pass --base " + ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in old_cfg["base"].items()) \
            + " to extend it)" if list(diff) == ["base"] else ""
        raise ValueError(f"--out {out} holds a report of {what}: "
                         + "; ".join(f"{k}: report {a!r}, now {b!r}" for k, (a, b) in diff.items())
                         + f"{hint}; rerun with the report's settings, choose another directory or pass --overwrite")
    union = {k: _union(old_cfg[k], getattr(cfg, k), ordered=k == "samplers") for k in GRID_KEYS}
    added = {k: [v for v in getattr(cfg, k) if v not in old_cfg[k]] for k in GRID_KEYS}
    if any(added.values()):
        logger.info("extending the report in %s with %s", out, {k: v for k, v in added.items() if v})
    old["config"] = {**dataclasses.asdict(cfg), **union}
    if command and command not in old.setdefault("commands", []):
        old["commands"].append(command)
    return old


def _union(old: list, new: list, *, ordered: bool) -> list:
    merged = list(dict.fromkeys([*old, *new]))
    return merged if ordered else sorted(merged)


# ---------------------------------------------------------------------- the sweep
def _ensemble(cfg: FidelityConfig, n: int, cache: dict) -> Any:
    from .fidelity_sweep import problems_from_model, random_problems

    if n not in cache:
        if cfg.ensemble == "random":
            cache[n] = random_problems(n, cfg.problems, seed=cfg.seed, scale=cfg.scale, beta=cfg.beta)
        else:
            from .fidelity_model import model_inputs

            model, idx = model_inputs(cfg.checkpoint, cfg.problems, seed=cfg.seed)
            cache[n] = problems_from_model(model, idx, n, layer=cfg.layer, head=cfg.head)
    return cache[n]


def run_sweep(cfg: FidelityConfig, out: str | Path, *, overwrite: bool = False, plots: bool = True,
              command: str | None = None, progress: bool = True) -> dict[str, Any]:
    """Measure every point of :func:`sweep_points` not already in ``out/report.json``; save after each point.

    Args:
        cfg: the sweep; out: report directory; overwrite: start a fresh report even if ``out`` holds one;
        plots: write PNGs; command: the command line recorded in the report; progress: tqdm bar.

    Returns:
        The report dict (also in ``out/report.json``).

    Raises:
        ValueError: ``out`` holds something else, or a report with other settings (see :func:`_open_report`).
        hybrid_attention.run_files.DirectoryLocked: another process is writing to ``out``.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a directory")
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        with lock_directory(out):
            return _sweep(cfg, out, _open_report(out, cfg, overwrite, command), plots=plots, progress=progress)
    finally:
        if created:  # refused before writing anything: leave no directory behind
            with contextlib.suppress(OSError):
                out.rmdir()


def _sweep(cfg: FidelityConfig, out: Path, report: dict[str, Any], *, plots: bool, progress: bool) -> dict[str, Any]:
    from tqdm.auto import tqdm

    from .fidelity_sweep import UnreachableTemperature, measure_point

    todo = [p for p in sweep_points(cfg) if p.key not in report["points"]]
    logger.info("fidelity: %d points to measure, %d already in %s", len(todo), len(report["points"]), out)
    cache: dict = {}
    skipped: dict[str, str] = report.setdefault("skipped", {})
    for pt in tqdm(todo, desc="fidelity", disable=not progress, unit="pt"):
        try:
            res = measure_point(pt, _ensemble(cfg, pt.n, cache), seed=cfg.seed, calibration=cfg.calibration)
        except (ImportError, UnreachableTemperature) as exc:
            logger.warning("skipping %s: %s", pt.key, exc)
            skipped[pt.key] = str(exc)
            continue
        skipped.pop(pt.key, None)
        report["points"][pt.key] = res
        _save(out, report)
    _save(out, report)
    if plots:
        from .fidelity_plots import write_plots

        report["plots"] = write_plots(report, out)
        _save(out, report)
    return report


# ---------------------------------------------------------------------- CLI
def _ints(s: str) -> list[int]:
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None


def _floats(s: str) -> list[float]:
    try:
        return [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {s!r}") from None


def _base(s: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in filter(None, s.split(",")):
        k, _, v = item.partition("=")
        if k not in AXES or not v:
            raise argparse.ArgumentTypeError(f"--base takes axis=value items with axis in {AXES}, got {item!r}")
        out[k] = float(v) if k == "tau" else int(v)
    return out


def command_line(cfg: FidelityConfig, out: str | Path) -> str:
    """The ``hybrid-attention fidelity`` command that reproduces ``cfg`` (recorded in the report)."""
    j = lambda xs: ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in xs)  # noqa: E731
    parts = ["hybrid-attention fidelity", f"--samplers {','.join(cfg.samplers)}", f"--n {j(cfg.n)}",
             f"--shots {j(cfg.shots)}", f"--tau {j(cfg.tau)}", f"--steps {j(cfg.steps)}",
             "--base " + ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in cfg.base.items()),
             f"--problems {cfg.problems}", f"--calibration {cfg.calibration}", f"--seed {cfg.seed}", f"--scale {cfg.scale:g}", f"--beta {cfg.beta:g}"]
    if cfg.ensemble == "model":
        parts += [f"--ensemble model --checkpoint {shlex.quote(str(cfg.checkpoint))}", f"--layer {cfg.layer}", f"--head {cfg.head}"]
    return " ".join(parts + [f"--out {shlex.quote(str(out))}"])


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--samplers", default=None, help="comma-separated samplers (default: every available one of "
                   "exact,statevector,aer,aer-noisy,pennylane,gibbs,anneal,meanfield)")
    p.add_argument("--n", type=_ints, default=[3, 4, 5], help="problem sizes (default: 3,4,5)")
    p.add_argument("--shots", type=_ints, default=[256, 1024, 4096], help="shots / reads (default: 256,1024,4096)")
    p.add_argument("--tau", type=_floats, default=[0.5, 1.0, 2.0], help="DQA anneal times (default: 0.5,1,2)")
    p.add_argument("--steps", type=_ints, default=[10, 40], help="Trotter steps (default: 10,40)")
    p.add_argument("--base", type=_base, default={}, help="base point, e.g. n=4,shots=1024,tau=1,steps=40 "
                   "(default: the lower median of each list)")
    p.add_argument("--problems", type=int, default=8, help="problems in the ensemble")
    p.add_argument("--ensemble", choices=("random", "model"), default="random")
    p.add_argument("--checkpoint", default=None, help="trained model directory (hybrid-attention train --out) for --ensemble model")
    p.add_argument("--layer", type=int, default=0)
    p.add_argument("--head", type=int, default=0)
    p.add_argument("--scale", type=float, default=1.0, help="std of random h and J")
    p.add_argument("--beta", type=float, default=1.0, help="target inverse temperature")
    p.add_argument("--calibration", choices=("none", "leading", "compensated", "fitted"), default="none",
                   help="DQA schedules: none = the SPEC program (Gamma = lambda = 1); leading = energy scale set so the "
                   "leading-order output temperature equals the problems' beta; compensated = also fields doubled so "
                   "beta_J = beta_h; fitted = compensated, then the energy scale bisected on the fitted temperature "
                   "of an independent random ensemble")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="report directory (resumed if it holds a report with the same ensemble and base point)")
    p.add_argument("--overwrite", action="store_true", help="start a fresh report even if --out holds one")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--no-progress", action="store_true")


def _default_samplers() -> list[str]:
    from .backends import available_samplers
    from .fidelity_sweep import SAMPLER_KINDS

    avail = available_samplers()
    return [s for s, (reg, _) in SAMPLER_KINDS.items() if avail.get(reg)]


def run(args: argparse.Namespace) -> int:
    samplers = [s.strip() for s in args.samplers.split(",") if s.strip()] if args.samplers else _default_samplers()
    cfg = FidelityConfig(samplers=samplers, n=args.n, shots=args.shots, tau=args.tau, steps=args.steps, base=args.base,
                         problems=args.problems, seed=args.seed, scale=args.scale, beta=args.beta,
                         ensemble=args.ensemble, checkpoint=args.checkpoint, layer=args.layer, head=args.head,
                         calibration=args.calibration)
    command = command_line(cfg, args.out)
    report = run_sweep(cfg, args.out, overwrite=args.overwrite, plots=not args.no_plots, command=command,
                       progress=not args.no_progress)
    from .fidelity_plots import summary_table

    print(summary_table(report))
    for k, why in report.get("skipped", {}).items():
        print(f"skipped {k}: {why}")
    print(f"\nreport: {Path(args.out) / REPORT}")
    return 0
