"""The job ledger under hostile conditions: a ledger write that fails after the runtime accepted a job, a crash
between the runtime accepting a job and its ledger line, two processes on one ledger, stored results swapped or
corrupt, and lines torn by a full disk. Each test fails on the ledger without intents, tags, rescue file, lock and
hashed results."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends import get_sampler
from hybrid_attention.circuits import DQASchedule

pytest.importorskip("qiskit_aer")
pytest.importorskip("qiskit_ibm_runtime")

from hybrid_attention.backends import ibm  # noqa: E402
from hybrid_attention.backends.ibm.ledger import JobLedger  # noqa: E402
from hybrid_attention.backends.ibm.runtime_double import RuntimeDouble  # noqa: E402

SCHED = DQASchedule(tau=1.0, steps=2)
REPO = Path(__file__).resolve().parents[2]


def problems(batch=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(batch, 2, generator=g, dtype=torch.float64)
    return IsingProblem(1.5 * h, torch.tensor([[0.0, 0.7], [0.7, 0.0]], dtype=torch.float64))


def sampler(ledger=None, **kw):
    return get_sampler("ibm", backend="fake_manila", schedule=SCHED, chunk_size=1, mode="job", ledger=ledger, **kw)


def lines(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def submitted_twice(server):
    """PUB keys the double's server accepted more than once (a double submission, paid twice)."""
    return {k: n for k, n in Counter(k for _, k in server.submissions()).items() if n > 1}


# ---------------------------------------------------------------------- 2. the ledger cannot be written
@pytest.mark.parametrize("rescue", ["beside the ledger", "temporary directory"])
def test_a_full_disk_after_the_job_ran_keeps_its_id_and_a_resume_collects_it(tmp_path, monkeypatch, rescue):
    """The disk fills (the ledger becomes /dev/full) right when the runtime accepts the second job: the error names
    that job and the rescue file holding it (status NOT_RECORDED, not NOT_SUBMITTED), and a rerun, the disk freed,
    collects the job by its id instead of submitting its PUB again."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    p = problems(batch=3)
    whole = RuntimeDouble(tmp_path / "clean").attach(sampler()).sample(p, num_reads=32, seed=3)
    server = RuntimeDouble(tmp_path / "server")
    path = tmp_path / "run" / "ibm_jobs.jsonl"
    s = server.attach(sampler(path))
    real_store, accepted = server._store, []

    def store_then_fill_the_disk(*a, **k):
        job_id = real_store(*a, **k)
        accepted.append(job_id)
        if len(accepted) == 2:
            path.rename(path.with_name("saved.jsonl"))
            path.symlink_to("/dev/full")  # every write: ENOSPC
            if rescue == "temporary directory":
                path.with_name(path.name + ".rescue").symlink_to("/dev/full")
        return job_id

    server._store = store_then_fill_the_disk
    with pytest.raises(ibm.IBMJobError) as exc:
        s.sample(p, num_reads=32, seed=3)
    job = accepted[1]
    assert exc.value.status == "NOT_RECORDED" and exc.value.job_id == job
    assert job in str(exc.value) and "No space left on device" in str(exc.value)
    rescue_files = [
        f
        for f in [path.with_name(path.name + ".rescue"), *(tmp_path / "tmp").glob("*.rescue")]
        if f.is_file() and not f.is_symlink()
    ]
    assert len(rescue_files) == 1 and str(rescue_files[0]) in str(exc.value) and job in rescue_files[0].read_text()
    assert (rescue == "temporary directory") == (rescue_files[0].parent == tmp_path / "tmp")

    server._store = real_store
    for f in (path, path.with_name(path.name + ".rescue")):
        if f.is_symlink():
            f.unlink()
    path.with_name("saved.jsonl").rename(path)  # the disk freed
    s.close()
    resumed = server.attach(sampler(path)).sample(p, num_reads=32, seed=3)
    assert job in server.fetched and not submitted_twice(server) and len(server.submissions()) == 3
    np.testing.assert_array_equal(resumed.spins, whole.spins)
    assert not rescue_files[0].exists()  # its event moved into the ledger
    assert any(r["job_id"] == job and r.get("rescued_from") for r in lines(path))


# ---------------------------------------------------------------------- 3. crash between accept and ledger line
class SimulatedKill(BaseException):
    """A crash at one exact point (BaseException: nothing in the sampler catches it)."""


def test_a_crash_between_accept_and_ledger_line_never_submits_twice_20_trials(tmp_path, monkeypatch):
    """20 trials: the process 'dies' right after the runtime accepted its K-th job and before that job's ledger
    line (K = 1, 2, 3 in turn). The rerun settles the intent by the job's tag (the PUB hash) and collects that job:
    the double's server accepted no PUB twice, and the bits are those of an uninterrupted run."""
    p = problems(batch=3)
    whole = RuntimeDouble(tmp_path / "clean").attach(sampler()).sample(p, num_reads=16, seed=5)
    real_record = JobLedger.record
    doubles = 0
    for trial in range(20):
        kill_at, seen = 1 + trial % 3, [0]

        def record(self, event, kill_at=kill_at, seen=seen, **kw):
            if event == "submitted":
                seen[0] += 1
                if seen[0] == kill_at:
                    raise SimulatedKill  # the job is accepted; its ledger line is never written
            return real_record(self, event, **kw)

        server = RuntimeDouble(tmp_path / f"server{trial}")
        path = tmp_path / f"run{trial}" / "ibm_jobs.jsonl"
        monkeypatch.setattr(JobLedger, "record", record)
        with pytest.raises(SimulatedKill):
            server.attach(sampler(path)).sample(p, num_reads=16, seed=5)
        monkeypatch.setattr(JobLedger, "record", real_record)
        assert len(server.submissions()) == kill_at
        resumed = server.attach(sampler(path)).sample(p, num_reads=16, seed=5)
        assert server.listed, "the rerun did not ask the service for the interrupted job by its tag"
        doubles += len(submitted_twice(server))
        assert len(server.submissions()) == 3, f"trial {trial}: {server.submissions()}"
        np.testing.assert_array_equal(resumed.spins, whole.spins)
        rows = lines(path)
        for job_id, _ in server.submissions():  # every job carries its PUB hash as a tag, recorded in the ledger
            tag = server.tags(job_id)
            assert any(r["job_id"] == job_id and [r["pub_sha256"]] == tag for r in rows), (job_id, tag)
    assert doubles == 0


CHILD = textwrap.dedent(
    """
    import os, signal, sys, numpy as np, torch
    from hybrid_attention import IsingProblem
    from hybrid_attention.backends import get_sampler
    from hybrid_attention.backends.ibm.ledger import JobLedger
    from hybrid_attention.circuits import DQASchedule
    from hybrid_attention.backends.ibm.runtime_double import RuntimeDouble

    ledger, server, out, kill_at = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    real, seen = JobLedger.record, [0]

    def record(self, event, **kw):  # kill -9 after the runtime accepted the job, before its ledger line
        if event == "submitted":
            seen[0] += 1
            if seen[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        return real(self, event, **kw)

    JobLedger.record = record
    g = torch.Generator().manual_seed(0)
    p = IsingProblem(1.5 * torch.randn(3, 2, generator=g, dtype=torch.float64),
                     torch.tensor([[0.0, 0.7], [0.7, 0.0]], dtype=torch.float64))
    s = get_sampler("ibm", backend="fake_manila", schedule=DQASchedule(tau=1.0, steps=2), chunk_size=1,
                    mode="job", ledger=ledger)
    RuntimeDouble(server).attach(s)
    np.save(out, s.sample(p, num_reads=16, seed=5).spins)
    """
)


def _kill_trials(tmp_path, trials):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    doubles, outs = 0, []
    for trial in range(trials):
        kill_at = 1 + trial % 3
        ledger, server = tmp_path / f"run{trial}" / "ibm_jobs.jsonl", tmp_path / f"server{trial}"
        runs = []
        for k in (kill_at, 0):  # killed, then the rerun
            argv = [sys.executable, "-c", CHILD, str(ledger), str(server), str(tmp_path / f"b{trial}.npy"), str(k)]
            runs.append(subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO))
        assert runs[0].returncode == -9 and runs[1].returncode == 0, runs[1].stderr[-3000:]
        keys = [k for _, k in RuntimeDouble(server).submissions()]
        doubles += len(keys) - len(set(keys))
        assert len(set(keys)) == 3
        outs.append(np.load(tmp_path / f"b{trial}.npy"))
    assert doubles == 0
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


def test_kill_9_between_accept_and_ledger_line_submits_nothing_twice(tmp_path):
    """A real SIGKILL at that point (one trial; the 20-trial run is the slow test below)."""
    _kill_trials(tmp_path, 1)


@pytest.mark.slow
def test_kill_9_between_accept_and_ledger_line_20_trials(tmp_path):
    _kill_trials(tmp_path, 20)


# ---------------------------------------------------------------------- 4. two processes on one ledger
HOLDER = textwrap.dedent(
    """
    import sys, torch
    from hybrid_attention import IsingProblem
    from hybrid_attention.backends import get_sampler
    from hybrid_attention.circuits import DQASchedule

    s = get_sampler("ibm", backend="fake_manila", schedule=DQASchedule(tau=1.0, steps=2), mode="job",
                    ledger=sys.argv[1])
    s.sample(IsingProblem(torch.tensor([[0.3, -0.2]], dtype=torch.float64)), num_reads=8, seed=0)
    print("ready", flush=True)
    sys.stdin.read()  # hold the ledger until the test closes stdin
    """
)


def test_a_second_process_on_a_ledger_is_refused_before_submitting(tmp_path):
    path = tmp_path / "run" / "ibm_jobs.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        assert holder.stdout.readline().strip() == "ready", holder.stderr.read()[-3000:]
        before = path.read_text()
        s = sampler(path)
        s._primitive = lambda *a, **k: pytest.fail("submitted while another process holds the ledger")
        with pytest.raises(RuntimeError, match=rf"ledger .* is in use by process {holder.pid}.*nothing was submitted"):
            s.sample(problems(batch=1, seed=4), num_reads=8, seed=1)
        assert path.read_text() == before
    finally:
        holder.stdin.close()
        holder.wait(timeout=120)
    assert holder.returncode == 0
    s = sampler(path)  # released with the process: usable again
    s.sample(problems(batch=1, seed=4), num_reads=8, seed=1)
    s.close()


# ---------------------------------------------------------------------- 5. stored results checked against their PUB
def _bits_files(path):
    return sorted(p for p in path.with_name(path.name + ".bits").iterdir() if p.is_file())


def test_swapped_result_files_are_refused_naming_the_file(tmp_path):
    path = tmp_path / "ibm_jobs.jsonl"
    p = problems(batch=2)
    s = sampler(path)
    s.sample(p, num_reads=16, seed=2)
    s.close()
    a, b = _bits_files(path)
    tmp = a.with_name("swap")
    a.rename(tmp), b.rename(a), tmp.rename(b)  # each PUB's file now holds the other's bits
    again = sampler(path)
    again._primitive = lambda *a, **k: pytest.fail("a PUB was submitted again")
    with pytest.raises(ValueError, match=rf"stored result .*({a.name}|{b.name}).* belongs to PUB"):
        again.sample(p, num_reads=16, seed=2)


def test_a_corrupt_result_file_is_a_clear_error_and_nothing_is_submitted(tmp_path):
    path = tmp_path / "ibm_jobs.jsonl"
    p = problems(batch=1)
    s = sampler(path)
    s.sample(p, num_reads=16, seed=2)
    s.close()
    (f,) = _bits_files(path)
    f.write_bytes(f.read_bytes()[:40])  # cut short
    n = len(lines(path))
    again = sampler(path)
    again._primitive = lambda *a, **k: pytest.fail("a PUB was submitted again")
    with pytest.raises(ValueError, match=rf"stored result '{f}' is unreadable.*nothing was submitted"):
        again.sample(p, num_reads=16, seed=2)
    assert len(lines(path)) == n


def test_a_corrupt_stored_isa_circuit_is_a_clear_error_naming_it(tmp_path):
    path = tmp_path / "ibm_jobs.jsonl"
    s = sampler(path)
    s.sample(problems(batch=1), num_reads=16, seed=2)
    s.close()
    (qpy,) = path.with_name(path.name + ".isa").glob("*.qpy")
    qpy.write_bytes(b"QISKIT" + bytes(30))
    again = sampler(path)
    again._primitive = lambda *a, **k: pytest.fail("a PUB was submitted")
    with pytest.raises(ValueError, match=rf"stored ISA circuit '{qpy}' is unreadable.*nothing was submitted"):
        again.sample(problems(batch=1), num_reads=16, seed=2)


# ---------------------------------------------------------------------- 6. torn lines
def test_a_line_torn_in_this_process_does_not_swallow_the_next_event(tmp_path):
    """A write cut short by a full disk (the process goes on): the next event starts a line of its own and stays
    readable; the torn line is reported and kept in ``<ledger>.torn``."""
    path = tmp_path / "ibm_jobs.jsonl"
    s = sampler(path)
    s.sample(problems(batch=1), num_reads=16, seed=2)
    with open(path, "ab") as f:
        f.write(b'{"event": "completed", "job_id": "j-cut", "back')  # what a full disk left of a line
    later = problems(batch=1, seed=8)
    with pytest.warns(UserWarning, match=r"is not JSON"):
        s.sample(later, num_reads=16, seed=4)
    s.close()
    with pytest.warns(UserWarning, match=r"line 4\) is not JSON .*skipped and kept in '.*\.torn'"):
        fresh = JobLedger(path)
    assert [e.event for e in fresh.entries()] == ["completed", "completed"]
    torn = [json.loads(x) for x in path.with_name(path.name + ".torn").read_text().splitlines()]
    assert torn == [{"line": 4, "text": '{"event": "completed", "job_id": "j-cut", "back'}]
    with pytest.warns(UserWarning, match="not JSON"):
        again = sampler(path)
    again._primitive = lambda *a, **k: pytest.fail("a PUB was submitted again")
    again.sample(later, num_reads=16, seed=4)  # read from the ledger: the event after the torn line is there


def test_an_event_glued_onto_a_torn_line_is_recovered(tmp_path):
    """A ledger written by an earlier version: an event appended right after a line cut short, on the same line."""
    path = tmp_path / "ibm_jobs.jsonl"
    event = {"event": "completed", "job_id": "j2", "backend": "b", "pub_sha256": "ff" * 32, "shots": 4, "time": "t"}
    path.write_text('{"event": "submitted", "job_id": "j1", "bac' + json.dumps(event) + "\n")
    with pytest.warns(UserWarning, match=r"line 1\) is not JSON.*glued onto it was recovered"):
        led = JobLedger(path)
    assert led.lookup("ff" * 32, "b").job_id == "j2"
