"""Classical samplers (Gibbs, simulated annealing, mean field) against exact oracles: enumeration for n <= 16,
closed forms (J = 0) and a transfer-matrix chain for n far beyond enumeration."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem, exact, kernels
from hybrid_attention.backends import get_sampler
from hybrid_attention.backends.mcmc.gibbs import AnnealingSampler, GibbsSampler
from hybrid_attention.backends.mcmc.meanfield import MeanFieldSampler
from hybrid_attention.sampling import Sampling

Z = 5.0


# the chains are thousands of small sequential kernels: one intra-op thread is faster on a shared CPU
pytestmark = pytest.mark.usefixtures("one_thread")


def sk_problem(rng, n, batch, beta, mask=None):
    """h ~ N(0, 1), J ~ N(0, 1/n) (SK scaling): the documented accuracy class of the chain samplers."""
    h = rng.normal(size=(batch, n))
    J = np.triu(rng.normal(scale=1 / np.sqrt(n), size=(batch, n, n)), 1)
    return IsingProblem(torch.tensor(h), torch.tensor(J + np.swapaxes(J, 1, 2)), beta=beta, mask=mask)


def within_shot_tolerance(m_hat, m, N):
    # z sqrt((1 - m^2) / N) per marginal; 4/N guards the Poisson tail of states seen a handful of times
    tol = Z * np.sqrt((1 - m**2) / N) + 4.0 / N
    return np.abs(m_hat - m) <= tol


def chain_marginals(h, Jc, beta):
    """Exact marginals of an open nearest-neighbour chain E = -sum h s - sum Jc_j s_j s_{j+1} (forward-backward)."""
    n = len(h)
    s = np.array([1.0, -1.0])
    logf = np.zeros((n, 2))
    logb = np.zeros((n, 2))
    logf[0] = beta * h[0] * s
    for j in range(1, n):
        T = beta * Jc[j - 1] * np.outer(s, s)
        logf[j] = beta * h[j] * s + np.logaddexp.reduce(logf[j - 1][:, None] + T, axis=0)
    for j in range(n - 2, -1, -1):
        T = beta * Jc[j] * np.outer(s, s)
        logb[j] = np.logaddexp.reduce(T + (beta * h[j + 1] * s + logb[j + 1])[None, :], axis=1)
    lp = logf + logb
    p = np.exp(lp - np.logaddexp.reduce(lp, axis=1, keepdims=True))
    return p[:, 0] - p[:, 1]


@pytest.mark.parametrize("name", ["gibbs", "anneal"])
@pytest.mark.parametrize("n,beta", [(4, 2.0), (10, 1.0), (16, 0.5), (16, 2.0)])
def test_chain_marginals_match_exact(name, n, beta):
    rng = np.random.default_rng(100 * n + int(10 * beta))
    pr = sk_problem(rng, n, 3, beta)
    N = 2000
    ss = get_sampler(name).sample(pr, num_reads=N, seed=7)  # documented defaults
    m = exact.marginals(pr).numpy()
    assert ss.spins.shape == (3, N, n)
    assert within_shot_tolerance(ss.marginals(), m, N).all()


def test_gibbs_correlations_and_thinning():
    rng = np.random.default_rng(3)
    pr = sk_problem(rng, 8, 2, 1.5)
    chains, N = 250, 2000  # 8 thinned records per chain: the honest N for the tolerance is the number of chains
    ss = GibbsSampler(num_chains=chains, thinning=4).sample(pr, num_reads=N, seed=1)
    assert ss.info["records_per_chain"] == 8 and ss.spins.shape == (2, N, 8)
    m = exact.marginals(pr).numpy()
    assert within_shot_tolerance(ss.marginals(), m, chains).all()
    C = exact.correlations(pr).numpy()
    assert within_shot_tolerance(ss.correlations(), C, chains).all()


@pytest.mark.parametrize("cls", [GibbsSampler, AnnealingSampler, MeanFieldSampler])
def test_masked_spins_are_dropped(cls):
    rng = np.random.default_rng(5)
    n = 7
    mask = torch.tensor([[True] * (i + 1) + [False] * (n - i - 1) for i in range(n)])  # causal prefixes
    h = torch.tensor(rng.normal(size=(n, n)))
    J = np.triu(rng.normal(scale=0.3, size=(n, n)), 1)
    J = torch.tensor(J + J.T)
    pr = IsingProblem(h, J, mask=mask)
    m = exact.marginals(pr).numpy()
    N = 3000
    ms = cls().sample(pr, num_reads=N, seed=2).marginals()
    assert (ms[~mask.numpy()] == 0).all()
    if cls is MeanFieldSampler:
        return
    assert within_shot_tolerance(ms, m, N).all()


@pytest.mark.parametrize("name", ["gibbs", "anneal", "meanfield"])
def test_long_window_closed_forms(name):
    """T = 128 attention windows: J = 0 is exactly tanh(beta h); a nearest-neighbour chain has exact marginals."""
    rng = np.random.default_rng(11)
    n, N = 128, 500
    h = rng.normal(size=(2, n))
    pr0 = IsingProblem(torch.tensor(h), beta=0.8)
    # independent spins mix in one sweep: short runs for J = 0, the documented defaults for the chain below
    s = get_sampler(
        name, **{"gibbs": {"burn_in": 4}, "anneal": {"num_sweeps": 4, "final_sweeps": 2}, "meanfield": {}}[name]
    )
    m0 = np.tanh(0.8 * h)
    got = s.sample(pr0, num_reads=N, seed=4).marginals()
    if name == "meanfield":
        assert np.allclose(s.marginals(pr0).numpy(), m0, atol=1e-12)
    assert within_shot_tolerance(got, m0, N).all()
    if name == "meanfield":
        return
    Jc = rng.normal(size=n - 1)
    J = np.diag(Jc, 1) + np.diag(Jc, -1)
    pr = IsingProblem(torch.tensor(h[:1]), torch.tensor(J), beta=1.0)
    m = chain_marginals(h[0], Jc, 1.0)
    assert within_shot_tolerance(get_sampler(name).sample(pr, num_reads=N, seed=9).marginals()[0], m, N).all()


def test_mean_field_exact_without_couplings_and_close_for_weak():
    rng = np.random.default_rng(0)
    n = 10
    h = torch.tensor(rng.normal(size=(4, n)))
    for method in ("naive", "tap"):
        m = MeanFieldSampler(method=method).marginals(IsingProblem(h, beta=1.3))
        assert torch.allclose(m, torch.tanh(1.3 * h), atol=1e-12)
    errs = {}
    for scale in (0.02, 0.05):
        J = np.triu(rng.normal(scale=scale, size=(n, n)), 1)
        pr = IsingProblem(h, torch.tensor(J + J.T))
        me = exact.marginals(pr)
        for method in ("naive", "tap"):
            errs[method, scale] = float((MeanFieldSampler(method=method, tol=1e-12).marginals(pr) - me).abs().max())
    # naive is O(J^2), TAP O(J^3): both small, TAP smaller, and the error shrinks faster than linearly
    assert errs["naive", 0.05] < 0.02 and errs["tap", 0.05] < errs["naive", 0.05]
    assert errs["naive", 0.02] < errs["naive", 0.05] * (0.02 / 0.05) ** 1.5
    assert errs["tap", 0.02] < errs["tap", 0.05] * (0.02 / 0.05) ** 2


@pytest.mark.parametrize("method", ["naive", "tap"])
@pytest.mark.parametrize("grad", ["implicit", "unroll"])
def test_mean_field_gradients(method, grad):
    rng = np.random.default_rng(1)
    n = 6
    iu = torch.triu_indices(n, n, offset=1)
    mf = MeanFieldSampler(method=method, grad=grad, tol=1e-13, max_iter=5000)

    def f(h, v, beta):
        U = torch.zeros(n, n, dtype=torch.float64).index_put((iu[0], iu[1]), v)
        return mf.differentiable_marginals(IsingProblem(h, U + U.T, beta=beta))

    h = torch.tensor(rng.normal(size=(2, n)), requires_grad=True)
    v = torch.tensor(rng.normal(scale=0.3, size=iu.shape[1]), requires_grad=True)
    beta = torch.tensor([0.8, 1.1], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(f, (h, v, beta), eps=1e-6, atol=1e-6, check_undefined_grad=False)


@pytest.mark.parametrize("method", ["naive", "tap"])
def test_mean_field_implicit_gradient_is_scale_free(method):
    """A training loss averages over thousands of targets, so the incoming gradient is tiny; the implicit backward
    must still solve its adjoint system (it once stopped after one step when the entries fell below ``tol``)."""
    rng = np.random.default_rng(2)
    n, R = 8, 5
    U = np.triu(rng.normal(scale=0.6 / np.sqrt(n), size=(n, n)), 1)
    h0, w = rng.normal(size=(R, n)), torch.tensor(rng.normal(size=(R, n)))
    grads = {}
    for grad in ("implicit", "unroll"):
        mf = MeanFieldSampler(method=method, grad=grad, tol=1e-13, max_iter=5000)
        h = torch.tensor(h0, requires_grad=True)
        J = torch.tensor(U + U.T, requires_grad=True)
        m = mf.differentiable_marginals(IsingProblem(h, J))
        (1e-7 * (m * w).sum()).backward()
        grads[grad] = torch.cat([h.grad.flatten(), J.grad.flatten()]) / 1e-7
        assert grad == "unroll" or mf.last_info["backward_iterations"] > 5
    err = (grads["implicit"] - grads["unroll"]).norm() / grads["unroll"].norm()
    assert err < 1e-8, err


@pytest.mark.parametrize("method", ["naive", "tap"])
def test_mean_field_causal_blocks_match_the_full_width_iteration(method):
    """Causal problems large enough for the row blocks (``backends.meanfield.solve``): the marginals equal the
    full-width iteration's bit for bit, masked spins stay 0, and the implicit gradient (closed-form adjoint in the
    same blocks) matches differentiation through the unrolled iteration."""
    from hybrid_attention.backends.mcmc import meanfield

    rng = np.random.default_rng(3)
    B, T = 16, 64
    U = np.triu(rng.normal(scale=0.4 / np.sqrt(T), size=(1, T, T)), 1)
    mask = torch.ones(T, T, dtype=torch.float64).tril().repeat(B, 1)[None]
    assert meanfield.width_blocks(mask, T) is not None  # the case under test
    h0 = torch.tensor(rng.normal(size=(1, B * T, T))) * mask
    beta = torch.tensor(rng.uniform(0.5, 1.5, size=(1, B * T)))
    w = torch.tensor(rng.normal(size=(1, B * T, T)))
    b = beta[..., None]
    J0 = torch.tensor(U + U.transpose(0, 2, 1))
    full = meanfield.solve(h0, J0, mask, method == "tap", b, 0.5, 300, 1e-12, None)[0]
    with torch.no_grad():
        m, info = meanfield.mean_field(h0, J0, beta, mask, method=method, tol=1e-12, max_iter=300)
    assert info["converged"]
    # The same iteration on the leading blocks of J: only the matrix products' shapes differ, and with them the
    # rounding of each sum of n terms (about n eps |J| |m| per step, ~1e-14 here; the kernels of another CPU may
    # round either one differently). Both stop once their residual is below tol, which bounds what rounding can move.
    assert float((m - full).abs().max()) <= 1e-12
    assert float((m * (1 - mask)).abs().max()) == 0.0
    grads = {}
    for grad in ("implicit", "unroll"):
        h, J = h0.clone().requires_grad_(True), J0.clone().requires_grad_(True)
        m, info = meanfield.mean_field(h, J, beta, mask, method=method, grad=grad, tol=1e-12, max_iter=300)
        (1e-6 * (m * w).sum()).backward()
        grads[grad] = torch.cat([h.grad.flatten(), J.grad.flatten()]) / 1e-6
    err = (grads["implicit"] - grads["unroll"]).norm() / grads["unroll"].norm()
    assert err < 1e-8, err


def test_seeds_and_validation():
    pr = IsingProblem(torch.randn(2, 5, generator=torch.Generator().manual_seed(0)))
    g = GibbsSampler(burn_in=8)
    assert np.array_equal(g.sample(pr, num_reads=16, seed=3).spins, g.sample(pr, num_reads=16, seed=3).spins)
    assert not np.array_equal(g.sample(pr, num_reads=16, seed=3).spins, g.sample(pr, num_reads=16, seed=4).spins)
    with pytest.raises(TypeError, match="unknown option"):
        g.sample(pr, sweeps=3)
    with pytest.raises(ValueError, match="burn_in"):
        GibbsSampler(burn_in=-1)
    with pytest.raises(ValueError, match="burn_in"):
        g.sample(pr, burn_in=1.5)
    with pytest.raises(ValueError, match="method"):
        MeanFieldSampler(method="bethe")
    with pytest.raises(ValueError, match="dtype"):
        AnnealingSampler(dtype=torch.int32)
    for name in ("gibbs", "anneal", "meanfield"):
        s = get_sampler(name)
        assert s.properties["pad_with_mask"] and s.properties["max_spins"] is None
    assert g.sample(pr, num_reads=16, seed=0, burn_in=2, num_chains=4).info["num_chains"] == 4


@pytest.mark.parametrize("name", ["gibbs", "meanfield"])
def test_bridge_padded_problem_matches_causal_exact(name):
    """The bridge's one batched problem: J (H, T, T) expanded over batch and queries (never copied), causal mask."""
    bridge = pytest.importorskip("hybrid_attention.bridge")
    rng = np.random.default_rng(8)
    B, H, T = 2, 2, 6
    h = torch.tensor(rng.normal(size=(B, H, T, T)))
    U = np.triu(rng.normal(scale=0.05 if name == "meanfield" else 0.4, size=(H, T, T)), 1)
    J = torch.tensor(U + np.swapaxes(U, 1, 2))
    beta = torch.tensor([0.7, 1.3], dtype=torch.float64)
    ref = kernels.causal_marginals(h, J, beta).numpy()
    N = 3000
    m = (
        bridge.attention_marginals(h, J, beta, sampling=Sampling(get_sampler(name), num_reads=N, seed=3))
        .detach()
        .numpy()
    )
    assert np.all(np.triu(m, 1) == 0)
    if name == "meanfield":  # weak couplings: naive mean field is close (O(J^2))
        assert np.abs(m - ref).max() < 0.01
    else:
        low = np.tril(np.ones((T, T), dtype=bool))
        assert within_shot_tolerance(m[..., low], ref[..., low], N).all()


def test_dropped_prefix_problems_share_their_coupling_matrix():
    """The bridge sends causal prefixes with J already dropped per problem (J * m m^T, one matrix per problem). The
    chain samplers regroup them onto each head's unmasked J (same Markov chain, one GEMM per block instead of one
    per problem); the order is restored on the way out and anything that does not fit is left as it was."""
    from hybrid_attention.grouping import Grouped

    rng = np.random.default_rng(5)
    B, H, T = 3, 2, 5
    U = np.triu(rng.normal(scale=0.4, size=(H, T, T)), 1)
    J = torch.tensor(U + np.swapaxes(U, 1, 2))
    mask = torch.ones(T, T, dtype=torch.bool).tril().expand(B, H, T, T)
    flat = IsingProblem(
        torch.tensor(rng.normal(size=(B, H, T, T))), J[None, :, None].expand(B, H, T, T, T), mask=mask
    ).flatten()
    h, Jd = flat.dropped()
    pr = IsingProblem(h, Jd.expand(B * H * T, T, T).contiguous(), mask=flat.mask)
    plain, shared = Grouped(pr), Grouped(pr, share_masked=True)
    assert (plain.G, plain.R) == (B * H * T, 1) and (shared.G, shared.R) == (H, B * T)
    assert {tuple(x.flatten().tolist()) for x in shared.J} == {tuple(x.flatten().tolist()) for x in J}
    assert torch.equal(shared.ungroup(shared.h), plain.ungroup(plain.h)) and torch.equal(
        shared.ungroup(shared.h), h * flat.mask
    )
    other = pr.J.clone()
    other[4, 0, 1] = other[4, 1, 0] = 0.123  # one problem off its head's matrix: no regrouping
    assert Grouped(IsingProblem(h, other, mask=flat.mask), share_masked=True).G == B * H * T
    N = 3000
    ref = exact.marginals(pr).numpy()
    m = GibbsSampler().sample(pr, num_reads=N, seed=1).marginals()
    assert within_shot_tolerance(m, ref, N).all()


@pytest.mark.parametrize("name", ["meanfield", "gibbs"])
def test_broadcast_couplings_equal_expanded_ones(name):
    """The bridge hands ``J`` broadcast over batch and queries (shape ``(1, H, 1, n, n)``, never expanded, so its
    gradient is not materialised per query); it gives the values and gradients of the same ``J`` expanded."""
    from hybrid_attention.bridge import differentiable_marginals
    from hybrid_attention.sampling import Sampling

    g = torch.Generator().manual_seed(3)
    B, H, Tq, n = 3, 2, 4, 5
    h = torch.randn(B, H, Tq, n, generator=g, dtype=torch.float64)
    U = (0.4 * torch.randn(H, n, n, generator=g, dtype=torch.float64)).triu(1).requires_grad_()
    mask = torch.ones(n, n, dtype=torch.bool).tril()[1:][None, None].expand(B, H, Tq, n)
    sampling = Sampling(get_sampler(name), num_reads=8, estimator="reads" if name == "meanfield" else "conditional")
    out = []
    for shape in ("broadcast", "expanded"):
        J = (U + U.transpose(-1, -2))[None, :, None]
        J = J if shape == "broadcast" else J.expand(B, H, Tq, n, n)
        m = differentiable_marginals(IsingProblem(h, J, mask=mask), sampling.with_seed(0))
        (gU,) = torch.autograd.grad((m * h).sum(), U)
        out.append((m.detach(), gU))
    torch.testing.assert_close(out[0][0], out[1][0], rtol=0, atol=1e-12)
    torch.testing.assert_close(out[0][1], out[1][1], rtol=0, atol=1e-10)


def test_gibbs_continues_given_chains_and_reports_where_they_stopped():
    """``initial_state``: with no sweep the reads are the given states; with sweeps the final states are reported
    (masked spins free, ±1) and the next call continues from them; bad states are refused before any work."""
    g = torch.Generator().manual_seed(4)
    h = torch.randn(3, 5, generator=g, dtype=torch.float64)
    mask = torch.tensor([True, True, False, True, True])
    p = IsingProblem(h, torch.zeros(5, 5, dtype=torch.float64), mask=mask)
    init = np.where(np.random.default_rng(0).random((3, 4, 5)) < 0.5, 1, -1).astype(np.int8)
    s = get_sampler("gibbs")
    ss = s.sample(p, num_reads=4, seed=0, initial_state=init, burn_in=0)
    assert np.array_equal(ss.spins[..., mask.numpy()], init[..., mask.numpy()])
    assert ss.info["kernel"] == "torch" and ss.info["num_chains"] == 4
    moved = s.sample(p, num_reads=4, seed=1, initial_state=init, burn_in=3)
    final = moved.info["final_state"]
    assert final.shape == (3, 4, 5) and set(np.unique(final)) <= {-1, 1}
    assert np.array_equal(final[..., mask.numpy()], moved.spins[..., mask.numpy()])
    for bad, words in (
        (init[:, :, :4], "shape"),
        (np.zeros_like(init), "only -1 and \\+1"),
    ):
        with pytest.raises(ValueError, match=words):
            s.sample(p, num_reads=4, initial_state=bad)
    with pytest.raises(ValueError, match="num_reads = 2 must be at least"):
        s.sample(p, num_reads=2, initial_state=init)
    with pytest.raises(TypeError, match="unknown option"):
        get_sampler("anneal").sample(p, num_reads=4, initial_state=init)


def test_continued_gibbs_chains_record_several_states_without_burn_in():
    """``initial_state`` with ``burn_in=0`` and several records per chain (it raised IndexError): the first record is
    the given state, the later ones come from sweeps at the problem's beta. Independent spins (J = 0) are exact after
    one heat-bath sweep, so the later records' means match tanh(beta h) within 5 standard errors."""
    g = torch.Generator().manual_seed(5)
    h = torch.randn(2, 6, generator=g, dtype=torch.float64)
    beta, chains, records = 0.7, 500, 4
    p = IsingProblem(h, torch.zeros(6, 6, dtype=torch.float64), beta=beta)
    init = np.ones((2, chains, 6), dtype=np.int8)
    ss = get_sampler("gibbs").sample(p, num_reads=chains * records, seed=3, initial_state=init, burn_in=0, thinning=1)
    reads = ss.spins.reshape(2, records, chains, 6)
    assert np.array_equal(reads[:, 0], init)
    later = reads[:, 1:].reshape(2, -1, 6).astype(np.float64)
    exact = np.tanh(beta * h.numpy())
    se = np.sqrt((1 - exact**2) / later.shape[1])
    assert np.all(np.abs(later.mean(1) - exact) < 5 * se)
    assert np.array_equal(ss.info["final_state"], reads[:, -1])


def test_persistent_gibbs_chains_equilibrate_across_calls():
    """Forty calls of three sweeps each from a random start leave persistent Gibbs chains Boltzmann distributed:
    the next call's reads (no sweep) match exact marginals within 5 standard errors of 300 chains."""
    from hybrid_attention.bridge import attention_marginals
    from hybrid_attention.kernels import causal_marginals
    from hybrid_attention.sampling import PersistentChains, Sampling

    g = torch.Generator().manual_seed(5)
    h = torch.randn(1, 1, 4, 4, generator=g, dtype=torch.float64)
    U = torch.randn(1, 4, 4, generator=g, dtype=torch.float64).triu(1)
    J = U + U.transpose(-1, -2)
    chains = PersistentChains(num_chains=300, seed=0)
    s = Sampling(get_sampler("gibbs", burn_in=3), num_reads=300, chains=chains)
    for k in range(40):
        attention_marginals(h, J, 1.0, sampling=s.with_seed(k))
    m = attention_marginals(h, J, 1.0, sampling=Sampling(get_sampler("gibbs", burn_in=0), num_reads=300, chains=chains))
    ref = causal_marginals(h, J)
    assert torch.all((m - ref).abs() <= 5 * torch.sqrt((1 - ref**2).clamp_min(1e-3) / 300) + 1e-12)
