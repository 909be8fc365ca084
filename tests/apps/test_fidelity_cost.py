"""Cost columns and Pareto marking of ``hybrid-attention fidelity``: the counters count what ran (counting proposal
engines), the projected QPU time follows the placeholder model, the Pareto frontier of a hand-made set, and a
budget sweep through the new samplers end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem, exact
from hybrid_attention.apps.fidelity import FidelityConfig, SweepPoint, measure_point, random_problems, run_sweep
from hybrid_attention.apps.fidelity.cost import circuit_depth, mark_pareto, pareto_front
from hybrid_attention.apps.fidelity.sweep import conditional_marginals
from hybrid_attention.backends.ibm.cost import qpu_seconds
from hybrid_attention.backends.mcmc import metropolis, qemcmc


class Counter:
    """Wraps an engine class's ``propose`` and counts the proposals it draws (chains per call)."""

    def __init__(self, monkeypatch, cls):
        self.count = 0
        orig = cls.propose

        def propose(engine, cur, *a, **kw):
            self.count += cur.size
            return orig(engine, cur, *a, **kw)

        monkeypatch.setattr(cls, "propose", propose)


@pytest.mark.parametrize(
    "sampler,cls,budget",
    [
        ("qemcmc", qemcmc.StatevectorEngine, 6),
        ("qemcmc-k0", qemcmc.StatevectorEngine, None),
        ("mh-local", metropolis._ClassicalProposals, 5),  # noqa: SLF001 (the engine under test)
        ("mh-uniform", metropolis._ClassicalProposals, 0),  # noqa: SLF001
    ],
)
def test_evaluations_count_the_proposals_that_ran(monkeypatch, sampler, cls, budget):
    counter = Counter(monkeypatch, cls)
    problems, shots = random_problems(3, 5, seed=1), 40
    res = measure_point(SweepPoint(sampler, 3, shots, None, None, budget), problems, seed=0)
    cost = res["cost"]
    # every chain contributes its start state plus one state per proposal drawn
    assert cost["evaluations"] == 5 * shots + counter.count
    assert counter.count == 5 * shots * (budget or 0)
    assert cost["wall_s"] > 0 and cost["evaluations_unit"] == "chain states"
    if sampler.startswith("qemcmc"):
        # every circuit the engine ran, in one job (one sampler call)
        want = qpu_seconds(circuits=counter.count, shots=1, depth=circuit_depth(3, 12) + 1)
        assert cost["qpu_seconds"] == pytest.approx(want)
    else:
        assert cost["qpu_seconds"] is None


def test_classical_and_exact_costs():
    problems = random_problems(3, 2, seed=2)
    ex = measure_point(SweepPoint("exact", 3, 100, None, None), problems)
    assert ex["cost"]["evaluations"] == 2 * 8 and ex["cost"]["qpu_seconds"] is None
    gb = measure_point(SweepPoint("gibbs", 3, 10, None, None, 7), problems)
    assert gb["cost"]["evaluations"] == 2 * 10 * 7 * 3  # problems x chains x sweeps x spins
    sv = measure_point(SweepPoint("statevector", 3, 50, 1.0, 5), problems)
    assert sv["cost"]["evaluations"] == 2 * 50
    assert sv["cost"]["qpu_seconds"] == pytest.approx(qpu_seconds(circuits=2, shots=50, depth=circuit_depth(3, 5)))


def test_qpu_seconds_model():
    assert qpu_seconds(circuits=0, shots=100) == 0.0
    kw = {"rep_delay": 1.0, "layer_seconds": 0.5, "per_circuit_seconds": 3.0, "per_job_seconds": 0.0}
    a = qpu_seconds(circuits=2, shots=10, depth=4, **kw)
    assert a == pytest.approx(2 * 10 * (1.0 + 4 * 0.5) + 2 * 3.0)
    with pytest.raises(ValueError, match="unknown model key"):
        qpu_seconds(circuits=1, shots=1, speed=2)
    with pytest.raises(ValueError, match="shots"):
        qpu_seconds(circuits=1, shots=-1)


def test_pareto_front_of_a_hand_made_set():
    #        (error, cost)
    pairs = [(0.5, 1.0), (0.3, 2.0), (0.4, 3.0), (0.1, 10.0), (0.1, 12.0), (0.3, 2.0), (0.05, None)]
    assert pareto_front(pairs) == [True, True, False, True, False, True, False]


def test_mark_pareto_compares_within_each_size():
    def pt(n, err, ev, wall):
        return {
            "point": {"n": n},
            "target": {"attention_tv": {"mean": err}},
            "cost": {"evaluations": ev, "wall_s": wall},
        }

    points = {"a": pt(3, 0.1, 100, 1.0), "b": pt(3, 0.2, 10, 2.0), "c": pt(3, 0.3, 50, 0.5), "d": pt(4, 0.9, 1e6, 9.0)}
    mark_pareto(points)
    assert [points[k]["pareto"] for k in "abcd"] == [True, True, False, True]
    assert [points[k]["pareto_wall"] for k in "abcd"] == [True, False, True, True]


def test_conditional_marginals_are_exact_for_exact_weights():
    """With the exact distribution as weighted reads, the Rao-Blackwellised estimate is the exact marginal."""
    p = random_problems(4, 3, seed=4, beta=0.7)
    S = exact.enumerate_states(4, dtype=torch.float64).numpy()
    w = exact.probabilities(p).numpy()
    m = conditional_marginals(np.broadcast_to(S, (3, 16, 4)), w, p)
    np.testing.assert_allclose(m, exact.marginals(p).numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="masked"):
        conditional_marginals(
            S[None], w[:1], IsingProblem(torch.zeros(1, 4), mask=torch.tensor([[True, True, True, False]]))
        )


def test_budget_sweep_end_to_end(tmp_path):
    cfg = FidelityConfig(
        samplers=["exact", "qemcmc", "qemcmc-k0", "mh-local", "mh-uniform", "gibbs"],
        n=[3],
        shots=[64],
        budget=[0, 4, 16],
        problems=2,
    )
    rep = run_sweep(cfg, tmp_path / "r", progress=False, plots=True)
    pts = rep["points"]
    budgets = sorted(r["point"]["budget"] for r in pts.values() if r["point"]["sampler"] == "mh-local")
    assert budgets == [0, 4, 16]
    assert all(r["point"]["budget"] is None for r in pts.values() if r["point"]["sampler"] in ("exact", "qemcmc-k0"))
    assert all(isinstance(r["pareto"], bool) and "cost" in r for r in pts.values())
    assert any(r["pareto"] for r in pts.values())
    assert (tmp_path / "r" / "fidelity_vs_cost.png").exists()
    assert "--budget 0,4,16" in rep["commands"][0] if rep["commands"] else True
    # resume: nothing re-measured
    again = run_sweep(cfg, tmp_path / "r", progress=False, plots=False)
    assert {k: v["seconds"] for k, v in again["points"].items()} == {k: v["seconds"] for k, v in pts.items()}


def test_qemcmc_on_aer_counts_its_circuit_executions():
    """``qemcmc-aer`` runs the proposal circuits on qiskit-aer: its cost counts the circuits the engine executed."""
    pytest.importorskip("qiskit_aer")
    from hybrid_attention.backends.mcmc import qemcmc_engines

    counted = {"n": 0}
    orig = qemcmc_engines.CircuitEngine.propose

    def propose(engine, cur, *a, **kw):
        out = orig(engine, cur, *a, **kw)
        counted["n"] = engine.executions
        return out

    mp = pytest.MonkeyPatch()
    mp.setattr(qemcmc_engines.CircuitEngine, "propose", propose)
    try:
        res = measure_point(SweepPoint("qemcmc-aer", 2, 6, None, None, 3), random_problems(2, 2, seed=0), seed=0)
    finally:
        mp.undo()
    assert counted["n"] == 2 * 6 * 3  # problems x chains x moves, one shot each
    assert res["cost"]["evaluations"] == 2 * 6 * (1 + 3)
    want = qpu_seconds(circuits=2 * 6 * 3, shots=1, depth=circuit_depth(2, 12) + 1)  # one job
    assert res["cost"]["qpu_seconds"] == pytest.approx(want)
