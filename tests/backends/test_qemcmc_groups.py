"""Masked batches in the Metropolis chains (``backends/mcmc/chain_rows.py``): rows grouped by their visible spins, the
short groups merged into runs over the union of their spins (the quantum proposal only), the bridge's single padded
qemcmc call per layer. Exact where a refactor keeps the random stream (the same draws as a call on the group's own
spins), against exact enumeration and the exact one-move kernel where it does not (tolerances: 5 standard errors of
the reads' binomial proportions)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem, Sampling, exact, kernels
from hybrid_attention.backends.mcmc import chain_rows
from hybrid_attention.backends.mcmc.analysis import transition_matrix
from hybrid_attention.backends.mcmc.chain import ChainSchedule, _naive_mean_field
from hybrid_attention.backends.mcmc.qemcmc import QEMCMCSampler
from hybrid_attention.bridge import attention_marginals
from hybrid_attention.checks import spawn_seeds
from hybrid_attention.circuits.proposal import ProposalParams
from hybrid_attention.ising import index_to_bits, spins_to_index

Z = 5.0
FIXED = ProposalParams(gamma=0.4, time=5.0, steps=2)


class Unmerged(QEMCMCSampler):
    """qemcmc with every group of a masked batch run on its own spins (no merged runs)."""

    _merge_overhead = 0.0


def couplings(n: int, g: torch.Generator, scale: float = 0.5) -> torch.Tensor:
    J = scale * torch.randn(n, n, generator=g, dtype=torch.float64).triu(1)
    return J + J.T


def causal_batch(B: int, T: int, seed: int, scale: float = 0.5) -> tuple[IsingProblem, torch.Tensor]:
    """A causal attention layer's problems as the bridge's padded call holds them: ``(B, T, T)`` fields, one shared
    ``J``, query ``i`` seeing keys ``0..i``."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(B, T, T, generator=g, dtype=torch.float64)
    J = couplings(T, g, scale)
    mask = torch.ones(T, T, dtype=torch.bool).tril().expand(B, T, T)
    return IsingProblem(h, J.expand(B, T, T, T), mask=mask), J


def test_visible_groups_partition_the_rows_and_spread_indices_inverts_the_compression():
    rng = np.random.default_rng(0)
    mask = rng.random((40, 7)) < 0.6
    mask[:5] = True
    groups = chain_rows.visible_groups(mask)
    rows = np.concatenate([r for r, _ in groups])
    assert sorted(rows.tolist()) == list(range(40))
    for r, cols in groups:
        assert (mask[r] == mask[r[0]]).all() and cols.tolist() == np.flatnonzero(mask[r[0]]).tolist()
        k = len(cols)
        idx = rng.integers(0, 1 << k, size=(len(r), 3))
        full = chain_rows.spread_indices(idx, cols)
        bits = index_to_bits(full, 7)
        assert not bits[..., ~mask[r[0]]].any()  # dropped spins' bits are 0
        assert np.array_equal(spins_to_index(1 - 2 * bits[..., cols].astype(np.int8)), idx)
    assert chain_rows.visible_groups(np.ones((3, 4), dtype=bool)) == [(None, None)]
    assert chain_rows.visible_groups(None) == [(None, None)]


def test_merge_groups_joins_the_short_prefixes_only():
    mask = np.tril(np.ones((12, 12), dtype=bool))[np.arange(12 * 32) % 12]  # 32 rows per prefix length
    groups = chain_rows.visible_groups(mask)
    assert chain_rows.merge_groups(groups, 0.0) == groups
    runs = chain_rows.merge_groups(groups, 16384.0)
    sizes = [len(c) for _, c in runs]
    # prefix k + 1 joins the run of prefixes 1..k while 32 k 2**k <= 16384 (k <= 6); prefix 9 joins prefix 8
    # (16384 + 64 * 2**9 < 2 * 16384 + 32 * 2**8 + 32 * 2**9), prefix 10 not (16384 + 96 * 2**10 > 3 * 32768)
    assert sizes == [7, 9, 10, 11, 12]
    assert runs[0][1].tolist() == list(range(7)) and len(runs[0][0]) == 7 * 32
    assert sorted(np.concatenate([r for r, _ in runs]).tolist()) == list(range(12 * 32))


@pytest.mark.parametrize("scale", [0.3, 3.0])  # converged, and stopped at max_iter (strong couplings)
def test_grouped_mean_field_equals_one_solve_per_group(scale):
    g = torch.Generator().manual_seed(3)
    N, n = 60, 6
    h = 2.0 * torch.randn(N, n, generator=g, dtype=torch.float64).numpy()
    J = couplings(n, g, scale).numpy()
    mask = np.random.default_rng(1).random((N, n)) < 0.7
    mask[:10] = np.tril(np.ones((n, n), dtype=bool))[np.arange(10) % n]
    b = np.random.default_rng(2).uniform(0.5, 1.5, (N, 1))
    groups = chain_rows.visible_groups(mask)
    labels = chain_rows.group_labels(groups, N)
    # the undropped shared J, as the sampler hands it over: a dropped spin's magnetisation stays 0
    got = _naive_mean_field(
        h * mask, np.broadcast_to(J, (N, n, n)), b, mask.astype(float), max_iter=200, tol=1e-6, groups=labels
    )
    for rows, cols in groups:
        want = _naive_mean_field(
            h[np.ix_(rows, cols)],
            J[np.ix_(cols, cols)][None].repeat(len(rows), 0),
            b[rows],
            None,
            max_iter=200,
            tol=1e-6,
        )
        np.testing.assert_allclose(got[np.ix_(rows, cols)], want, rtol=0, atol=1e-12)
        assert not got[rows][:, ~mask[rows[0]]].any()


@pytest.mark.parametrize("start", ["random", "meanfield"])
def test_a_masked_batch_draws_what_each_group_draws_on_its_own_spins(start):
    """Without merged runs, the rows of each group get exactly the reads (and end states) of a call on the group's
    visible spins alone with the group's child seed: the same random stream, so the same draws (determinism in one
    process); the dropped spins are ±1."""
    problem, J = causal_batch(B=3, T=5, seed=4)
    s = Unmerged(params=FIXED)
    ss = s.sample(problem, num_reads=6, burn_in=3, start=start, seed=11)
    flat_spins = ss.spins.reshape(-1, 6, 5)
    final = ss.info["final_state"].reshape(-1, 6, 5)
    mask = problem.mask.reshape(-1, 5).numpy()
    groups = chain_rows.visible_groups(mask)
    seeds = spawn_seeds(11, len(groups) + 1)
    h = problem.h.reshape(-1, 5)
    for (rows, cols), sd in zip(groups, seeds):
        k = len(cols)
        sub = IsingProblem(h[rows][:, cols], J[:k, :k].expand(len(rows), k, k))
        own = s.sample(sub, num_reads=6, burn_in=3, start=start, seed=sd)
        assert np.array_equal(flat_spins[rows][:, :, cols], own.spins)
        assert np.array_equal(final[rows][:, :, cols], own.info["final_state"])
    assert set(np.unique(flat_spins).tolist()) <= {-1, 1}


def test_persistent_chains_keep_their_dropped_spins():
    """A dropped spin is never moved: its int8 state is carried from ``initial_state`` as it is (no arithmetic)."""
    problem, _ = causal_batch(B=2, T=4, seed=5)
    init = np.random.default_rng(0).choice(np.array([-1, 1], dtype=np.int8), size=(2, 4, 4, 4))
    ss = QEMCMCSampler(params=FIXED).sample(problem, num_reads=4, burn_in=2, initial_state=init, seed=0)
    off = ~problem.mask.numpy()[..., None, :].repeat(4, -2)
    assert np.array_equal(ss.info["final_state"][off], init[off])


def test_a_merged_run_moves_the_visible_spins_by_the_exact_one_move_kernel():
    """One move from a fixed state in a merged run (the prefixes of a T = 4 layer on 4 spins, the shorter ones with
    dropped spins) has the law of the visible problem's exact qemcmc kernel ``P[s, :]``
    (:func:`~hybrid_attention.backends.mcmc.analysis.transition_matrix`): every configuration's frequency within 5
    binomial standard errors (plus float slack) of its probability."""
    T, chains = 4, 6000
    problem, J = causal_batch(B=1, T=T, seed=6)
    start = np.tile(np.array([1, -1, 1, -1], dtype=np.int8), (1, T, chains, 1))
    s = QEMCMCSampler(params=FIXED)
    flat = problem.flatten()
    mask = flat.mask.numpy()
    assert len(chain_rows.merge_groups(chain_rows.visible_groups(mask), s._merge_overhead)) == 1  # one run
    ss = s.sample(problem, num_reads=chains, burn_in=1, initial_state=start, seed=2)
    for q in range(T):
        k = q + 1
        sub = IsingProblem(flat.h[q : q + 1, :k], J[:k, :k][None])
        P = transition_matrix(sub, FIXED)
        s0 = int(spins_to_index(start[0, q, 0, :k]))
        got = np.bincount(spins_to_index(ss.spins[0, q][:, :k]), minlength=1 << k) / chains
        tol = Z * np.sqrt(P[s0] * (1 - P[s0]) / chains) + 1e-9
        assert np.all(np.abs(got - P[s0]) <= tol), (q, got, P[s0])


def test_fresh_chains_on_a_masked_batch_are_boltzmann_on_the_visible_spins():
    """Merged runs and dropped spins: after 40 moves from the mean-field start the reads' marginals and correlations
    of every query's visible spins match exact enumeration within 5 standard errors of the reads, and the dropped
    spins average 0 within 5 standard errors."""
    problem, _ = causal_batch(B=2, T=5, seed=7)
    reads = 3000
    ss = QEMCMCSampler(params=ProposalParams(steps=2)).sample(
        problem, num_reads=reads, burn_in=40, start="meanfield", seed=1
    )
    s = ss.spins.astype(np.float64)  # (2, 5, reads, 5)
    m, c = exact.marginals(problem).numpy(), exact.correlations(problem).numpy()
    vis = problem.mask.numpy()
    got_m = s.mean(-2)
    assert np.all(np.abs(got_m - m)[vis] <= Z * np.sqrt((1 - m**2)[vis] / reads) + 1e-9)
    assert np.all(np.abs(got_m[~vis]) <= Z / np.sqrt(reads))
    got_c = np.einsum("bqrj,bqrk->bqjk", s, s) / reads
    both = vis[..., :, None] & vis[..., None, :] & ~np.eye(5, dtype=bool)  # pairs of visible spins
    assert np.all(np.abs(got_c - c)[both] <= Z * np.sqrt((1 - c**2)[both] / reads) + 1e-9)


def test_the_bridge_makes_one_qemcmc_call_per_layer_and_matches_exact_marginals():
    g = torch.Generator().manual_seed(8)
    B, H, T, reads = 2, 2, 6, 2000
    h = torch.randn(B, H, T, T, generator=g, dtype=torch.float64)
    J = torch.stack([couplings(T, g, 0.3) for _ in range(H)])
    s = QEMCMCSampler(params=ProposalParams(steps=2), chain=ChainSchedule(burn_in=30, start="meanfield"))
    calls = []
    sample = s.sample

    def counting(problem, **kw):
        calls.append(tuple(problem.h.shape))
        return sample(problem, **kw)

    s.sample = counting
    sampling = Sampling(s, num_reads=reads, estimator="conditional", seed=0)
    m = attention_marginals(h, J, 1.0, sampling=sampling)
    assert calls == [(B, H, T, T)]  # one padded, causally masked call
    ref = kernels.causal_marginals(h, J)
    tril = torch.ones(T, T, dtype=torch.bool).tril().expand_as(ref)
    sd = torch.sqrt((1 - ref**2).clamp_min(1e-3) / reads)
    # mean-field start + 30 moves: Rao-Blackwellised reads, at most the spin-average's standard error
    assert torch.all((m - ref).abs()[tril] <= Z * sd[tril] + 1e-9)
    assert torch.all(m[~tril] == 0)  # masked entries are set to 0


def test_the_ibm_estimate_of_a_masked_batch_counts_the_jobs_its_groups_submit(tmp_path):
    """On a (fake) IBM device each group of rows with the same visible spins runs on those spins (no merged runs for
    circuits): the estimate counts one PUB per group per move, as the run submits."""
    from hybrid_attention.backends import get_sampler

    s = get_sampler(
        "qemcmc", engine="ibm", backend="fake_manila", ledger=tmp_path / "q.jsonl", burn_in=2, trotter_steps=1
    )
    assert s._merge_overhead == 0.0
    h = torch.tensor([[0.3, 0.0], [0.2, -0.4], [0.1, 0.5]], dtype=torch.float64)
    J = torch.tensor([[0.0, 0.25], [0.25, 0.0]], dtype=torch.float64)
    p = IsingProblem(h, J.expand(3, 2, 2), mask=torch.tensor([[True, False], [True, True], [True, True]]))
    est = s.estimate(p, num_reads=3)
    # two groups (1 spin: 1 problem; 2 spins: 2 problems), one chunk each: 2 PUBs per move, 3 problems x 3 chains
    assert (est["jobs"], est["circuits"]) == (2 * 2, 3 * 3 * 2)
    ss = s.sample(p, num_reads=3, seed=0)
    assert len(ss.info["job_ids"]) == est["jobs"]
    assert np.all(ss.spins[0, :, 1] ** 2 == 1)


def test_the_ibm_estimate_of_a_batch_with_every_spin_masked_is_no_work(tmp_path):
    """Nothing visible, nothing to run: the estimate counts no job (it raised a bare ``max()`` error before) and
    ``sample`` submits none."""
    from hybrid_attention.backends import get_sampler

    s = get_sampler("qemcmc", engine="ibm", backend="fake_manila", ledger=tmp_path / "q.jsonl", burn_in=1)
    h = torch.tensor([[0.3, 0.1], [0.2, -0.4]], dtype=torch.float64)
    J = torch.tensor([[0.0, 0.25], [0.25, 0.0]], dtype=torch.float64)
    p = IsingProblem(h, J.expand(2, 2, 2), mask=torch.zeros(2, 2, dtype=torch.bool))
    est = s.estimate(p, num_reads=3)
    assert (est["jobs"], est["circuits"], est["shots"], est["qpu_seconds"]) == (0, 0, 0, 0.0)
    ss = s.sample(p, num_reads=3, seed=0)
    assert len(ss.info["job_ids"]) == est["jobs"]
