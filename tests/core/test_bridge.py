"""Sampler bridge: exact gradients with the exact sampler (1e-8 in float64 against autograd through enumeration),
covariance gradients from reads, causal structure, DQA surrogate, bad input."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem, exact, kernels
from hybrid_attention.backends import get_sampler
from hybrid_attention.bridge import attention_marginals, differentiable_marginals
from hybrid_attention.sampling import PersistentChains, Sampling


def sym(raw):
    U = raw.triu(1)
    return U + U.transpose(-1, -2)


@pytest.fixture
def layer():
    g = torch.Generator().manual_seed(0)
    B, H, T = 2, 2, 5
    h = torch.randn(B, H, T, T, generator=g, dtype=torch.float64, requires_grad=True)
    raw = torch.randn(H, T, T, generator=g, dtype=torch.float64, requires_grad=True)
    beta = torch.tensor([0.7, 1.3], dtype=torch.float64, requires_grad=True)
    G = torch.randn(B, H, T, T, generator=g, dtype=torch.float64)
    return h, raw, beta, G


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("readout,pad", [("exact", False), ("shots", False), ("shots", True), ("exact", True)])
def test_exact_sampler_gradients_equal_autograd(layer, causal, readout, pad):
    """J enters through a symmetric parametrisation (as in the model), so gradients compare on the raw parameter."""
    h, raw, beta, G = layer
    kernel = kernels.causal_marginals if causal else kernels.bidirectional_marginals
    ref = kernel(h, sym(raw), beta)
    g_ref = torch.autograd.grad((ref * G).sum(), (h, raw, beta))
    sampling = Sampling(get_sampler("exact"), readout=readout)  # shots, num_reads None: every state, its weight
    m = attention_marginals(h, sym(raw), beta, sampling=sampling, causal=causal, pad_with_mask=pad)
    assert m.dtype == torch.float64 and m.shape == h.shape
    assert torch.allclose(m, ref, atol=1e-12, rtol=0)
    g = torch.autograd.grad((m * G).sum(), (h, raw, beta))
    for a, b in zip(g, g_ref):
        assert torch.allclose(a, b, atol=1e-8, rtol=0)


def test_sampled_marginals_gradcheck():
    g = torch.Generator().manual_seed(1)
    h = torch.randn(3, 4, generator=g, dtype=torch.float64, requires_grad=True)
    U = torch.randn(3, 4, 4, generator=g, dtype=torch.float64).triu(1)
    J = (U + U.transpose(-1, -2)).requires_grad_()
    beta = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    reads = Sampling(get_sampler("exact"), readout="shots")  # every state with its exact weight

    off = 1.0 - torch.eye(4, dtype=torch.float64)

    def f(h, J, beta):  # symmetrise inside so finite differences stay symmetric with a zero diagonal
        return differentiable_marginals(IsingProblem(h, 0.5 * (J + J.transpose(-1, -2)) * off, beta=beta), reads)

    assert torch.autograd.gradcheck(f, (h, J, beta), atol=1e-7)


def test_covariance_gradients_from_exact_reads_within_shot_noise():
    g = torch.Generator().manual_seed(2)
    h = torch.randn(4, 4, generator=g, dtype=torch.float64, requires_grad=True)
    U = torch.randn(4, 4, generator=g, dtype=torch.float64).triu(1)
    raw = U.clone().requires_grad_()
    G = torch.randn(4, 4, generator=g, dtype=torch.float64)
    ref = torch.autograd.grad((exact.marginals(IsingProblem(h, sym(raw))) * G).sum(), (h, raw))
    N = 40000
    m = differentiable_marginals(
        IsingProblem(h, sym(raw)), Sampling(get_sampler("exact"), num_reads=N, readout="shots", seed=3)
    )
    got = torch.autograd.grad((m * G).sum(), (h, raw))
    # each gradient entry is a mean of N terms bounded by |u| * |s| <= sum_j |G_j| (centred: x2); z = 5
    bound = 5 * 2 * G.abs().sum(-1, keepdim=True) / np.sqrt(N)
    assert torch.all((got[0] - ref[0]).abs() <= bound)
    assert torch.all((got[1] - ref[1]).abs() <= 5 * 2 * G.abs().sum() / np.sqrt(N))
    assert (got[0] - ref[0]).abs().max() > 0  # really estimated from reads


def test_causal_structure_and_future_independence(layer):
    h, raw, beta, _ = layer
    s = Sampling(get_sampler("exact"), num_reads=64, readout="shots", seed=0)
    m = attention_marginals(h, sym(raw), beta, sampling=s)
    assert torch.all(m.detach().triu(1) == 0)
    h2 = h.detach().clone()
    h2[..., 1, 3:] += 5.0  # future keys of query 1
    m2 = attention_marginals(h2, sym(raw), beta, sampling=s)
    assert torch.equal(m.detach()[..., :2, :], m2[..., :2, :])


def test_dqa_sampler_through_bridge_is_surrogate_at_effective_beta():
    pytest.importorskip("qiskit_aer")
    from hybrid_attention.circuits import DQASchedule
    from hybrid_attention.circuits.reference import dqa_probabilities

    sched = DQASchedule(tau=1.5, steps=10)
    aer = get_sampler("aer", schedule=sched)
    g = torch.Generator().manual_seed(4)
    h = torch.randn(1, 1, 3, 3, generator=g, dtype=torch.float64, requires_grad=True)
    J = sym(torch.randn(1, 3, 3, generator=g, dtype=torch.float64)).requires_grad_()
    N = 4000
    m = attention_marginals(h, J, 1.0, sampling=Sampling(aer, num_reads=N, seed=5))
    # forward: the circuit's marginals per prefix (the reference output of query i's problem)
    for i in range(3):
        p = dqa_probabilities(h.detach()[0, 0, i, : i + 1].numpy(), J.detach()[0, : i + 1, : i + 1].numpy(), sched)
        S = 1 - 2 * ((np.arange(1 << (i + 1))[:, None] >> np.arange(i + 1)) & 1)
        mref = p @ S
        assert np.all(np.abs(m.detach()[0, 0, i, : i + 1].numpy() - mref) <= 5 * np.sqrt((1 - mref**2) / N) + 1e-12)
    # backward: beta_h * covariance of the reads (recomputed by hand for the last query)
    G = torch.zeros_like(m)
    G[0, 0, 2, 0] = 1.0
    gh = torch.autograd.grad((m * G).sum(), h)[0]
    bh, bJ = aer.effective_beta(1.0)
    ss = aer.sample(
        IsingProblem(h.detach()[0, 0, 2], J.detach()[0]),
        num_reads=N,
        seed=int(np.random.SeedSequence(5).spawn(3)[2].generate_state(1)[0] & 0x7FFFFFFF),
    )
    s = ss.spins[0] if ss.spins.ndim == 3 else ss.spins
    s = s.astype(float)
    cov = ((s[:, 0:1] * s).mean(0) - s[:, 0].mean() * s.mean(0)) * N / (N - 1)  # the unbiased sample covariance
    assert np.allclose(gh[0, 0, 2].numpy(), bh * cov, atol=1e-12)


def test_boltzmann_attention_with_exact_sampler_matches_exact_path():
    from hybrid_attention.attention import attention_weights

    g = torch.Generator().manual_seed(6)
    h = torch.randn(2, 1, 4, 4, generator=g, dtype=torch.float64)
    J = sym(torch.randn(1, 4, 4, generator=g, dtype=torch.float64))
    a = attention_weights(h, J, mode="hj")
    b = attention_weights(h, J, mode="hj", sampling=Sampling(get_sampler("exact")))
    assert torch.allclose(a, b, atol=1e-12)


def test_bridge_bad_input():
    ex = get_sampler("exact")
    h = torch.zeros(1, 1, 3, 3)
    J = torch.zeros(1, 3, 3)
    with pytest.raises(ValueError, match=r"\(B, H, Tq, T\)"):
        attention_marginals(torch.zeros(3, 3), J, sampling=Sampling(ex))
    with pytest.raises(ValueError, match="T' >= T"):
        attention_marginals(h, torch.zeros(1, 2, 2), sampling=Sampling(ex))
    with pytest.raises(ValueError, match="Tq == T"):
        attention_marginals(torch.zeros(1, 1, 2, 3), J, sampling=Sampling(ex))
    with pytest.raises(TypeError, match="needs a sampler"):
        attention_marginals(h, J)
    with pytest.raises(TypeError, match="sampling must be a Sampling"):
        attention_marginals(h, J, sampling=ex)
    with pytest.raises(ValueError, match="beta"):
        attention_marginals(h, J, torch.ones(2), sampling=Sampling(ex))
    with pytest.raises(ValueError, match="readout"):
        differentiable_marginals(IsingProblem(torch.zeros(2)), Sampling(ex, readout="magic"))
    with pytest.raises(TypeError, match="sampling must be a Sampling"):
        differentiable_marginals(IsingProblem(torch.zeros(2)), ex)
    with pytest.raises(ValueError, match="symmetric"):
        attention_marginals(
            h, torch.tensor([[[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]]), sampling=Sampling(ex)
        )
    bad = h.clone()
    bad[0, 0, 2, 1] = float("nan")
    with pytest.raises(ValueError, match="finite on the keys each query sees"):
        attention_marginals(bad, J, sampling=Sampling(ex))
    future = h.clone()
    future[0, 0, 0, 2] = float("-inf")  # a key query 0 never sees: ignored when causal
    assert torch.isfinite(attention_marginals(future, J, sampling=Sampling(ex))).all()
    with pytest.raises(ValueError, match="finite"):
        attention_marginals(future, J, sampling=Sampling(ex), causal=False)


def _grouping(overhead, **kw):
    """A statevector sampler whose class declares the bridge's prefix grouping (``per_call_overhead``) ``overhead``."""
    from hybrid_attention.backends.dqa.statevector import StatevectorSampler

    class Grouping(StatevectorSampler):
        capabilities = dataclasses.replace(StatevectorSampler.capabilities, per_call_overhead=overhead)

    return Grouping(**kw)


@pytest.mark.parametrize("overhead", [1e3, 1e9])
def test_grouped_prefixes_equal_one_call_per_prefix(layer, overhead):
    """Grouping prefix lengths into padded, causally masked calls changes nothing: values and gradients of the
    statevector sampler's exact output marginals equal the one-call-per-prefix path (complex128)."""
    from hybrid_attention.circuits import DQASchedule
    from hybrid_attention.kernels import plan_groups

    h, raw, beta, G = layer
    kw = {"schedule": DQASchedule(tau=1.5, steps=6), "dtype": torch.complex128}
    assert get_sampler("statevector", **kw).properties["group_prefixes"] > 0
    assert len(plan_groups(5, 4, overhead)) < 5  # the test really groups
    grads = []
    for s in (_grouping(None, **kw), _grouping(overhead, **kw)):
        m = attention_marginals(h, sym(raw), beta, sampling=Sampling(s))
        grads.append((m.detach(), *torch.autograd.grad((m * G).sum(), (h, raw, beta))))
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-12, rtol=0)
    assert torch.all(grads[0][0].triu(1) == 0)


def test_grouped_prefixes_with_reads_match_the_circuit_output(layer):
    """Reads (covariance path) through grouped, masked calls: within shot noise of each query's exact circuit
    output, zero above the diagonal, and future keys get no gradient."""
    from hybrid_attention.circuits import DQASchedule

    h, raw, beta, _ = layer
    kw = {"schedule": DQASchedule(tau=1.5, steps=6), "dtype": torch.complex128}
    N = 4000
    s = Sampling(_grouping(1e9, **kw), num_reads=N, readout="shots", seed=3)  # one call for all prefixes
    m = attention_marginals(h, sym(raw), beta, sampling=s)
    ref = attention_marginals(h, sym(raw), beta, sampling=Sampling(_grouping(None, **kw))).detach()
    assert torch.all(m.detach().triu(1) == 0)
    assert torch.all((m.detach() - ref).abs() <= 5 * torch.sqrt((1 - ref**2).clamp_min(0) / N) + 1e-12)
    gh = torch.autograd.grad(m.sum(), h)[0]
    assert torch.all(gh.triu(1) == 0) and gh.abs().max() > 0


# ---------------------------------------------------------------------- hostile input
@pytest.mark.parametrize("name", ["exact", "statevector", "gibbs", "meanfield"])
@pytest.mark.parametrize("causal", [True, False])
def test_empty_batch(name, causal):
    s = get_sampler(name)
    h = torch.zeros(0, 2, 4, 4, dtype=torch.float64, requires_grad=True)
    J = torch.zeros(2, 4, 4, dtype=torch.float64, requires_grad=True)
    beta = torch.ones(2, dtype=torch.float64, requires_grad=True)
    readouts = ("exact", "shots") if s.capabilities.differentiable else ("shots",)
    for readout in readouts:
        sampling = Sampling(s, num_reads=16, seed=0, readout=readout)
        m = attention_marginals(h, J, beta, sampling=sampling, causal=causal)
        assert m.shape == (0, 2, 4, 4)
        m.sum().backward()
        assert J.grad is not None and torch.all(J.grad == 0)
    p = IsingProblem(torch.zeros(0, 3, dtype=torch.float64))
    assert differentiable_marginals(p, sampling=Sampling(s, num_reads=4)).shape == (0, 3)


@pytest.mark.parametrize("seed", [1.9, True])
def test_float_and_bool_seeds_rejected(seed):
    h = torch.zeros(1, 1, 3, 3)
    J = torch.zeros(1, 3, 3)
    with pytest.raises(TypeError, match=r"seed must be .* got (float 1.9|bool True)"):
        attention_marginals(h, J, sampling=Sampling(get_sampler("gibbs"), num_reads=8, seed=seed))
    with pytest.raises(TypeError, match="seed must be"):
        differentiable_marginals(
            IsingProblem(torch.zeros(2)), sampling=Sampling(get_sampler("gibbs"), num_reads=8, seed=seed)
        )


def test_seedsequence_seed_is_reproducible():
    h = torch.randn(2, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    J = torch.zeros(1, 4, 4)
    g = get_sampler("gibbs", burn_in=4)
    a = attention_marginals(h, J, sampling=Sampling(g, num_reads=8, seed=np.random.SeedSequence(11)))
    b = attention_marginals(h, J, sampling=Sampling(g, num_reads=8, seed=np.random.SeedSequence(11)))
    assert torch.equal(a, b)
    c = attention_marginals(h, J, sampling=Sampling(g, num_reads=8, seed=11))
    assert torch.equal(a, c)  # an int seeds the same SeedSequence


@pytest.mark.parametrize("num_reads, exc", [(True, TypeError), (2.5, TypeError), (0, ValueError)])
def test_num_reads_validated(num_reads, exc):
    with pytest.raises(exc, match="num_reads must be an integer >= 1"):
        attention_marginals(
            torch.zeros(1, 1, 3, 3), torch.zeros(1, 3, 3), sampling=Sampling(get_sampler("exact"), num_reads=num_reads)
        )


# ---------------------------------------------------------------------- persistent chains (qemcmc)
def _qemcmc(overhead=None, pad=False, **kw):
    """A qemcmc sampler whose declared call grouping is chosen by the test (one call per prefix, groups, padded)."""
    from hybrid_attention.backends.mcmc.chain import ChainSchedule
    from hybrid_attention.backends.mcmc.qemcmc import QEMCMCSampler
    from hybrid_attention.circuits.proposal import ProposalParams

    class Q(QEMCMCSampler):
        capabilities = dataclasses.replace(QEMCMCSampler.capabilities, per_call_overhead=overhead, pad_with_mask=pad)

    return Q(params=ProposalParams(steps=3), chain=ChainSchedule(**kw))


@pytest.mark.parametrize("overhead, pad", [(None, False), (1e9, False), (None, True)], ids=["single", "grouped", "pad"])
def test_persistent_chains_start_where_they_are_stored(layer, overhead, pad):
    """With no move (burn_in = 0, one read per chain) the reads are the stored states: every (b, head, query) reads
    exactly its own chains; with moves the stored states become the chains' final states."""
    h, raw, beta, _ = layer
    B, H, T = h.shape[0], h.shape[1], h.shape[-1]
    chains = PersistentChains(num_chains=6, seed=1)
    s = Sampling(_qemcmc(overhead, pad, burn_in=0), num_reads=6, chains=chains, seed=0).layer(0)
    m = attention_marginals(h, sym(raw), beta, sampling=s)
    st = chains.state("layer0")
    assert st.shape == (B, H, T, 6, T) and st.dtype == torch.int8
    expect = st.double().mean(3) * torch.ones(T, T, dtype=torch.bool).tril()
    assert torch.allclose(m.detach(), expect, atol=1e-12)
    before = st.clone()
    s2 = Sampling(_qemcmc(overhead, pad, burn_in=5), num_reads=6, chains=chains, seed=1).layer(0)
    attention_marginals(h, sym(raw), beta, sampling=s2)
    after = chains.state("layer0")
    vis = torch.ones(T, T, dtype=torch.bool).tril()[None, None, :, None, :].expand_as(after)
    assert not torch.equal(after[vis], before[vis])  # the chains moved and were stored
    m3 = attention_marginals(h, sym(raw), beta, sampling=Sampling(_qemcmc(burn_in=0), 6, chains=chains).layer(0))
    assert torch.allclose(m3.detach(), after.double().mean(3) * torch.ones(T, T, dtype=torch.bool).tril())


def test_persistent_chains_equilibrate_across_calls():
    """Forty calls of three moves each from a random start leave the chains Boltzmann distributed: the next call's
    reads (no further move) match exact marginals within 5 standard errors of 300 independent chains."""
    g = torch.Generator().manual_seed(5)
    h = torch.randn(1, 1, 4, 4, generator=g, dtype=torch.float64)
    J = sym(torch.randn(1, 4, 4, generator=g, dtype=torch.float64))
    chains = PersistentChains(num_chains=300, seed=0)
    s = Sampling(_qemcmc(burn_in=3), num_reads=300, chains=chains)
    for k in range(40):
        attention_marginals(h, J, 1.0, sampling=s.with_seed(k))
    m = attention_marginals(h, J, 1.0, sampling=Sampling(_qemcmc(burn_in=0), num_reads=300, chains=chains))
    ref = kernels.causal_marginals(h, J)
    assert torch.all((m - ref).abs() <= 5 * torch.sqrt((1 - ref**2).clamp_min(1e-3) / 300) + 1e-12)


def test_persistent_chains_state_dict_round_trip_and_batch_resize(layer):
    h, raw, beta, G = layer
    chains = PersistentChains(num_chains=4, seed=2)
    s = Sampling(_qemcmc(burn_in=2), num_reads=8, chains=chains).layer(0)
    m = attention_marginals(h, sym(raw), beta, sampling=s.with_seed(0))
    (gh,) = torch.autograd.grad((m * G).sum(), h)  # covariance backward over the chains' reads
    assert torch.isfinite(gh).all() and gh.abs().max() > 0
    saved = chains.state_dict()
    other = PersistentChains(num_chains=4, seed=99)
    other.load_state_dict(saved)
    a = attention_marginals(h, sym(raw), beta, sampling=s.with_seed(5))
    b = attention_marginals(h, sym(raw), beta, sampling=Sampling(_qemcmc(burn_in=2), 8, chains=other, seed=5).layer(0))
    assert torch.equal(a, b)  # restored chains continue exactly like the originals
    st = chains.state("layer0").clone()
    attention_marginals(
        h[:1].detach(), sym(raw), beta, sampling=Sampling(_qemcmc(burn_in=3), 4, chains=chains).layer(0)
    )
    after = chains.state("layer0")
    assert after.shape == st.shape and torch.equal(after[1:], st[1:])  # a smaller batch moves its rows only
    assert not torch.equal(after[:1], st[:1])
    h3 = torch.cat([h[:1], h[:1], h[:1]]).detach()
    attention_marginals(h3, sym(raw), beta, sampling=Sampling(_qemcmc(burn_in=0), 4, chains=chains).layer(0))
    assert torch.equal(chains.state("layer0"), after[[0, 1, 0]])  # a larger one reuses the rows cyclically


def test_persistent_chains_bad_input(layer):
    h, raw, beta, _ = layer
    chains = PersistentChains(num_chains=4)
    with pytest.raises(ValueError, match="Markov-chain sampler"):
        Sampling(get_sampler("exact"), chains=chains)
    with pytest.raises(TypeError, match="chain_key must be a string"):
        Sampling(_qemcmc(), chains=chains, chain_key=0)
    with pytest.raises(TypeError, match="chains must be a PersistentChains"):
        Sampling(_qemcmc(), chains=4)
    with pytest.raises(ValueError, match="below the 4 persistent chains"):
        Sampling(_qemcmc(burn_in=1), num_reads=2, chains=chains)
    with pytest.raises(ValueError, match="readout 'exact' uses no reads"):
        Sampling(get_sampler("statevector"), readout="exact", estimator="conditional")
    s = Sampling(_qemcmc(burn_in=1), num_reads=4, chains=chains, chain_key="l")
    attention_marginals(h, sym(raw), beta, sampling=s)
    with pytest.raises(ValueError, match="use another key"):
        attention_marginals(h[..., :3, :3], sym(raw)[:, :3, :3], beta, sampling=s)
    with pytest.raises(ValueError, match="expected int8"):
        chains.load_state_dict({"l": torch.zeros(1, 1, 2, 4, 2, dtype=torch.int8)})
    with pytest.raises(ValueError, match="expected int8"):
        chains.load_state_dict({"l": torch.ones(1, 1, 2, 3, 2, dtype=torch.int8)})
    with pytest.raises(TypeError, match="dict"):
        chains.load_state_dict([1])
    with pytest.raises(ValueError, match="num_chains must be"):
        PersistentChains(num_chains=0)


def test_chain_states_are_a_value_stored_after_the_sampler_calls(layer, monkeypatch):
    """Inside autograd nothing writes to the store: every sampler call gets its start states as a value and returns
    its end states; the bridge stores them once, after the last call, and a call that fails stores nothing."""
    h, raw, beta, _ = layer
    chains = PersistentChains(num_chains=3, seed=4)
    s = Sampling(_qemcmc(burn_in=2), num_reads=3, chains=chains, seed=0).layer(0)
    attention_marginals(h, sym(raw), beta, sampling=s)
    before = chains.state("layer0").clone()
    stored = []
    store = chains.store
    monkeypatch.setattr(chains, "store", lambda key, states: stored.append(key) or store(key, states))
    forward = type(s.sampler).sample

    def sample(self, problem, **kw):  # the store is untouched while the sampler calls run
        assert torch.equal(chains.state("layer0"), before)
        return forward(self, problem, **kw)

    monkeypatch.setattr(type(s.sampler), "sample", sample)
    attention_marginals(h, sym(raw), beta, sampling=s.with_seed(1))
    assert stored == ["layer0"] and not torch.equal(chains.state("layer0"), before)
    moved = chains.state("layer0").clone()
    calls = []

    def failing(self, problem, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("the third call fails")
        return forward(self, problem, **kw)

    monkeypatch.setattr(type(s.sampler), "sample", failing)
    with pytest.raises(RuntimeError, match="third call"):
        attention_marginals(h, sym(raw), beta, sampling=s.with_seed(2))
    assert torch.equal(chains.state("layer0"), moved)  # the two calls that ran stored nothing


@pytest.mark.parametrize(
    "kw, field",
    [
        (
            {"sampler": "exact"},
            r"sampler= was removed: pass sampling=Sampling\(sampler, num_reads=\.\.\., seed=\.\.\.\)",
        ),
        ({"num_reads": 4}, r"num_reads= was removed: .*Sampling\.num_reads"),
        ({"seed": 0}, r"seed= was removed: .*Sampling\.seed"),
    ],
)
def test_removed_keywords_name_their_sampling_field(kw, field):
    """The keywords the Sampling value replaced raise TypeError naming its field, before any work (even beside a
    valid value, even on the exact path, even with bad tensors)."""
    from hybrid_attention.attention import attention_weights, boltzmann_attention

    ex = Sampling(get_sampler("exact"))
    bad = torch.zeros(3)  # not a layer's scores: the keyword is refused first
    with pytest.raises(TypeError, match=field):
        attention_marginals(bad, bad, sampling=ex, **kw)
    with pytest.raises(TypeError, match=field):
        differentiable_marginals(bad, ex, **kw)
    with pytest.raises(TypeError, match=field):
        attention_weights(bad, **kw)
    with pytest.raises(TypeError, match=field):
        boltzmann_attention(bad, bad, bad, **kw)
    with pytest.raises(TypeError, match="unexpected keyword argument 'samplr'"):
        attention_marginals(bad, bad, sampling=ex, samplr=1)


def test_the_finiteness_check_of_the_scores_needs_one_reduction_and_falls_back_exactly():
    """``bridge._finite_where_seen``: a finite float64 sum means every entry is finite; a non-finite sum (an infinity
    or NaN anywhere, or finite float64 entries whose sum overflows) falls back to testing the seen entries one by one."""
    from hybrid_attention.bridge import _finite_where_seen

    seen = torch.ones(3, 3, dtype=torch.bool).tril()
    h = torch.randn(2, 1, 3, 3)
    assert _finite_where_seen(h, seen) and _finite_where_seen(h, None)
    unseen = h.clone()
    unseen[..., 0, 2] = float("inf")  # a future key: allowed when causal, not otherwise
    assert _finite_where_seen(unseen, seen) and not _finite_where_seen(unseen, None)
    both = h.clone()
    both[0, 0, 1, 0], both[0, 0, 2, 1] = float("inf"), float("-inf")  # their sum is NaN: caught either way
    assert not _finite_where_seen(both, seen)
    huge = torch.full((1, 1, 3, 3), 1e308, dtype=torch.float64)  # finite, but its sum overflows to inf
    assert _finite_where_seen(huge, seen) and _finite_where_seen(huge, None)
