"""The IBM sampler offline: the runtime's client-side (executor-based) Sampler in local mode on fake backends and on
noiseless simulators with a fake device's target, against the exact circuit output; the legacy SamplerV2 fallback;
batches of chunks; fake backends by name; fractional-gate detection; real hardware behind its opt-in; failed jobs."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends import get_sampler
from hybrid_attention.circuits import DQASchedule

pytest.importorskip("qiskit_aer")
pytest.importorskip("qiskit_ibm_runtime")

from hybrid_attention.backends.ibm import devices as ibm_devices  # noqa: E402
from hybrid_attention.backends.ibm import jobs as ibm_jobs  # noqa: E402
from hybrid_attention.backends.ibm import sampler as ibm  # noqa: E402

Z = 5.0
SCHED = DQASchedule(tau=1.5, steps=8)


def problems(n=3, batch=6, seed=0, mask=None):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(batch, n, generator=g, dtype=torch.float64)
    U = torch.randn(n, n, generator=g, dtype=torch.float64).triu(1)
    return IsingProblem(1.5 * h, U + U.T, mask=mask)


def ideal_marginals(sampler, problem):
    """Marginals of the exact output distribution of the same circuit (numpy statevector reference)."""
    p = sampler.reference_probabilities(problem)
    n = problem.n
    S = 1 - 2 * ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1)
    m = p @ S
    if problem.mask is not None:
        m = m * problem.mask.numpy()
    return m


def assert_within_shot_noise(m, m_ref, shots, extra=0.0):
    m = np.asarray(m)
    tol = Z * np.sqrt(np.clip(1 - m_ref**2, 0, None) / shots) + extra + 1e-12
    assert np.all(np.abs(m - m_ref) <= tol), np.max(np.abs(m - m_ref) - tol)


def noiseless(name):
    """An ideal Aer simulator with the named fake device's target (basis gates, coupling map, fractional gates)."""
    from qiskit_aer import AerSimulator

    return AerSimulator.from_backend(ibm.fake_backend(name), noise_model=None)


@pytest.fixture
def manila():
    return ibm.fake_backend("fake_manila")


# ---------------------------------------------------------------------- the primitive and its fallback
def test_the_executor_based_sampler_is_used_without_deprecation_warnings():
    cls, kind = ibm.runtime_sampler()
    assert kind == "executor" and cls.__module__.startswith("qiskit_ibm_runtime.executor_sampler")
    p = problems(n=2, batch=2, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the legacy SamplerV2 warns on construction
        s = get_sampler("ibm", backend=noiseless("fake_manila"), schedule=SCHED)
        ss = s.sample(p, num_reads=2000, seed=3)
    assert ss.info["primitive"] == "executor" and s.properties["primitive"] == "executor"
    assert_within_shot_noise(ss.marginals(), ideal_marginals(s, p), 2000)


def test_legacy_sampler_v2_fallback_on_an_older_runtime(monkeypatch):
    """Without ``qiskit_ibm_runtime.executor_sampler`` (runtimes < 0.50) the legacy SamplerV2 runs the same PUBs."""
    monkeypatch.setitem(sys.modules, "qiskit_ibm_runtime.executor_sampler", None)  # its import now fails
    cls, kind = ibm.runtime_sampler()
    assert kind == "legacy" and cls.__name__ == "SamplerV2"
    p = problems(n=3, batch=4, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        s = get_sampler("ibm", backend=noiseless("fake_manila"), schedule=SCHED, chunk_size=2)
        ss = s.sample(p, num_reads=2000, seed=4)
    assert ss.info["primitive"] == "legacy" and len(ss.info["job_ids"]) == 2
    assert_within_shot_noise(ss.marginals(), ideal_marginals(s, p), 2000)


def test_sampler_options_are_checked_against_the_primitive_schema():
    with pytest.raises(ValueError, match="sampler_options"):
        get_sampler("ibm", backend="fake_manila", sampler_options={"no_such_option": 1})
    s = get_sampler("ibm", backend="fake_manila", sampler_options={"default_shots": 100})
    assert s.sampler_options == {"default_shots": 100}


# ---------------------------------------------------------------------- fake backends by name
def test_fake_backends_by_name():
    names = ibm.fake_backend_names()
    assert {"fake_torino", "fake_manila", "fake_fractional"} <= set(names) and len(names) > 20
    for alias in ("fake_manila", "FakeManilaV2", "fake-manila", "FAKE_MANILA_V2", "FakeManila"):
        assert ibm.fake_backend(alias).name == "fake_manila"
    assert ibm.fake_backend("FakeFractionalBackend").name == "fake_fractional"
    with pytest.raises(ValueError, match="fake_torino") as exc:
        ibm.fake_backend("fake_torin")
    assert "did you mean" in str(exc.value)
    with pytest.raises(ValueError, match="no fake backend named 'fake_nowhere'"):
        get_sampler("ibm", backend="fake_nowhere")
    with pytest.raises(TypeError, match="string"):
        ibm.fake_backend(3)


def test_a_fake_name_runs_offline_without_credentials(monkeypatch):
    monkeypatch.delenv("QISKIT_IBM_TOKEN", raising=False)
    monkeypatch.setattr(ibm_devices, "has_credentials", lambda: pytest.fail("a fake backend needs no credentials"))
    monkeypatch.setattr(
        ibm_devices, "QiskitRuntimeService", lambda *a, **k: pytest.fail("no service for a fake backend")
    )
    s = get_sampler("ibm", backend="fake_manila", schedule=DQASchedule(tau=1.0, steps=2))
    assert s.local and s.backend.name == "fake_manila" and s.max_qubits == 5
    ss = s.sample(problems(n=2, batch=1), num_reads=32, seed=0)
    assert ss.spins.shape == (1, 32, 2) and ss.info["backend_name"] == "fake_manila"


# ---------------------------------------------------------------------- agreement with the exact circuit output
@pytest.mark.parametrize("name", ["fake_manila", "fake_fractional"])
def test_noiseless_fake_targets_match_the_statevector_reference(name):
    """The whole IBM route (ISA transpilation with SWAPs to the device graph; fractional RZZ folded automatically)
    on an ideal simulator with the device's target: marginals within shot noise of the exact output."""
    p = problems(n=3, batch=6, seed=0)
    s = get_sampler("ibm", backend=noiseless(name), schedule=SCHED, chunk_size=4)
    ss = s.sample(p, num_reads=4000, seed=0)
    assert_within_shot_noise(ss.marginals(), ideal_marginals(s, p), 4000)
    isa = s.isa_circuit(s._template(p.flatten()))
    assert set(isa.count_ops()) <= set(s.backend.target.operation_names)
    assert s.circuit_options.fold_rzz is (name == "fake_fractional") and ss.info["fold_rzz"] is s.fractional
    if name == "fake_fractional":
        angles = ibm_devices._rzz_angles(isa, s._chunk_values(s._template(p.flatten()), p.flatten()))
        assert isa.count_ops()["rzz"] > 0 and angles.size and angles.min() >= 0 and angles.max() <= np.pi / 2 + 1e-12


@pytest.mark.parametrize("mode", ["job", "batch", "session"])
def test_noisy_fake_backend_end_to_end_matches_noisy_aer(manila, mode):
    """The fake device with its noise model (runtime local mode) against Aer with the same noise model and ISA
    circuit (both sampled: difference within shot noise), and loosely against the ideal output."""
    sched = DQASchedule(tau=1.5, steps=3)
    p = problems(n=2, batch=2, seed=5)
    with get_sampler("ibm", backend="fake_manila", schedule=sched, mode=mode) as s:
        ss = s.sample(p, num_reads=4000, seed=0)
        assert len(ss.info["job_ids"]) == 1 and ss.info["local"] is True and ss.info["two_qubit_gates"] > 0
        assert ss.info["mode"] == mode
    noisy = get_sampler("aer", schedule=sched, noise_backend=manila, method="density_matrix").sample(
        p, num_reads=4000, seed=9
    )
    m_noisy = np.asarray(noisy.marginals())
    tol = Z * np.sqrt(2 * (1 - m_noisy**2) / 4000) + 1e-12
    assert np.all(np.abs(np.asarray(ss.marginals()) - m_noisy) <= tol)
    m_ref = ideal_marginals(s, p)
    assert_within_shot_noise(ss.marginals(), m_ref, 4000, extra=0.15 * np.abs(m_ref).max() + 0.03)


def test_noisy_fractional_fake_backend_runs_end_to_end():
    p = problems(n=3, batch=2, seed=6)
    s = get_sampler("ibm", backend="fake_fractional", schedule=DQASchedule(tau=1.0, steps=3))
    assert s.fractional and s.circuit_options.fold_rzz and s.properties["fractional_rzz"]
    ss = s.sample(p, num_reads=256, seed=1)
    assert ss.spins.shape == (2, 256, 3) and set(np.unique(ss.spins)) <= {-1, 1}


@pytest.mark.slow
def test_noisy_fake_torino_by_name():
    sched = DQASchedule(tau=1.5, steps=3)
    p = problems(n=2, batch=2, seed=5)
    s = get_sampler("ibm", backend="fake_torino", schedule=sched)
    ss = s.sample(p, num_reads=4000, seed=0)
    m_ref = ideal_marginals(s, p)
    assert_within_shot_noise(ss.marginals(), m_ref, 4000, extra=0.15 * np.abs(m_ref).max() + 0.03)


# ---------------------------------------------------------------------- fractional gates
def test_fractional_gate_detection():
    from qiskit_aer import AerSimulator

    assert ibm.has_fractional_rzz(ibm.fake_backend("fake_fractional"))
    assert ibm.has_fractional_rzz(noiseless("fake_fractional"))  # the target travels with the simulator
    assert not ibm.has_fractional_rzz(ibm.fake_backend("fake_torino"))
    assert not ibm.has_fractional_rzz(AerSimulator())  # rzz without angle bounds
    assert not get_sampler("ibm", backend=AerSimulator()).circuit_options.fold_rzz
    assert get_sampler("ibm", backend=AerSimulator(), fold_rzz=True).circuit_options.fold_rzz


def test_unfolded_negative_angles_are_refused_before_submission():
    """fold_rzz=False on a fractional backend warns; a call with a negative RZZ angle is refused before any job."""
    with pytest.warns(UserWarning, match="fractional RZZ"):
        s = get_sampler("ibm", backend="fake_fractional", schedule=SCHED, fold_rzz=False)
    s._primitive = lambda *a, **k: pytest.fail("nothing may be submitted")
    ferro = IsingProblem(torch.zeros(2), torch.tensor([[0.0, 1.0], [1.0, 0.0]]))  # RZZ(-2 b J) < 0
    with pytest.raises(ValueError, match=r"rejects RZZ\(-.*nothing was submitted.*fold_rzz=True"):
        s.sample(ferro, num_reads=10)
    with pytest.raises(TypeError, match="fold_rzz"):
        get_sampler("ibm", backend="fake_fractional", fold_rzz="yes")


# ---------------------------------------------------------------------- chunks, batches, sessions
class _Recorder:
    """Wraps ``_primitive`` to log submissions and result calls in order."""

    def __init__(self, sampler, fail_at=None, status="ERROR"):
        self.real, self.log, self.contexts, self.fail_at, self.status = sampler._primitive, [], [], fail_at, status

    def __call__(self, seed, ctx=None, **kw):  # kw: the job tags (on a device every job carries its PUB's hash)
        self.contexts.append(ctx)
        inner, rec = self.real(seed, ctx, **kw), self

        class Primitive:
            def run(self, pubs, shots):
                k = sum(1 for e in rec.log if e[0] == "submit")
                rec.log.append(("submit", k))
                job = _FailedJob(rec.status) if k == rec.fail_at else inner.run(pubs, shots=shots)
                return _Logged(job, rec.log, k)

        return Primitive()


class _Logged:
    def __init__(self, job, log, k):
        self.job, self.log, self.k = job, log, k

    def job_id(self):
        return self.job.job_id()

    def status(self):
        return self.job.status()

    def result(self):
        self.log.append(("result", self.k))
        return self.job.result()


class _FailedJob:
    def __init__(self, status):
        self._status = status

    def job_id(self):
        return "job-failed-123"

    def result(self):
        raise RuntimeError(f"job was {self._status.lower()}")

    def status(self):
        return self._status


def test_auto_mode_opens_a_batch_per_call_of_many_chunks(monkeypatch):
    opened = []

    class CountingBatch(ibm_jobs.Batch):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.closed = False
            opened.append(self)

        def close(self):
            self.closed = True
            super().close()

    monkeypatch.setattr(ibm_jobs, "Batch", CountingBatch)
    s = get_sampler("ibm", backend=noiseless("fake_manila"), schedule=SCHED, chunk_size=2)
    assert s.mode == "auto"
    one = s.sample(problems(batch=2), num_reads=16, seed=0)
    assert one.info["mode"] == "job" and not opened
    rec = _Recorder(s)
    s._primitive = rec
    p = problems(batch=5)
    ss = s.sample(p, num_reads=2000, seed=1)
    assert ss.info["mode"] == "batch" and len(ss.info["job_ids"]) == 3 and len(opened) == 1 and opened[0].closed
    assert all(c is opened[0] for c in rec.contexts)  # every chunk's primitive runs in the call's batch
    assert_within_shot_noise(ss.marginals(), ideal_marginals(s, p), 2000)
    # local mode runs the chunks one after the other (the runtime ignores batches there)
    assert rec.log == [("submit", 0), ("result", 0), ("submit", 1), ("result", 1), ("submit", 2), ("result", 2)]


def test_a_device_batch_submits_every_chunk_before_waiting():
    """On a device (``local`` False; the jobs still run locally here) a batch submits all chunks first."""
    s = get_sampler("ibm", backend=noiseless("fake_manila"), schedule=SCHED, chunk_size=2, mode="batch")
    s.local = False
    rec = _Recorder(s)
    s._primitive = rec
    p = problems(batch=5)
    ss = s.sample(p, num_reads=2000, seed=1)
    assert [e[0] for e in rec.log] == ["submit"] * 3 + ["result"] * 3
    assert len({id(c) for c in rec.contexts}) == 1 and isinstance(rec.contexts[0], ibm_jobs.Batch)
    assert_within_shot_noise(ss.marginals(), ideal_marginals(s, p), 2000)
    s.close()
    assert s._ctx is None


@pytest.mark.parametrize("status", ["CANCELLED", "ERROR"])
def test_failed_job_in_job_mode_keeps_completed_chunks_and_stops(manila, status):
    s = get_sampler("ibm", backend=manila, schedule=DQASchedule(tau=1.0, steps=2), chunk_size=2, mode="job")
    rec = _Recorder(s, fail_at=1, status=status)
    s._primitive = rec
    with pytest.raises(ibm.IBMJobError) as exc:
        s.sample(problems(n=2, batch=5), num_reads=64, seed=0)
    err = exc.value
    assert err.job_id == "job-failed-123" and "job-failed-123" in str(err) and err.status == status
    assert list(err.completed) == [0] and err.completed[0].shape == (2, 64, 2)
    assert len(err.job_ids) == 2 and sum(e[0] == "submit" for e in rec.log) == 2  # the third chunk was never sent


def test_failed_job_in_a_device_batch_keeps_every_other_chunk(manila):
    s = get_sampler("ibm", backend=manila, schedule=DQASchedule(tau=1.0, steps=2), chunk_size=2, mode="batch")
    s.local = False
    s._primitive = _Recorder(s, fail_at=1)
    with pytest.raises(ibm.IBMJobError) as exc:
        s.sample(problems(n=2, batch=5), num_reads=64, seed=0)
    err = exc.value
    assert sorted(err.completed) == [0, 4] and err.completed[4].shape == (1, 64, 2) and len(err.job_ids) == 3
    s.close()


def test_a_refused_submission_keeps_the_chunks_already_done(manila):
    s = get_sampler("ibm", backend=manila, schedule=DQASchedule(tau=1.0, steps=2), chunk_size=2, mode="job")
    real, calls = s._primitive, []

    def primitive(seed, ctx=None):
        calls.append(seed)
        if len(calls) == 2:  # not transient (a transient error is tried again: tests/backends/test_ibm_service.py)
            raise ValueError("the service refused the PUB")
        return real(seed, ctx)

    s._primitive = primitive
    with pytest.raises(ibm.IBMJobError, match="could not be submitted.*refused the PUB") as exc:
        s.sample(problems(n=2, batch=5), num_reads=64, seed=0)
    assert exc.value.status == "NOT_SUBMITTED" and exc.value.job_id is None and list(exc.value.completed) == [0]
    assert len(exc.value.job_ids) == 1 and len(calls) == 2


# ---------------------------------------------------------------------- limits and the hardware opt-in
def test_problem_larger_than_device(manila):
    s = get_sampler("ibm", backend=manila, schedule=SCHED)
    s._primitive = lambda *a, **k: pytest.fail("nothing may be submitted")
    with pytest.raises(ValueError, match="limit of 5"):
        s.sample(IsingProblem(torch.zeros(2, 6)), num_reads=10)
    with pytest.raises(TypeError, match="unknown option"):
        s.sample(problems(), num_reads=10, resilience_level=1)


def test_coupling_restriction(manila):
    triangle = IsingProblem(torch.zeros(3), torch.tensor([[0.0, 1, 1], [1, 0, 1], [1, 1, 0]]))
    s = get_sampler("ibm", backend=manila, schedule=SCHED, restrict_couplings="raise")
    s._primitive = lambda *a, **k: pytest.fail("nothing may be submitted")
    with pytest.raises(ValueError, match=r"\(0, 2\)"):
        s.sample(triangle, num_reads=10)
    d = get_sampler("ibm", backend=manila, schedule=SCHED, restrict_couplings="drop")
    assert d._template(triangle.flatten()).edges == ((0, 1), (1, 2))


def test_real_hardware_needs_opt_in_and_credentials(monkeypatch):
    from qiskit_ibm_runtime import QiskitRuntimeService

    monkeypatch.delenv("QISKIT_IBM_TOKEN", raising=False)
    monkeypatch.delenv("QISKIT_IBM_INSTANCE", raising=False)
    monkeypatch.setattr(QiskitRuntimeService, "saved_accounts", staticmethod(lambda *a, **k: {}))

    def no_service(*a, **k):
        raise AssertionError("the service must not be contacted")

    monkeypatch.setattr(
        ibm_devices,
        "QiskitRuntimeService",
        type("S", (), {"__init__": no_service, "saved_accounts": staticmethod(lambda *a, **k: {})}),
    )
    with pytest.raises(ValueError, match="allow_hardware=True"):
        get_sampler("ibm", backend="ibm_torino", schedule=SCHED)
    with pytest.raises(ValueError, match="allow_hardware=True"):
        get_sampler("ibm", backend=None, schedule=SCHED)
    with pytest.raises(RuntimeError, match="QISKIT_IBM_TOKEN") as exc:
        get_sampler("ibm", backend="ibm_torino", schedule=SCHED, allow_hardware=True)
    assert "save_account" in str(exc.value)
    with pytest.raises(ValueError, match="mode"):
        get_sampler("ibm", backend="ibm_torino", mode="dedicated")
    with pytest.raises(TypeError, match="backend"):
        get_sampler("ibm", backend=42)
