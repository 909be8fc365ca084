"""The qemcmc sampler: exact transition matrices (detailed balance, stationary = Boltzmann), sampled marginals
against exact enumeration with tolerances from the number of independent reads, diagnostics against their exact
values, persistent-chain state, validation, the engines."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem, exact
from hybrid_attention.backends.mcmc import analysis as mcmc
from hybrid_attention.backends.mcmc.chain import ChainSchedule
from hybrid_attention.backends.mcmc.metropolis import UniformMetropolisSampler
from hybrid_attention.backends.mcmc.qemcmc import QEMCMCSampler, proposal_rows, transition_matrix
from hybrid_attention.backends.registry import get_sampler, sampler_options
from hybrid_attention.backends.testing import assert_sampler_conforms
from hybrid_attention.circuits.proposal import ProposalParams, alpha_of, proposal_matrix
from hybrid_attention.exact import enumerate_states

Z = 5.0
FIXED = ProposalParams(gamma=0.45, time=6.0, steps=8)


def random_problem(n, seed, *, beta=1.0, batch=(), mask=None, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(*batch, n, generator=g, dtype=torch.float64) * scale
    J = torch.randn(n, n, generator=g, dtype=torch.float64).triu(1) * scale / max(n - 1, 1) ** 0.5
    return IsingProblem(h, J + J.T, beta=beta, mask=mask)


def energies(problem):
    return problem.energy(enumerate_states(problem.n, dtype=torch.float64)).numpy()


# ---------------------------------------------------------------------- exact transition matrices (n <= 6)
def test_simulated_proposal_matrix_equals_the_numpy_oracle():
    p = random_problem(4, seed=1)
    h, J = p.h.numpy(), p.J.numpy()
    a, b = FIXED.phases(0.45, 6.0)
    E = torch.from_numpy(alpha_of(h, J) * energies(p))[None]
    Q = proposal_rows(E, a, b, FIXED.steps)[0].numpy()
    np.testing.assert_allclose(Q, proposal_matrix(h, J, FIXED), atol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize(
    "params",
    [FIXED, ProposalParams(steps=6), ProposalParams(gamma=(0.4, 0.9), time=(1.0, 8.0), steps=5, shape="reverse")],
    ids=["fixed", "random", "reverse-anneal"],
)
def test_detailed_balance_and_boltzmann_stationary_distribution(n, params):
    """P from the simulated unitary satisfies detailed balance; its stationary distribution is Boltzmann to 1e-10."""
    p = random_problem(n, seed=10 + n, beta=1.3, scale=1.5)
    P = transition_matrix(p, params, nodes=3)
    pi = exact.probabilities(p).numpy()
    np.testing.assert_allclose(P.sum(1), 1.0, atol=1e-12)
    assert P.min() >= 0
    assert mcmc.detailed_balance_violation(P, pi) < 1e-12
    np.testing.assert_allclose(pi @ P, pi, atol=1e-12)
    np.testing.assert_allclose(mcmc.stationary_distribution(P), pi, atol=1e-10)
    assert mcmc.spectral_gap(P, pi) > 0  # ergodic


def test_masked_spins_stay_free_and_the_rest_is_boltzmann():
    mask = torch.tensor([True, False, True, True])
    p = random_problem(4, seed=3, mask=mask)
    P = transition_matrix(p, FIXED)
    pi = exact.probabilities(p).numpy()  # masked spin uniform, the others Boltzmann without it
    np.testing.assert_allclose(mcmc.stationary_distribution(P), pi, atol=1e-10)


def test_classical_baselines_are_reversible_too():
    p = random_problem(4, seed=5, beta=0.7)
    E, pi = energies(p), exact.probabilities(p).numpy()
    for P in (
        mcmc.metropolis_matrix(mcmc.local_proposal(4), E, 0.7),
        mcmc.metropolis_matrix(mcmc.uniform_proposal(4), E, 0.7),
        mcmc.heat_bath_matrix(E, 0.7, 4),
    ):
        assert mcmc.detailed_balance_violation(P, pi) < 1e-14
        np.testing.assert_allclose(mcmc.stationary_distribution(P), pi, atol=1e-10)


def test_an_asymmetric_proposal_needs_the_hastings_ratio():
    """metropolis_matrix corrects an asymmetric proposal with Q(s|s')/Q(s'|s): detailed balance still holds."""
    rng = np.random.default_rng(0)
    Q = rng.random((8, 8))
    Q /= Q.sum(1, keepdims=True)
    E = rng.normal(size=8)
    pi = np.exp(-E) / np.exp(-E).sum()
    assert mcmc.detailed_balance_violation(mcmc.metropolis_matrix(Q, E, 1.0), pi) < 1e-15


# ---------------------------------------------------------------------- sampled marginals against exact
def check_marginals(ss, problem, *, ess=None):
    """|m - m_exact| <= Z sqrt((1 - m^2) / ESS) per spin, ESS the number of independent reads."""
    m_ref = exact.marginals(problem).numpy()
    ess = ss.info["ess_spins"] if ess is None else ess
    tol = Z * np.sqrt(np.clip(1 - m_ref**2, 1e-3, None) / ess) + 1e-12
    err = np.abs(ss.marginals() - m_ref)
    assert np.all(err <= tol), f"marginal errors {err} above {tol}"


@pytest.mark.parametrize("mode", ["unitary", "columns"])
def test_independent_chains_sample_boltzmann(mode):
    p = random_problem(5, seed=7, batch=(3,), beta=1.2)
    ss = QEMCMCSampler(mode=mode, params=ProposalParams(steps=6)).sample(p, num_reads=1500, seed=1)
    assert ss.info["mode"] == mode and ss.info["num_chains"] == 1500 and ss.info["records_per_chain"] == 1
    np.testing.assert_array_equal(ss.info["ess_spins"], 1500)
    check_marginals(ss, p, ess=1500)


def test_reverse_anneal_proposals_sample_boltzmann():
    p = random_problem(4, seed=9, batch=(2,))
    params = ProposalParams(gamma=0.8, time=(2.0, 6.0), steps=4, shape="reverse")
    ss = QEMCMCSampler(params=params, mode="columns").sample(p, num_reads=1500, seed=2)
    check_marginals(ss, p, ess=1500)


def test_long_chains_with_records_use_their_effective_sample_size():
    p = random_problem(6, seed=8, batch=(2,))
    ss = QEMCMCSampler(params=FIXED).sample(p, num_reads=4000, num_chains=40, burn_in=128, thinning=2, seed=2)
    assert ss.info["records_per_chain"] == 100 and ss.info["moves"] == 128 + 99 * 2
    assert np.all(ss.info["ess_spins"] <= 4000) and np.all(ss.info["ess_spins"] > 100)
    check_marginals(ss, p)


@pytest.mark.parametrize("n", [8, 10])
def test_marginals_match_exact_at_larger_n(n):
    p = random_problem(n, seed=20 + n)
    s = QEMCMCSampler(params=ProposalParams(steps=4), chain=ChainSchedule(burn_in=160))
    ss = s.sample(p, num_reads=600, num_chains=60, thinning=4, seed=3)
    check_marginals(ss, p)


@pytest.mark.slow
@pytest.mark.parametrize("n", [12, 14, 16])
def test_marginals_match_exact_up_to_16_spins(n):
    p = random_problem(n, seed=30 + n)
    s = QEMCMCSampler(params=ProposalParams(steps=4), chain=ChainSchedule(burn_in=200))
    ss = s.sample(p, num_reads=32 * 40, num_chains=32, thinning=3, seed=4)
    assert ss.info["mode"] == "columns"
    check_marginals(ss, p)


# ---------------------------------------------------------------------- diagnostics against exact values
def stationary_start(p, chains, seed):
    return exact.sample(p, chains, seed=seed)  # (*batch, chains, n): every chain starts in equilibrium


def test_acceptance_rate_matches_the_exact_stationary_rate():
    p = random_problem(4, seed=11, beta=1.5)
    C = 2000
    ss = QEMCMCSampler(params=FIXED).sample(p, num_reads=C, initial_state=stationary_start(p, C, 0), burn_in=20, seed=5)
    Q = proposal_matrix(p.h.numpy(), p.J.numpy(), FIXED)
    E, pi = energies(p), exact.probabilities(p).numpy()
    acc = float((pi[:, None] * Q * np.minimum(1, np.exp(-1.5 * (E[None, :] - E[:, None])))).sum())
    rate = float(ss.info["acceptance_rate"])
    assert abs(rate - acc) <= Z * np.sqrt(acc * (1 - acc) / C)  # each chain's mean has variance <= p (1 - p)
    # moves that change the configuration: the same sum without the proposals of the current state
    A = pi[:, None] * Q * np.minimum(1, np.exp(-1.5 * (E[None, :] - E[:, None])))
    move = float(A.sum() - np.trace(A))
    assert move < acc - 0.01  # the identity proposal is frequent enough here for the two rates to differ
    assert abs(float(ss.info["move_rate"]) - move) <= Z * np.sqrt(move * (1 - move) / C)


def test_integrated_time_matches_the_exact_value():
    p = random_problem(4, seed=12, beta=2.0, scale=1.5)
    C, T = 200, 400
    ss = QEMCMCSampler(params=FIXED).sample(
        p, num_reads=C * T, num_chains=C, burn_in=0, initial_state=stationary_start(p, C, 1), seed=6
    )
    P = transition_matrix(p, FIXED)
    tau = mcmc.exact_integrated_time(P, exact.probabilities(p).numpy(), energies(p))
    est = float(ss.info["iat"])
    M = 5 * tau  # Sokal: var(tau_hat) ~ 2 (2M + 1) / N tau^2
    assert abs(est - tau) <= Z * tau * np.sqrt(2 * (2 * M + 1) / (C * T)) + 0.05 * tau, (est, tau)


def test_integrated_time_of_an_ar1_process():
    rng = np.random.default_rng(0)
    phi, C, T = 0.8, 64, 4000
    x = np.zeros((C, T))
    e = rng.normal(size=(C, T))
    for t in range(1, T):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    tau = (1 + phi) / (1 - phi)
    assert abs(float(mcmc.integrated_time(x)) - tau) < Z * tau * np.sqrt(2 * (10 * tau + 1) / (C * T)) + 0.05 * tau
    assert float(mcmc.integrated_time(np.ones((3, 50)))) == 1.0
    with pytest.raises(ValueError, match="traces"):
        mcmc.integrated_time(np.ones(5))


def test_effective_sample_size_formula():
    np.testing.assert_allclose(mcmc.effective_sample_size(10, 1, 7.0), 10)  # one record per independent chain
    np.testing.assert_allclose(mcmc.effective_sample_size(10, 100, 4.0), 250)
    np.testing.assert_allclose(mcmc.effective_sample_size(10, 100, 4.0, thinning=4), 1000)


def test_info_reports_executions_and_diagnostics_with_the_batch_shape():
    p = random_problem(3, seed=13, batch=(2, 3))
    ss = QEMCMCSampler().sample(p, num_reads=64, num_chains=8, burn_in=10, seed=0)
    info = ss.info
    assert info["moves"] == 10 + 7 and info["circuit_executions"] == 8 * 17
    for key in ("acceptance_rate", "iat", "ess"):
        assert info[key].shape == (2, 3), key
    assert info["ess_spins"].shape == (2, 3, 3) and info["final_state"].shape == (2, 3, 8, 3)
    assert np.all((info["acceptance_rate"] > 0) & (info["acceptance_rate"] <= 1))


# ---------------------------------------------------------------------- persistent chains
def test_initial_state_is_where_the_chains_start_and_final_state_where_they_stop():
    p = random_problem(4, seed=14, batch=(2,))
    init = torch.from_numpy(np.random.default_rng(0).choice([-1, 1], size=(2, 5, 4)).astype(np.int8))
    s = QEMCMCSampler()
    ss = s.sample(p, num_reads=5, initial_state=init, burn_in=0, seed=0)  # no move: the reads are the start
    np.testing.assert_array_equal(ss.spins, init.numpy())
    np.testing.assert_array_equal(ss.info["final_state"], init.numpy())
    ss2 = s.sample(p, num_reads=10, initial_state=init, burn_in=3, seed=0)
    assert ss2.info["num_chains"] == 5 and ss2.info["moves"] == 4
    np.testing.assert_array_equal(ss2.spins[:, 1::2], ss2.info["final_state"])  # chain-major: last record


def test_fields_start_draws_the_exact_fields_only_distribution():
    """With J = 0 and no move the reads are the start: independent spins with <s_j> = tanh(beta h_j) exactly."""
    g = torch.Generator().manual_seed(21)
    p = IsingProblem(
        torch.randn(3, 5, generator=g, dtype=torch.float64), torch.zeros(5, 5, dtype=torch.float64), beta=0.8
    )
    ss = QEMCMCSampler(chain=ChainSchedule(burn_in=0, start="fields")).sample(p, num_reads=3000, seed=2)
    assert ss.info["start"] == "fields" and ss.info["moves"] == 0
    check_marginals(ss, p, ess=3000)
    # per call, and masked (dropped) spins start free: uniform, <s> = 0
    pm = IsingProblem(p.h, p.J, beta=0.8, mask=torch.tensor([True, True, False, True, True]))
    ssm = QEMCMCSampler(chain=ChainSchedule(burn_in=0)).sample(pm, num_reads=3000, seed=3, start="fields")
    assert abs(ssm.spins[..., 2].mean()) <= Z * np.sqrt(1 / (3 * 3000))


def test_meanfield_start_is_closer_than_the_fields_start_and_keeps_the_stationary_law():
    """No move: the reads are independent spins at the mean-field magnetisations, which carry the couplings' first-order
    effect (errors against exact, compared with a margin of Z standard errors of the reads); after a burn-in the
    chains sample the exact marginals."""
    p = random_problem(6, seed=23, batch=(4,), beta=1.0, scale=0.8)
    m_ref = exact.marginals(p).numpy()
    R = 4000
    err = {
        st: np.sqrt(
            (
                (
                    QEMCMCSampler(chain=ChainSchedule(burn_in=0, start=st)).sample(p, num_reads=R, seed=5).marginals()
                    - m_ref
                )
                ** 2
            ).mean()
        )
        for st in ("fields", "meanfield")
    }
    assert err["meanfield"] + Z / np.sqrt(R) < err["fields"], err
    ss = QEMCMCSampler(chain=ChainSchedule(burn_in=64, start="meanfield"), params=ProposalParams(steps=6)).sample(
        p, num_reads=1200, seed=6
    )
    assert ss.info["start"] == "meanfield"
    check_marginals(ss, p, ess=1200)


def test_fields_start_keeps_the_boltzmann_stationary_distribution():
    """Coupled problem: after the burn-in the chains sample exact Boltzmann marginals from either start."""
    p = random_problem(5, seed=22, batch=(2,), beta=1.1)
    ss = QEMCMCSampler(chain=ChainSchedule(burn_in=64, start="fields"), params=ProposalParams(steps=6)).sample(
        p, num_reads=1200, seed=4
    )
    check_marginals(ss, p, ess=1200)
    with pytest.raises(ValueError, match="start must be one of"):
        QEMCMCSampler(chain=ChainSchedule(start="zero"))
    with pytest.raises(ValueError, match="start must be one of"):
        QEMCMCSampler().sample(p, num_reads=4, start="mean-field")


@pytest.mark.parametrize(
    "init, match",
    [
        (np.ones((2, 5, 3), dtype=np.int8), "initial_state must be"),
        (np.zeros((2, 5, 4), dtype=np.int8), "initial_state must be"),
        (np.ones((5, 4), dtype=np.int8), "initial_state must be"),
    ],
)
def test_bad_initial_state_is_refused_before_any_work(init, match):
    p = random_problem(4, seed=15, batch=(2,))
    s = QEMCMCSampler()
    s._sample = None  # reaching the backend would fail with a TypeError
    with pytest.raises(ValueError, match=match):
        s.sample(p, num_reads=5, initial_state=init)
    with pytest.raises(ValueError, match="num_chains = 3 but initial_state holds 5"):
        s.sample(p, num_reads=5, num_chains=3, initial_state=np.ones((2, 5, 4), dtype=np.int8))


def test_constructor_and_option_validation():
    with pytest.raises(ValueError, match="engine must be"):
        QEMCMCSampler(engine="qpu")
    with pytest.raises(ValueError, match="mode must be"):
        QEMCMCSampler(mode="fast")
    with pytest.raises(TypeError, match="params must be a ProposalParams"):
        QEMCMCSampler(params={"gamma": 0.5})
    with pytest.raises(TypeError, match="params must be a ProposalParams"):
        QEMCMCSampler().sample(random_problem(2, 0), num_reads=4, params=0.5)
    with pytest.raises(ValueError, match="burn_in must be"):
        QEMCMCSampler().sample(random_problem(2, 0), num_reads=4, burn_in=-1)
    with pytest.raises(ValueError, match="above this backend's limit"):
        QEMCMCSampler(max_spins=4).sample(random_problem(5, 0), num_reads=4)
    s = get_sampler("qemcmc", gamma=0.3, time=[1.0, 4.0], trotter_steps=5)  # number spellings (command lines)
    assert s.params == ProposalParams(gamma=0.3, time=(1.0, 4.0), steps=5)
    with pytest.raises(ValueError, match="not both"):
        get_sampler("qemcmc", params=FIXED, gamma=0.3)
    with pytest.raises(ValueError, match="gamma must lie in"):
        get_sampler("qemcmc", gamma=2.0)
    with pytest.raises(ValueError, match="start must be one of"):
        get_sampler("qemcmc", start="zero")
    with pytest.raises(TypeError, match="chain must be a ChainSchedule"):
        QEMCMCSampler(chain={"burn_in": 3})
    with pytest.raises(ValueError, match="kernel must be one of .*got 'gpu'"):
        get_sampler("qemcmc", kernel="gpu")


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_the_compiled_and_torch_kernels_run_the_same_chains(dtype):
    """``kernel=`` changes how the proposals are computed, not what they are: the same seed gives the same chains
    (a masked batch of random problems at n = 9, 1 and 5 moves), and the sampler reports its kernel. The two kernels'
    float arithmetic differs (and differs between CPUs), so a draw may move where its uniform lies within rounding of
    a bin edge (``test_qemcmc_draw.py`` bounds that below 1e-3 of the draws at n = 12 in float32), and a moved draw
    sends its chain elsewhere from then on: at most one of the 96 reads may differ; a wrong proposal rule would change
    most of them."""
    pytest.importorskip("numba")
    p = random_problem(9, seed=41, batch=(6,), mask=torch.arange(9) <= torch.arange(6)[:, None] + 3)
    for moves in (1, 5):
        runs = {}
        for kernel in ("compiled", "torch"):
            s = QEMCMCSampler(kernel=kernel, dtype=dtype, chain=ChainSchedule(burn_in=moves, start="meanfield"))
            assert s.properties["kernel"] == kernel
            runs[kernel] = s.sample(p, num_reads=16, seed=5).spins
        differ = (np.asarray(runs["compiled"]) != np.asarray(runs["torch"])).any(-1)
        assert differ.shape == (6, 16) and differ.sum() <= 1, f"{differ.sum()} of 96 reads differ after {moves} moves"


def test_registry_folds_flat_options_into_the_grouped_values():
    """The registry's flat options (command lines, older code) build the frozen values the constructors take, on top
    of each class's defaults; the sampler is the one built from the values."""
    s = get_sampler("qemcmc", burn_in=5, thinning=2, start="fields", num_chains=3, trotter_steps=4)
    assert s.chain == ChainSchedule(burn_in=5, thinning=2, start="fields", num_chains=3)
    assert s.params == ProposalParams(steps=4) and (s.burn_in, s.thinning, s.start, s.num_chains) == (5, 2, "fields", 3)
    assert get_sampler("qemcmc").chain == ChainSchedule(burn_in=128)
    assert get_sampler("mh-local", thinning=3).chain == ChainSchedule(burn_in=512, thinning=3)
    p = random_problem(3, 0)
    a = get_sampler("mh-uniform", burn_in=7, start="meanfield").sample(p, num_reads=8, seed=1)
    b = UniformMetropolisSampler(chain=ChainSchedule(burn_in=7, start="meanfield")).sample(p, num_reads=8, seed=1)
    assert np.array_equal(a.spins, b.spins)
    assert {"burn_in", "thinning", "start", "num_chains", "gamma", "time", "trotter_steps"} <= sampler_options("qemcmc")
    with pytest.raises(TypeError, match="does not accept option"):
        get_sampler("qemcmc", burnin=3)


def test_seeds_reproduce():
    p = random_problem(4, seed=16, batch=(3,))
    s = QEMCMCSampler(chain=ChainSchedule(burn_in=8))
    a, b = s.sample(p, num_reads=32, num_chains=8, seed=3), s.sample(p, num_reads=32, num_chains=8, seed=3)
    np.testing.assert_array_equal(a.spins, b.spins)
    assert not np.array_equal(a.spins, s.sample(p, num_reads=32, num_chains=8, seed=4).spins)


def test_conforms():
    assert_sampler_conforms(QEMCMCSampler(params=ProposalParams(steps=4)), num_reads=3000, seed=7)


# ---------------------------------------------------------------------- the aer engine
def test_aer_engine_samples_boltzmann():
    pytest.importorskip("qiskit_aer")
    p = random_problem(3, seed=17, beta=1.2)
    s = QEMCMCSampler(engine="aer", params=ProposalParams(steps=3), chain=ChainSchedule(burn_in=30))
    ss = s.sample(p, num_reads=300, seed=8)
    assert ss.info["engine"] == "aer" and ss.info["mode"] == "shots"
    check_marginals(ss, p, ess=400)


# ---------------------------------------------------------------------- the ibm engine (offline: local mode)
def test_ibm_engine_on_an_ideal_local_backend_samples_boltzmann():
    pytest.importorskip("qiskit_ibm_runtime")
    from qiskit_aer import AerSimulator

    p = random_problem(3, seed=18, beta=1.2)
    with QEMCMCSampler(
        engine="ibm", backend=AerSimulator(), params=ProposalParams(steps=3), chain=ChainSchedule(burn_in=30)
    ) as s:
        ss = s.sample(p, num_reads=300, seed=9)
    assert ss.info["engine"] == "ibm" and len(ss.info["job_ids"]) == 30  # one job per chain step
    check_marginals(ss, p, ess=300)


def test_ibm_engine_runs_a_fake_device_by_name():
    """A fake device (noise model, ISA transpilation) runs offline; noise makes the proposal only approximately
    symmetric, so only the structure is checked here."""
    pytest.importorskip("qiskit_ibm_runtime")
    s = QEMCMCSampler(
        engine="ibm", backend="fake_manila", params=ProposalParams(steps=2), chain=ChainSchedule(burn_in=3)
    )
    assert s.max_spins == 5 and s.properties["max_spins"] == 5
    ss = s.sample(random_problem(3, seed=19, batch=(2,)), num_reads=8, num_chains=4, seed=0)
    assert ss.spins.shape == (2, 8, 3) and ss.info["backend_name"] == "fake_manila"
    assert len(ss.info["job_ids"]) == ss.info["moves"] == 4
    with pytest.raises(ValueError, match="allow_hardware"):
        QEMCMCSampler(engine="ibm", backend="ibm_torino")
    with pytest.raises(ValueError, match="for engine='ibm'"):
        QEMCMCSampler(backend="fake_manila")


@pytest.mark.parametrize("shape", ["constant", "reverse"])
@pytest.mark.parametrize("n, problems, chains", [(1, 2, 3), (5, 3, 4), (9, 7, 8)])
def test_evolving_basis_states_equals_the_simulated_first_layer(shape, n, problems, chains):
    """The engine's shortcut (first driver layer written as a product state, problem phases shared by a problem's
    chains, sub-chunks of whole problems) against simulating every layer from one-hot states."""
    from hybrid_attention.backends.mcmc.qemcmc_engines import evolve_basis_states, evolve_proposal

    g = torch.Generator().manual_seed(n)
    E = torch.randn(problems, 1 << n, generator=g, dtype=torch.float64)
    idx = torch.randint(0, 1 << n, (problems, chains), generator=g)
    a, b = ProposalParams(gamma=0.45, time=7.0, steps=3, shape=shape).slices(0.45, 7.0)
    onehot = torch.zeros(problems * chains, 1 << n, dtype=torch.complex128)
    onehot[torch.arange(problems * chains), idx.reshape(-1)] = 1.0
    want = evolve_proposal(onehot, E.repeat_interleave(chains, dim=0), a, b, 3)
    got = evolve_basis_states(idx, E, a, b, 3, dtype=torch.complex128, cache_limit=1 << 12)  # several sub-chunks
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
