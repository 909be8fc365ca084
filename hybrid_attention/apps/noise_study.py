"""What device noise does to the quantum samplers, measured on a (fake or real) IBM backend's noise model: the
functions behind ``experiments/hardware/run.py`` and ``notebooks/hardware_noise.py``.

* :func:`dqa_noise` -- the DQA circuit sampled under the backend's noise model (qiskit-aer, density matrix, the ISA
  circuit of the device), with and without each mitigation (:data:`DQA_VARIANTS`): the sampled distribution's total
  variation (TV) to exact Boltzmann and to the noiseless circuit's exact output, and the mean marginal error to the
  noiseless circuit with its shot-noise standard error.
* :func:`qemcmc_stationary_bias` -- the qemcmc chain's stationary law under noise, exactly (``n <= 6``): the noisy
  proposal matrix ``Q[s, s']`` from the density matrix of the ISA proposal circuit run on every basis-state input
  (read-out errors of the noise model applied to its output distribution), the chain's transition matrix as the
  sampler runs it (Metropolis acceptance ``min(1, exp(-beta dE))``, which assumes a symmetric proposal), its
  stationary law and TV to Boltzmann; beside it the same for the noiseless proposal (symmetric: TV ~ 0) and for full
  Metropolis-Hastings with the noisy ``Q``'s ratio (which would need ``Q``, unknown on a device).
* :func:`qemcmc_sampled_bias` -- larger ``n``: the ``qemcmc`` sampler's marginals under the noise model (aer engine)
  against exact Boltzmann marginals, in units of their effective-sample-size standard errors.

Problems: :func:`sk_problems` (``h ~ N(0, 1)``, ``J ~ N(0, 1/(n-1))`` all-to-all, ``beta = 1``).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from hybrid_attention import IsingProblem, exact
from hybrid_attention.metrics import total_variation

__all__ = [
    "DQA_VARIANTS",
    "sk_problems",
    "dqa_noise",
    "noisy_proposal_matrix",
    "exact_noisy_distribution",
    "qemcmc_stationary_bias",
    "qemcmc_sampled_bias",
]

#: the DQA runs of :func:`dqa_noise`: name -> aer sampler options (``None``: the ideal circuit, sampled)
DQA_VARIANTS: dict[str, dict[str, Any] | None] = {
    "noiseless": None,
    "noisy": {},
    "readout": {"readout_mitigation": True},
    "twirling": {"twirling": 8},
    "readout+twirling": {"readout_mitigation": True, "twirling": 8},
}


def sk_problems(n: int, count: int, seed: int) -> IsingProblem:
    """``count`` problems of ``n`` spins: ``h ~ N(0, 1)``, ``J ~ N(0, 1/(n-1))`` symmetric, ``beta = 1``."""
    g = torch.Generator().manual_seed(int(seed) * 1000 + n)
    h = torch.randn(count, n, generator=g, dtype=torch.float64)
    U = torch.randn(count, n, n, generator=g, dtype=torch.float64).triu(1) / np.sqrt(max(n - 1, 1))
    return IsingProblem(h, U + U.transpose(-1, -2))


_NOISE: dict[int, tuple[Any, Any]] = {}


def _noise_model(backend: Any) -> Any:
    """``NoiseModel.from_backend(backend)``, built once per backend object (seconds for a 100+ qubit device)."""
    from qiskit_aer.noise import NoiseModel

    key = id(backend)
    if key not in _NOISE or _NOISE[key][0] is not backend:
        _NOISE[key] = (backend, NoiseModel.from_backend(backend))
    return _NOISE[key][1]


def _spins(n: int) -> np.ndarray:
    return 1 - 2 * ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1)


def dqa_noise(
    backend: Any,
    problems: IsingProblem,
    *,
    shots: int = 4096,
    seed: int = 0,
    schedule: Any = None,
    variants: list[str] | None = None,
) -> dict[str, Any]:
    """The DQA sampler under ``backend``'s noise model, per variant of :data:`DQA_VARIANTS`.

    Args:
        backend: a BackendV2 with a noise model source (a fake backend, or a real device's ``IBMBackend``).
        problems: a batch of problems; shots: reads per problem; seed: sampler seed; schedule: the anneal
            (default ``DQASchedule(tau=1.0, steps=20)``); variants: names to run (default all).

    Returns:
        ``{"n", "problems", "shots", "depth", "two_qubit_gates", "variants": {name: {"tv_boltzmann",
        "tv_circuit", "marginal_error", "marginal_se", "seconds"}}}``; TVs and errors averaged over the problems,
        ``marginal_se`` the shot-noise standard error of one marginal (mean over spins and problems).
    """
    from qiskit_aer.noise import NoiseModel

    from hybrid_attention.backends import get_sampler
    from hybrid_attention.circuits import DQASchedule

    schedule = schedule or DQASchedule(tau=1.0, steps=20)
    names = list(DQA_VARIANTS) if variants is None else list(variants)
    noise = {"noise_model": NoiseModel.from_backend(backend)}  # built once for every variant
    p_boltz = exact.probabilities(problems).numpy().reshape(-1, 1 << problems.n)
    base = get_sampler("aer", schedule=schedule, noise_backend=backend, method="density_matrix", backend_options=noise)
    p_circ = np.asarray(base.reference_probabilities(problems)).reshape(-1, 1 << problems.n)
    m_circ = p_circ @ _spins(problems.n)
    isa = base.circuit_for(base._template(problems.flatten()))
    ops = isa.count_ops()
    out: dict[str, Any] = {
        "n": problems.n,
        "problems": int(p_circ.shape[0]),
        "shots": int(shots),
        "depth": int(isa.depth()),
        "two_qubit_gates": int(sum(v for k, v in ops.items() if k in ("cz", "cx", "ecr", "rzz"))),
        "variants": {},
    }
    for name in names:
        opts = DQA_VARIANTS[name]
        t0 = time.perf_counter()
        if opts is None:
            s = get_sampler("aer", schedule=schedule, readout="probabilities")
            ss = s.sample(problems, num_reads=shots, seed=seed)
        else:
            s = get_sampler(
                "aer", schedule=schedule, noise_backend=backend, method="density_matrix", backend_options=noise, **opts
            )
            s._isa.update(base._isa)  # the same ISA circuit (transpiled once, deterministic)
            ss = s.sample(problems, num_reads=shots, seed=seed)
        p = np.asarray(ss.probabilities()).reshape(-1, 1 << problems.n)
        m = np.asarray(ss.marginals()).reshape(-1, problems.n)
        se = np.sqrt(np.clip(1 - m_circ**2, 0, None) / shots)
        out["variants"][name] = {
            "tv_boltzmann": float(np.mean(total_variation(p, p_boltz))),
            "tv_circuit": float(np.mean(total_variation(p, p_circ))),
            "marginal_error": float(np.mean(np.abs(m - m_circ))),
            "marginal_se": float(np.mean(se)),
            "seconds": time.perf_counter() - t0,
        }
    out["tv_circuit_to_boltzmann"] = float(np.mean(total_variation(p_circ, p_boltz)))
    return out


def _readout_channel(backend: Any, qubits: list[int]) -> list[np.ndarray]:
    """Per measured qubit the read-out assignment matrix ``A[meas, prep]`` of ``backend``'s Aer noise model."""
    errs = _noise_model(backend).to_dict().get("errors", [])
    table: dict[int, np.ndarray] = {}
    for e in errs:
        if e.get("type") == "roerror":
            P = np.asarray(e["probabilities"], dtype=np.float64)  # rows: prepared, columns: measured
            for qs in e.get("gate_qubits", []):
                table[int(qs[0])] = P.T
    return [table.get(q, np.eye(2)) for q in qubits]


def exact_noisy_distribution(isa: Any, backend: Any) -> np.ndarray:
    """The exact output distribution ``(2**n,)`` of a bound ISA circuit (``n`` measured classical bits) under
    ``backend``'s Aer noise model: the density matrix of the circuit's measured qubits (Aer drops idle qubits), then
    each bit through its qubit's read-out channel. Index ``c = sum_j b_j 2**j`` over classical bits ``b_j``, the
    order of ``SampleSet`` spins. No shots: a sampled histogram of ``N`` shots scatters around it by about
    :func:`hybrid_attention.metrics.expected_tv` ``(p, N)``."""
    from qiskit_aer import AerSimulator

    from hybrid_attention.backends.ibm.mitigation import measured_qubits

    if isa.num_parameters:
        raise ValueError(f"exact_noisy_distribution needs a bound circuit, got {isa.num_parameters} free parameters")
    qubits = measured_qubits(isa)
    N = 1 << len(qubits)
    circ = isa.remove_final_measurements(inplace=False)
    circ.save_probabilities(qubits, label="p")
    sim = AerSimulator(method="density_matrix", noise_model=_noise_model(backend))
    P = np.asarray(sim.run(circ, shots=1).result().data(0)["p"], dtype=np.float64)[None]
    for j, A in enumerate(_readout_channel(backend, qubits)):  # bit j passes through its read-out channel
        P = P.reshape(1, N >> (j + 1), 2, 1 << j)
        P = np.einsum("mb,rabc->ramc", A, P).reshape(1, N)
    P = np.clip(P[0], 0, None)
    return P / P.sum()


def noisy_proposal_matrix(
    problem: IsingProblem, backend: Any, *, gamma: float = 0.45, time_: float = 6.0, steps: int = 2
) -> tuple[np.ndarray, np.ndarray]:
    """``(Q_noisy, Q_ideal)``, ``(2**n, 2**n)``: the qemcmc proposal ``Q[s, s'] = P(measure s' | prepare s)`` of one
    problem with fixed ``gamma``, ``time_`` and Trotter ``steps``, under ``backend``'s noise model (density matrix of
    the ISA circuit for every basis-state input, then the model's read-out errors) and noiselessly (the simulated
    proposal unitary). States are indexed ``c = sum_j b_j 2**j``."""
    from qiskit.transpiler import generate_preset_pass_manager
    from qiskit_aer import AerSimulator

    from hybrid_attention.backends.dqa.statevector import configuration_energies
    from hybrid_attention.backends.ibm.mitigation import measured_qubits
    from hybrid_attention.backends.mcmc.qemcmc_engines import proposal_rows
    from hybrid_attention.circuits.proposal import ProposalParams, alpha_of, proposal_template, proposal_values
    from hybrid_attention.ising import index_to_bits

    flat = problem.detach().flatten()
    if flat.h.shape[0] != 1:
        raise ValueError(f"noisy_proposal_matrix takes one problem, got batch {tuple(problem.batch_shape)}")
    n = flat.n
    h, J = flat.dropped()
    h64, J64 = h.double().numpy(), J.double().expand(1, n, n).numpy()
    params = ProposalParams(gamma=gamma, time=time_, steps=steps)
    edges = tuple((j, k) for j in range(n) for k in range(j + 1, n) if J64[0, j, k] != 0)
    tmpl = proposal_template(n, edges, steps)
    values = proposal_values(h64, J64, params, tmpl.edges)  # (1, n + E)
    N = 1 << n
    binds = tmpl.bindings(index_to_bits(np.arange(N), n), np.repeat(values, N, axis=0), gamma, time_)
    pm = generate_preset_pass_manager(optimization_level=1, backend=backend, seed_transpiler=0)
    isa = pm.run(tmpl.circuit)
    qubits = measured_qubits(isa)
    circ = isa.remove_final_measurements(inplace=False)
    circ.save_probabilities(qubits, label="p")
    sim = AerSimulator(method="density_matrix", noise_model=_noise_model(backend))
    params_ = list(isa.parameters)
    res = sim.run(circ, parameter_binds=[{p: binds[:, i] for i, p in enumerate(params_)}], shots=1).result()
    P = np.stack([np.asarray(res.data(i)["p"], dtype=np.float64) for i in range(N)])  # (N, N): bit j <- qubits[j]
    for j, A in enumerate(_readout_channel(backend, qubits)):  # bit j passes through its read-out channel
        P = P.reshape(N, N >> (j + 1), 2, 1 << j)
        P = np.einsum("mb,rabc->ramc", A, P).reshape(N, N)
    P = np.clip(P, 0, None)
    P /= P.sum(1, keepdims=True)
    alpha = float(alpha_of(h64, J64)[0])
    E = configuration_energies(torch.from_numpy(h64), torch.from_numpy(J64))
    a, b = params.slices(gamma, time_)
    Q0 = proposal_rows(alpha * E, a, b, steps, dtype=torch.complex128)[0].double().numpy()
    return P, Q0


def _as_run_matrix(Q: np.ndarray, E: np.ndarray, beta: float) -> np.ndarray:
    """The qemcmc chain as the sampler runs it: propose from ``Q``, accept with ``min(1, exp(-beta dE))``."""
    dE = E[None, :] - E[:, None]
    P = Q * np.minimum(1.0, np.exp(np.clip(-beta * dE, -700, 700)))
    np.fill_diagonal(P, 0.0)
    P[np.diag_indices_from(P)] = 1.0 - P.sum(1)
    return P


def qemcmc_stationary_bias(
    problem: IsingProblem, backend: Any, *, gamma: float = 0.45, time_: float = 6.0, steps: int = 2
) -> dict[str, Any]:
    """Exact stationary bias of the qemcmc chain of one problem under ``backend``'s noise (module docstring).

    Returns:
        ``{"n", "tv_as_run", "tv_ideal", "tv_mh_noisy", "asymmetry", "marginal_error"}``: TV to Boltzmann of the
        stationary law of the chain as run with the noisy proposal, with the ideal proposal, and with full
        Metropolis-Hastings on the noisy proposal; ``asymmetry = max |Q - Q^T|`` of the noisy proposal; the max
        marginal error of the as-run stationary law.
    """
    from hybrid_attention.backends.dqa.statevector import configuration_energies
    from hybrid_attention.backends.mcmc.analysis import metropolis_matrix, stationary_distribution

    Q, Q0 = noisy_proposal_matrix(problem, backend, gamma=gamma, time_=time_, steps=steps)
    flat = problem.detach().flatten()
    n = flat.n
    h, J = flat.dropped()
    E = configuration_energies(h.double(), J.double().expand(1, n, n))[0].numpy()
    beta = float(flat.beta_tensor()[0])
    p_b = exact.probabilities(flat).numpy().reshape(-1)
    pi = stationary_distribution(_as_run_matrix(Q, E, beta))
    pi0 = stationary_distribution(_as_run_matrix(Q0, E, beta))
    pi_mh = stationary_distribution(metropolis_matrix(Q, E, beta))
    S = _spins(n)
    return {
        "n": n,
        "tv_as_run": float(total_variation(pi, p_b)),
        "tv_ideal": float(total_variation(pi0, p_b)),
        "tv_mh_noisy": float(total_variation(pi_mh, p_b)),
        "asymmetry": float(np.abs(Q - Q.T).max()),
        "marginal_error": float(np.abs(pi @ S - p_b @ S).max()),
    }


def qemcmc_sampled_bias(
    backend: Any,
    problems: IsingProblem,
    *,
    reads: int = 256,
    chains: int = 16,
    burn_in: int = 32,
    seed: int = 0,
    gamma: float = 0.45,
    time_: float = 6.0,
    steps: int = 2,
) -> dict[str, Any]:
    """The qemcmc sampler (aer engine with ``backend``'s noise model, and noiseless) on ``problems``: marginal errors
    against exact Boltzmann in units of the effective-sample-size standard error ``sqrt((1 - m^2) / ESS)``.

    Returns:
        ``{"n", "variants": {"noiseless" | "noisy": {"marginal_error", "z_max", "z_rms", "ess", "seconds"}}}``.
    """
    from hybrid_attention.backends import get_sampler
    from hybrid_attention.circuits.proposal import ProposalParams

    params = ProposalParams(gamma=gamma, time=time_, steps=steps)
    m_b = exact.marginals(problems).numpy().reshape(-1, problems.n)
    out: dict[str, Any] = {"n": problems.n, "problems": int(m_b.shape[0]), "reads": reads, "variants": {}}
    noisy = {"noise_backend": backend, "backend_options": {"noise_model": _noise_model(backend)}}
    for name, kw in (("noiseless", {}), ("noisy", noisy)):
        t0 = time.perf_counter()
        s = get_sampler("qemcmc", engine="aer", params=params, burn_in=burn_in, num_chains=chains, **kw)
        ss = s.sample(problems, num_reads=reads, seed=seed)
        m = np.asarray(ss.marginals()).reshape(-1, problems.n)
        ess = np.asarray(ss.info["ess_spins"], dtype=np.float64).reshape(-1, problems.n)
        se = np.sqrt(np.clip(1 - m_b**2, 1e-12, None) / np.maximum(ess, 1.0))
        z = np.abs(m - m_b) / se
        out["variants"][name] = {
            "marginal_error": float(np.mean(np.abs(m - m_b))),
            "z_max": float(z.max()),
            "z_rms": float(np.sqrt(np.mean(z**2))),
            "ess": float(np.mean(ess)),
            "seconds": time.perf_counter() - t0,
        }
    return out
