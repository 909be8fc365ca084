"""Every long command says its projected time before its work starts, from a timed probe of that work (issue #44):
``train`` (exact marginals and samplers), ``fidelity``, ``ablate``, ``mixing``. The probe's one-off costs are not
multiplied by the run's length, and work the probe did for real is kept, not done twice. The accuracy of the
projections is measured by ``bench/projections.py`` (results/bench/projections.md), not here: timings are not tests.
"""

from __future__ import annotations

import json
import logging

import pytest
import torch

from hybrid_attention.apps import cli
from hybrid_attention.apps.ablate import grid as ablate_grid
from hybrid_attention.apps.fidelity import sweep as fidelity_sweep
from hybrid_attention.apps.train import cost
from hybrid_attention.apps.train import loop as train_loop
from hybrid_attention.apps.train.cost import PROBE_ROWS, evaluations, probe_passes, probe_seconds, two_point

SMALL = [
    "train", "--task", "brackets", "--block-size", "4", "--steps", "3", "--eval-interval", "2", "--n-embd", "8",
    "--batch-size", "4", "--no-progress",
]  # fmt: skip


class _Order(logging.Handler):
    """Records, in order, the projection lines (``"projection"``) among the events a test appends itself."""

    def __init__(self, events: list[str]) -> None:
        super().__init__(logging.INFO)
        self.events = events

    def emit(self, record: logging.LogRecord) -> None:
        if "projected" in record.getMessage() and " in all" in record.getMessage():
            self.events.append("projection")


@pytest.fixture
def events():
    out: list[str] = []
    handler = _Order(out)
    root = logging.getLogger("hybrid_attention")
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)  # the library's projection lines (the commands raise them to INFO themselves)
    yield out
    root.removeHandler(handler)
    root.setLevel(level)


SAMPLERS = [
    [],
    ["--sampler", "meanfield"],
    ["--sampler", "gibbs", "--eval-exact"],
    ["--sampler", "qemcmc", "--eval-exact"],
    pytest.param(  # the IBM route, offline (noisy simulation of every job: slow on a loaded machine)
        ["--sampler", "ibm", "--backend", "fake_manila", "--shots", "16", "--eval-exact"], marks=pytest.mark.slow
    ),
]


@pytest.mark.parametrize("sampler", SAMPLERS, ids=["exact", "meanfield", "gibbs", "qemcmc", "ibm-fake"])
def test_train_says_its_projection_before_its_first_step(tmp_path, monkeypatch, events, sampler):
    real = train_loop._Run.train_step

    def step(self):
        events.append("step")
        return real(self)

    monkeypatch.setattr(train_loop._Run, "train_step", step)
    assert cli.main([*SMALL, *sampler, "--out", str(tmp_path / "run")]) == 0
    assert events[0] == "projection" and events.count("projection") == 1 and events.count("step") == 3


class _Clock:
    """A fake ``time`` module for :mod:`hybrid_attention.apps.train.cost`: wall and CPU seconds advance only when a
    pass says so, so the probe's fit is checked exactly, whatever the machine's load."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def perf_counter(self) -> float:
        return self.wall

    def process_time(self) -> float:
        return self.cpu


class _SlowFirst(torch.nn.Module):
    """A model whose first call costs ``first`` seconds of the clock (a kernel compiled, a template transpiled) and
    every later one ``each`` seconds."""

    def __init__(self, clock: _Clock, first: float, each: float) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(()))
        self.clock, self.first, self.each, self.calls = clock, first, each, 0

    def forward(self, x, y, sampling=None):
        self.clock.wall += self.first if self.calls == 0 else self.each
        self.calls += 1
        return None, self.w * x.float().mean()


class _Task:
    def get_batch(self, split, rows, T, generator=None):
        return torch.zeros(rows, T), torch.zeros(rows, T)


def test_the_probe_does_not_multiply_one_off_costs(monkeypatch):
    """One timed pass scaled to the batch and the run multiplied a one-off cost by both (7.2 min projected for a
    15 s run): the warm-up pass pays it, the step is the mean of the full-batch passes after it."""

    class Cfg:
        batch_size, block_size, seed, eval_exact = 64, 4, 0, False

    clock = _Clock()
    monkeypatch.setattr(cost, "time", clock)
    model = _SlowFirst(clock, first=0.5, each=0.01)
    timing = probe_seconds(model, _Task(), Cfg(), None)
    assert timing.warmup == pytest.approx(0.5) and timing.rows == 64 and timing.passes >= 2
    assert timing.step == pytest.approx(0.01)  # the one-off 0.5 s would make it 0.5 / passes + 0.01 or more
    assert model.w.grad is None  # the run's gradients are cleared


class _PerJob(torch.nn.Module):
    """A pass of ``rows`` rows takes ``fixed + per_row * rows`` seconds of the clock: a device route's pass, one job
    per call whatever its rows (a fake backend's local executor: 17-25 s per job, about 0.8 s per row); a device
    waits (wall time only), a fake backend computes (``busy``: CPU time too, ``wall_per_cpu`` wall seconds per CPU second)."""

    def __init__(self, clock: _Clock, fixed: float, per_row: float, busy: bool = False, wall_per_cpu: float = 1.0):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(()))
        self.clock, self.fixed, self.per_row, self.busy, self.wall_per_cpu = clock, fixed, per_row, busy, wall_per_cpu
        self.rows = []

    def forward(self, x, y, sampling=None):
        self.rows.append(len(x))
        seconds = self.fixed + self.per_row * len(x)
        if self.busy:
            self.clock.cpu += seconds
        self.clock.wall += seconds * (self.wall_per_cpu if self.busy else 1.0)
        return None, self.w * x.float().mean()


def test_the_device_probe_separates_the_per_job_time_from_the_rows(monkeypatch):
    """On the IBM route one pass of PROBE_ROWS rows scaled to the batch multiplied the per-job time by 8 (the fake
    backend's docs example: 19.2 min projected, 3.0 min actual). Two passes of 1 and PROBE_ROWS - 1 rows fit both
    parts exactly (a fake clock: wall and CPU time advance only by what each pass costs)."""

    class Cfg:
        batch_size, block_size, seed, eval_exact = 64, 4, 0, True

    clock = _Clock()
    monkeypatch.setattr(cost, "time", clock)
    model = _PerJob(clock, fixed=0.2, per_row=0.01)
    t = probe_seconds(model, _Task(), Cfg(), None, full=False)
    assert model.rows[:2] == [1, PROBE_ROWS - 1] and (t.passes, t.rows, t.warmup) == (2, PROBE_ROWS, 0.0)
    true = 0.2 + 0.01 * 64  # one pass of 8 rows scaled by 64 / 8 would be 8 * 0.28 = 2.24 s, 2.7x this
    assert t.fixed == pytest.approx(0.2) and t.step == pytest.approx(true)
    assert model.w.grad is None
    small = probe_seconds(
        _PerJob(clock, 0.05, 0.001), _Task(), type("C", (Cfg,), {"batch_size": PROBE_ROWS})(), None, full=False
    )
    assert (small.rows, small.passes, small.fixed) == (PROBE_ROWS, 1, 0.0)  # a batch this small: one pass as it is
    # a fake backend (local): the fit on CPU time, turned into wall time by the probe's wall / CPU ratio (here a
    # machine where the executor gets half a core: every CPU second takes two wall seconds)
    busy = _PerJob(clock, fixed=0.2, per_row=0.01, busy=True, wall_per_cpu=2.0)
    t = probe_seconds(busy, _Task(), Cfg(), None, full=False, local=True)
    assert t.fixed == pytest.approx(2 * 0.2) and t.step == pytest.approx(2 * true)
    assert probe_passes(PROBE_ROWS) == 1 and probe_passes(PROBE_ROWS + 1) == 2
    assert two_point(22.0, 28.0, 1, 7) == (21.0, 1.0) and two_point(25.0, 24.0, 1, 7) == (25.0, 0.0)


def test_evaluations_counts_the_interval_and_the_last_step():
    assert [evaluations(0, m, 100) for m in (99, 100, 101, 250)] == [1, 1, 2, 3]
    assert evaluations(150, 250, 100) == 2 and evaluations(250, 250, 100) == 0


def test_fidelity_projects_before_the_sweep_and_measures_no_point_twice(tmp_path, monkeypatch, events):
    """The cheapest point of each (sampler, n) is measured in full by the probe and kept; every point is measured
    on the whole ensemble exactly once, the others after the projection line; the report keeps the serial order."""
    real, full = fidelity_sweep.measure_point, []

    def measure(pt, problems, **kw):
        if problems.h.shape[0] == 3:  # the whole ensemble (probe calls take one problem)
            full.append(pt.key)
            events.append(pt.key)
        return real(pt, problems, **kw)

    monkeypatch.setattr(fidelity_sweep, "measure_point", measure)
    argv = ["fidelity", "--samplers", "exact,gibbs", "--n", "2,3", "--shots", "64,256,1024", "--problems", "3"]
    out = tmp_path / "rep"
    assert cli.main([*argv, "--no-progress", "--no-plots", "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert sorted(full) == sorted(report["points"]) and len(full) == len(set(full))
    cheapest = {k for k in report["points"] if "shots=64" in k and "n=2" in k}
    at = events.index("projection")
    assert set(events[:at]) >= cheapest and set(events[at + 1 :]) == set(full) - set(events[:at])
    assert list(report["points"]) == [p.key for p in fidelity_sweep_points(report)]


def fidelity_sweep_points(report):
    from hybrid_attention.apps.fidelity.config import FidelityConfig, sweep_points

    cfg = report["config"]
    return sweep_points(FidelityConfig(**{k: cfg[k] for k in ("samplers", "n", "shots", "tau", "steps", "base")}))


def test_ablate_projects_before_its_first_run(tmp_path, monkeypatch, events):
    real = ablate_grid.run_one

    def run(cfg):
        events.append("run")
        return real(cfg)

    monkeypatch.setattr(ablate_grid, "run_one", run)
    argv = ["ablate", "--task", "brackets", "--modes", "softmax", "hj", "--block-sizes", "4", "--seeds", "0"]
    argv += ["--steps", "2", "--eval-interval", "2", "--n-embd", "8", "--batch-size", "4", "--no-progress"]
    assert cli.main([*argv, "--out", str(tmp_path / "abl")]) == 0
    # the ablate line first; each run then says its own
    assert events[0] == "projection" and events.count("run") == 2


def test_mixing_projects_before_the_rest_and_keeps_the_probe_rows(tmp_path, monkeypatch, events):
    """The probe's rows (problem 0 of the smallest size, then one more of every size) are kept: every problem has
    one row, in order, equal to the rows computed without a probe."""
    from hybrid_attention.apps import mixing
    from hybrid_attention.apps.fidelity.problems import ensemble_problems

    problems = {n: ensemble_problems("sk", n, 3, seed=0) for n in (3, 4)}
    real, calls = mixing._exact_rows, []

    def rows(problem, proposals, nodes, noise=None, which=None):
        calls.append((problem.n, list(which)))
        events.append("rows")
        return real(problem, proposals, nodes, noise, which)

    monkeypatch.setattr(mixing, "_exact_rows", rows)
    rep = mixing.mixing_report(problems, proposals=("local", "uniform"), progress=False)
    assert events[events.index("projection") - 3 : events.index("projection")] == ["rows"] * 3
    assert calls == [(3, [0]), (3, [1]), (4, [0]), (3, [2]), (4, [1, 2])]
    for n, prob in problems.items():
        assert [r["problem"] for r in rep["rows"][str(n)]] == [0, 1, 2]
        assert rep["rows"][str(n)] == real(prob, ("local", "uniform"), None)  # exact, deterministic in one process
