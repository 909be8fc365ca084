"""A resumable experiment plan: studies of training runs, a per-mode learning-rate sweep, and parallel workers.

A :class:`Study` is a grid (modes x block sizes x seeds) of :func:`hybrid_attention.apps.train.train` runs sharing one
base :class:`~hybrid_attention.apps.train.TrainConfig`. With a :class:`LRSweep`, every mode first trains at each
candidate learning rate on the sweep's block size (or on every block size of the study) and seeds (seeds kept apart
from the main seeds, so that choosing the rate does not bias the reported runs); the main runs of a mode then use the
rate with the lowest mean final validation loss (a diverged sweep run counts as infinitely bad). Every mode gets the
same sweep budget; an extending sweep adds rates beyond an edge of its grid while the best rate sits on that edge.

Directories (every run is an ordinary ``train`` run directory):

* ``ROOT/<study>/sweep/<mode>_T<T>_lr<lr>_s<seed>``;
* ``ROOT/<study>/runs/<mode>_T<T>_lr<lr>_s<seed>``.

:func:`run_plan` is resumable: finished, early-stopped and diverged runs are skipped, interrupted runs resume from
their checkpoint, and main runs wait until their mode's sweep is complete. ``workers`` processes (each with one
torch thread) train disjoint run directories; each run directory is also locked by ``train`` itself, so two runners
on one ROOT never train the same run. Ctrl-C or SIGTERM stops the workers as well (their runs resume from their last
checkpoint on the next call). Nothing is committed or deleted (a directory holding only the ``config.json``
of a run killed before its first checkpoint is restarted).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hybrid_attention.apps.train import TrainConfig
from hybrid_attention.attention import ALL_MODES

from .costs import FIELD_MODE, mode_label

__all__ = [
    "LRSweep",
    "Study",
    "RunSpec",
    "plan_runs",
    "chosen_lr",
    "sweep_grid",
    "sweep_losses",
    "lr_at_edge",
    "run_plan",
    "run_state",
    "estimate_seconds",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LRSweep:
    """Candidate learning rates, tried per mode with ``seeds`` (full step budget).

    Attributes:
        lrs: the starting grid, ascending (at least 3 rates when ``extend``).
        block_size: the one block size swept, whose rate every block size then uses; ``None``: a sweep at every
            block size of the study, each block size using its own rate.
        seeds: sweep seeds, kept apart from the reported seeds.
        extend: when the best rate is at an edge of the grid, add the next rate beyond that edge (continuing the
            grid's spacing: 1e-3, 3e-3, 1e-2 extends to 3e-4 below and 3e-2 above) and sweep it too, until the best
            is interior or ``max_extend`` rates were added on that side; a rate chosen at an edge is then reported
            as such (:func:`lr_at_edge`).
        max_extend: rates that may be added per side.
        extend_below_divergence: with ``extend``, also add the next rate below the grid while its lowest rate has a
            diverged seed (a rate at which training diverges does not bound the optimum from below), within the
            same ``max_extend``.
    """

    lrs: tuple[float, ...]
    block_size: int | None
    seeds: tuple[int, ...] = (100, 101)
    extend: bool = False
    max_extend: int = 2
    extend_below_divergence: bool = False

    def __post_init__(self) -> None:
        if list(self.lrs) != sorted(set(self.lrs)) or not self.lrs or min(self.lrs) <= 0:
            raise ValueError(f"LRSweep.lrs must be distinct positive rates in ascending order, got {self.lrs!r}")
        if self.extend and len(self.lrs) < 3:
            raise ValueError(f"LRSweep(extend=True) needs at least 3 starting rates, got {self.lrs!r}")

    def block_sizes(self, study_block_sizes: tuple[int, ...]) -> tuple[int, ...]:
        """The block sizes swept for a study with ``study_block_sizes``."""
        return study_block_sizes if self.block_size is None else (self.block_size,)


@dataclass(frozen=True)
class Study:
    """One grid of runs.

    Attributes:
        name: directory name under the plan's root.
        base: :class:`TrainConfig` fields shared by every run (task, max_steps, patience, variant, ``ffn``, ...).
        modes, block_sizes, seeds: the grid.
        sweep: the learning-rate sweep (``None``: ``base["lr"]`` or the :class:`TrainConfig` default for all modes).
        label: what the study is for (shown in reports).
        mode_base: per mode, fields laid over ``base`` for that mode's runs only (e.g. the engine of ``hj``, which
            ``softmax`` cannot take): ``{"hj": {"sampler": "meanfield"}}``. A mode is an attention mode, or an arm
            named freely whose fields say its ``attention``: ``{"softmax-2L": {"attention": "softmax", "n_layer": 2}}``
            (run directories and reports use the mode's name).
        stage: a rule giving the study as it stands from its finished runs, ``stage(study, root) -> Study`` (e.g. a
            first stage with fewer sweep seeds, or a stopping rule that drops the main seeds); :func:`plan_runs`
            and reports read :meth:`resolve`'s study. ``None``: the study is fixed.
    """

    name: str
    base: dict[str, Any]
    modes: tuple[str, ...]
    block_sizes: tuple[int, ...]
    seeds: tuple[int, ...]
    sweep: LRSweep | None = None
    label: str = ""
    mode_base: dict[str, dict[str, Any]] = field(default_factory=dict)
    stage: Callable[[Study, Path], Study] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.mode_base) - set(self.modes))
        if unknown:
            raise ValueError(f"Study {self.name!r}: mode_base names modes {unknown} that are not in modes {self.modes}")

    def resolve(self, root: str | Path) -> Study:
        """The study as it stands given the finished runs under ``root``: ``self`` without a ``stage`` rule, else the
        rule's study (without a rule of its own; its name and modes must be this study's)."""
        if self.stage is None:
            return self
        st = dataclasses.replace(self.stage(self, Path(root)), stage=None)
        if (st.name, st.modes) != (self.name, self.modes):
            raise ValueError(f"Study {self.name!r}: its stage rule returned study {st.name!r} with modes {st.modes}")
        return st

    def config(self, mode: str, T: int, seed: int, lr: float, out: Path) -> TrainConfig:
        """The validated :class:`TrainConfig` of one run (one torch thread, no progress bar)."""
        arm = self.mode_base.get(mode, {})
        base = {**self.base, **arm}
        cfg = TrainConfig(
            **{**base, "attention": arm.get("attention", mode), "block_size": T, "seed": seed, "lr": lr},
            out=str(out),
            threads=1,
            progress=False,
        )
        cfg.validate()
        return cfg


@dataclass(frozen=True)
class RunSpec:
    """One run of a plan: its study, kind (``sweep`` or ``main``) and configuration."""

    study: str
    kind: str
    config: TrainConfig = field(compare=False)
    mode: str = ""  # the study's mode (an attention mode or a named arm); "" = the config's attention

    @property
    def out(self) -> Path:
        return Path(self.config.out)


def _name(mode: str, T: int, lr: float, seed: int) -> str:
    return f"{mode}_T{T}_lr{lr:g}_s{seed}"


def run_state(d: Path) -> str:
    """``finished`` (also early-stopped), ``diverged``, ``started`` (a checkpoint to resume) or ``new``."""
    p = d / "metrics.json"
    if p.is_file():
        try:
            m = json.loads(p.read_text())
        except ValueError:
            m = {}
        if m.get("finished"):
            return "finished"
        if m.get("diverged"):
            return "diverged"
    return "started" if (d / "checkpoint.pt").is_file() else "new"


def _final_loss(d: Path) -> float:
    if run_state(d) != "finished":
        return math.inf
    return float(json.loads((d / "metrics.json").read_text())["val_loss"])


def _next_rate(a: float, b: float, c: float) -> float:
    """The rate beyond ``c`` continuing the spacing of ``a, b, c`` (``b / a`` repeats: 1e-3, 3e-3, 1e-2 -> 3e-2)."""
    return float(f"{c * b / a:.3g}")


def sweep_losses(study: Study, mode: str, T: int, lr: float, root: str | Path) -> list[float | None]:
    """The final validation loss of each sweep seed's run of ``mode`` at block size ``T`` and rate ``lr``, in the
    order of ``study.sweep.seeds``: ``inf`` for a diverged run, ``None`` for one not finished yet."""
    if study.sweep is None:
        raise ValueError(f"study {study.name!r} has no learning-rate sweep")
    out: list[float | None] = []
    for seed in study.sweep.seeds:
        d = Path(root) / study.name / "sweep" / _name(mode, T, lr, seed)
        out.append(_final_loss(d) if run_state(d) in ("finished", "diverged") else None)
    return out


def _mean_losses(study: Study, mode: str, T: int, lrs: Iterable[float], root: Path) -> dict[float, float] | None:
    """Mean final validation loss over the sweep seeds per rate; ``None`` while any of those runs is unfinished."""
    scores = {}
    for lr in lrs:
        losses = sweep_losses(study, mode, T, lr, root)
        if any(x is None for x in losses):
            return None
        scores[lr] = sum(losses) / len(losses)
    return scores


def sweep_grid(study: Study, mode: str, T: int, root: str | Path) -> tuple[tuple[float, ...], float | None]:
    """The rates of a mode's sweep at block size ``T`` so far, and the chosen rate (``None`` until it is known).

    Without ``extend`` the grid is fixed. With it, the grid grows by one rate beyond an edge whenever the finished
    sweep's best rate sits on that edge (at most ``max_extend`` per side), and with ``extend_below_divergence`` also
    below while the lowest rate has a diverged seed: the rates returned are those to run now. Ties go to the smaller
    rate; a diverged run counts as infinitely bad.
    """
    sw, root = study.sweep, Path(root)
    grid = list(sw.lrs)
    while True:
        scores = _mean_losses(study, mode, T, grid, root)
        if scores is None:
            return tuple(grid), None
        best = min(grid, key=lambda lr: (scores[lr], lr))
        added_low = sum(lr < sw.lrs[0] for lr in grid)
        added_high = sum(lr > sw.lrs[-1] for lr in grid)
        low_diverged = sw.extend_below_divergence and math.isinf(scores[grid[0]])
        if sw.extend and (best == grid[0] or low_diverged) and added_low < sw.max_extend:
            grid.insert(0, _next_rate(grid[2], grid[1], grid[0]))
        elif sw.extend and best == grid[-1] and added_high < sw.max_extend:
            grid.append(_next_rate(grid[-3], grid[-2], grid[-1]))
        else:
            return tuple(grid), best


def chosen_lr(study: Study, mode: str, root: Path, T: int | None = None) -> float | None:
    """The mode's learning rate at block size ``T`` (any ``T`` when the sweep has one block size): the sweep's best
    (lowest mean final validation loss over the sweep seeds; ties: the smaller rate; see :func:`sweep_grid`),
    ``None`` while any sweep run it needs is unfinished; without a sweep the base rate."""
    if study.sweep is None:
        return float(study.base.get("lr", TrainConfig().lr))
    if study.sweep.block_size is not None:
        T = study.sweep.block_size
    elif T is None:
        raise ValueError(f"study {study.name!r} sweeps every block size: chosen_lr needs T")
    return sweep_grid(study, mode, T, root)[1]


def lr_at_edge(study: Study, mode: str, T: int, root: str | Path) -> bool:
    """Whether the chosen rate lies on an edge of the swept grid (the optimum may lie beyond it)."""
    grid, best = sweep_grid(study, mode, T, root) if study.sweep else ((), None)
    return best is not None and best in (grid[0], grid[-1])


def plan_runs(studies: Iterable[Study], root: str | Path) -> tuple[list[RunSpec], int]:
    """Every run of ``studies`` that can be scheduled now (sweep runs; main runs whose mode's rate is known), in
    order: sweeps first, then seed-major main runs (an interrupted plan has whole grids for the first seeds). Returns
    ``(runs, waiting)``, ``waiting`` = main runs whose rate awaits the sweep. Every configuration is validated."""
    root = Path(root)
    sweeps, mains, waiting = [], [], 0
    for st in (s.resolve(root) for s in studies):
        lrs = {}
        if st.sweep is not None:
            grids = {}
            for T in st.sweep.block_sizes(st.block_sizes):
                for mode in st.modes:
                    grids[mode, T], lrs[mode, T] = sweep_grid(st, mode, T, root)
            for seed in st.sweep.seeds:
                for (mode, T), grid in grids.items():
                    for lr in grid:
                        out = root / st.name / "sweep" / _name(mode, T, lr, seed)
                        sweeps.append(RunSpec(st.name, "sweep", st.config(mode, T, seed, lr, out), mode))
        for seed in st.seeds:
            for T in st.block_sizes:
                for mode in st.modes:
                    if st.sweep is None:
                        lr = chosen_lr(st, mode, root)
                    else:
                        lr = lrs[mode, st.sweep.block_size or T]
                    if lr is None:
                        waiting += 1
                        continue
                    out = root / st.name / "runs" / _name(mode, T, lr, seed)
                    mains.append(RunSpec(st.name, "main", st.config(mode, T, seed, lr, out), mode))
    return sweeps + mains, waiting


def estimate_seconds(spec: RunSpec, ms_per_step: dict[tuple[str, int, bool], float]) -> float | None:
    """Training seconds of a run at the full step budget from a cost table ``{(mode, T, ffn): ms per step}`` (for
    the run's task; modes as :func:`~hybrid_attention.apps.claims.costs.mode_label` names them, J-only with a field
    falling back to ``hj``); ``None`` when the table has no entry."""
    c = spec.config
    mode = spec.mode if spec.mode and spec.mode not in ALL_MODES else mode_label(c)  # a named arm, else its attention
    ms = ms_per_step.get((mode, c.block_size, c.ffn))
    if ms is None and mode == FIELD_MODE:  # not measured yet: the same exact enumeration as hj
        ms = ms_per_step.get(("hj", c.block_size, c.ffn))
    return None if ms is None else ms * c.max_steps / 1000


def _train_one(cfg: TrainConfig) -> tuple[str, str]:
    """Worker: train (or resume) one run; ``(out, outcome)``. Runs in a separate process with one torch thread."""
    import torch

    from hybrid_attention.apps.run_files import LOCK_NAME, DirectoryLocked, lock_directory, remove_stale_temporaries
    from hybrid_attention.apps.train import TrainingDiverged, train

    torch.set_num_threads(1)
    d = Path(cfg.out)
    if (d / "checkpoint.pt").is_file():
        cfg = dataclasses.replace(cfg, resume=True)
    elif d.is_dir() and {p.name for p in d.iterdir()} <= {"config.json", LOCK_NAME}:
        try:  # killed before its first checkpoint: nothing computed, start afresh
            with lock_directory(d):
                remove_stale_temporaries(d)
                (d / "config.json").unlink(missing_ok=True)
        except DirectoryLocked:
            return cfg.out, "locked"
    try:
        m = train(cfg)
    except TrainingDiverged as exc:
        return cfg.out, f"diverged ({exc.reason})"
    except DirectoryLocked:
        return cfg.out, "locked (another runner is training it)"
    except Exception as exc:  # one broken run must not stop the plan; it is reported and retried next call
        return cfg.out, f"failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
    return cfg.out, f"finished at step {m['step']}, val_loss {m['val_loss']:.4f}"


def run_plan(
    studies: list[Study],
    root: str | Path,
    *,
    workers: int = 2,
    hours: float | None = None,
    progress: bool = True,
) -> dict[str, int]:
    """Run every pending run of ``studies`` under ``root`` with ``workers`` processes; resumable (module docstring).

    Args:
        hours: stop starting new runs after this many hours (runs in progress finish; the rest waits for the next
            call). ``None``: no limit.

    Returns:
        ``{"done": runs finished in this call, "pending": runs left (including main runs awaiting a sweep),
        "failed": {run directory: error}}`` (a run that raised is reported, skipped in this call, retried in the next).
    """
    import multiprocessing
    import signal

    from tqdm.auto import tqdm

    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    root = Path(root)
    t0 = time.monotonic()
    done, running = 0, {}
    skip: set[str] = set()
    failed: dict[str, str] = {}
    bar = tqdm(desc="claims plan", unit="run", disable=not progress, dynamic_ncols=True)

    def _stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, _stop)  # kill PID stops the workers too (their runs resume later)
    pool = multiprocessing.get_context("spawn").Pool(workers, maxtasksperchild=1)
    try:
        while True:
            runs, waiting = plan_runs(studies, root)
            pending = [
                r
                for r in runs
                if run_state(r.out) not in ("finished", "diverged") and str(r.out) not in skip | set(running)
            ]
            bar.total = done + len(pending) + len(running) + waiting
            bar.refresh()
            out_of_time = hours is not None and time.monotonic() - t0 > hours * 3600
            while pending and len(running) < workers and not out_of_time:
                r = pending.pop(0)
                running[str(r.out)] = pool.apply_async(_train_one, (r.config,))
            if not running:
                break
            while not any(f.ready() for f in running.values()):
                time.sleep(0.5)
            for key in [k for k, f in running.items() if f.ready()]:
                out, outcome = running.pop(key).get()
                if outcome.startswith(("locked", "failed")):
                    skip.add(out)
                    if outcome.startswith("failed"):
                        failed[out] = outcome
                        logger.warning("%s: %s", out, outcome)
                else:
                    done += 1
                    bar.update(1)
                logger.info("%s: %s", out, outcome)
                bar.set_postfix_str(f"{Path(out).name}: {outcome}")
        pool.close()
    except BaseException:
        pool.terminate()  # runs in progress stop; they resume from their last checkpoint next time
        raise
    finally:
        pool.join()
        signal.signal(signal.SIGTERM, old)
        bar.close()
    runs, waiting = plan_runs(studies, root)
    left = sum(run_state(r.out) not in ("finished", "diverged") for r in runs) + waiting
    return {"done": done, "pending": left, "failed": failed}
