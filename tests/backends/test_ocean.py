"""D-Wave Ocean interop (hybrid_attention/backends/ocean*.py): the ``dimod`` sampler, BQM and SampleSet conversions, and our samplers
as ``dimod.Sampler`` objects. Oracles: exact enumeration (our ``exact`` module and ``dimod.ExactSolver``); stochastic
tolerances are z = 5 standard errors of the number of reads. No network: ``dwave-system`` is never imported."""

from __future__ import annotations

import importlib.util
import itertools
import sys
import unittest
import warnings

import numpy as np
import pytest
import torch

dimod = pytest.importorskip("dimod")
pytest.importorskip("dwave.samplers")

from dwave.samplers import SimulatedAnnealingSampler, TabuSampler, TreeDecompositionSampler  # noqa: E402

from hybrid_attention import IsingProblem, exact  # noqa: E402
from hybrid_attention.backends import get_sampler  # noqa: E402
from hybrid_attention.backends import testing as conformance  # noqa: E402
from hybrid_attention.backends.ocean.sampler import (  # noqa: E402
    DimodAdapter,
    DimodSampler,
    dimod_sampler,
    sampleset_from_dimod,
    sampleset_to_dimod,
    to_bqm,
)
from hybrid_attention.sampling import Sampling  # noqa: E402

Z = 5.0


def random_problem(n, *, seed, batch=(), scale=0.8, beta=1.0, mask=None):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(*batch, n, generator=g, dtype=torch.float64) * scale
    J = torch.randn(n, n, generator=g, dtype=torch.float64) * scale
    return IsingProblem.from_couplings(h, J, beta=beta, mask=mask)


def all_spins(n):
    return np.array(list(itertools.product([-1, 1], repeat=n)), dtype=np.int8)


def boltzmann_from_dimod(bqm, beta):
    """Marginals ``{v: <s_v>}`` of ``p ∝ exp(-beta E_dimod)`` by dimod's own enumeration (dimod's sign)."""
    ss = dimod.ExactSolver().sample(bqm.spin)
    e = ss.record.energy
    p = np.exp(-beta * (e - e.min()))
    p /= p.sum()
    return dict(zip(ss.variables, p @ ss.record.sample))


def shot_tol(m_ref, reads, z=Z):
    return z * np.sqrt(np.clip(1 - m_ref**2, 0, None) / reads) + 1e-12


# ---------------------------------------------------------------------- sign conventions against enumeration
@pytest.mark.parametrize("vartype", ["SPIN", "BINARY"])
def test_bqm_energies_equal_ours_on_every_configuration(vartype):
    p = random_problem(4, seed=0)
    bqm = to_bqm(p, labels=["a", ("b",), 7, "d"], vartype=vartype, offset=0.75)
    S = all_spins(4)
    ours = p.energy(torch.from_numpy(S.astype(np.float64))).numpy()
    vals = S if vartype == "SPIN" else (S + 1) // 2  # dimod BINARY x = 1 is s = +1
    theirs = np.array([bqm.energy(dict(zip(["a", ("b",), 7, "d"], row))) for row in vals])
    np.testing.assert_allclose(theirs, ours + 0.75, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("vartype", ["SPIN", "BINARY"])
def test_to_bqm_from_bqm_round_trip_with_labels_and_masks(seed, vartype):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 6))
    mask = torch.from_numpy(rng.random(n) < 0.7)
    mask[int(rng.integers(n))] = True  # at least one active spin
    p = random_problem(n, seed=seed, mask=mask)
    labels = [("t", j) if j % 2 else f"v{j}" for j in rng.permutation(n).tolist()]
    offset = float(rng.normal())
    back, off = IsingProblem.from_bqm(
        to_bqm(p, labels=labels, vartype=vartype, offset=offset), labels=labels, return_offset=True
    )
    assert back.n == n and (back.mask is None) == (p.mask is None)
    if p.mask is not None:
        assert back.mask.tolist() == p.mask.tolist()
    for a, b in zip(back.dropped(), p.dropped()):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
    assert off == pytest.approx(offset, abs=1e-12)


def test_converted_problems_have_the_same_boltzmann_marginals():
    """Our exact marginals of p equal the Boltzmann marginals of to_bqm(p) enumerated by dimod, and back."""
    mask = torch.tensor([True, True, False, True, True])
    p = random_problem(5, seed=1, beta=1.3, mask=mask)
    bqm = to_bqm(p)
    md = boltzmann_from_dimod(bqm, 1.3)
    m = exact.marginals(p).numpy()
    assert sorted(md) == [0, 1, 3, 4]  # the masked spin is not a variable
    np.testing.assert_allclose([md[j] for j in (0, 1, 3, 4)], m[[0, 1, 3, 4]], atol=1e-12)
    back = IsingProblem.from_bqm(bqm, labels=range(5), beta=1.3)
    assert back.mask.tolist() == mask.tolist()
    np.testing.assert_allclose(exact.marginals(back).numpy(), m, atol=1e-12)


def test_sampleset_round_trip_keeps_spins_counts_and_energies():
    p = random_problem(3, seed=2, batch=(2,))
    ss = get_sampler("exact").sample(p, num_reads=500, seed=3)
    d = sampleset_to_dimod(ss, (1,), labels=["x", "y", "z"], aggregate=True)
    assert set(d.variables) == {"x", "y", "z"} and d.vartype is dimod.SPIN
    assert d.record.num_occurrences.sum() == 500
    bqm = to_bqm(p[1], labels=["x", "y", "z"])
    dimod.testing.assert_sampleset_energies(d, bqm)
    back = sampleset_from_dimod(d, p[1], labels=["x", "y", "z"])
    assert back.num_reads == 500
    np.testing.assert_allclose(back.marginals(), ss.marginals()[1], atol=1e-12)
    np.testing.assert_allclose(back.correlations(), ss.correlations()[1], atol=1e-12)
    binary = sampleset_to_dimod(ss, (0,), vartype="BINARY")
    assert binary.vartype is dimod.BINARY
    with pytest.raises(ValueError, match="vartype='BINARY' only applies to the default model"):  # not dropped
        sampleset_to_dimod(ss, (1,), bqm=bqm, labels=["x", "y", "z"], vartype="BINARY")
    np.testing.assert_allclose(sampleset_from_dimod(binary, p[0]).marginals(), ss.marginals()[0], atol=1e-12)


def test_exact_output_goes_to_a_probability_vector():
    p = random_problem(2, seed=4)
    ss = get_sampler("exact").sample(p)  # all 4 states, exact probabilities
    d = sampleset_to_dimod(ss)
    np.testing.assert_allclose(d.record.probability, ss.weights)
    assert (d.record.num_occurrences == 1).all()


# ---------------------------------------------------------------------- the dimod sampler
def test_default_is_simulated_annealing_at_constant_beta():
    s = get_sampler("dimod")
    assert isinstance(s.sampler, SimulatedAnnealingSampler) and s.beta_mode == "schedule"
    assert s.properties["dimod_sampler"] == "SimulatedAnnealingSampler" and not s.properties["hardware"]


def test_tree_decomposition_wrapper_conforms():
    """The second beta mode (a ``beta`` parameter: exact Boltzmann samples) passes the shipped suite too."""
    s = DimodSampler(TreeDecompositionSampler())
    assert s.beta_mode == "parameter"
    conformance.assert_sampler_conforms(s, num_reads=3000, seed=7)


@pytest.mark.parametrize("sampler", ["simulated_annealing", "tree_decomposition"])
def test_marginals_and_correlations_match_enumeration(sampler):
    """A batch with per-problem beta and a masked last spin: marginals and correlations within 5 standard errors."""
    mask = torch.tensor([[True] * 5, [True, True, True, True, False], [True, False, True, True, True]])
    beta = torch.tensor([0.5, 1.0, 1.7], dtype=torch.float64)
    p = random_problem(5, seed=5, batch=(3,), beta=beta, mask=mask)
    reads = 4000
    ss = DimodSampler(sampler, num_sweeps=300).sample(p, num_reads=reads, seed=11)
    m_ref = exact.marginals(p).numpy()
    assert np.all(np.abs(ss.marginals() - m_ref) <= shot_tol(m_ref, reads))
    c_ref = exact.correlations(p).numpy()
    assert np.all(np.abs(ss.correlations() - c_ref) <= shot_tol(c_ref, reads))


def test_masked_spins_are_free_draws_and_the_rest_ignores_them():
    p = conformance.problem_ladder()["masked spin"]
    ss = get_sampler("dimod").sample(p, num_reads=2000, seed=0)
    col = ss.spins[:, 1]
    assert set(np.unique(col)) == {-1, 1}  # present as free ±1 values, like the other samplers
    assert abs(col.mean()) <= shot_tol(0.0, 2000) and ss.marginals()[1] == 0
    none = IsingProblem(torch.zeros(2, dtype=torch.float64), mask=torch.tensor([False, False]))
    out = get_sampler("dimod").sample(none, num_reads=100, seed=0)
    assert out.spins.shape == (100, 2) and np.all(out.marginals() == 0)


def test_seeds_are_reproducible_and_per_problem():
    p = IsingProblem(torch.zeros(2, 3, dtype=torch.float64))
    s = get_sampler("dimod", num_sweeps=50)
    a, b = s.sample(p, num_reads=64, seed=9), s.sample(p, num_reads=64, seed=9)
    np.testing.assert_array_equal(a.spins, b.spins)
    assert a.info["seeds"][0] != a.info["seeds"][1] and not np.array_equal(a.spins[0], a.spins[1])


def test_scale_mode_hands_over_beta_times_the_problem():
    """A sampler without a temperature parameter sees ``beta * E`` (dimod sign); a seed it cannot take warns."""
    tracker = dimod.TrackingComposite(dimod.RandomSampler())
    s = DimodSampler(tracker)
    assert s.beta_mode == "scale"
    p = IsingProblem(torch.tensor([0.5, -1.0]), torch.tensor([[0.0, 0.25], [0.25, 0.0]]), beta=2.0)
    with pytest.warns(UserWarning, match="takes no seed"):
        ss = s.sample(p, num_reads=10, seed=1)
    bqm = tracker.input["bqm"]
    assert dict(bqm.linear) == {0: -1.0, 1: 2.0} and dict(bqm.quadratic) == {(1, 0): -0.5}
    assert tracker.input["num_reads"] == 10 and ss.spins.shape == (10, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s.sample(p, num_reads=10)  # no seed: nothing to warn about


def test_refuses_options_that_would_change_what_beta_means():
    with pytest.raises(ValueError, match=r"set by the wrapper"):
        DimodSampler(sample_options={"beta_range": (0.1, 10.0)})
    with pytest.raises(ValueError, match=r"set by the wrapper"):
        DimodSampler(sample_options={"num_sweeps": 10})
    with pytest.raises(TypeError, match="does not take option"):
        DimodSampler(sample_options={"no_such": 1})
    with pytest.raises(ValueError, match="needs a sampler with a 'beta_schedule'"):
        DimodSampler(TabuSampler(), beta_mode="schedule")
    with pytest.raises(ValueError, match="beta_mode must be one of"):
        DimodSampler(beta_mode="hot")
    with pytest.raises(ValueError, match="takes no num_reads"):
        DimodSampler(dimod.ExactSolver())
    with pytest.raises(TypeError, match="dimod.Sampler or a name"):
        DimodSampler(object())
    with pytest.raises(ValueError, match="unknown sampler name"):
        DimodSampler("quantum_magic")
    ok = DimodSampler(sample_options={"proposal_acceptance_criteria": "Metropolis"})
    assert ok.sample_options["proposal_acceptance_criteria"] == "Metropolis"


class _RemoteLike(dimod.Sampler):
    """Stands in for a QPU client: its module says dwave.system; it samples locally (no network)."""

    parameters = {"num_reads": []}
    properties: dict = {}

    def sample(self, bqm, num_reads=1):
        return dimod.RandomSampler().sample(bqm, num_reads=num_reads)


_RemoteLike.__module__ = "dwave.system.samplers.fake"


def test_hardware_needs_the_explicit_opt_in_and_is_never_imported():
    with pytest.raises(ValueError, match="allow_hardware=True"):
        dimod_sampler("dwave")
    with pytest.raises(ValueError, match="allow_hardware=True"):
        get_sampler("dimod", sampler="dwave")
    with pytest.raises(ValueError, match="allow_hardware=True"):
        DimodSampler(dimod.TrackingComposite(_RemoteLike()))  # found behind a composite too
    assert "dwave.system" not in sys.modules
    if importlib.util.find_spec("dwave.system") is None:  # never constructed when installed: it contacts Leap
        with pytest.raises(ImportError, match="pip install dwave-system"):
            dimod_sampler("dwave", allow_hardware=True)
    s = DimodSampler(_RemoteLike(), allow_hardware=True)
    assert s.hardware and s.beta_mode == "scale"
    assert s.sample(IsingProblem(torch.zeros(3)), num_reads=5).spins.shape == (5, 3)


# ---------------------------------------------------------------------- our samplers as dimod samplers
def _adapter_exact():
    return DimodAdapter("exact")


def _adapter_gibbs():
    return DimodAdapter("gibbs")


_adapter_exact.__name__, _adapter_gibbs.__name__ = "ExactAdapter", "GibbsAdapter"


@dimod.testing.load_sampler_bqm_tests(_adapter_exact)
@dimod.testing.load_sampler_bqm_tests(_adapter_gibbs)
class TestDimodBQMSuite(unittest.TestCase):
    """dimod's own sampler tests: empty, one-variable, paths; SPIN and BINARY; odd labels; offsets."""

    def test_api(self):
        for make in (_adapter_exact, _adapter_gibbs):
            dimod.testing.assert_sampler_api(make())


def test_adapter_labels_vartype_offset_and_energies():
    sampler = DimodAdapter("exact")
    bqm = dimod.BinaryQuadraticModel(
        {"q": 0.5, ("t", 1): -1.0}, {("q", ("t", 1)): 0.75, ("q", 3): -0.25}, 2.0, "BINARY"
    )
    ss = sampler.sample(bqm, num_reads=200, seed=1, beta=0.7)
    assert ss.vartype is dimod.BINARY and set(ss.variables) == {"q", ("t", 1), 3}
    dimod.testing.assert_sampleset_energies(ss, bqm)
    assert len(ss) == 200 and ss.info["backend"] == "exact"
    assert {"num_reads", "seed", "beta"} <= set(sampler.parameters) and sampler.properties["sampler"] == "exact"


@pytest.mark.parametrize("name", ["exact", "gibbs", "dimod"])
def test_adapter_samples_the_boltzmann_law_of_the_dimod_model(name):
    """Marginals of the adapter's reads at beta vs dimod's own enumeration of exp(-beta E_dimod)."""
    bqm = dimod.BinaryQuadraticModel({"a": 0.4, "b": -0.3, "c": 0.1}, {("a", "b"): -0.8, ("b", "c"): 0.6}, 0.5, "SPIN")
    reads, beta = 4000, 1.4
    ss = DimodAdapter(name).sample(bqm, num_reads=reads, seed=5, beta=beta)
    md = boltzmann_from_dimod(bqm, beta)
    occ = ss.record.num_occurrences
    for v in bqm.variables:
        col = ss.record.sample[:, ss.variables.index(v)]
        est = float((occ * col).sum() / occ.sum())
        assert abs(est - md[v]) <= shot_tol(md[v], reads), (v, est, md[v])


def test_adapter_qubo_matches_enumeration_and_is_reproducible():
    Q = {(0, 0): -1.0, (1, 1): 0.5, (0, 1): 1.5}
    a = DimodAdapter("gibbs")
    s1, s2 = a.sample_qubo(Q, num_reads=300, seed=4), a.sample_qubo(Q, num_reads=300, seed=4)
    np.testing.assert_array_equal(s1.record.sample, s2.record.sample)
    for sample, e in s1.data(["sample", "energy"]):
        assert e == pytest.approx(dimod.qubo_energy(sample, Q))


def test_adapter_refuses_bad_input():
    a = DimodAdapter("exact")
    with pytest.raises(ValueError, match="beta"):
        a.sample_ising({0: 1.0}, {}, beta=0.0)
    with pytest.raises(TypeError, match="unknown option"):
        a.sample_ising({0: 1.0}, {}, num_reads=3, temperature=2)
    with pytest.raises(TypeError, match="BinaryQuadraticModel"):
        a.sample({0: 1.0})
    with pytest.raises(TypeError, match="only apply to a sampler given by name"):
        DimodAdapter(get_sampler("exact"), max_spins=3)
    with pytest.raises(TypeError, match="registry name or a hybrid-attention Sampler"):
        DimodAdapter(SimulatedAnnealingSampler())


def test_attention_bridge_through_the_dimod_sampler():
    """The bridge's padded, causally masked call (capabilities.pad_with_mask) gives the exact attention marginals
    within shot noise, and gradients flow (covariance surrogate)."""
    from hybrid_attention.bridge import attention_marginals

    g = torch.Generator().manual_seed(0)
    h = torch.randn(2, 1, 5, 5, generator=g, dtype=torch.float64, requires_grad=True)
    U = torch.triu(torch.randn(1, 5, 5, generator=g, dtype=torch.float64) * 0.5, 1)
    J = U + U.transpose(-1, -2)
    m_ref = attention_marginals(h, J, sampling=Sampling(get_sampler("exact"))).detach().numpy()
    reads = 4000
    m = attention_marginals(
        h, J, sampling=Sampling(get_sampler("dimod", sampler="tree_decomposition"), num_reads=reads, seed=0)
    )
    assert np.all(np.abs(m.detach().numpy() - m_ref) <= shot_tol(m_ref, reads))
    m.sum().backward()
    assert torch.isfinite(h.grad).all() and h.grad.abs().sum() > 0
