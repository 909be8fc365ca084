"""What a training run will do and how long it will take, said before its first step.

:func:`step_work` counts the sampler work of one optimiser step from the run's :class:`~hybrid_attention.Sampling`
value: every (row, layer, head, query) is one Ising problem, and each problem costs, per sampler kind,

* quantum-enhanced MCMC (``qemcmc``): ``chains x moves`` proposal circuits (one circuit execution, one shot, per
  chain per move);
* classical Markov chains (``gibbs``, ``anneal``): ``chains x sweeps`` chain sweeps;
* DQA circuits read out as shots: ``shots`` circuit shots; read out exactly (``statevector``): one simulated circuit;
* mean field: one fixed-point solve; anything else: its reads.

:func:`probe_seconds` times the real work on a short probe (a warm-up pass, then full-batch forward and backward
passes, and an exact evaluation pass when evaluation is exact), without touching the run's state (its own batch
generator, a copy of any persistent chains, the global random state forked), and :func:`projection` turns the
timings into the line ``train`` prints first, for every run (exact marginals included).
:func:`check_sampler_calls` has the sampler validate every call a step and an evaluation will make (its memory
checks included) before any data is loaded.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import torch

from hybrid_attention.sampling import Sampling

from ..timing import duration

__all__ = [
    "StepWork",
    "ProbeTiming",
    "step_work",
    "probe_seconds",
    "evaluations",
    "run_seconds",
    "projection",
    "check_sampler_calls",
    "PROBE_ROWS",
    "two_point",
    "probe_passes",
]

#: rows of the probe's warm-up pass (and of its one pass on a real device)
PROBE_ROWS = 8
#: the probe's timed full-batch passes: at most this many, and no more once they took PROBE_SECONDS (a longer
#: probe averages over more of a shared machine's load)
PROBE_PASSES = 10
PROBE_SECONDS = 1.0


def probe_passes(batch_size: int) -> int:
    """Sampler passes of the IBM route's timing probe (its estimate counts them): one for a batch of at most
    ``PROBE_ROWS`` rows, else two (:func:`probe_seconds` with ``full=False``)."""
    return 1 if batch_size <= PROBE_ROWS else 2


@dataclass(frozen=True)
class StepWork:
    """Sampler work of one optimiser step: ``count`` units (``unit``: "proposal circuits", "chain sweeps", ...),
    ``short`` (the progress bar's abbreviation) and ``detail`` (how it is counted)."""

    count: int
    unit: str
    short: str
    detail: str


def _chain_moves(sampler: Any, reads: int, chains: int, sweeps: int) -> int:
    """Moves (or sweeps) per chain of one call: the burn-in and the thinned moves between records."""
    records = -(-reads // chains)
    return sweeps + (records - 1) * getattr(sampler, "thinning", 1)


def step_work(cfg: Any, sampling: Sampling | None) -> StepWork | None:
    """The sampler work of one optimiser step of the run ``cfg`` (a resolved ``TrainConfig``); ``None`` for exact
    enumeration."""
    if sampling is None:
        return None
    s, caps = sampling.sampler, sampling.sampler.capabilities
    problems = cfg.batch_size * cfg.n_layer * cfg.n_head * cfg.block_size
    where = f"{cfg.batch_size} rows x {cfg.n_layer} layer(s) x {cfg.n_head} head(s) x {cfg.block_size} queries"
    reads = sampling.num_reads or s.default_num_reads or 1
    if caps.markov_chain or s.name == "anneal":
        chains = (
            sampling.chains.num_chains if sampling.chains is not None else (getattr(s, "num_chains", None) or reads)
        )
        sweeps = s.burn_in if s.name != "anneal" else s.num_sweeps + s.final_sweeps
        moves = _chain_moves(s, reads, chains, sweeps)
        unit, short = ("proposal circuits", "circ") if caps.needs_circuit else ("chain sweeps", "sweeps")
        per = f"{chains} chain(s) x {moves} move(s)" if caps.needs_circuit else f"{chains} chain(s) x {moves} sweep(s)"
        return StepWork(problems * chains * moves, unit, short, f"{where} x {per}")
    if caps.dqa and sampling.readout == "shots":
        return StepWork(problems * reads, "circuit shots", "shots", f"{where} x {reads} shots")
    if caps.dqa:
        return StepWork(problems, "simulated circuits", "circ", f"{where}, exact output of each")
    if s.name == "meanfield":
        return StepWork(problems, "mean-field solves", "solves", where)
    return StepWork(problems * reads, "reads", "reads", f"{where} x {reads} reads")


@dataclass(frozen=True)
class ProbeTiming:
    """What the probe measured: ``step`` seconds per training pass (forward and backward on a full batch),
    ``eval_row`` seconds per validation window of an evaluation pass, ``warmup`` seconds of the untimed warm-up pass,
    ``passes`` timed passes of ``rows`` rows each (a device's two-point probe: ``rows`` in all, and ``fixed`` the
    seconds per pass that do not grow with its rows)."""

    step: float
    eval_row: float
    warmup: float
    passes: int
    rows: int
    fixed: float = 0.0


def probe_seconds(
    model: torch.nn.Module, task: Any, cfg: Any, sampling: Sampling | None, *, full: bool = True, local: bool = False
) -> ProbeTiming:
    """Time the run's real work on a short probe, leaving the run's state untouched.

    A warm-up pass on ``PROBE_ROWS`` rows pays the one-off costs (kernel compilation, circuit templates and their
    transpilation, the first burn-in of persistent chains), which a single timed pass scaled to the batch and to
    every step would multiply (a Gibbs run at T = 8 was projected at 7.2 min and took 15 s); then full-batch
    forward and backward passes are timed (at least one, up to :data:`PROBE_PASSES` while they take under
    :data:`PROBE_SECONDS` in all) and their mean is the step. An exact evaluation (``eval_exact``, or no sampler)
    is timed on its own, three no-gradient passes over the batch; a sampled one costs the forward part of a step per
    row. ``full=False`` (a real device, where every pass is paid, and a fake backend rehearsing it): no warm-up and
    no full batch. A batch of at most ``PROBE_ROWS`` rows is timed once as it is; a larger one by two passes of 1 and
    ``PROBE_ROWS - 1`` rows, fitted as ``fixed + per_row x rows`` (:func:`two_point`): each pass submits one job per
    sampler call whatever its rows, and that per-job time (a fake backend's local executor measured 17-25 s per job
    against about 0.8 s per row) scaled by the batch over the probe's rows projected 6x the actual time. With
    ``local`` (a fake backend: every job runs in this process) the fit is made on the passes' CPU time, which a
    loaded machine disturbs far less than their wall time (a per-row difference of a few seconds drowned in it),
    and turned into wall time by the probe's own wall / CPU ratio.

    The rows come from a generator of their own, persistent chains are copied, the global random state is forked
    and the gradients are cleared.
    """
    g = torch.Generator().manual_seed(cfg.seed + 1)
    rows = cfg.batch_size if full else min(cfg.batch_size, PROBE_ROWS)
    x, y = task.get_batch("train", rows, cfg.block_size, generator=g)
    if sampling is not None and sampling.chains is not None:
        sampling = dataclasses.replace(sampling, chains=sampling.chains.copy())
    if not full and cfg.batch_size > PROBE_ROWS:
        return _device_probe(model, x, y, cfg, sampling, local=local)
    warmup, fwd, steps = 0.0, [], []
    with torch.random.fork_rng(devices=[]):
        if full:
            t0 = time.perf_counter()
            model(x[:PROBE_ROWS], y[:PROBE_ROWS], sampling=sampling)[1].backward()
            warmup = time.perf_counter() - t0
        while not steps or (full and len(steps) < PROBE_PASSES and sum(steps) < PROBE_SECONDS):
            t0 = time.perf_counter()
            _, loss = model(x, y, sampling=sampling)
            t1 = time.perf_counter()
            loss.backward()
            fwd.append(t1 - t0)
            steps.append(time.perf_counter() - t0)
        model.zero_grad(set_to_none=True)
        eval_row = sum(fwd) / len(fwd) / rows
        if sampling is None or cfg.eval_exact:
            with torch.no_grad():
                t0 = time.perf_counter()
                for _ in range(3):
                    model(x, y)
                eval_row = (time.perf_counter() - t0) / (3 * rows)
    scale = cfg.batch_size / rows
    return ProbeTiming(sum(steps) / len(steps) * scale, eval_row, warmup, len(steps), rows)


def two_point(t1: float, t2: float, r1: int, r2: int) -> tuple[float, float]:
    """``(fixed, per_row)`` seconds of a pass from two timed passes of ``r1 < r2`` rows, both at least 0 (a pass
    that took less for more rows, on a loaded machine, has no measurable per-row part).

    Example:
        >>> two_point(22.0, 28.0, 1, 7)
        (21.0, 1.0)
    """
    per_row = max(t2 - t1, 0.0) / (r2 - r1)
    return max(t1 - per_row * r1, 0.0), per_row


def _device_probe(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, cfg: Any, sampling: Any, *, local: bool
) -> ProbeTiming:
    """:func:`probe_seconds` on the IBM route for a batch above ``PROBE_ROWS`` rows: passes of 1 and
    ``PROBE_ROWS - 1`` rows (``PROBE_ROWS`` rows of circuits in all), fitted by :func:`two_point` on their wall
    time, or with ``local`` on their CPU time scaled by the probe's wall / CPU ratio."""
    sizes = (1, PROBE_ROWS - 1)
    fwd, steps, cpu, start = [], [], [], 0
    with torch.random.fork_rng(devices=[]):
        for r in sizes:
            c0, t0 = time.process_time(), time.perf_counter()
            _, loss = model(x[start : start + r], y[start : start + r], sampling=sampling)
            t1 = time.perf_counter()
            loss.backward()
            fwd.append(t1 - t0)
            steps.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            start += r
        model.zero_grad(set_to_none=True)
        if sampling is None or cfg.eval_exact:
            with torch.no_grad():
                t0 = time.perf_counter()
                model(x, y)
                eval_row = (time.perf_counter() - t0) / len(x)
        else:  # a sampled evaluation: the forward part of a step, per row of a batch
            a, b = two_point(*fwd, *sizes)
            eval_row = (a + b * cfg.batch_size) / cfg.batch_size
    if local and min(cpu) > 0:
        fixed, per_row = two_point(*cpu, *sizes)
        load = sum(steps) / sum(cpu)
        fixed, per_row = fixed * load, per_row * load
    else:
        fixed, per_row = two_point(*steps, *sizes)
    return ProbeTiming(fixed + per_row * cfg.batch_size, eval_row, 0.0, len(sizes), sum(sizes), fixed)


def evaluations(step: int, max_steps: int, interval: int) -> int:
    """Evaluations of a run from ``step`` to ``max_steps``: every ``interval`` steps and at the last one.

    Example:
        >>> evaluations(0, 250, 100), evaluations(100, 200, 100), evaluations(200, 200, 100)
        (3, 1, 0)
    """
    return max_steps // interval - step // interval + (1 if max_steps % interval and max_steps > step else 0)


def run_seconds(
    cfg: Any, step: int, timing: ProbeTiming, *, eval_rows: int, extra_evals: int = 0
) -> tuple[float, int, float]:
    """``(seconds, evaluations, their seconds)`` of the run ``cfg`` from ``step`` to ``max_steps`` (arguments as
    :func:`projection`)."""
    steps_left = cfg.max_steps - step
    evals = evaluations(step, cfg.max_steps, cfg.eval_interval) + (extra_evals if steps_left else 0)
    eval_s = evals * eval_rows * timing.eval_row
    return steps_left * timing.step + eval_s, evals, eval_s


def projection(
    cfg: Any, work: StepWork | None, step: int, timing: ProbeTiming, *, eval_rows: int, extra_evals: int = 0
) -> str:
    """The line ``train`` prints before its first step (``step``: the step it starts from): the sampler work per
    step and over the run (``work``; ``None`` for exact marginals), and the projected time of the steps and of the
    evaluations (``eval_rows`` windows each; ``extra_evals``: the final ``J = 0`` one of a coupled model)."""
    steps_left = cfg.max_steps - step
    total, evals, eval_s = run_seconds(cfg, step, timing, eval_rows=eval_rows, extra_evals=extra_evals)
    head = cfg.sampler or "exact"
    if work is not None:
        head += (
            f": {work.count:,} {work.unit} per step ({work.detail}); {steps_left} steps: "
            f"{work.count * steps_left:,} {work.unit};"
        )
    else:
        head += f" marginals: {steps_left} steps;"
    probe = f"{timing.passes} timed pass(es) of {timing.rows} rows"
    if timing.fixed:
        probe = f"2 timed passes of 1 and {timing.rows - 1} rows, {duration(timing.fixed)} of each pass not growing with its rows"
    if timing.warmup:
        probe += f" after a {duration(timing.warmup)} warm-up"
    return (
        f"{head} projected {duration(timing.step)} per step, {duration(total)} in all ({evals} evaluation(s) of "
        f"{eval_rows:,} windows included: {duration(eval_s)}; measured on {probe})"
    )


def check_sampler_calls(cfg: Any, sampling: Sampling | None) -> None:
    """Have the sampler validate each call of a training pass (``batch_size`` rows) and, unless ``eval_exact``, of an
    evaluation pass (up to :data:`~hybrid_attention.apps.train.data.EVAL_CHUNK` rows) on stand-in problems of the
    same sizes (:func:`hybrid_attention.apps.estimate.bridge_calls`), before any data is loaded or a model is built:
    a setting whose chains, traces, sweep schedules or reads exceed the memory budget (``--sampler-option
    burn_in=1000000000``) is refused (``ValueError`` naming the size, the estimate and the budget) before any work.
    Readout ``exact`` makes no reads: nothing to check."""
    if sampling is None or sampling.readout != "shots":
        return
    from ..estimate import bridge_calls, stub_problem
    from .data import EVAL_CHUNK

    rows = {cfg.batch_size} if cfg.eval_exact else {cfg.batch_size, min(EVAL_CHUNK, cfg.eval_size)}
    for r in sorted(rows):
        for n, count in bridge_calls(sampling.sampler.capabilities, r * cfg.n_head, cfg.block_size):
            sampling.sampler.validate(stub_problem(n, count), num_reads=sampling.num_reads)
