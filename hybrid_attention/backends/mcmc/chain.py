"""One Metropolis chain over spin configurations, parameterised by its proposal rule: :class:`MetropolisChain`.

Every chain sampler of the wing is this chain with a proposal rule (:meth:`MetropolisChain._proposal_engine`): the
classical rules of :mod:`.metropolis` (one spin flipped, a uniformly random configuration) and the quantum rule of
:mod:`.qemcmc` (a DQA-style proposal circuit). The chain owns what they share: acceptance
``min(1, exp(-beta (E(s') - E(s))))`` from a table of the ``2**n`` energies, chains, burn-in, thinning, starts
(random, fields, mean field) and persistent ``initial_state``, chunking, seeds and the diagnostics in
``SampleSet.info`` (documented in :mod:`.qemcmc`). How a chain runs (burn-in, thinning, start, chains per problem)
is one frozen :class:`ChainSchedule` value; the registry also takes its fields as flat options
(``get_sampler("qemcmc", burn_in=32)``, ``--sampler-option burn_in=32``). Each move draws the proposal parameters
(:class:`~hybrid_attention.circuits.proposal.ProposalParams`) from the chain's stream, whether the rule uses them
or not, so a chain's random stream is the same for every rule.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, ClassVar

import numpy as np
import torch

from hybrid_attention.checks import check_memory, check_positive_int, describe_seed, spawn_seeds
from hybrid_attention.circuits.proposal import ProposalParams
from hybrid_attention.exact import enumerate_states
from hybrid_attention.ising import IsingProblem, index_to_bits, spins_to_index
from hybrid_attention.sampler import Sampler, SamplerCapabilities
from hybrid_attention.sampleset import SampleSet

from ..dqa.statevector import configuration_energies
from .analysis import effective_sample_size, integrated_time
from .chain_rows import ChainRows, fill_dropped, group_labels, merge_groups, spread_indices, visible_groups
from .qemcmc_engines import REAL

__all__ = ["ChainSchedule", "MetropolisChain", "start_magnetisations", "STARTS"]

#: where chains without ``initial_state`` start
STARTS = ("random", "fields", "meanfield")


@dataclasses.dataclass(frozen=True)
class ChainSchedule:
    """How a sampler's Markov chains run: the settings that travel together, validated when built.

    Attributes:
        burn_in: moves before the first record (an int >= 0).
        thinning: moves between records of one chain (an int >= 1).
        start: where chains without ``initial_state`` start: ``"random"`` (uniform), ``"fields"`` (the fields-only
            distribution) or ``"meanfield"`` (independent spins at the mean-field magnetisations; :mod:`.qemcmc`).
        num_chains: chains per problem (``None``: one per read, every read an independent chain's state).

    Each is also a per-call option of ``sample`` (``burn_in=``, ...), which overrides the schedule for that call.

    Example:
        >>> ChainSchedule(burn_in=16, start="fields")
        ChainSchedule(burn_in=16, thinning=1, start='fields', num_chains=None)
    """

    burn_in: int = 128
    thinning: int = 1
    start: str = "random"
    num_chains: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "burn_in", check_positive_int(self.burn_in, "burn_in", minimum=0))
        object.__setattr__(self, "thinning", check_positive_int(self.thinning, "thinning"))
        if self.start not in STARTS:
            raise ValueError(f"qemcmc: start must be one of {STARTS}, got {self.start!r}")
        object.__setattr__(self, "num_chains", check_positive_int(self.num_chains, "num_chains", allow_none=True))


#: the registry's flat spellings of a :class:`ChainSchedule` constructor option ``chain``
CHAIN_OPTIONS = {f.name: ("chain", f.name) for f in dataclasses.fields(ChainSchedule)}


def start_magnetisations(
    h: torch.Tensor, J: torch.Tensor, beta: np.ndarray, mask: Any, start: str, groups: np.ndarray | None = None
) -> np.ndarray:
    """``(N, n)`` magnetisations of the independent-spin start: ``tanh(beta h)`` (``"fields"``) or the naive mean-field
    solution (``"meanfield"``: :func:`.meanfield.mean_field`'s damped iteration, 200 iterations at most, tolerance
    1e-6, by :func:`_naive_mean_field`). ``h (N, n)``, ``J (N, n, n)`` float64 with dropped spins without field (their
    couplings need not be zeroed: their magnetisation stays 0); ``beta (N,)``; ``groups (N,)`` labels the rows whose
    iteration stops together (``None``: all of them, as one call on those rows alone would)."""
    b = np.asarray(beta, dtype=np.float64)[:, None]
    if start == "fields":
        return np.tanh(b * h.numpy())
    mk = None if mask is None else np.asarray(mask, dtype=np.float64)
    return _naive_mean_field(h.numpy(), J.numpy(), b, mk, max_iter=200, tol=1e-6, groups=groups)


def _naive_mean_field(
    h: np.ndarray, J: np.ndarray, b: np.ndarray, mask: Any, *, max_iter: int, tol: float, groups: Any = None
) -> np.ndarray:
    """:func:`.meanfield.mean_field` (naive, damping 0.5, no gradient) in numpy for ``h (N, n)``, ``J (N, n, n)``,
    ``b (N, 1)``: the same iteration from ``tanh(b h)``, the same stopping test (the largest residual of the batch
    below ``tol``), so the same solution (to 1e-12; ``tests/backends/test_qemcmc_fast.py``). A shared ``J`` (one head)
    is one matrix product per iteration.

    ``groups`` (``(N,)`` int labels ``0..G-1``, or ``None``: one group) runs several batches at once, each with its
    own stopping test: a group's rows stop moving at the first iteration where that group's largest residual is below
    ``tol``, so every group gets the solution a call on its rows alone would (one call for the prefixes of a whole
    attention layer instead of one per prefix length, where numpy's per-call cost was most of the time)."""
    shared = J.shape[0] > 0 and (J.strides[0] == 0 or bool((J == J[:1]).all()))
    m = np.tanh(b * h)
    if groups is not None and h.size > 0 and int(groups.max()) > 0:
        return _grouped_mean_field(m, h, J, b, mask, groups, shared, max_iter=max_iter, tol=tol)
    for _ in range(max_iter):
        field = h + (m @ J[0] if shared else np.einsum("rk,rkj->rj", m, J))
        f = torch.from_numpy(b * field).tanh_().numpy()  # torch's tanh: vectorised, ~2x numpy's (to an ulp)
        if mask is not None:
            f *= mask
        step = f - m
        if step.size == 0 or np.abs(step).max() < tol:
            break
        m = m + 0.5 * step
    return m


def _grouped_mean_field(m, h, J, b, mask, groups, shared, *, max_iter: int, tol: float) -> np.ndarray:  # noqa: ANN001
    """:func:`_naive_mean_field` from ``m`` with a stopping test per group: the rows of a group that has stopped leave
    the iteration (written back as they are), so late iterations run on the slow groups' rows only."""
    live = np.arange(h.shape[0])
    hl, bl, ml, lab = h, b, m, groups
    mkl = mask
    worst = np.zeros(int(groups.max()) + 1)
    for _ in range(max_iter):
        field = hl + (ml @ J[0] if shared else np.einsum("rk,rkj->rj", ml, J[live]))
        f = torch.from_numpy(bl * field).tanh_().numpy()  # (as in _naive_mean_field)
        if mkl is not None:
            f *= mkl
        step = f - ml
        worst.fill(0.0)
        np.maximum.at(worst, lab, np.abs(step).max(-1))
        keep = (worst >= tol)[lab]
        if not keep.all():
            m[live[~keep]] = ml[~keep]
            live, hl, bl, ml, lab, step = live[keep], hl[keep], bl[keep], ml[keep], lab[keep], step[keep]
            mkl = None if mkl is None else mkl[keep]
            if live.size == 0:
                return m
        ml = ml + 0.5 * step
    m[live] = ml
    return m


def _energy_table(h: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
    """:func:`.statevector.configuration_energies` of ``h (N, n)``, ``J (N, n, n)`` (float64). When the problems share
    a few coupling matrices (one attention head: the bridge's problems share ``J``; a merged run of
    :mod:`.chain_rows`: one per prefix length), the coupling energies of the ``2**n`` configurations are computed once
    per distinct matrix and the fields are one GEMM: a few kernel calls instead of the ~6 n of the doubling (equal to
    1e-12)."""
    N, n = h.shape
    if N == 0 or n == 0:
        return configuration_energies(h, J)
    S = enumerate_states(n, dtype=h.dtype)  # (2**n, n), row c = s(c)
    if torch.equal(J, J[:1].expand_as(J)):
        coupling = 0.5 * ((S @ J[0]) * S).sum(-1)  # sum_{j<k} J_jk s_j s_k (J symmetric, zero diagonal)
        return (h @ S.T).add_(coupling).neg_()
    distinct, which = torch.unique(J.reshape(N, n * n), dim=0, return_inverse=True)
    if 2 * len(distinct) > N:  # mostly distinct couplings: the doubling
        return configuration_energies(h, J)
    coupling = 0.5 * ((S @ distinct.view(-1, n, n)) * S).sum(-1)  # (distinct, 2**n)
    return (h @ S.T).add_(coupling[which]).neg_()


class MetropolisChain(Sampler):
    """A Metropolis chain whose proposal rule a subclass gives (:meth:`_proposal_engine`); module docstring.

    Args:
        chain: the :class:`ChainSchedule` (burn-in, thinning, start, chains per problem).
        num_reads: reads per problem when ``sample(num_reads=None)``.
        memory_limit: bytes of proposal state per chunk of problems.
        max_spins: largest ``n``.
        params: the proposal parameters drawn at every move (:class:`~hybrid_attention.circuits.proposal.ProposalParams`).
    """

    capabilities = SamplerCapabilities(markov_chain=True)
    option_groups: ClassVar[dict[str, tuple[str, str]]] = CHAIN_OPTIONS
    parameters = {
        "burn_in": "moves before the first record",
        "thinning": "moves between records of one chain",
        "num_chains": "chains per problem (default: one per read)",
        "start": "'random', 'fields' or 'meanfield': where chains without initial_state start",
        "initial_state": "(*batch, chains, n) ±1 starting configurations (persistent chains)",
    }
    #: what runs the proposals, as ``SampleSet.info`` reports it (the quantum rule sets its engine)
    engine = "statevector"
    #: how a proposal is drawn (``"columns"``: one per chain and move)
    mode = "columns"
    #: the precision of a proposal's state (the memory check of :meth:`validate`)
    dtype = torch.complex64
    #: the IBM sampler of a quantum rule on IBM hardware (``None``: none)
    ibm: Any = None
    #: the fixed cost of one group of a masked batch, in row-configurations, for :func:`.chain_rows.merge_groups`
    #: (0: every group of rows with the same visible spins runs on those spins alone). Only for a proposal under
    #: which dropped spins are free spins that change no draw of the others (the quantum proposal: a product driver
    #: and a problem term without them), never for one that spends moves on them (a single-spin flip).
    _merge_overhead: float = 0.0

    def __init__(
        self,
        *,
        chain: ChainSchedule,
        num_reads: int = 256,
        memory_limit: int = 64 << 20,
        max_spins: int = 16,
        params: ProposalParams | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(chain, ChainSchedule):
            raise TypeError(f"{self.name}: chain must be a ChainSchedule, got {type(chain).__name__}")
        self.params = ProposalParams() if params is None else params
        self.chain = chain
        self.default_num_reads = check_positive_int(num_reads, "num_reads")
        self.memory_limit = check_positive_int(memory_limit, "memory_limit")
        self.max_spins = check_positive_int(max_spins, "max_spins")

    @property
    def burn_in(self) -> int:
        return self.chain.burn_in

    @property
    def thinning(self) -> int:
        return self.chain.thinning

    @property
    def start(self) -> str:
        return self.chain.start

    @property
    def num_chains(self) -> int | None:
        return self.chain.num_chains

    @property
    def properties(self) -> dict[str, Any]:
        return {**super().properties, "burn_in": self.burn_in}

    @staticmethod
    def _check_params(params: Any) -> ProposalParams:
        if not isinstance(params, ProposalParams):
            raise TypeError(f"qemcmc: params must be a ProposalParams, got {type(params).__name__}")
        return params

    @staticmethod
    def _check_start(start: Any) -> str:
        if start not in STARTS:
            raise ValueError(f"qemcmc: start must be one of {STARTS}, got {start!r}")
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
        self._check_output_size(problem, opts["reads"])  # the reads first: the usual refusal of a huge num_reads
        rows, C = problem.h.numel() // max(problem.n, 1), opts["chains"]
        moves = opts["burn_in"] + (opts["records"] - 1) * opts["thinning"]
        check_memory(
            8.0 * rows * C * (moves + 1),
            f"{self.name}: the energy traces of {rows} problem(s) x {C} chain(s) x {moves + 1} states (burn_in "
            f"{opts['burn_in']} + {opts['records'] - 1} records x thinning {opts['thinning']} moves; 8 bytes each)",
            hint="use fewer moves (burn_in, thinning) or chains, or split the batch",
        )
        return problem

    def _mode(self, n: int, chains: int, moves: int, params: ProposalParams) -> str:
        return self.mode

    def _problems_per_chunk(self, n: int, chains: int, mode: str) -> int:
        """Problems run together (one chunk; with a circuit engine one PUB per move holds all their chains)."""
        per = (1 << n) * (1 << n if mode == "unitary" else chains) * 16 * 3
        return max(1, self.memory_limit // per)

    # ------------------------------------------------------------------ sampling
    def _sample(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> SampleSet:
        if self.ibm is not None and not self.ibm.local:  # budget, job limit, session, job-mode warning
            self.ibm.check_call(self.estimate(problem, num_reads, **options))  # before any submission
        opts = self._resolve(problem, num_reads, options)
        flat = problem.flatten()
        N, n = flat.h.shape[0], flat.n
        C, r, burn, thin = opts["chains"], opts["records"], opts["burn_in"], opts["thinning"]
        moves = burn + (r - 1) * thin
        t0 = time.perf_counter()
        rows = ChainRows.of(flat, opts)
        groups = visible_groups(rows.mask)
        if rows.init is None and opts["start"] != "random":  # every group's start in one solve, each its own stop
            labels = None if len(groups) == 1 else group_labels(groups, N)
            m0 = start_magnetisations(rows.h, rows.J, rows.beta, rows.mask, opts["start"], labels)
            rows = dataclasses.replace(rows, m0=m0)
        runs = merge_groups(groups, self._merge_overhead)
        # nothing masked: the chunks' seeds come from ``seed`` itself; else one child seed per run (its chunks' seeds
        # spawned from it, as a call on the run's spins alone would) and one for the dropped spins
        dropped = groups[0][0] is not None
        group_seeds = spawn_seeds(seed, len(runs) + 1) if dropped else [seed]
        self._jobs: list[list[str]] = []
        rec, final = np.zeros((N, C * r), dtype=np.int64), np.zeros((N, C), dtype=np.int64)  # indices over n spins
        acc, changed, energies = np.zeros((N, C)), np.zeros((N, C)), np.zeros((N, C, moves + 1))
        chunk_seeds, modes = [], []
        for (idx, cols), sd in zip(runs, group_seeds):
            if cols is not None and len(cols) == 0:  # no spin takes part: every proposal is the current (empty) state
                acc[idx] = moves
                continue
            g = rows.select(idx, cols)
            (rec_g, final_g, acc[g.rows], energies[g.rows], changed[g.rows]), mode, seeds = self._run_rows(g, opts, sd)
            rec[g.rows], final[g.rows] = spread_indices(rec_g, cols), spread_indices(final_g, cols)
            chunk_seeds += seeds
            modes.append((g.h.shape[1], mode))
        spins = 1 - 2 * index_to_bits(rec, n).astype(np.int8)  # (N, C * r, n), chain-major
        final_spins = 1 - 2 * index_to_bits(final, n).astype(np.int8)
        if dropped:  # free spins (uniform), or where persistent chains left them
            fill_dropped(spins, final_spins, rows.mask, rows.init, group_seeds[-1])
        mode = max(modes)[1] if modes else self._mode(0, C, moves, opts["params"])
        info = self._info(problem, opts, spins, final_spins, acc, energies, changed, mode, seed, chunk_seeds)
        info["timing"] = {"run": time.perf_counter() - t0}
        bs, reads = tuple(problem.batch_shape), opts["reads"]
        w = np.full((*bs, reads), 1.0 / reads)
        return SampleSet(spins[:, :reads].reshape(*bs, reads, n), w, problem, info)

    def _run_rows(self, g: ChainRows, opts: dict[str, Any], seed: Any) -> tuple[tuple[np.ndarray, ...], str, list]:
        """The chains of the problems ``g`` (every spin taking part), chunked by memory: ``((records (N, C * r), final
        (N, C), accepted, energies, changed), mode, chunk seeds)`` as :meth:`_run_chunk`, concatenated."""
        N, n = g.h.shape
        C, r, thin, params = opts["chains"], opts["records"], opts["thinning"], opts["params"]
        moves = opts["burn_in"] + (r - 1) * thin
        mode = self._mode(n, C, moves, params)
        step = self._problems_per_chunk(n, C, mode)
        starts = list(range(0, N, step))
        seeds = spawn_seeds(seed, len(starts))
        out = [
            self._run_chunk(g.chunk(s, s + step), opts, mode, np.random.default_rng(sd)) for s, sd in zip(starts, seeds)
        ]
        return tuple(np.concatenate([o[i] for o in out]) for i in range(5)), mode, seeds

    def _info(self, problem, opts, spins, final, acc, energies, changed, mode, seed, chunk_seeds):  # noqa: ANN001, ANN202
        """``SampleSet.info`` of a call (:mod:`.qemcmc` module docstring) from its chains' output."""
        N, _, n = spins.shape
        C, r, burn, thin, params = opts["chains"], opts["records"], opts["burn_in"], opts["thinning"], opts["params"]
        moves = burn + (r - 1) * thin
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
            "chunk_seeds": chunk_seeds,
            "acceptance_rate": (acc / max(moves, 1)).mean(-1).reshape(bs),
            "move_rate": (changed / max(moves, 1)).mean(-1).reshape(bs),
            "iat": iat.reshape(bs),
            "ess": np.minimum(effective_sample_size(C, r, iat, thin), opts["reads"]).reshape(bs),
            "iat_spins": iat_s.reshape(*bs, n),
            "ess_spins": np.minimum(effective_sample_size(C, r, iat_s), opts["reads"]).reshape(*bs, n),
            "final_state": final.reshape(*bs, C, n),
        }
        if self.engine == "ibm":
            info.update(job_ids=[j for jobs in self._jobs for j in jobs], backend_name=self.ibm.backend.name)
        return info

    def _proposal_engine(self, E, h, J, mask, alpha, params, mode):  # noqa: ANN001, ANN202 (internal)
        """The object whose ``propose(cur (N, C), gamma, t, rng) -> (N, C)`` draws each chain's proposal: the rule."""
        raise NotImplementedError(f"{type(self).__name__} gives no proposal rule")

    def _run_chunk(self, part: ChainRows, opts: dict[str, Any], mode: str, rng: np.random.Generator):  # noqa: ANN202
        """Chains of one chunk of problems ``part`` (every spin taking part): ``(records (N, C * r), final (N, C), accepted
        (N, C), energies (N, C, moves + 1), changed (N, C))`` (``changed``: accepted moves to another configuration)."""
        h, J, beta = part.h, part.J, part.beta
        N, n = h.shape
        C, r, burn, thin, params = opts["chains"], opts["records"], opts["burn_in"], opts["thinning"], opts["params"]
        moves = burn + (r - 1) * thin
        E = _energy_table(h, J)  # (N, 2**n) float64, the classical energies
        engine = self._proposal_engine(E, h, J, part.mask, part.alpha, params, mode)
        En = E.numpy()
        b = beta[:, None]  # the acceptance's beta E at the two states only (the same products as of a beta E table)
        if part.init is not None:
            cur = spins_to_index(part.init).astype(np.int64)
        elif part.m0 is not None:  # independent spins, P(s_j = +1) = (1 + m_j) / 2 ("fields", "meanfield")
            p_up = 0.5 * (1.0 + part.m0)
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
            dE = b * En[rows, new] - b * En[rows, cur]
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
