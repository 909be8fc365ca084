"""What a sampler-backed training run will do and how long it will take, said before its first step.

:func:`step_work` counts the sampler work of one optimiser step from the run's :class:`~hybrid_attention.Sampling`
value: every (row, layer, head, query) is one Ising problem, and each problem costs, per sampler kind,

* quantum-enhanced MCMC (``qemcmc``): ``chains x moves`` proposal circuits (one circuit execution, one shot, per
  chain per move);
* classical Markov chains (``gibbs``, ``anneal``): ``chains x sweeps`` chain sweeps;
* DQA circuits read out as shots: ``shots`` circuit shots; read out exactly (``statevector``): one simulated circuit;
* mean field: one fixed-point solve; anything else: its reads.

:func:`probe_seconds` times one forward and backward pass on a few rows of a batch (the sampler's cost grows with
the number of problems, so it scales with the rows), without touching the run's state (its own batch generator, a
copy of any persistent chains, the global random state forked), and :func:`projection` turns both into the line
``train`` prints first. :func:`check_sampler_calls` has the sampler validate every call a step and an evaluation
will make (its memory checks included) before any data is loaded.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

import torch

from hybrid_attention.sampling import Sampling

__all__ = ["StepWork", "step_work", "probe_seconds", "projection", "check_sampler_calls", "PROBE_ROWS"]

#: rows of the probe step
PROBE_ROWS = 8


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


def probe_seconds(model: torch.nn.Module, task: Any, cfg: Any, sampling: Sampling) -> tuple[float, float]:
    """``(forward, forward + backward)`` seconds of one training pass on ``PROBE_ROWS`` rows, scaled to the batch.

    The run's state is untouched: the rows come from a generator of their own, persistent chains are copied, the
    global random state is forked and the gradients are cleared.
    """
    rows = min(cfg.batch_size, PROBE_ROWS)
    x, y = task.get_batch("train", rows, cfg.block_size, generator=torch.Generator().manual_seed(cfg.seed + 1))
    if sampling.chains is not None:
        sampling = dataclasses.replace(sampling, chains=sampling.chains.copy())
    with torch.random.fork_rng(devices=[]):
        t0 = time.perf_counter()
        _, loss = model(x, y, sampling=sampling)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
    model.zero_grad(set_to_none=True)
    scale = cfg.batch_size / rows
    return (t1 - t0) * scale, (t2 - t0) * scale


def projection(cfg: Any, work: StepWork, steps_left: int, seconds: tuple[float, float]) -> str:
    """The line ``train`` prints before its first step: work per step, its count over the run, projected time."""
    fwd, step = seconds
    evals = math.ceil(steps_left / cfg.eval_interval)
    eval_s = 0.0 if cfg.eval_exact else evals * fwd * math.ceil(cfg.eval_size / cfg.batch_size)
    total = steps_left * step + eval_s
    return (
        f"{cfg.sampler}: {work.count:,} {work.unit} per step ({work.detail}); {steps_left} steps: "
        f"{work.count * steps_left:,} {work.unit}; projected {_duration(step)} per step, {_duration(total)} in all "
        f"(evaluations included; measured on a {min(cfg.batch_size, PROBE_ROWS)}-row probe)"
    )


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{1e3 * seconds:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


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
