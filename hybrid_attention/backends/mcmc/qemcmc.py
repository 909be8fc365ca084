"""The ``qemcmc`` sampler: quantum-enhanced Markov chain Monte Carlo with symmetric circuit proposals.

Each chain step (Layden et al., Nature 619, 282 (2023); docs/theory.md section 6) prepares the chain's current
configuration ``|s>``, runs the proposal circuit of :mod:`hybrid_attention.circuits.proposal` (time evolution under
``gamma H_mix + (1 - gamma) alpha H_P`` as a palindromic Trotter product), measures one proposal ``s'`` and accepts
it with probability ``min(1, exp(-beta (E(s') - E(s))))``. The proposal is symmetric, so the chain's stationary
distribution is exactly the Boltzmann distribution of the problem at its ``beta``: unlike DQA output, the reads are
Boltzmann samples (after burn-in) and the bridge's covariance gradients are unbiased for them.

Proposal engines (``engine=``):

* ``"statevector"`` (default): the batched PyTorch simulator of :mod:`.statevector` (its energy table and
  Kronecker-block driver layers), every chain of every problem at once. Two exact ways to draw a proposal, chosen by
  cost (``mode="auto"``): ``"columns"`` evolves each chain's basis state and draws from ``|U|s>|^2`` (one circuit
  execution per chain step, as on hardware); ``"unitary"`` evolves all ``2**n`` basis states once per parameter
  draw and draws each chain's proposal from its row of ``Q = |U|^2`` (cheaper when chains x steps exceed ``2**n``).
* ``"aer"``: the proposal circuit (:class:`~hybrid_attention.circuits.proposal.ProposalTemplate`) run by qiskit-aer's
  ``SamplerV2``, one shot per chain per step (one PUB per step with a bindings row per chain); ``noise_backend=`` a
  (fake) IBM backend adds its noise model and ISA transpilation.
* ``"ibm"``: the same circuit through the IBM runtime machinery of :class:`~hybrid_attention.backends.ibm.sampler.IBMSampler`
  (``backend="fake_torino"`` runs offline in local mode; a real device needs ``ibm_options={"allow_hardware": True}``
  and credentials): one job per chain step. Device noise makes the proposal only approximately symmetric, so the
  stationary distribution is then only approximately Boltzmann (docs/theory.md section 6).

Engines live in :mod:`.qemcmc_engines`.

Chains and reads: ``num_chains`` chains per problem (default one per read), ``burn_in`` moves, then a record every
``thinning`` moves until ``num_reads`` states are recorded. Chains start uniformly at random (``start="random"``)
or from independent draws of the fields-only distribution ``P(s_j = +1) = (1 + tanh(beta h_j)) / 2``, the exact
Boltzmann distribution at ``J = 0`` (``start="fields"``), or of independent spins with the naive mean-field
magnetisations ``m = tanh(beta (h + J m))`` (``start="meanfield"``, which also carries the couplings' first-order
effect on the marginals): where the couplings are weak beside the fields, as in attention problems, the chains then
start close to equilibrium and need a few moves instead of a long burn-in. The start changes only the burn-in, never
the stationary distribution. ``initial_state`` (``(*batch, chains, n)`` ±1) starts the
chains where earlier chains stopped (persistent chains); ``info["final_state"]`` is where they stopped.

Diagnostics in ``SampleSet.info`` (arrays have the problem's batch shape): ``acceptance_rate`` (accepted moves /
moves, per problem; a proposal of the current configuration counts as accepted), ``move_rate`` (moves that change
the configuration / moves: how much the chains actually move), ``iat`` (integrated autocorrelation time of the energy in moves, Sokal's window over the
moves after half the burn-in; NaN for fewer than 8 such moves), ``ess`` (:func:`.mcmc.effective_sample_size`),
``iat_spins`` / ``ess_spins`` (the same for each spin over its recorded reads, in records; ``(*batch, n)``; with one
record per chain ``iat_spins = 1`` and ``ess_spins = num_chains``, the chains being independent),
``circuit_executions`` (proposal circuits run: chains x moves per problem), ``proposals`` (the same count for any
proposal kind: chains x moves) and ``moves``.

Example:
    >>> import torch
    >>> from hybrid_attention import IsingProblem
    >>> ss = QEMCMCSampler().sample(IsingProblem(torch.tensor([[0.5, -0.3]])), num_reads=2000, seed=0)
    >>> ss.spins.shape, abs(float(ss.marginals()[0, 0]) - 0.4621) < 0.12   # tanh(0.5)
    ((1, 2000, 2), True)
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

import numpy as np
import torch

from hybrid_attention.checks import check_memory, check_positive_int, describe_seed, spawn_seeds
from hybrid_attention.circuits.program import CircuitOptions
from hybrid_attention.circuits.proposal import ProposalParams, alpha_of, proposal_template
from hybrid_attention.exact import enumerate_states
from hybrid_attention.ising import IsingProblem, index_to_bits, spins_to_index
from hybrid_attention.sampler import Sampler, SamplerCapabilities
from hybrid_attention.sampleset import SampleSet

from ..dqa.statevector import configuration_energies
from .analysis import effective_sample_size, integrated_time, transition_matrix
from .qemcmc_engines import (
    REAL,
    CircuitEngine,
    StatevectorEngine,
    aer_runner,
    evolve_proposal,
    ibm_runner,
    proposal_rows,
)

__all__ = ["QEMCMCSampler", "evolve_proposal", "proposal_rows", "transition_matrix"]

logger = logging.getLogger(__name__)

_ENGINES = ("statevector", "aer", "ibm")
_MODES = ("auto", "unitary", "columns")
_STARTS = ("random", "fields", "meanfield")
REAL = REAL


def start_magnetisations(h: torch.Tensor, J: torch.Tensor, beta: np.ndarray, mask: Any, start: str) -> np.ndarray:
    """``(N, n)`` magnetisations of the independent-spin start: ``tanh(beta h)`` (``"fields"``) or the naive mean-field
    solution (``"meanfield"``: :func:`.meanfield.mean_field`'s damped iteration, 200 iterations at most, tolerance
    1e-6, by :func:`_naive_mean_field`). ``h (N, n)``, ``J (N, n, n)`` float64 with dropped spins decoupled;
    ``beta (N,)``."""
    b = np.asarray(beta, dtype=np.float64)[:, None]
    if start == "fields":
        return np.tanh(b * h.numpy())
    mk = None if mask is None else np.asarray(mask, dtype=np.float64)
    return _naive_mean_field(h.numpy(), J.numpy(), b, mk, max_iter=200, tol=1e-6)


def _naive_mean_field(h: np.ndarray, J: np.ndarray, b: np.ndarray, mask: Any, *, max_iter: int, tol: float):
    """:func:`.meanfield.mean_field` (naive, damping 0.5, no gradient) in numpy for ``h (N, n)``, ``J (N, n, n)``,
    ``b (N, 1)``: the same iteration from ``tanh(b h)``, the same stopping test (the largest residual of the batch
    below ``tol``), so the same solution (to 1e-12; ``tests/backends/test_qemcmc_start.py``). A chain start is one
    small call per prefix length, where torch's per-call cost was most of the time; a shared ``J`` (one head) is one
    matrix product per iteration."""
    shared = J.shape[0] > 0 and (J.strides[0] == 0 or bool((J == J[:1]).all()))
    m = np.tanh(b * h)
    for _ in range(max_iter):
        field = h + (m @ J[0] if shared else np.einsum("rk,rkj->rj", m, J))
        f = np.tanh(b * field)
        if mask is not None:
            f *= mask
        step = f - m
        if step.size == 0 or np.abs(step).max() < tol:
            break
        m = m + 0.5 * step
    return m


def _energy_table(h: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
    """:func:`.statevector.configuration_energies` of ``h (N, n)``, ``J (N, n, n)`` (float64). When every problem has
    the same couplings (one attention head: the bridge's problems share ``J``), the coupling energies of the ``2**n``
    configurations are computed once and the fields are one GEMM: 4 kernel calls instead of the ~6 n of the doubling
    (equal to 1e-12)."""
    N, n = h.shape
    if N == 0 or n == 0 or not torch.equal(J, J[:1].expand_as(J)):
        return configuration_energies(h, J)
    S = enumerate_states(n, dtype=h.dtype)  # (2**n, n), row c = s(c)
    coupling = 0.5 * ((S @ J[0]) * S).sum(-1)  # sum_{j<k} J_jk s_j s_k (J symmetric, zero diagonal)
    return (h @ S.T).add_(coupling).neg_()


# ---------------------------------------------------------------------- the sampler
class QEMCMCSampler(Sampler):
    """Quantum-enhanced MCMC: Boltzmann samples at the problem's ``beta`` from chains with circuit proposals.

    Args:
        params: :class:`~hybrid_attention.circuits.proposal.ProposalParams` (gamma, time, Trotter steps, alpha;
            default: Layden's random ``gamma in [0.25, 0.6]``, ``t in [2, 20]``, 12 steps).
        engine: ``"statevector"`` (default), ``"aer"`` or ``"ibm"`` (module docstring).
        burn_in: moves before the first record (default 128).
        start: where chains without ``initial_state`` start: ``"random"`` (uniform, default), ``"fields"`` (the
            fields-only distribution) or ``"meanfield"`` (independent spins at the mean-field magnetisations; module
            docstring).
        thinning: moves between records of one chain (default 1).
        num_chains: chains per problem (default ``None``: one per read, every read an independent chain's state).
        num_reads: reads per problem when ``sample(num_reads=None)`` (default 256).
        mode: statevector engine: ``"auto"`` (default), ``"unitary"`` or ``"columns"`` (module docstring).
        dtype: statevector engine: ``torch.complex64`` (default) or ``torch.complex128``.
        group: statevector engine: qubits per Kronecker block.
        memory_limit: bytes of simulator state per chunk of problems (default 64 MiB).
        max_spins: largest ``n`` (default 16 for the statevector engine, 20 for aer, the device's qubits for ibm).
        gamma, time, trotter_steps: the fields of ``params`` given as numbers (or ``(low, high)`` pairs) instead,
            e.g. from a command line; not together with ``params``.
        noise_backend, options, backend_options: aer engine: a (fake) IBM backend for noise and ISA transpilation,
            :class:`~hybrid_attention.circuits.program.CircuitOptions`, extra ``AerSimulator`` options.
        backend, ibm_options: ibm engine: the backend (a fake-backend name such as ``"fake_torino"``, a BackendV2,
            a device name) and further :class:`~hybrid_attention.backends.ibm.sampler.IBMSampler` options
            (``allow_hardware=True`` for a real device, ``mode``, ``fold_rzz``, ``sampler_options``...): the IBM
            sampler resolves the backend, credentials, fractional gates, transpilation and the runtime primitive.
        ledger: ibm engine: the job ledger (a ``.jsonl`` path or a
            :class:`~hybrid_attention.backends.ibm.ledger.JobLedger`): every step's PUB is recorded before it is awaited,
            and a rerun with the same seed submits none twice (:mod:`.ledger`); same as ``ibm_options["ledger"]``.

    Per-call options (``sample(..., **options)``): ``burn_in``, ``thinning``, ``num_chains``, ``params``, ``start``,
    ``initial_state`` (``(*batch, chains, n)`` ±1 spins, or ``None``).
    """

    name = "qemcmc"
    capabilities = SamplerCapabilities(markov_chain=True, needs_circuit=True)
    parameters = {
        "burn_in": "moves before the first record",
        "thinning": "moves between records of one chain",
        "num_chains": "chains per problem (default: one per read)",
        "params": "ProposalParams for this call",
        "start": "'random', 'fields' or 'meanfield': where chains without initial_state start",
        "initial_state": "(*batch, chains, n) ±1 starting configurations (persistent chains)",
    }

    def __init__(
        self,
        *,
        params: ProposalParams | None = None,
        engine: str = "statevector",
        burn_in: int = 128,
        start: str = "random",
        thinning: int = 1,
        num_chains: int | None = None,
        num_reads: int = 256,
        mode: str = "auto",
        dtype: torch.dtype = torch.complex64,
        group: int = 4,
        memory_limit: int = 64 << 20,
        max_spins: int | None = None,
        noise_backend: Any = None,
        options: CircuitOptions | None = None,
        backend_options: dict[str, Any] | None = None,
        backend: Any = None,
        ibm_options: dict[str, Any] | None = None,
        gamma: Any = None,
        time: Any = None,
        trotter_steps: int | None = None,
        ledger: Any = None,
    ) -> None:
        super().__init__()
        if engine not in _ENGINES:
            raise ValueError(f"qemcmc: engine must be one of {_ENGINES}, got {engine!r}")
        if mode not in _MODES:
            raise ValueError(f"qemcmc: mode must be one of {_MODES}, got {mode!r}")
        if dtype not in REAL:
            raise ValueError(f"qemcmc: dtype must be torch.complex64 or torch.complex128, got {dtype}")
        self.params = self._check_params(ProposalParams() if params is None else params)
        given = {k: v for k, v in (("gamma", gamma), ("time", time), ("steps", trotter_steps)) if v is not None}
        if given:  # number-valued spellings of params (for command lines: --sampler-option gamma=0.4)
            if params is not None:
                raise ValueError("qemcmc: give either params= or gamma=/time=/trotter_steps=, not both")
            given = {k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in given.items()}
            self.params = dataclasses.replace(self.params, **given)
        self.engine, self.mode, self.dtype = engine, mode, dtype
        self.burn_in = check_positive_int(burn_in, "burn_in", minimum=0)
        self.start = self._check_start(start)
        self.thinning = check_positive_int(thinning, "thinning")
        self.num_chains = check_positive_int(num_chains, "num_chains", allow_none=True)
        self.default_num_reads = check_positive_int(num_reads, "num_reads")
        self.group = check_positive_int(group, "group")
        self.memory_limit = check_positive_int(memory_limit, "memory_limit")
        if options is not None and not isinstance(options, CircuitOptions):
            raise TypeError(f"qemcmc: options must be a CircuitOptions, got {type(options).__name__}")
        self.circuit_options = options or CircuitOptions()
        self.noise_backend = noise_backend
        self.backend_options: dict[str, Any] = {"method": "statevector", **(backend_options or {})}
        self._isa: dict[Any, Any] = {}
        self.ibm: Any = None
        limit = 16 if engine == "statevector" else 20
        if engine == "aer":
            import qiskit_aer  # noqa: F401  (fail now, with an ImportError naming the package, not at the first step)

            if noise_backend is not None:
                from qiskit_aer.noise import NoiseModel

                if self.backend_options.get("noise_model") is None:  # a model given in backend_options is kept
                    self.backend_options["noise_model"] = NoiseModel.from_backend(noise_backend)
        elif engine == "ibm":
            from ..ibm.sampler import IBMSampler

            opts = dict(ibm_options or {})
            if ledger is not None:
                if opts.get("ledger") not in (None, ledger):
                    raise ValueError("qemcmc: give the ledger once: ledger= or ibm_options['ledger'], not both")
                opts["ledger"] = ledger
            self.ibm = IBMSampler(backend, **opts)
            self.circuit_options = dataclasses.replace(self.circuit_options, fold_rzz=self.ibm.circuit_options.fold_rzz)
            limit = int(self.ibm.max_qubits)
        elif backend is not None or ibm_options or ledger is not None:
            raise ValueError(f"qemcmc: backend, ibm_options and ledger are for engine='ibm', got engine={engine!r}")
        self.max_spins = limit if max_spins is None else check_positive_int(max_spins, "max_spins")

    @staticmethod
    def _check_params(params: Any) -> ProposalParams:
        if not isinstance(params, ProposalParams):
            raise TypeError(f"qemcmc: params must be a ProposalParams, got {type(params).__name__}")
        return params

    @property
    def properties(self) -> dict[str, Any]:
        return {**super().properties, "engine": self.engine, "params": self.params, "burn_in": self.burn_in}

    def __repr__(self) -> str:
        return f"QEMCMCSampler(engine={self.engine!r}, params={self.params}, burn_in={self.burn_in})"

    def close(self) -> None:
        """Close the IBM sampler's Batch/Session (ibm engine). Idempotent."""
        if self.ibm is not None:
            self.ibm.close()
        super().close()

    def _aer_circuit(self, tmpl: Any) -> Any:
        """The template's circuit, transpiled once to the noise backend's ISA when one is set."""
        if self.noise_backend is None:
            return tmpl.circuit
        if tmpl not in self._isa:
            from qiskit.transpiler import generate_preset_pass_manager

            pm = generate_preset_pass_manager(optimization_level=1, backend=self.noise_backend, seed_transpiler=0)
            self._isa[tmpl] = pm.run(tmpl.circuit)
        return self._isa[tmpl]

    # ------------------------------------------------------------------ options
    @staticmethod
    def _check_start(start: Any) -> str:
        if start not in _STARTS:
            raise ValueError(f"qemcmc: start must be one of {_STARTS}, got {start!r}")
        return start

    def _resolve(self, problem: IsingProblem, num_reads: int | None, options: dict[str, Any]) -> dict[str, Any]:
        """Per-call settings, checked (before any work)."""
        reads = self.default_num_reads if num_reads is None else int(num_reads)
        params = self._check_params(options.get("params", self.params))
        init = options.get("initial_state")
        chains = check_positive_int(options.get("num_chains", self.num_chains), "num_chains", allow_none=True)
        if init is not None:
            init = np.asarray(init.cpu() if isinstance(init, torch.Tensor) else init)
            want = (*problem.batch_shape, init.shape[-2] if init.ndim >= 2 else -1, problem.n)
            if init.shape != want or not np.isin(init, (-1, 1)).all():
                raise ValueError(
                    f"qemcmc: initial_state must be ±1 spins of shape (*batch, chains, n) = "
                    f"({tuple(problem.batch_shape)}, chains, {problem.n}), got shape {init.shape}"
                )
            if chains is not None and chains != init.shape[-2]:
                raise ValueError(f"qemcmc: num_chains = {chains} but initial_state holds {init.shape[-2]} chains")
            chains = init.shape[-2]
            if reads < chains:
                raise ValueError(f"qemcmc: num_reads = {reads} is below the {chains} chains of initial_state")
        chains = min(chains or reads, reads)
        return {
            "reads": reads,
            "chains": chains,
            "records": -(-reads // chains),
            "burn_in": check_positive_int(options.get("burn_in", self.burn_in), "burn_in", minimum=0),
            "thinning": check_positive_int(options.get("thinning", self.thinning), "thinning"),
            "start": self._check_start(options.get("start", self.start)),
            "params": params,
            "initial_state": init,
        }

    def validate(self, problem: Any, *, num_reads: Any = None, seed: Any = None, options: dict | None = None):
        """The base checks, then the options and the simulator memory of one problem's chains."""
        problem = super().validate(problem, num_reads=num_reads, seed=seed, options=options)
        opts = self._resolve(problem, num_reads if num_reads is None else int(num_reads), options or {})
        amp = 2 * torch.finfo(REAL[self.dtype]).bits // 8
        per = float(amp) * (1 << problem.n) * min(opts["chains"], 1 << problem.n) * 3
        check_memory(per, f"qemcmc: the chains of one problem at n = {problem.n}", hint="use fewer chains or spins")
        return problem

    def _mode(self, n: int, chains: int, moves: int, params: ProposalParams) -> str:
        if self.mode != "auto":
            return self.mode
        draws = chains * (moves if params.fixed else 1)  # executions one unitary replaces
        return "unitary" if (1 << n) <= draws and n <= 10 else "columns"

    def _problems_per_chunk(self, n: int, chains: int, mode: str) -> int:
        """Problems run together (one chunk; with a circuit engine one PUB per move holds all their chains)."""
        per = (1 << n) * (1 << n if mode == "unitary" else chains) * 16 * 3
        return max(1, self.memory_limit // per)

    def estimate(self, problem: IsingProblem, num_reads: int | None = None, **options: Any) -> dict[str, Any]:
        """What :meth:`sample` would submit with the ``ibm`` engine, without submitting anything: per chunk of
        problems one PUB (one job) per chain move, holding one circuit (parameter binding) per chain, one shot each.

        Args:
            problem: the problems; num_reads, options: as :meth:`sample` (``burn_in``, ``num_chains``...).

        Returns:
            The keys of :meth:`hybrid_attention.backends.ibm.sampler.IBMSampler.estimate`: ``jobs`` = ``pubs`` = chunks x
            moves, ``circuits`` = problems x chains x moves, ``shots`` = ``circuits``, the proposal's ISA ``depth``
            and ``two_qubit_gates``, and ``qpu_seconds``; plus ``moves`` and ``chains``.
        """
        if self.engine != "ibm":
            raise ValueError(f"qemcmc: estimate is for engine='ibm' (circuits submitted to IBM), got {self.engine!r}")
        problem = self.validate(problem, num_reads=num_reads, options=options)
        opts = self._resolve(problem, num_reads, options)
        flat = problem.flatten()
        N, n = int(flat.h.shape[0]), flat.n
        C, params = opts["chains"], opts["params"]
        moves = opts["burn_in"] + (opts["records"] - 1) * opts["thinning"]
        chunks = -(-N // self._problems_per_chunk(n, C, self._mode(n, C, moves, params)))
        _, J = flat.dropped()
        nz = J.detach().abs().reshape(-1, n, n).amax(0) > 0
        edges = tuple((j, k) for j in range(n) for k in range(j + 1, n) if bool(nz[j, k]))
        tmpl = proposal_template(n, edges, params.steps, self.circuit_options, params.shape)
        est = self.ibm.cost(self.ibm.isa_circuit(tmpl), jobs=chunks * moves, circuits=N * C * moves, shots=1)
        return {**est, "moves": moves, "chains": C}

    # ------------------------------------------------------------------ sampling
    def _sample(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> SampleSet:
        if self.ibm is not None and not self.ibm.local and self.ibm.max_qpu_seconds is not None:
            self.ibm.check_budget(self.estimate(problem, num_reads, **options))  # before any submission
        opts = self._resolve(problem, num_reads, options)
        flat = problem.flatten()
        N, n = flat.h.shape[0], flat.n
        C, r, burn, thin, params = opts["chains"], opts["records"], opts["burn_in"], opts["thinning"], opts["params"]
        moves = burn + (r - 1) * thin
        h, J = flat.dropped()
        h64 = h.detach().to(torch.float64).cpu()
        J64 = J.detach().to(torch.float64).cpu().expand(N, n, n)
        beta = flat.beta_tensor().detach().to(torch.float64).cpu().numpy()
        mask = None if flat.mask is None else flat.mask.cpu().numpy()
        alpha = alpha_of(h64.numpy(), J64.numpy(), mask) if params.alpha is None else np.full(N, params.alpha)
        mode = self._mode(n, C, moves, params)
        step = self._problems_per_chunk(n, C, mode)
        starts = list(range(0, N, step))
        seeds = spawn_seeds(seed, len(starts))
        init = None if opts["initial_state"] is None else opts["initial_state"].reshape(N, C, n)
        t0 = time.perf_counter()
        self._jobs: list[list[str]] = []
        out = [
            self._run_chunk(
                h64[s : s + step],
                J64[s : s + step],
                beta[s : s + step],
                alpha[s : s + step],
                None if mask is None else mask[s : s + step],
                None if init is None else init[s : s + step],
                opts,
                mode,
                np.random.default_rng(sd),
            )
            for s, sd in zip(starts, seeds)
        ]
        rec, final, acc, energies, changed = (np.concatenate([o[i] for o in out]) for i in range(5))
        spins = 1 - 2 * index_to_bits(rec, n).astype(np.int8)  # (N, C * r, n), chain-major
        bs = tuple(problem.batch_shape)
        start = burn // 2
        iat = integrated_time(energies[:, :, start:]) if moves - start >= 8 else np.full(N, np.nan)
        rec_spins = spins.reshape(N, C, r, n).transpose(0, 3, 1, 2)  # (N, n, C, r): each spin's record traces
        iat_s = integrated_time(rec_spins) if r >= 8 else np.full((N, n), 1.0 if r == 1 else np.nan)
        info = {
            "backend": self.name,
            "engine": self.engine,
            "mode": mode if self.engine == "statevector" else "shots",
            "num_reads": opts["reads"],
            "num_chains": C,
            "records_per_chain": r,
            "burn_in": burn,
            "start": "initial_state" if opts["initial_state"] is not None else opts["start"],
            "thinning": thin,
            "moves": moves,
            "circuit_executions": C * moves if self.capabilities.needs_circuit else 0,
            "proposals": C * moves,
            "params": params,
            "seed": describe_seed(seed),
            "chunk_seeds": seeds,
            "acceptance_rate": (acc / max(moves, 1)).mean(-1).reshape(bs),
            "move_rate": (changed / max(moves, 1)).mean(-1).reshape(bs),
            "iat": iat.reshape(bs),
            "ess": np.minimum(effective_sample_size(C, r, iat, thin), opts["reads"]).reshape(bs),
            "iat_spins": iat_s.reshape(*bs, n),
            "ess_spins": np.minimum(effective_sample_size(C, r, iat_s), opts["reads"]).reshape(*bs, n),
            "final_state": (1 - 2 * index_to_bits(final, n).astype(np.int8)).reshape(*bs, C, n),
            "timing": {"run": time.perf_counter() - t0},
        }
        if self.engine == "ibm":
            info.update(job_ids=[j for jobs in self._jobs for j in jobs], backend_name=self.ibm.backend.name)
        w = np.full((*bs, opts["reads"]), 1.0 / opts["reads"])
        return SampleSet(spins[:, : opts["reads"]].reshape(*bs, opts["reads"], n), w, problem, info)

    def _proposal_engine(self, E, h, J, mask, alpha, params, mode):  # noqa: ANN001, ANN202 (internal)
        """The object whose ``propose(cur (N, C), gamma, t, rng) -> (N, C)`` draws each chain's proposal (the
        classical Metropolis samplers of :mod:`.metropolis` override it)."""
        if self.engine == "statevector":
            return StatevectorEngine(E, alpha, params, mode, dtype=self.dtype, group=self.group)
        if self.engine == "aer":
            circuit_for, run = self._aer_circuit, aer_runner(self.backend_options)
        else:
            circuit_for, run = ibm_runner(self.ibm)
        self._jobs.append(getattr(run, "job_ids", []))  # filled while the chains run
        return CircuitEngine(h.numpy(), J.numpy(), mask, params, self.circuit_options, circuit_for, run)

    def _run_chunk(self, h, J, beta, alpha, mask, init, opts, mode, rng):  # noqa: ANN001, ANN202 (internal)
        """Chains of one chunk of problems: ``(records (N, C * r), final (N, C), accepted (N, C), energies
        (N, C, moves + 1), changed (N, C))`` (``changed``: accepted moves to another configuration)."""
        N, n = h.shape
        C, r, burn, thin, params = opts["chains"], opts["records"], opts["burn_in"], opts["thinning"], opts["params"]
        moves = burn + (r - 1) * thin
        E = _energy_table(h, J)  # (N, 2**n) float64, the classical energies
        engine = self._proposal_engine(E, h, J, mask, alpha, params, mode)
        En = E.numpy()
        bE = beta[:, None] * En  # (N, 2**n)
        if init is not None:
            cur = spins_to_index(init).astype(np.int64)
        elif opts["start"] in ("fields", "meanfield"):  # independent spins, P(s_j = +1) = (1 + m_j) / 2
            m0 = start_magnetisations(h, J, beta, mask, opts["start"])  # (N, n); dropped spins: 0
            p_up = 0.5 * (1.0 + m0)
            cur = spins_to_index(np.where(rng.random((N, C, n)) < p_up[:, None, :], 1, -1).astype(np.int8))
        else:
            cur = rng.integers(0, 1 << n, size=(N, C))
        rows = np.arange(N)[:, None]
        accepted, changed = np.zeros((N, C)), np.zeros((N, C))
        trace = np.empty((N, C, moves + 1))
        trace[:, :, 0] = En[rows, cur]
        records = []
        if burn == 0:
            records.append(cur.copy())
        for t in _progress(range(1, moves + 1), moves, N * C * (1 << n)):
            g, tm = params.draw(rng)
            new = engine.propose(cur, float(g[0]), float(tm[0]), rng)
            dE = bE[rows, new] - bE[rows, cur]
            acc = np.log(rng.random((N, C))) < -dE
            changed += acc & (new != cur)
            cur = np.where(acc, new, cur)
            accepted += acc
            trace[:, :, t] = En[rows, cur]
            if t >= burn and (t - burn) % thin == 0:
                records.append(cur.copy())
        return np.stack(records, axis=-1).reshape(N, C * r), cur, accepted, trace, changed


def _progress(iterable: Any, total: int, work: int) -> Any:
    """A tqdm bar over the chain moves when the run is long (many moves of a large batch)."""
    if total * work < 1 << 26:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc="qemcmc", leave=False, disable=None)
