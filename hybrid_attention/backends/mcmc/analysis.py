"""Markov-chain analysis: exact transition matrices of small chains, spectral gaps, autocorrelation diagnostics.

Used by the ``qemcmc`` sampler (its diagnostics in ``SampleSet.info``), its tests (detailed balance, stationarity),
``experiments/qemcmc_mixing`` and ``hybrid-attention mixing`` (spectral gaps of quantum, local and uniform proposals).
numpy only at import; :func:`transition_matrix` and :func:`spectral_gaps` import torch and the proposal simulator
(:mod:`.qemcmc_engines`) when called.

States are indexed ``c = sum_j b_j 2**j`` (docs/theory.md section 2). A transition matrix ``P`` has ``P[s, s']`` the
probability of moving from ``s`` to ``s'`` (rows sum to 1).

* :func:`metropolis_matrix`: the Metropolis-Hastings chain of a proposal ``Q`` on energies ``E`` at ``beta``
  (acceptance ``min(1, exp(-beta (E' - E)) Q(s|s') / Q(s'|s))``, reducing to ``min(1, exp(-beta dE))`` for a
  symmetric ``Q``);
* :func:`local_proposal`, :func:`uniform_proposal`, :func:`heat_bath_matrix`: the classical baselines
  (single-spin-flip Metropolis, uniform proposals, random-scan Gibbs);
* :func:`stationary_distribution`, :func:`detailed_balance_violation`, :func:`spectral_gap`,
  :func:`exact_integrated_time`: exact properties of a chain;
* :func:`integrated_time`, :func:`effective_sample_size`: estimates from sampled traces (Sokal's automatic window);
* :func:`transition_matrix`: the exact kernel of one problem's ``qemcmc`` chain (simulated proposal unitary);
  :func:`kernel_matrices`: every kernel of :data:`KERNELS` for one problem; :func:`spectral_gaps`: their gaps for a
  batch of problems (``n <= 12``).

Example:
    >>> import numpy as np
    >>> E = np.array([0.0, 1.0, 1.0, -0.5])
    >>> P = metropolis_matrix(uniform_proposal(2), E, 1.0)
    >>> pi = np.exp(-E) / np.exp(-E).sum()
    >>> bool(np.allclose(stationary_distribution(P), pi)), detailed_balance_violation(P, pi) < 1e-15
    (True, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "metropolis_matrix",
    "local_proposal",
    "uniform_proposal",
    "heat_bath_matrix",
    "stationary_distribution",
    "detailed_balance_violation",
    "spectral_gap",
    "exact_integrated_time",
    "integrated_time",
    "effective_sample_size",
    "transition_matrix",
    "kernel_matrices",
    "spectral_gaps",
    "KERNELS",
    "MAX_EXACT_SPINS",
    "check_nodes",
    "quadrature",
    "DEFAULT_NODES",
]

#: the chains :func:`spectral_gaps` and :func:`kernel_matrices` know: ``qemcmc`` (Metropolis with the quantum
#: proposal of the ``qemcmc`` sampler), ``local`` (Metropolis, one uniformly chosen spin flipped: ``mh-local``),
#: ``uniform`` (Metropolis, a uniformly random configuration: ``mh-uniform``), ``heat-bath`` (random-scan Gibbs)
KERNELS = ("qemcmc", "local", "uniform", "heat-bath")
#: largest ``n`` for exact transition matrices (``2**12 = 4096`` states: ~134 MB per matrix)
MAX_EXACT_SPINS = 12
#: default quadrature of the random proposal parameters, ``(gamma_nodes, time_nodes)``: the proposal oscillates in
#: ``t in [2, 20]`` and is smooth in ``gamma``; on Layden instances at n = 4 and 6 this rule's gaps differ from a
#: (12, 96) rule by less than 1e-3 relative (results/qemcmc_noise/README.md, "Quadrature"), where the earlier 4 x 4
#: rule erred by up to 9 %
DEFAULT_NODES = (8, 32)


def _flips(n: int) -> np.ndarray:
    """``(2**n, n)`` index of ``s`` with spin ``j`` flipped."""
    c = np.arange(1 << n)
    return c[:, None] ^ (1 << np.arange(n))[None, :]


def metropolis_matrix(Q: Any, E: Any, beta: float) -> np.ndarray:
    """Transition matrix of Metropolis-Hastings with proposal ``Q (2**n, 2**n)`` on energies ``E (2**n,)``.

    ``P[s, s'] = Q[s, s'] min(1, exp(-beta (E[s'] - E[s])) Q[s', s] / Q[s, s'])`` for ``s' != s``; the rejected
    mass stays on the diagonal. For a symmetric ``Q`` the ratio of proposals is 1.
    """
    Q = np.asarray(Q, dtype=np.float64)
    E = np.asarray(E, dtype=np.float64)
    dE = E[None, :] - E[:, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.where(Q > 0, np.exp(-beta * dE) * Q.T / np.where(Q > 0, Q, 1.0), 0.0)
    P = Q * np.minimum(1.0, ratio)
    np.fill_diagonal(P, 0.0)
    P[np.diag_indices_from(P)] = 1.0 - P.sum(1)
    return P


def local_proposal(n: int) -> np.ndarray:
    """Single-spin-flip proposal: flip one uniformly chosen spin, ``Q[s, s^j] = 1/n``."""
    Q = np.zeros((1 << n, 1 << n))
    Q[np.arange(1 << n)[:, None], _flips(n)] = 1.0 / n
    return Q


def uniform_proposal(n: int) -> np.ndarray:
    """Uniform proposal ``Q[s, s'] = 2**-n`` (Layden et al.'s classical baseline, with local moves)."""
    return np.full((1 << n, 1 << n), 1.0 / (1 << n))


def heat_bath_matrix(E: Any, beta: float, n: int) -> np.ndarray:
    """Random-scan Gibbs (heat bath): pick spin ``j`` uniformly, redraw it from its conditional distribution."""
    E = np.asarray(E, dtype=np.float64)
    F = _flips(n)
    c = np.arange(1 << n)
    p_flip = 1.0 / (1.0 + np.exp(np.clip(beta * (E[F] - E[:, None]), -700, 700)))  # (2**n, n)
    P = np.zeros((1 << n, 1 << n))
    P[c[:, None], F] = p_flip / n
    P[c, c] = 1.0 - p_flip.sum(1) / n
    return P


def stationary_distribution(P: Any) -> np.ndarray:
    """The stationary distribution of an ergodic chain: the left eigenvector of ``P`` for eigenvalue 1, normalised."""
    P = np.asarray(P, dtype=np.float64)
    w, v = np.linalg.eig(P.T)
    k = int(np.argmin(np.abs(w - 1.0)))
    pi = np.real(v[:, k])
    return pi / pi.sum()


def detailed_balance_violation(P: Any, pi: Any) -> float:
    """``max |pi[s] P[s, s'] - pi[s'] P[s', s]|`` (0 for a reversible chain with stationary ``pi``)."""
    F = np.asarray(pi)[:, None] * np.asarray(P)
    return float(np.abs(F - F.T).max())


def spectral_gap(P: Any, pi: Any) -> float:
    """``1 - |lambda_2|`` of a reversible chain, ``lambda_2`` the second-largest eigenvalue in absolute value.

    Computed from the symmetric matrix ``D^1/2 P D^-1/2`` (``D = diag(pi)``), which has the eigenvalues of ``P``
    when detailed balance holds.
    """
    pi = np.asarray(pi, dtype=np.float64)
    d = np.sqrt(pi)
    A = d[:, None] * np.asarray(P) / d[None, :]
    lam = np.linalg.eigvalsh(0.5 * (A + A.T))
    lam = np.sort(np.abs(lam))
    return float(1.0 - lam[-2])


def exact_integrated_time(P: Any, pi: Any, f: Any) -> float:
    """Integrated autocorrelation time ``1 + 2 sum_{t>=1} rho_f(t)`` of ``f(X_t)`` for a stationary chain.

    Uses ``sum_{t>=1} P^t g = (I - P + 1 pi^T)^-1 P g`` for the centred ``g = f - E_pi f`` (the fundamental matrix).
    """
    P = np.asarray(P, dtype=np.float64)
    pi = np.asarray(pi, dtype=np.float64)
    g = np.asarray(f, dtype=np.float64) - pi @ np.asarray(f, dtype=np.float64)
    var = pi @ g**2
    Z = np.linalg.solve(np.eye(len(pi)) - P + np.outer(np.ones(len(pi)), pi), P @ g)
    return float(1.0 + 2.0 * (pi * g) @ Z / var)


def _autocorrelation(x: np.ndarray) -> np.ndarray:
    """Chain-averaged normalised autocorrelation of ``x (..., chains, T)`` along the last axis (FFT).

    The mean subtracted is pooled over chains and time: per-chain means bias the autocovariance low by about
    ``tau / T`` (short traces), and chains stuck in different modes then show up as a long time, not a short one."""
    T = x.shape[-1]
    y = x - x.mean((-2, -1), keepdims=True)
    f = np.fft.rfft(y, n=2 * T, axis=-1)
    acov = np.fft.irfft(f * np.conj(f), axis=-1)[..., :T] / T
    acov = acov.mean(-2)  # average over chains
    with np.errstate(divide="ignore", invalid="ignore"):
        return acov / acov[..., :1]


def integrated_time(x: Any, *, c: float = 5.0) -> np.ndarray:
    """Integrated autocorrelation time (in steps) of traces ``x (..., chains, T)``, per leading index.

    Sokal's automatic window (as in emcee): ``tau(M) = 1 + 2 sum_{t=1}^{M} rho(t)`` with the chain-averaged
    autocorrelation ``rho``, at the smallest ``M >= c tau(M)``. A constant trace (no variance) gives 1; a window
    that never closes within ``T`` gives the last estimate (an underestimate: the trace is too short).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim < 2 or x.shape[-1] < 2:
        raise ValueError(f"integrated_time needs traces (..., chains, T >= 2), got shape {x.shape}")
    rho = _autocorrelation(x)
    rho = np.where(np.isfinite(rho), rho, 0.0)
    rho[..., 0] = 1.0
    taus = 2.0 * np.cumsum(rho, axis=-1) - 1.0
    M = np.arange(x.shape[-1])
    ok = M >= c * taus
    first = np.where(ok.any(-1), ok.argmax(-1), x.shape[-1] - 1)
    return np.maximum(np.take_along_axis(taus, first[..., None], -1)[..., 0], 1.0)


def effective_sample_size(num_chains: int, records: int, iat: Any, thinning: int = 1) -> np.ndarray:
    """Effective number of independent reads among ``num_chains * records`` recorded states.

    Chains are independent; within a chain, records ``thinning`` steps apart have an integrated time of about
    ``max(1, iat / thinning)`` records, so ``ESS = num_chains * min(records, max(1, records / (iat / thinning)))``.
    """
    tau = np.maximum(np.asarray(iat, dtype=np.float64) / thinning, 1.0)
    return num_chains * np.minimum(records, np.maximum(1.0, records / tau))


def check_nodes(nodes: Any) -> tuple[int, int]:
    """``nodes`` (Gauss-Legendre nodes per random proposal parameter: one positive int for both, or a pair
    ``(gamma_nodes, time_nodes)``) as a checked pair whose rules fit the memory budget:
    ``numpy.polynomial.legendre.leggauss`` builds a ``nodes x nodes`` float64 matrix (``ValueError`` naming the
    estimate, before any work; :func:`hybrid_attention.checks.check_memory`)."""
    from hybrid_attention.checks import check_memory, check_positive_int

    pair = tuple(nodes) if isinstance(nodes, (tuple, list)) else (nodes, nodes)
    if len(pair) != 2:
        raise ValueError(f"nodes must be a positive int or a (gamma_nodes, time_nodes) pair, got {nodes!r}")
    pair = (check_positive_int(pair[0], "nodes"), check_positive_int(pair[1], "nodes"))
    for k in pair:
        check_memory(
            8.0 * k * k,
            f"the Gauss-Legendre rule of {k} nodes (a nodes x nodes float64 matrix)",
            hint=f"use fewer nodes (the default {DEFAULT_NODES} is converged: results/qemcmc_noise/README.md)",
        )
    return pair


def quadrature(params: Any, nodes: Any = None) -> list[tuple[float, float, float]]:
    """``[(gamma, time, weight)]``: the product Gauss-Legendre rule over the uniform distribution of the proposal's
    random parameters (a fixed parameter is one node of weight 1); ``nodes`` as :func:`check_nodes` (default
    :data:`DEFAULT_NODES`)."""
    ng, nt = check_nodes(DEFAULT_NODES if nodes is None else nodes)
    (g0, g1), (t0, t1) = params.ranges()

    def rule(lo: float, hi: float, k: int) -> list[tuple[float, float]]:
        if lo == hi:
            return [(lo, 1.0)]
        x, w = np.polynomial.legendre.leggauss(k)
        return [(lo + (hi - lo) * (xi + 1) / 2, wi / 2) for xi, wi in zip(x, w)]

    return [(g, t, wg * wt) for g, wg in rule(g0, g1, ng) for t, wt in rule(t0, t1, nt)]


def transition_matrix(problem: Any, params: Any = None, *, nodes: Any = None, dtype: Any = None) -> np.ndarray:
    """The exact transition matrix ``P[s, s']`` ``(2**n, 2**n)`` of one problem's ``qemcmc`` chain.

    The proposal matrix comes from the simulated proposal unitary
    (:func:`hybrid_attention.backends.mcmc.qemcmc_engines.proposal_rows`), the acceptance is Metropolis on ``beta E``
    (:func:`metropolis_matrix`). For parameters drawn from ranges the chain's kernel is the average of ``P`` over the
    uniform parameter distribution; it is computed with a product Gauss-Legendre rule (:func:`quadrature`; a mixture
    of exactly symmetric kernels, so detailed balance holds for any ``nodes``).

    Args:
        problem: one :class:`~hybrid_attention.ising.IsingProblem` (batch size 1 or no batch), ``n <= 12``
            (``n = 11, 12`` simulate 2048 / 4096 basis states per quadrature node: minutes and about 1 GB).
        params: :class:`~hybrid_attention.circuits.proposal.ProposalParams` (default: the sampler's default).
        nodes: quadrature nodes per random parameter, an int or a pair ``(gamma_nodes, time_nodes)`` (default
            :data:`DEFAULT_NODES`, converged: see :data:`DEFAULT_NODES`).
        dtype: simulation dtype (default ``torch.complex128``).
    """
    import torch

    from hybrid_attention.circuits.proposal import ProposalParams, alpha_of

    from ..dqa.statevector import configuration_energies
    from .qemcmc_engines import proposal_rows

    rule = quadrature(ProposalParams() if params is None else params, nodes)
    dtype = torch.complex128 if dtype is None else dtype
    params = ProposalParams() if params is None else params
    flat = problem.detach().flatten()
    if flat.h.shape[0] != 1 or flat.n > MAX_EXACT_SPINS:
        raise ValueError(f"transition_matrix needs one problem with n <= {MAX_EXACT_SPINS}, got {problem!r}")
    h, J = flat.dropped()
    h64, J64 = h.to(torch.float64).cpu(), J.to(torch.float64).cpu().expand(1, flat.n, flat.n)
    mask = None if flat.mask is None else flat.mask.cpu().numpy()
    alpha = float(alpha_of(h64.numpy(), J64.numpy(), mask)[0]) if params.alpha is None else params.alpha
    E = configuration_energies(h64, J64)  # (1, 2**n)
    beta = float(flat.beta_tensor()[0])
    P = np.zeros((1 << flat.n, 1 << flat.n))
    for g, t, wt in rule:
        a, b = params.slices(g, t)
        Q = proposal_rows(alpha * E, a, b, params.steps, dtype=dtype)[0].to(torch.float64).numpy()
        P += wt * metropolis_matrix(Q, E[0].numpy(), beta)
    return P


def _check_kernels(problem: Any, proposals: Any) -> tuple[str, ...]:
    """``proposals`` as a tuple of :data:`KERNELS` names; ``ValueError`` for an unknown one or ``n`` above the limit
    (before any work)."""
    from hybrid_attention.ising import IsingProblem

    if not isinstance(problem, IsingProblem):
        raise TypeError(f"expected an IsingProblem, got {type(problem).__name__}")
    if isinstance(proposals, str):
        proposals = (proposals,)
    proposals = tuple(proposals)
    bad = [p for p in proposals if p not in KERNELS]
    if bad or not proposals:
        raise ValueError(f"proposals must be a non-empty selection of {KERNELS}, got {list(proposals)}")
    if problem.n > MAX_EXACT_SPINS:
        raise ValueError(
            f"exact transition matrices need n <= {MAX_EXACT_SPINS} spins (2**n states), got n = {problem.n}; "
            "estimate autocorrelation times from chains instead (hybrid-attention mixing does so above the limit)"
        )
    return proposals


def kernel_matrices(
    problem: Any, proposals: Any = KERNELS, params: Any = None, *, nodes: Any = None
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """The exact transition matrices of one problem's chains, with its energies and Boltzmann distribution.

    Args:
        problem: one :class:`~hybrid_attention.ising.IsingProblem` (batch size 1 or no batch), ``n <= 12``.
        proposals: names among :data:`KERNELS`. params: the ``qemcmc`` proposal (:func:`transition_matrix`).
        nodes: quadrature nodes per random proposal parameter (:func:`transition_matrix`).

    Returns:
        ``({name: P (2**n, 2**n)}, E (2**n,), pi (2**n,))``: one step of each chain is one proposal (``local``,
        ``uniform``, ``qemcmc``) or one spin update (``heat-bath``); ``E`` the energies, ``pi`` the exact Boltzmann
        distribution at the problem's ``beta``.
    """
    import torch

    from ..dqa.statevector import configuration_energies

    proposals = _check_kernels(problem, proposals)
    flat = problem.detach().flatten()
    if flat.h.shape[0] != 1:
        raise ValueError(f"kernel_matrices takes one problem, got a batch of {flat.h.shape[0]}")
    n = flat.n
    h, J = flat.dropped()
    E = configuration_energies(h.to(torch.float64).cpu(), J.to(torch.float64).cpu().expand(1, n, n))[0].numpy()
    beta = float(flat.beta_tensor()[0])
    w = np.exp(-beta * (E - E.min()))
    pi = w / w.sum()
    out: dict[str, np.ndarray] = {}
    for name in proposals:
        if name == "qemcmc":
            out[name] = transition_matrix(flat, params, nodes=nodes)
        elif name == "local":
            out[name] = metropolis_matrix(local_proposal(n), E, beta)
        elif name == "uniform":
            out[name] = metropolis_matrix(uniform_proposal(n), E, beta)
        else:
            out[name] = heat_bath_matrix(E, beta, n)
    return out, E, pi


def spectral_gaps(
    problem: Any, proposals: Any = KERNELS, params: Any = None, *, nodes: Any = None
) -> dict[str, np.ndarray]:
    """Exact spectral gaps ``1 - |lambda_2|`` of each chain, for every problem of a batch.

    A larger gap mixes faster: the chain forgets its start within about ``1 / gap`` steps (one step = one proposal;
    for ``heat-bath`` one spin update). Gaps are per step, not per unit of cost: a ``qemcmc`` step runs a circuit.

    Args:
        problem: an :class:`~hybrid_attention.ising.IsingProblem` with any batch shape and ``n <= 12``
            (``qemcmc`` at ``n = 11, 12`` takes minutes per problem).
        proposals: names among :data:`KERNELS` (default: all four).
        params: :class:`~hybrid_attention.circuits.proposal.ProposalParams` of the ``qemcmc`` proposal (default: the
            sampler's Layden ranges ``gamma in [0.25, 0.6]``, ``t in [2, 20]``, averaged by quadrature).
        nodes: Gauss-Legendre nodes per random proposal parameter, an int or ``(gamma_nodes, time_nodes)`` (default
            :data:`DEFAULT_NODES`, converged).

    Returns:
        ``{name: gaps}`` with ``gaps`` float64 of the problem's batch shape.

    Raises:
        ValueError: an unknown proposal name, or ``n > 12`` (before any work). TypeError: not an IsingProblem.

    Example:
        >>> import torch
        >>> from hybrid_attention import IsingProblem
        >>> g = spectral_gaps(IsingProblem(torch.zeros(2, 3)), proposals=("uniform", "local", "heat-bath"))
        >>> {k: [round(float(x), 4) for x in v] for k, v in g.items()}  # free spins; local flips are periodic
        {'uniform': [1.0, 1.0], 'local': [0.0, 0.0], 'heat-bath': [0.3333, 0.3333]}
    """
    proposals = _check_kernels(problem, proposals)
    flat = problem.detach().flatten()
    B = flat.h.shape[0]
    gaps = {name: np.empty(B) for name in proposals}
    for b in range(B):
        Ps, _, pi = kernel_matrices(flat[b : b + 1], proposals, params, nodes=nodes)
        for name, P in Ps.items():
            gaps[name][b] = spectral_gap(P, pi)
    return {name: g.reshape(tuple(problem.batch_shape)) for name, g in gaps.items()}
