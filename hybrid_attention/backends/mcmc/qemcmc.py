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
  The ``"columns"`` draw runs compiled loops when numba is installed (``kernel=``; :mod:`.qemcmc_kernel`), else
  torch GEMMs (:mod:`.qemcmc_draw`).
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
from typing import Any, ClassVar

import torch

from hybrid_attention.checks import check_positive_int
from hybrid_attention.circuits.program import CircuitOptions
from hybrid_attention.circuits.proposal import ProposalParams, proposal_template
from hybrid_attention.ising import IsingProblem
from hybrid_attention.sampler import SamplerCapabilities

from . import qemcmc_kernel
from .analysis import transition_matrix
from .chain import CHAIN_OPTIONS, ChainSchedule, MetropolisChain
from .chain_rows import visible_groups
from .qemcmc_draw import KERNELS
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
#: the defaults of the grouped options (frozen values; the registry's flat options replace their fields)
_DEFAULT_PARAMS = ProposalParams()
_DEFAULT_CHAIN = ChainSchedule(burn_in=128)
#: the statevector engine's fixed cost of one group of rows (QEMCMCSampler._merge_overhead), in row-configurations
_MERGE_OVERHEAD = 16384.0
REAL = REAL


# ---------------------------------------------------------------------- the sampler
class QEMCMCSampler(MetropolisChain):
    """Quantum-enhanced MCMC: the Metropolis chain (:class:`~.chain.MetropolisChain`) with the quantum proposal rule,
    circuit proposals; Boltzmann samples at the problem's ``beta``.

    Args:
        params: :class:`~hybrid_attention.circuits.proposal.ProposalParams` (gamma, time, Trotter steps, alpha;
            default: Layden's random ``gamma in [0.25, 0.6]``, ``t in [2, 20]``, 12 steps).
        engine: ``"statevector"`` (default), ``"aer"`` or ``"ibm"`` (module docstring).
        chain: the :class:`~.chain.ChainSchedule`: ``burn_in`` (default 128 moves), ``thinning`` (default 1),
            ``start`` (``"random"``, the default, ``"fields"`` or ``"meanfield"``; module docstring) and
            ``num_chains`` (default ``None``: one per read, every read an independent chain's state).
        num_reads: reads per problem when ``sample(num_reads=None)`` (default 256).
        mode: statevector engine: ``"auto"`` (default), ``"unitary"`` or ``"columns"`` (module docstring).
        dtype: statevector engine: ``torch.complex64`` (default) or ``torch.complex128``.
        group: statevector engine: qubits per Kronecker block.
        memory_limit: bytes of simulator state per chunk of problems (default 64 MiB).
        max_spins: largest ``n`` (default 16 for the statevector engine, 20 for aer, the device's qubits for ibm).
        noise_backend, options, backend_options: aer engine: a (fake) IBM backend for noise and ISA transpilation,
            :class:`~hybrid_attention.circuits.program.CircuitOptions`, extra ``AerSimulator`` options.
        backend, ibm_options: ibm engine: the backend (a fake-backend name such as ``"fake_torino"``, a BackendV2,
            a device name) and further :class:`~hybrid_attention.backends.ibm.sampler.IBMSampler` options
            (``allow_hardware=True`` for a real device, ``mode``, ``fold_rzz``, ``sampler_options``...; flat
            spellings folded as the registry does): the IBM sampler resolves the backend, credentials, fractional
            gates, transpilation and the runtime primitive. Every chain step is one job waiting on the last, so the
            engine runs in a ``Session`` unless ``mode`` says otherwise (``mode="batch"`` on the Open Plan, which has
            no sessions; ``mode="job"`` warns on a device with the projected per-job overhead).
        kernel: statevector engine, ``"columns"`` mode: the proposal draw's loops, ``"auto"`` (default: compiled when
            numba is installed, the ``fast`` extra), ``"compiled"`` (:mod:`.qemcmc_kernel`) or ``"torch"``
            (:mod:`.qemcmc_draw`'s GEMMs); both draw the same proposals up to rounding at the bin edges.
        ledger: ibm engine: the job ledger (a ``.jsonl`` path or a
            :class:`~hybrid_attention.backends.ibm.ledger.JobLedger`): every step's PUB is recorded before it is awaited,
            and a rerun with the same seed submits none twice (:mod:`.ledger`); same as ``ibm_options["ledger"]``.

    The registry (:func:`~hybrid_attention.backends.get_sampler`, ``--sampler-option``) also takes the fields as
    flat options: ``burn_in``, ``thinning``, ``start``, ``num_chains`` (of ``chain``) and ``gamma``, ``time``,
    ``trotter_steps`` (of ``params``: numbers or ``(low, high)`` pairs), e.g. ``get_sampler("qemcmc", burn_in=32,
    gamma=0.4)``.

    Per-call options (``sample(..., **options)``): ``burn_in``, ``thinning``, ``num_chains``, ``params``, ``start``,
    ``initial_state`` (``(*batch, chains, n)`` ±1 spins, or ``None``).
    """

    name = "qemcmc"
    capabilities = SamplerCapabilities(markov_chain=True, needs_circuit=True, pad_with_mask=True)
    option_groups: ClassVar[dict[str, tuple[str, str]]] = {
        **CHAIN_OPTIONS,
        "gamma": ("params", "gamma"),
        "time": ("params", "time"),
        "trotter_steps": ("params", "steps"),
    }
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
        params: ProposalParams | None = _DEFAULT_PARAMS,
        engine: str = "statevector",
        chain: ChainSchedule = _DEFAULT_CHAIN,
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
        ledger: Any = None,
        kernel: str = "auto",
    ) -> None:
        if engine not in _ENGINES:
            raise ValueError(f"qemcmc: engine must be one of {_ENGINES}, got {engine!r}")
        if mode not in _MODES:
            raise ValueError(f"qemcmc: mode must be one of {_MODES}, got {mode!r}")
        if dtype not in REAL:
            raise ValueError(f"qemcmc: dtype must be torch.complex64 or torch.complex128, got {dtype}")
        if kernel not in KERNELS:
            raise ValueError(f"qemcmc: kernel must be one of {KERNELS}, got {kernel!r}")
        if kernel == "compiled" and not qemcmc_kernel.available():
            raise ImportError("qemcmc: kernel='compiled' needs numba: pip install numba (or use kernel='torch')")
        self.kernel = ("compiled" if qemcmc_kernel.available() else "torch") if kernel == "auto" else kernel
        self.params = self._check_params(ProposalParams() if params is None else params)
        self.engine, self.mode, self.dtype = engine, mode, dtype
        super().__init__(
            chain=chain,
            num_reads=num_reads,
            memory_limit=memory_limit,
            params=self.params,
        )
        self.group = check_positive_int(group, "group")
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
            from ..ibm.options import Execution
            from ..ibm.sampler import IBMSampler
            from ..registry import fold_options

            opts = fold_options("ibm", dict(ibm_options or {}))  # flat spellings (mode=, twirling=) folded
            if ledger is not None:
                if opts.get("ledger") not in (None, ledger):
                    raise ValueError("qemcmc: give the ledger once: ledger= or ibm_options['ledger'], not both")
                opts["ledger"] = ledger
            # one job per chain step, each step waiting on the last: an iterative workload, run in a session
            execution = opts.get("execution") or Execution()
            opts["execution"] = (
                execution if execution.mode != "auto" else dataclasses.replace(execution, mode="session")
            )
            self.ibm = IBMSampler(backend, **opts)
            self.circuit_options = dataclasses.replace(self.circuit_options, fold_rzz=self.ibm.circuit_options.fold_rzz)
            limit = int(self.ibm.max_qubits)
        elif backend is not None or ibm_options or ledger is not None:
            raise ValueError(f"qemcmc: backend, ibm_options and ledger are for engine='ibm', got engine={engine!r}")
        self.max_spins = limit if max_spins is None else check_positive_int(max_spins, "max_spins")

    @property
    def _merge_overhead(self) -> float:  # type: ignore[override]
        """The simulator's fixed cost of one group of a masked batch (:func:`.chain_rows.merge_groups`), measured at
        T = 12 (a group's setup and per-move draw calls against the arithmetic of one row's configuration); 0 for
        circuits (a merged run would put idle qubits on the device)."""
        return _MERGE_OVERHEAD if self.engine == "statevector" else 0.0

    @property
    def properties(self) -> dict[str, Any]:
        props = {k: v for k, v in super().properties.items() if k != "burn_in"}
        props = {**props, "engine": self.engine, "params": self.params, "burn_in": self.burn_in}
        if self.engine == "statevector":
            props["kernel"] = self.kernel
        return props

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

    def _mode(self, n: int, chains: int, moves: int, params: ProposalParams) -> str:
        if self.mode != "auto":
            return self.mode
        draws = chains * (moves if params.fixed else 1)  # executions one unitary replaces
        return "unitary" if (1 << n) <= draws and n <= 10 else "columns"

    def estimate(self, problem: IsingProblem, num_reads: int | None = None, **options: Any) -> dict[str, Any]:
        """What :meth:`sample` would submit with the ``ibm`` engine, without submitting anything: per chunk of
        problems one PUB (one job) per chain move, holding one circuit (parameter binding) per chain, one shot each.

        Args:
            problem: the problems; num_reads, options: as :meth:`sample` (``burn_in``, ``num_chains``...).

        Returns:
            The keys of :meth:`hybrid_attention.backends.ibm.sampler.IBMSampler.estimate`: ``jobs`` = ``pubs`` = chunks x
            moves, ``circuits`` = problems x chains x moves, ``shots`` = ``circuits``, the proposal's ISA ``depth``
            and ``two_qubit_gates``, and ``qpu_seconds``; plus ``moves`` and ``chains``. A masked batch counts each
            group of rows with the same visible spins on those spins, as :meth:`sample` runs it (counts and seconds
            summed over the groups, depth and gates of the deepest).
        """
        if self.engine != "ibm":
            raise ValueError(f"qemcmc: estimate is for engine='ibm' (circuits submitted to IBM), got {self.engine!r}")
        problem = self.validate(problem, num_reads=num_reads, options=options)
        opts = self._resolve(problem, num_reads, options)
        flat = problem.flatten()
        C = opts["chains"]
        moves = opts["burn_in"] + (opts["records"] - 1) * opts["thinning"]
        _, J = flat.dropped()
        J = J.detach().expand(flat.h.shape[0], flat.n, flat.n)
        mask = None if flat.mask is None else flat.mask.cpu().numpy()
        # a masked batch runs each group of rows with the same visible spins on those spins (:mod:`.chain_rows`)
        parts = [
            self._estimate_group(J if rows is None else J[rows][:, cols][:, :, cols], C, moves, opts["params"])
            for rows, cols in visible_groups(mask)
            if cols is None or len(cols)
        ]
        if not parts:  # every spin of every problem masked: sample runs no chain and submits nothing
            zero = dict.fromkeys(("jobs", "pubs", "circuits", "shots", "depth", "two_qubit_gates"), 0)
            seconds = dict.fromkeys(("qpu_seconds", "overhead_seconds", "largest_job_seconds"), 0.0)
            return {**zero, **seconds, "mode": self.ibm.mode, "moves": moves, "chains": C}
        est = {
            k: sum(p[k] for p in parts)
            for k in ("jobs", "pubs", "circuits", "shots", "qpu_seconds", "overhead_seconds")
        }
        est.update({k: max(p[k] for p in parts) for k in ("depth", "two_qubit_gates", "largest_job_seconds")})
        return {**parts[-1], **est, "moves": moves, "chains": C}

    def _estimate_group(self, J: torch.Tensor, C: int, moves: int, params: ProposalParams) -> dict[str, Any]:
        """:meth:`estimate` of the problems with couplings ``J (N, n, n)``, every spin taking part."""
        N, n = J.shape[0], J.shape[-1]
        per_chunk = self._problems_per_chunk(n, C, self._mode(n, C, moves, params))
        nz = J.abs().reshape(-1, n, n).amax(0) > 0
        edges = tuple((j, k) for j in range(n) for k in range(j + 1, n) if bool(nz[j, k]))
        isa = self.ibm.isa_circuit(proposal_template(n, edges, params.steps, self.circuit_options, params.shape))
        chunks = -(-N // per_chunk)
        return self.ibm.cost(
            isa, jobs=chunks * moves, circuits=N * C * moves, shots=1, job_circuits=min(N, per_chunk) * C
        )

    def _proposal_engine(self, E, h, J, mask, alpha, params, mode):  # noqa: ANN001, ANN202 (internal)
        """The object whose ``propose(cur (N, C), gamma, t, rng) -> (N, C)`` draws each chain's proposal (the
        classical Metropolis samplers of :mod:`.metropolis` override it)."""
        if self.engine == "statevector":
            return StatevectorEngine(E, alpha, params, mode, dtype=self.dtype, group=self.group, kernel=self.kernel)
        if self.engine == "aer":
            circuit_for, run = self._aer_circuit, aer_runner(self.backend_options)
        else:
            circuit_for, run = ibm_runner(self.ibm)
        self._jobs.append(getattr(run, "job_ids", []))  # filled while the chains run
        return CircuitEngine(h.numpy(), J.numpy(), mask, params, self.circuit_options, circuit_for, run)
