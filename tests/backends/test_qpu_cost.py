"""Cost before submission: the QPU-time model, IBMSampler.estimate and QEMCMCSampler.estimate against a hand count
and against what a run actually submits; the budget refusal before any submission on a (double of a) device."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends import get_sampler
from hybrid_attention.circuits import DQASchedule

pytest.importorskip("qiskit_aer")
pytest.importorskip("qiskit_ibm_runtime")

from hybrid_attention.backends.ibm.cost import DEFAULT_MODEL, qpu_seconds  # noqa: E402
from hybrid_attention.backends.ibm.runtime_double import RuntimeDouble  # noqa: E402

SCHED = DQASchedule(tau=1.0, steps=2)
KEYS = {
    "jobs", "pubs", "circuits", "shots", "depth", "two_qubit_gates", "qpu_seconds", "overhead_seconds",
    "largest_job_seconds", "mode",
}  # fmt: skip


def problems(n=3, batch=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    U = torch.randn(n, n, generator=g, dtype=torch.float64).triu(1)
    return IsingProblem(torch.randn(batch, n, generator=g, dtype=torch.float64), U + U.T)


def test_the_model_is_its_documented_formula():
    m = dict(rep_delay=2e-4, per_circuit_seconds=1e-3, per_job_seconds=1.5, layer_seconds=1e-7)
    got = qpu_seconds(circuits=7, shots=300, depth=50, jobs=3, **m)
    assert got == pytest.approx(3 * 1.5 + 7 * 1e-3 + 7 * 300 * (2e-4 + 50 * 1e-7))
    assert qpu_seconds(circuits=7, shots=300, circuit_seconds=1e-5, **m) == pytest.approx(
        1.5 + 7e-3 + 2100 * (2e-4 + 1e-5)
    )
    assert qpu_seconds(circuits=1, shots=1) == pytest.approx(
        sum(DEFAULT_MODEL[k] for k in ("per_job_seconds", "per_circuit_seconds", "rep_delay"))
    )
    assert qpu_seconds(circuits=2, shots=10) < qpu_seconds(circuits=2, shots=11) < qpu_seconds(circuits=3, shots=11)
    with pytest.raises(ValueError, match="unknown model key"):
        qpu_seconds(circuits=1, shots=1, rep_dealy=1e-4)
    with pytest.raises(ValueError, match="circuits must be a non-negative integer"):
        qpu_seconds(circuits=-1, shots=1)


def test_ibm_estimate_matches_a_hand_count_and_what_the_call_submits():
    s = get_sampler("ibm", backend="fake_manila", schedule=SCHED, chunk_size=2, mode="job")
    p = problems(batch=5)
    est = s.estimate(p, num_reads=100)
    assert set(est) == KEYS
    # by hand: 5 problems in chunks of 2 -> 3 PUBs (one job each), one circuit per problem, 100 shots each
    assert (est["jobs"], est["pubs"], est["circuits"], est["shots"]) == (3, 3, 5, 500)
    isa = s.isa_circuit(s._template(p.flatten()))
    ops = isa.count_ops()
    assert est["depth"] == isa.depth() and est["two_qubit_gates"] == ops.get("cx", 0) + ops.get("ecr", 0) + ops.get(
        "cz", 0
    )
    dur = isa.estimate_duration(s.backend.target, unit="s")
    rep = s.backend.configuration().default_rep_delay
    assert est["qpu_seconds"] == pytest.approx(
        qpu_seconds(circuits=5, shots=100, depth=isa.depth(), jobs=3, circuit_seconds=dur, rep_delay=rep)
    )
    seen = []
    real = s._run_chunks

    def counting(tmpl, values, starts, shots, seeds):
        seen.append((len(values), len(starts), shots))
        return real(tmpl, values, starts, shots, seeds)

    s._run_chunks = counting
    ss = s.sample(p, num_reads=100, seed=0)
    assert len(ss.info["job_ids"]) == est["jobs"] and seen == [(5, 3, 100)] and ss.spins.shape == (5, 100, 3)
    assert s.estimate(problems(batch=1), num_reads=10)["jobs"] == 1


def test_qemcmc_estimate_matches_the_pubs_its_chains_submit(tmp_path):
    kw = dict(engine="ibm", backend="fake_manila", burn_in=3, trotter_steps=2)
    s = get_sampler("qemcmc", ledger=tmp_path / "q.jsonl", **kw)
    p = problems(n=2, batch=2)
    est = s.estimate(p, num_reads=6, num_chains=3)
    # by hand: 6 reads over 3 chains -> 2 records each, moves = burn_in + (2 - 1) * thinning = 4; both problems in
    # one chunk: one PUB per move with 2 problems x 3 chains bindings, one shot each
    assert (est["moves"], est["chains"]) == (4, 3)
    assert (est["jobs"], est["pubs"], est["circuits"], est["shots"]) == (4, 4, 24, 24)
    ss = s.sample(p, num_reads=6, num_chains=3, seed=1)
    assert len(ss.info["job_ids"]) == est["jobs"] and ss.info["circuit_executions"] * 2 == est["circuits"]
    bits = [np.load(f)["bits"] for f in sorted((tmp_path / "q.jsonl.bits").iterdir())]
    assert sum(b.shape[0] for b in bits) == est["circuits"] and {b.shape[1] for b in bits} == {1}
    with pytest.raises(ValueError, match="engine='ibm'"):
        get_sampler("qemcmc").estimate(p, num_reads=4)


def test_estimate_train_and_fidelity_match_a_hand_count():
    from hybrid_attention.apps.estimate import estimate_fidelity, estimate_train

    s = get_sampler("ibm", backend="fake_manila", schedule=SCHED, chunk_size=4)
    est = estimate_train(s, block_size=3, batch_size=3, n_layer=2, n_head=2, max_steps=5, shots=16, eval_calls=1)
    # per layer and pass one call per prefix length k = 1..3 on 3 x 2 = 6 problems: ceil(6 / 4) = 2 PUBs each
    passes, layers = 5 + 1, 2
    assert est["forward_passes"] == passes
    assert est["jobs"] == passes * layers * 3 * 2 and est["circuits"] == passes * layers * 3 * 6
    assert est["shots"] == est["circuits"] * 16
    fid = estimate_fidelity(lambda tau, steps: s, n=[2, 3], shots=[100, 200], tau=[1.0], steps=[2], problems=4)
    # one-axis-at-a-time: base (n 2, shots 100), n 3, shots 200 -> 3 points of 4 problems, one PUB each
    assert fid["points"] == 3 and fid["jobs"] == 3 and fid["circuits"] == 12
    assert fid["shots"] == 4 * (100 + 100 + 200)


def test_train_estimate_counts_what_a_training_run_submits(tmp_path):
    """The train route's estimate (steps + timing probe; evaluations exact) against the sampler calls of a run."""
    from hybrid_attention.apps.train import TrainConfig, train
    from hybrid_attention.backends.ibm.sampler import IBMSampler

    seen = []
    real = IBMSampler._run_chunks

    def counting(self, tmpl, values, starts, shots, seeds):
        seen.append((len(values), len(starts), shots))
        return real(self, tmpl, values, starts, shots, seeds)

    cfg = TrainConfig(
        task="brackets",
        attention="hj",
        block_size=4,
        max_steps=2,
        batch_size=2,
        ffn=False,
        sampler="ibm",
        backend="fake_manila",
        shots=16,
        trotter_steps=2,
        eval_exact=True,
        eval_size=4,
        out=str(tmp_path / "run"),
        progress=False,
    )
    import dataclasses

    from hybrid_attention.apps.train.loop import build_sampler, qpu_budget

    other = dataclasses.replace(cfg, out=str(tmp_path / "estimate")).resolved()  # its ledger elsewhere
    est = qpu_budget(other, build_sampler(other), 2)
    IBMSampler._run_chunks = counting
    try:
        train(cfg)
    finally:
        IBMSampler._run_chunks = real
    # the probe's rows: min(batch_size, 8) = the batch here, so the count is exact: 3 passes x 4 prefix lengths
    assert len(seen) == 12 and sum(c for c, _, _ in seen) == est["circuits"] == 24
    assert sum(j for _, j, _ in seen) == est["jobs"] and sum(c * s for c, _, s in seen) == est["shots"]
    assert (tmp_path / "run" / "ibm_jobs.jsonl").exists()
    # a batch above PROBE_ROWS: the probe makes two passes (1 and PROBE_ROWS - 1 rows); the estimate counts their
    # jobs exactly and their circuits and shots as two full passes (from above)
    from hybrid_attention.apps.train.cost import PROBE_ROWS

    seen.clear()
    big = dataclasses.replace(cfg, batch_size=PROBE_ROWS + 1, max_steps=1, out=str(tmp_path / "big"))
    est = qpu_budget(dataclasses.replace(big, out=str(tmp_path / "estimate2")).resolved(), build_sampler(big), 1)
    IBMSampler._run_chunks = counting
    try:
        train(big)
    finally:
        IBMSampler._run_chunks = real
    assert len(seen) == 3 * 4 and sum(j for _, j, _ in seen) == est["jobs"]  # 2 probe passes + 1 step, 4 calls each
    assert sum(c for c, _, _ in seen) <= est["circuits"] and sum(c * s for c, _, s in seen) <= est["shots"]


def test_a_device_call_above_its_budget_is_refused_before_submission(tmp_path):
    server = RuntimeDouble(tmp_path / "server")
    s = server.attach(get_sampler("ibm", backend="fake_manila", schedule=SCHED, max_qpu_seconds=1.0))
    with pytest.raises(ValueError, match=r"estimated at .* QPU seconds .* above max_qpu_seconds = 1; nothing was"):
        s.sample(problems(batch=2), num_reads=100, seed=0)
    assert server.submissions() == []
    s.max_qpu_seconds = 1e6
    s.sample(problems(batch=2), num_reads=100, seed=0)
    assert len(server.submissions()) == 1
    offline = get_sampler("ibm", backend="fake_manila", schedule=SCHED, max_qpu_seconds=0.0)  # ignored offline
    assert offline.sample(problems(batch=1), num_reads=8, seed=0).spins.shape == (1, 8, 3)
    with pytest.raises(ValueError, match="max_qpu_seconds"):
        get_sampler("ibm", backend="fake_manila", max_qpu_seconds=-1)
    q = get_sampler("qemcmc", engine="ibm", backend="fake_manila", ibm_options={"max_qpu_seconds": 0.5}, burn_in=2)
    server.attach(q.ibm)
    with pytest.raises(ValueError, match="above max_qpu_seconds"):
        q.sample(problems(n=2, batch=1), num_reads=2, seed=0)
    assert len(server.submissions()) == 1


def test_train_refuses_a_device_run_above_max_qpu_seconds(tmp_path):
    from hybrid_attention.apps.train import TrainConfig
    from hybrid_attention.apps.train.loop import build_sampler, qpu_budget

    cfg = TrainConfig(
        task="brackets",
        block_size=4,
        max_steps=100,
        sampler="ibm",
        backend="fake_manila",
        out=str(tmp_path),
        max_qpu_seconds=10.0,
    ).resolved()
    s = build_sampler(cfg)
    est = qpu_budget(cfg, s, 100)  # offline: the estimate only
    assert est["qpu_seconds"] > 10 and math.isfinite(est["qpu_seconds"])
    s.local = False  # as on a device
    with pytest.raises(ValueError, match="above --max-qpu-seconds 10; nothing was submitted"):
        qpu_budget(cfg, s, 100)
