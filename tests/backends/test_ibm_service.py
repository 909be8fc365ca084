"""The IBM route against a service that bills and fails (issue #43 items 1-3), offline through the runtime double:
execution modes and their checks before submission, measured usage against the estimate, the calibration of the
cost model, and one test per fault of the service (transient errors, an accepted job whose answer is lost, queueing,
cancellation, max_execution_time, retries capped)."""

from __future__ import annotations

import json
import warnings
from types import SimpleNamespace

import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends import get_sampler
from hybrid_attention.circuits import DQASchedule

pytest.importorskip("qiskit_aer")
pytest.importorskip("qiskit_ibm_runtime")

from qiskit.providers.fake_provider import GenericBackendV2  # noqa: E402

from hybrid_attention.backends.ibm import sampler as ibm  # noqa: E402
from hybrid_attention.backends.ibm.ledger import JobLedger  # noqa: E402
from hybrid_attention.backends.ibm.options import Execution, Mitigation  # noqa: E402
from hybrid_attention.backends.ibm.runtime_double import RuntimeDouble  # noqa: E402
from hybrid_attention.backends.ibm.usage import compare, fit_overheads, usage_rows  # noqa: E402

SCHED = DQASchedule(tau=1.0, steps=2)
FAST = {"backoff_seconds": 0.0}  # retries without waiting


def problems(n=3, batch=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return IsingProblem(torch.randn(batch, n, generator=g, dtype=torch.float64))


def device(tmp_path, *, ledger=True, server=None, **kw):
    """A sampler on fake_manila routed through the runtime double as if it were a device."""
    server = server or RuntimeDouble(tmp_path / "server")
    opts = {"chunk_size": 2, "mode": "batch", **FAST, **kw}
    if ledger:
        opts["ledger"] = tmp_path / "run" / "ibm_jobs.jsonl"
    return server, server.attach(get_sampler("ibm", backend="fake_manila", schedule=SCHED, **opts))


def events(tmp_path):
    path = tmp_path / "run" / "ibm_jobs.jsonl"
    return [json.loads(x)["event"] for x in path.read_text().splitlines() if x.strip()]


class Device(GenericBackendV2):
    """A backend the sampler takes for a device (not a fake or Aer class): built offline, never submitted to."""


# ---------------------------------------------------------------------- grouped options (#40)
def test_flat_keywords_fold_into_the_execution_and_mitigation_values():
    s = get_sampler("ibm", backend="fake_manila", mode="job", max_attempts=3, twirling=True, calibration_shots=64)
    assert s.execution == Execution(mode="job", max_attempts=3) and s.mode == "job"
    assert s.mitigation == Mitigation(twirling=True, calibration_shots=64)
    assert s.sampler_options["twirling"] == {"enable_gates": True, "enable_measure": True}
    q = get_sampler("qemcmc", engine="ibm", backend="fake_manila", ibm_options={"dynamical_decoupling": "XY4"})
    assert q.ibm.mitigation.dynamical_decoupling == "XY4" and q.ibm.mode == "session"  # qemcmc: a session
    with pytest.raises(ValueError, match="give either execution= or mode=, not both"):
        get_sampler("ibm", backend="fake_manila", execution=Execution(), mode="job")
    with pytest.raises(ValueError, match="mode must be one of"):
        get_sampler("ibm", backend="fake_manila", mode="sessions")
    with pytest.raises(ValueError, match="max_execution_time once"):
        get_sampler("ibm", backend="fake_manila", max_execution_time=60, sampler_options={"max_execution_time": 9})
    assert get_sampler("ibm", backend="fake_manila", max_execution_time=60).sampler_options["max_execution_time"] == 60


# ---------------------------------------------------------------------- execution modes (item 1)
def test_qemcmc_and_training_run_in_a_session_by_default(tmp_path):
    from hybrid_attention.apps.train import TrainConfig
    from hybrid_attention.apps.train.loop import build_sampler

    q = get_sampler("qemcmc", engine="ibm", backend="fake_manila", burn_in=2, trotter_steps=2)
    assert q.ibm.mode == "session" and q.estimate(problems(n=2, batch=1), num_reads=2)["mode"] == "session"
    assert get_sampler("qemcmc", engine="ibm", backend="fake_manila", ibm_options={"mode": "batch"}).ibm.mode == "batch"
    cfg = TrainConfig(task="brackets", block_size=4, sampler="ibm", backend="fake_manila", out=str(tmp_path)).resolved()
    s = build_sampler(cfg)
    assert s.mode == "session"
    s.close()


def test_every_mode_pays_the_per_job_overhead_and_a_session_its_gaps():
    est = {m: get_sampler("ibm", backend="fake_manila", chunk_size=1, mode=m).estimate(problems(), 100) for m in
           ("job", "batch", "session")}  # fmt: skip
    assert est["job"]["qpu_seconds"] == est["batch"]["qpu_seconds"] and est["job"]["overhead_seconds"] >= 3 * 2.0
    assert est["session"]["qpu_seconds"] == pytest.approx(est["batch"]["qpu_seconds"] + 3 * 1.0)  # session_gap 1 s


def test_job_mode_on_a_device_warns_with_the_projected_overhead(tmp_path):
    server, s = device(tmp_path, mode="job")
    with pytest.warns(UserWarning, match=r"job mode on fake_manila: this call submits 2 jobs.*6?4?\.0 s of the"):
        s.sample(problems(), num_reads=16, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per sampler
        s.sample(problems(seed=1), num_reads=16, seed=0)
    q = get_sampler("qemcmc", engine="ibm", backend="fake_manila", burn_in=2, trotter_steps=2,
                    ibm_options={"mode": "job"})  # fmt: skip
    server.attach(q.ibm)
    with pytest.warns(UserWarning, match="job mode on fake_manila: this call submits 2 jobs"):  # one per step
        q.sample(problems(n=2, batch=1), num_reads=2, seed=0)


def test_a_session_is_refused_on_the_open_plan_and_on_a_simulator_before_submission(tmp_path):
    server = RuntimeDouble(tmp_path / "server", plan="open")
    _, s = device(tmp_path, server=server, mode="session")
    with pytest.raises(ValueError, match="Open Plan.*nothing was submitted.*mode='batch'"):
        s.sample(problems(), num_reads=16, seed=0)
    q = get_sampler("qemcmc", engine="ibm", backend="fake_manila", burn_in=2, trotter_steps=2)
    server.attach(q.ibm)
    with pytest.raises(ValueError, match="Open Plan"):
        q.sample(problems(n=2, batch=1), num_reads=2, seed=0)
    assert server.submissions() == []
    sim = Device(num_qubits=3, seed=0)
    sim.configuration = lambda: SimpleNamespace(simulator=True)
    s = get_sampler("ibm", backend=sim, allow_hardware=True, mode="session")
    s.service = server
    with pytest.raises(ValueError, match="a simulator: it has no sessions"):
        s.check_mode_available()
    _, ok = device(tmp_path / "paid", mode="session")  # a paid plan: the session runs
    assert ok.sample(problems(), num_reads=16, seed=0).info["mode"] == "session"


def test_bad_budgets_limits_and_ledgers_are_refused_before_submission(tmp_path):
    with pytest.raises(ValueError, match="cannot cover one job.*per_job_seconds = 2 s, an assumption"):
        get_sampler("ibm", backend=Device(num_qubits=3, seed=0), allow_hardware=True, max_qpu_seconds=0.5)
    server, s = device(tmp_path, max_qpu_seconds=1.5)
    with pytest.raises(ValueError, match="above max_qpu_seconds.*cannot cover even one job's overhead"):
        s.sample(problems(), num_reads=16, seed=0)
    _, s = device(tmp_path, max_execution_time=2)  # each job is estimated above 2 s (2 s fixed + circuits)
    with pytest.raises(ValueError, match=r"estimated at .* above max_execution_time = 2 s.*nothing was submitted"):
        s.sample(problems(), num_reads=16, seed=0)
    assert server.submissions() == []
    _, s = device(tmp_path)
    s.sample(problems(), num_reads=16, seed=0)
    s.close()
    with pytest.raises(ValueError, match=r"records jobs on \['fake_manila'\], not on 'fake_lima'.*nothing was"):
        get_sampler("ibm", backend="fake_lima", ledger=tmp_path / "run" / "ibm_jobs.jsonl")


# ---------------------------------------------------------------------- measured usage (item 2)
def test_the_estimate_agrees_with_the_doubles_usage_within_ten_percent(tmp_path, capsys):
    from hybrid_attention.apps.cli import main

    server, s = device(tmp_path, chunk_size=3)
    p = problems(n=3, batch=7)
    est = s.estimate(p, num_reads=400)
    s.sample(p, num_reads=400, seed=0)
    s.close()
    rows = usage_rows(JobLedger(tmp_path / "run" / "ibm_jobs.jsonl"))
    got = compare(rows)
    assert len(got["jobs"]) == est["jobs"] == 3 and got["estimate"] == pytest.approx(est["qpu_seconds"])
    assert all(abs(r["ratio"] - 1) < 0.10 for r in got["jobs"]) and abs(got["ratio"] - 1) < 0.10
    args = ["estimate", "sample", "--backend", "fake_manila", "--n", "3", "--problems", "7", "--shots", "400"]
    args += ["--trotter-steps", "2", "--sampler-option", "chunk_size=3", "--sampler-option", "mode=batch"]
    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "estimate against actual usage (QPU seconds), per job:" in out and out.count("actual/estimate") == 4
    assert f"total over 3 job(s): estimate {got['estimate']:,.3f} s, actual {got['actual']:,.3f} s" in out


def test_calibration_recovers_the_doubles_overheads_from_a_ledger(tmp_path, capsys):
    from hybrid_attention.apps.cli import main

    server = RuntimeDouble(tmp_path / "server", usage_model={"per_job_seconds": 0.7, "per_circuit_seconds": 0.05})
    _, s = device(tmp_path, server=server, chunk_size=4)
    for k, batch in enumerate((1, 4, 7)):  # jobs of 1 to 4 circuits
        s.sample(problems(batch=batch, seed=k), num_reads=64, seed=k)
    s.close()
    fit = fit_overheads(usage_rows(JobLedger(tmp_path / "run" / "ibm_jobs.jsonl")))
    assert fit["per_job_seconds"] == pytest.approx(0.7, rel=0.1)
    assert fit["per_circuit_seconds"] == pytest.approx(0.05, rel=0.25)
    assert main(["estimate", "calibrate", "--out", str(tmp_path / "run"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["qpu_model"]["per_job_seconds"] == pytest.approx(fit["per_job_seconds"]) and out["jobs"] == 4
    with pytest.raises(ValueError, match="two sizes"):
        fit_overheads([{"actual": 2.0, "circuits": 2, "shots": 8, "shot_seconds": 1e-4}] * 3)


# ---------------------------------------------------------------------- a service that fails (item 3)
def test_transient_submission_errors_are_tried_again_with_backoff(tmp_path, monkeypatch):
    from hybrid_attention.backends.ibm import jobs, retry

    server, s = device(tmp_path)
    server.fail_submissions(2, status_code=503)
    slept = []
    monkeypatch.setattr(jobs, "retrying", lambda *a, **k: retry.retrying(*a, **{**k, "sleep": slept.append}))
    ss = s.sample(problems(), num_reads=16, seed=0)
    assert server.refused == 2 and len(server.submissions()) == 2 == len(ss.info["job_ids"])
    assert len(slept) == 2 and server.listed  # waited twice; asked the service for the PUB's tag before each new try
    # a device batch submits both chunks before waiting: each PUB one intent, one submission, one completion
    assert sorted(events(tmp_path)) == ["completed"] * 2 + ["intent"] * 2 + ["submitted"] * 2


def test_backoff_grows_with_jitter_and_a_cap():
    import numpy as np

    ex = Execution(backoff_seconds=1.0, max_backoff_seconds=5.0)
    rng = np.random.default_rng(0)
    d = [ex.delay(k, rng) for k in range(6)]
    assert 0.5 <= d[0] <= 1 and 1 <= d[1] <= 2 and 2 <= d[2] <= 4 and all(2.5 <= x <= 5 for x in d[3:])
    assert len({round(x, 6) for x in d[3:]}) == 3  # jitter: clients that failed together do not retry together


def test_a_job_accepted_before_its_answer_was_lost_is_never_submitted_again(tmp_path):
    server, s = device(tmp_path, ledger=False)  # no ledger: the job tag alone decides
    server.fail_submissions(1, status_code=504, accepted=True)
    ss = s.sample(problems(), num_reads=16, seed=0)
    assert server.refused == 1 and len(server.submissions()) == 2  # two chunks, each submitted once
    assert ss.info["job_ids"] == [j for j, _ in server.submissions()]


def test_retries_are_capped_and_the_intent_is_left_for_a_rerun(tmp_path):
    server, s = device(tmp_path, max_attempts=3)
    server.fail_submissions(3)
    with pytest.raises(ibm.IBMJobError, match="3 tries failed with transient errors.*asks the service for its tag"):
        s.sample(problems(), num_reads=16, seed=0)
    assert server.submissions() == [] and events(tmp_path) == ["intent"]  # the first chunk's intent, no job
    s.close()
    _, again = device(tmp_path, server=server)
    again.sample(problems(), num_reads=16, seed=0)  # the intent settled (no job had the tag): submitted now
    assert len(server.submissions()) == 2


def test_a_queued_job_is_waited_for_and_submitted_once(tmp_path, caplog):
    server, s = device(tmp_path)
    server.queue(polls=5)
    with caplog.at_level("INFO", logger="hybrid_attention.backends.ibm.sampler"):
        ss = s.sample(problems(), num_reads=16, seed=0)
    assert "is queued on fake_manila" in caplog.text and len(server.submissions()) == 2 == len(ss.info["job_ids"])


def test_a_cancelled_job_raises_naming_it_and_a_rerun_submits_it_again(tmp_path):
    server, s = device(tmp_path)
    server.cancel_next()
    with pytest.raises(ibm.IBMJobError, match=r"job double-0000-\w+ ended with status CANCELLED") as exc:
        s.sample(problems(), num_reads=16, seed=0)
    assert exc.value.status == "CANCELLED" and "failed" in events(tmp_path)
    s.close()
    _, again = device(tmp_path, server=server)
    with pytest.warns(UserWarning, match="failed; its PUB is submitted again"):
        again.sample(problems(), num_reads=16, seed=0)


def test_a_job_over_its_max_execution_time_raises_a_clear_error(tmp_path):
    server, s = device(tmp_path, max_execution_time=600)
    server.time_out_next()
    with pytest.raises(ibm.IBMJobError, match=r"exceeded its maximum execution time \(max_execution_time = 600 s; "
                       r"the cost model estimated it at 2\.\d s\).*billed") as exc:  # fmt: skip
        s.sample(problems(), num_reads=16, seed=0)
    assert exc.value.status == "TIMED_OUT" and events(tmp_path).count("failed") == 1


def test_a_transient_error_while_waiting_is_tried_again_without_resubmitting(tmp_path):
    server, s = device(tmp_path)
    server.fail_results(2)
    ss = s.sample(problems(), num_reads=16, seed=0)
    assert len(server.submissions()) == 2 == len(ss.info["job_ids"]) and server.faults["result"] == 0
    server.fail_results(9)
    _, capped = device(tmp_path / "capped", server=server, max_attempts=2)
    with pytest.raises(ibm.IBMJobError, match="may still run: a rerun with this ledger collects it by its id"):
        capped.sample(problems(seed=3), num_reads=16, seed=1)
    # not "failed": a rerun collects those jobs by id, never submits them again
    assert "failed" not in events(tmp_path / "capped")


def test_an_error_that_is_not_transient_is_raised_at_once(tmp_path):
    server, s = device(tmp_path)
    calls = []

    def refusing(seed, ctx=None, **kw):
        calls.append(seed)
        raise PermissionError("403 Forbidden: instance not authorised for this backend")

    s._primitive = refusing
    with pytest.raises(ibm.IBMJobError, match="could not be submitted.*403 Forbidden"):
        s.sample(problems(), num_reads=16, seed=0)
    assert len(calls) == 1 and server.submissions() == []
