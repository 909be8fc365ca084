"""The ``qemcmc`` chain under device noise: the proposal circuit as a channel, and the exact chain it drives (``n <= 6``).

A device does not run the unitary proposal ``Q(s'|s) = |<s'|U|s>|^2`` of :mod:`hybrid_attention.circuits.proposal`; it
runs a noisy circuit, whose proposal ``Q_noisy[s, s'] = P(measure s' | prepare s)`` is a channel: the diagonal of the
output density matrix for each basis-state input, then the read-out errors. This module builds it, exactly for one
set of proposal parameters, with qiskit-aer's density-matrix simulator (``AerSimulator(method="density_matrix")``)
under a noise model: ``NoiseModel.from_backend`` of a (fake) IBM backend on the backend's ISA circuit (optimization
level 1, seed 0), or any ``NoiseModel`` on the logical circuit. Read-out errors are applied to the output
distribution from the model's assignment matrices; :class:`ProposalNoise` ``readout_asymmetry`` makes them
asymmetric (Aer models built from fake backends have symmetric read-out: one ``error`` per qubit).

Random proposal parameters (Layden's ``gamma in [0.25, 0.6]``, ``t in [2, 20]``) make the chain's proposal the
average ``Qbar`` of ``Q(gamma, t)`` over them. One noisy channel costs ``2**n`` density-matrix circuits, so the noisy
average is a sampled estimate with its error, not a quadrature: the mean of ``Q_noisy`` over ``draws``
Latin-hypercube draws of ``(gamma, t)``, corrected by a regression control variate, the noiseless proposal at the same
draws against its converged quadrature average (:func:`~.analysis.quadrature`):
``Qbar_noisy ~ mean(Q_noisy) + c (Qbar_ideal - mean(Q_ideal))``, ``c`` the least-squares slope of ``Q_noisy`` on
``Q_ideal`` over the draws. It is exact in both limits: no noise (``c = 1``) and a proposal that noise has made
independent of the parameters (``c = 0``, e.g. full depolarisation). Its error is a bootstrap over the draws
(:func:`noisy_kernel`), ``c`` refitted in each resample.

Acceptance: the chain as the ``qemcmc`` sampler runs it (and as hardware can: ``Q`` is unknown there) accepts with
``min(1, exp(-beta dE))``, the Metropolis rule of a symmetric proposal (``acceptance="symmetric"``, the default).
With a noisy, slightly asymmetric proposal its stationary law is then not exactly Boltzmann: :func:`noisy_kernel`
reports that stationary bias as a total variation. ``acceptance="hastings"`` uses the Hastings ratio of the estimated
``Qbar_noisy`` instead (exactly Boltzmann, but it needs ``Q``). Either chain is in general not reversible, so its gap
is ``1 - |lambda_2|`` from a general eigendecomposition (:func:`absolute_gap`), which equals
:func:`~.analysis.spectral_gap` for a reversible chain.

qiskit and qiskit-aer are imported when a channel is built.

Example:
    >>> import numpy as np
    >>> P = np.array([[0.5, 0.5], [0.25, 0.75]])
    >>> round(absolute_gap(P), 6)  # eigenvalues 1 and 0.25
    0.75
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "ProposalNoise",
    "MAX_NOISY_SPINS",
    "ACCEPTANCE",
    "absolute_gap",
    "readout_matrices",
    "proposal_channels",
    "noisy_kernel",
    "symmetric_acceptance_matrix",
]

#: largest ``n`` for the noisy channel (``2**n`` density-matrix circuits of ``4**n`` entries per parameter draw)
MAX_NOISY_SPINS = 6
#: acceptance rules of the noisy chain (module docstring)
ACCEPTANCE = ("symmetric", "hastings")


@dataclass(frozen=True)
class ProposalNoise:
    """The noise the proposal circuit runs under.

    Args:
        backend: a fake-backend name (``"fake_torino"``) or a BackendV2: the circuit is transpiled to its ISA and
            simulated under ``NoiseModel.from_backend(backend)`` (or ``noise_model``). ``None``: the logical circuit
            (gates ``rx``, ``rz``, ``rzz``) under ``noise_model``.
        noise_model: a ``qiskit_aer.noise.NoiseModel`` used instead of the backend's (an empty ``NoiseModel()`` gives
            the noiseless channel of the same circuit: the oracle tests).
        readout_asymmetry: ``a`` in ``[-1, 1]``. ``0`` (default): the model's read-out errors as they are. Otherwise
            each measured qubit keeps its mean read-out error ``e = (p(1|0) + p(0|1)) / 2`` and gets
            ``p(0|1) = e (1 + a)``, ``p(1|0) = e (1 - a)`` (``a > 0``: ``|1>`` decays to ``0`` during read-out, as
            on superconducting devices; ``a = 1``: only that decay).
        draws: parameter draws of the sampled noisy average (:func:`noisy_kernel`).
        seed: seed of the draws.
    """

    backend: Any = None
    noise_model: Any = None
    readout_asymmetry: float = 0.0
    draws: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        a = self.readout_asymmetry
        if isinstance(a, bool) or not isinstance(a, (int, float, np.floating)) or not -1.0 <= a <= 1.0:
            raise ValueError(f"readout_asymmetry must be a number in [-1, 1], got {a!r}")
        if isinstance(self.draws, bool) or not isinstance(self.draws, (int, np.integer)) or self.draws < 2:
            raise ValueError(f"draws must be an integer >= 2 (the error is a bootstrap over them), got {self.draws!r}")
        if self.backend is None and self.noise_model is None:
            raise ValueError("ProposalNoise needs a backend or a noise_model")


def absolute_gap(P: Any) -> float:
    """``1 - |lambda_2|`` of any transition matrix from its eigenvalues (``numpy.linalg.eigvals``), ``lambda_2`` the
    second-largest eigenvalue in absolute value. For a reversible chain this is :func:`~.analysis.spectral_gap`."""
    lam = np.sort(np.abs(np.linalg.eigvals(np.asarray(P, dtype=np.float64))))
    return float(1.0 - lam[-2])


def symmetric_acceptance_matrix(Q: Any, E: Any, beta: float) -> np.ndarray:
    """The chain that proposes from ``Q`` and accepts with ``min(1, exp(-beta (E' - E)))`` (the rule of a symmetric
    proposal, as the ``qemcmc`` sampler runs it); rejected mass stays on the diagonal. Linear in ``Q``."""
    Q = np.asarray(Q, dtype=np.float64)
    E = np.asarray(E, dtype=np.float64)
    P = Q * np.minimum(1.0, np.exp(np.clip(-beta * (E[None, :] - E[:, None]), -700.0, 700.0)))
    np.fill_diagonal(P, 0.0)
    P[np.diag_indices_from(P)] = 1.0 - P.sum(1)
    return P


_MODELS: dict[str, tuple[Any, Any]] = {}
#: the last pre-read-out channels computed (:func:`proposal_channels`)
_RAW: dict[tuple, np.ndarray] = {}


def _backend_and_model(noise: ProposalNoise) -> tuple[Any, Any]:
    """The backend object (or None) and the noise model; ``from_backend`` models are built once per backend name
    (about 25 s for a 133-qubit device)."""
    from qiskit_aer.noise import NoiseModel

    backend = noise.backend
    if isinstance(backend, str):
        from hybrid_attention.backends.ibm.sampler import fake_backend

        if backend not in _MODELS:
            b = fake_backend(backend)
            _MODELS[backend] = (b, None if noise.noise_model is not None else NoiseModel.from_backend(b))
        backend, model = _MODELS[backend]
        if noise.noise_model is not None:
            return backend, noise.noise_model
        if model is None:
            model = NoiseModel.from_backend(backend)
            _MODELS[noise.backend] = (backend, model)
        return backend, model
    if noise.noise_model is not None or backend is None:
        return backend, noise.noise_model
    return backend, NoiseModel.from_backend(backend)


def _restricted(model: Any, qubits: set[int]) -> Any:
    """The noise model's errors on ``qubits`` only (all-qubit errors kept): the same simulation of a circuit on those
    qubits, about 5x faster than the device-wide model (Aer handles every listed qubit's errors per circuit)."""
    from qiskit_aer.noise import NoiseModel

    d = model.to_dict()
    errs = [e for e in d.get("errors", []) if all(set(q) <= qubits for q in e.get("gate_qubits", [()]))]
    with warnings.catch_warnings():  # from_dict is deprecated (qiskit-aer 0.15) with no replacement for this use
        warnings.simplefilter("ignore", DeprecationWarning)
        return NoiseModel.from_dict({**d, "errors": errs})


def readout_matrices(model: Any, qubits: list[int], asymmetry: float = 0.0) -> list[np.ndarray]:
    """Per measured qubit the read-out assignment matrix ``A[measured, prepared]`` of ``model`` (identity where it
    has none), made asymmetric by ``asymmetry`` (:class:`ProposalNoise`)."""
    table: dict[int, np.ndarray] = {}
    default = np.eye(2)
    for e in model.to_dict().get("errors", []):
        if e.get("type") == "roerror":
            R = np.asarray(e["probabilities"], dtype=np.float64)  # rows: prepared, columns: measured
            if "gate_qubits" not in e:  # an all-qubit read-out error
                default = R.T
            for qs in e.get("gate_qubits", []):
                table[int(qs[0])] = R.T
    out = []
    for q in qubits:
        A = table.get(q, default)
        if asymmetry:
            e = 0.5 * (A[1, 0] + A[0, 1])
            p01, p10 = min(e * (1 + asymmetry), 1.0), e * (1 - asymmetry)  # p(0|1), p(1|0)
            A = np.array([[1 - p10, p01], [p10, 1 - p01]])
        out.append(A)
    return out


def _apply_readout(P: np.ndarray, mats: list[np.ndarray]) -> np.ndarray:
    """Bit ``j`` of every row's outcome (index ``c = sum_j b_j 2**j``) through ``mats[j]``."""
    R, N = P.shape
    for j, A in enumerate(mats):
        P = np.einsum("mb,rabc->ramc", A, P.reshape(R, N >> (j + 1), 2, 1 << j)).reshape(R, N)
    return P


def proposal_channels(h: Any, J: Any, params: Any, gammas: Any, times: Any, noise: ProposalNoise) -> np.ndarray:
    """Noisy proposal matrices ``Q[m, s, s'] = P(measure s' | prepare s)`` at parameter pairs ``(gammas[m], times[m])``.

    Args:
        h: ``(n,)`` fields; J: ``(n, n)`` couplings (masked spins decoupled beforehand); ``n <= 6``.
        params: :class:`~hybrid_attention.circuits.proposal.ProposalParams` (steps, alpha, shape; its ranges unused).
        gammas, times: ``(M,)`` parameter values.
        noise: :class:`ProposalNoise`.

    Returns:
        ``(M, 2**n, 2**n)`` float64, rows summing to 1 (negative round-off clipped).
    """
    from qiskit_aer import AerSimulator

    from hybrid_attention.backends.ibm.mitigation import measured_qubits
    from hybrid_attention.circuits.proposal import proposal_template, proposal_values
    from hybrid_attention.ising import index_to_bits

    h = np.asarray(h, dtype=np.float64)
    J = np.asarray(J, dtype=np.float64)
    n = h.shape[-1]
    if h.ndim != 1 or J.shape != (n, n) or not 1 <= n <= MAX_NOISY_SPINS:
        raise ValueError(
            f"proposal_channels needs h (n,), J (n, n), 1 <= n <= {MAX_NOISY_SPINS}; got {h.shape}, {J.shape}"
        )
    gammas = np.atleast_1d(np.asarray(gammas, dtype=np.float64))
    times = np.atleast_1d(np.asarray(times, dtype=np.float64))
    backend, model = _backend_and_model(noise)
    edges = tuple((j, k) for j in range(n) for k in range(j + 1, n) if J[j, k] != 0)
    tmpl = proposal_template(n, edges, params.steps, shape=params.shape)
    circ = tmpl.circuit
    if backend is not None:
        from qiskit.transpiler import generate_preset_pass_manager

        circ = generate_preset_pass_manager(optimization_level=1, backend=backend, seed_transpiler=0).run(circ)
    qubits = measured_qubits(circ)
    active = {circ.find_bit(q).index for inst in circ.data for q in inst.qubits}
    circ = circ.remove_final_measurements(inplace=False)
    circ.save_probabilities(qubits, label="p")
    N = 1 << n
    key = (h.tobytes(), J.tobytes(), params, gammas.tobytes(), times.tobytes(), id(model), id(backend))
    out = _RAW.get(key)
    if out is None:
        sim = AerSimulator(method="density_matrix", noise_model=_restricted(model, active))
        values = np.repeat(proposal_values(h[None], J[None], params, tmpl.edges), N, axis=0)
        bits = index_to_bits(np.arange(N), n)
        names = {p.name for p in circ.parameters}
        out = np.empty((len(gammas), N, N))
        for m, (g, t) in enumerate(zip(gammas, times)):
            binds = tmpl.bindings(bits, values, g, t)
            bind = {p: binds[:, i] for i, p in enumerate(tmpl.params) if p.name in names}
            res = sim.run(circ, parameter_binds=[bind], shots=1).result()
            out[m] = np.stack([np.asarray(res.data(i)["p"], dtype=np.float64) for i in range(N)])
        _RAW.clear()  # keep one: a second read-out setting of the same channels is free
        _RAW[key] = out
    out = _apply_readout(out.reshape(-1, N), readout_matrices(model, qubits, noise.readout_asymmetry))
    out = np.clip(out, 0.0, None).reshape(len(gammas), N, N)
    return out / out.sum(-1, keepdims=True)


def _draws(params: Any, draws: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Latin-hypercube draws of ``(gamma, t)`` from the params' ranges (a fixed value stays fixed)."""
    rng = np.random.default_rng(seed)
    (g0, g1), (t0, t1) = params.ranges()
    u = (np.stack([rng.permutation(draws) for _ in range(2)]) + rng.random((2, draws))) / draws
    return g0 + (g1 - g0) * u[0], t0 + (t1 - t0) * u[1]


def noisy_kernel(
    problem: Any,
    noise: ProposalNoise,
    params: Any = None,
    *,
    nodes: Any = None,
    acceptance: str = "symmetric",
    boots: int = 200,
) -> dict[str, Any]:
    """The noisy ``qemcmc`` chain of one problem (module docstring): gap, stationary bias and their errors.

    Args:
        problem: one :class:`~hybrid_attention.ising.IsingProblem`, ``n <= 6``.
        noise: :class:`ProposalNoise`. params: the proposal (default: the sampler's, Layden's ranges, 12 steps).
        nodes: quadrature of the noiseless average (:func:`~.analysis.quadrature`; default
            :data:`~.analysis.DEFAULT_NODES`).
        acceptance: ``"symmetric"`` (as run) or ``"hastings"`` (:data:`ACCEPTANCE`). boots: bootstrap resamples.

    Returns:
        ``{"gap", "gap_err", "tv_bias", "tv_bias_err", "gap_ideal", "asymmetry", "draws", "acceptance", "P"}``:
        the noisy chain's ``1 - |lambda_2|`` and its stationary law's TV to Boltzmann (errors: bootstrap standard
        deviations over the parameter draws; 0 for fixed parameters), the noiseless chain's gap (same quadrature),
        ``max |Qbar - Qbar^T|`` of the noisy proposal, and the noisy transition matrix ``P``.
    """
    from hybrid_attention.circuits.proposal import ProposalParams

    from .analysis import metropolis_matrix, quadrature, spectral_gap, stationary_distribution

    if acceptance not in ACCEPTANCE:
        raise ValueError(f"acceptance must be one of {ACCEPTANCE}, got {acceptance!r}")
    params = ProposalParams() if params is None else params
    flat = problem.detach().flatten()
    if flat.h.shape[0] != 1 or flat.n > MAX_NOISY_SPINS:
        raise ValueError(f"noisy_kernel needs one problem with n <= {MAX_NOISY_SPINS}, got {problem!r}")
    E, pi, beta, h, J = _energies(flat)
    Qbar_ideal = sum(w * _ideal_rows(flat, params, g, t) for g, t, w in quadrature(params, nodes))
    P_ideal = symmetric_acceptance_matrix(Qbar_ideal, E, beta)  # = transition_matrix (Qbar is symmetric)
    if params.fixed:
        gs, ts = np.array([float(params.gamma)]), np.array([float(params.time)])
    else:
        gs, ts = _draws(params, noise.draws, noise.seed)
    Qn = proposal_channels(h, J, params, gs, ts, noise)
    Qi = np.stack([_ideal_rows(flat, params, g, t) for g, t in zip(gs, ts)])

    def slope(a: np.ndarray, b: np.ndarray) -> float | None:
        da, db = a - a.mean(0), b - b.mean(0)
        var = float((db * db).sum())
        return float((da * db).sum()) / var if var > 1e-24 else None

    c_all = slope(Qn, Qi)
    c_all = 1.0 if c_all is None else c_all  # one draw (fixed parameters): no correction is needed

    def chain(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a, b = Qn[idx], Qi[idx]
        c = slope(a, b)  # regression control variate; a degenerate resample (one distinct draw) keeps the full fit
        c = c_all if c is None else c
        Q = np.clip(a.mean(0) + c * (Qbar_ideal - b.mean(0)), 0.0, None)
        Q /= Q.sum(1, keepdims=True)
        P = symmetric_acceptance_matrix(Q, E, beta) if acceptance == "symmetric" else metropolis_matrix(Q, E, beta)
        return Q, P

    Q, P = chain(np.arange(len(gs)))
    pi_n = stationary_distribution(P)
    out = {
        "gap": absolute_gap(P),
        "tv_bias": float(0.5 * np.abs(pi_n - pi).sum()),
        "gap_ideal": spectral_gap(P_ideal, pi),
        "asymmetry": float(np.abs(Q - Q.T).max()),
        "draws": len(gs),
        "acceptance": acceptance,
        "P": P,
    }
    rng = np.random.default_rng(noise.seed + 1)
    gaps, tvs = [], []
    for _ in range(boots if len(gs) > 1 else 0):
        _, Pb = chain(rng.integers(0, len(gs), len(gs)))
        gaps.append(absolute_gap(Pb))
        tvs.append(0.5 * np.abs(stationary_distribution(Pb) - pi).sum())
    out["gap_err"] = float(np.std(gaps)) if gaps else 0.0
    out["tv_bias_err"] = float(np.std(tvs)) if tvs else 0.0
    return out


def _energies(flat: Any) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray]:
    """``(E, pi, beta, h, J)`` of one flattened problem (float64 numpy; masked spins decoupled)."""
    import torch

    from ..dqa.statevector import configuration_energies

    n = flat.n
    h, J = flat.dropped()
    h64, J64 = h.to(torch.float64).cpu(), J.to(torch.float64).cpu().expand(1, n, n)
    E = configuration_energies(h64, J64)[0].numpy()
    beta = float(flat.beta_tensor()[0])
    w = np.exp(-beta * (E - E.min()))
    return E, w / w.sum(), beta, h64[0].numpy(), J64[0].numpy()


def _ideal_rows(flat: Any, params: Any, gamma: float, time: float) -> np.ndarray:
    """The noiseless proposal matrix at one ``(gamma, time)`` (the simulated unitary, float64)."""
    import torch

    from hybrid_attention.circuits.proposal import alpha_of

    from ..dqa.statevector import configuration_energies
    from .qemcmc_engines import proposal_rows

    _, _, _, h, J = _energies(flat)
    alpha = float(alpha_of(h, J)) if params.alpha is None else params.alpha
    E = configuration_energies(torch.from_numpy(h)[None], torch.from_numpy(J)[None])
    a, b = params.slices(gamma, time)
    return proposal_rows(alpha * E, a, b, params.steps, dtype=torch.complex128)[0].to(torch.float64).numpy()
