"""The ``statevector`` sampler: a batched PyTorch simulator of the documented Trotterized DQA program.

It runs the same program as :func:`hybrid_attention.circuits.dqa_circuit` (docs/theory.md section 4) for a whole batch of
problems at once, without any circuit object:

* start in ``|+>^n`` (uniform amplitudes ``2**(-n/2)``);
* problem layer ``exp(-i b_k H_P)``: a diagonal phase ``exp(-i b_k E(z))`` from the energies of all ``2**n``
  configurations (``E`` with the physics sign of :mod:`hybrid_attention.ising`, masked spins decoupled, fields and
  couplings multiplied by the schedule's ``field_scale`` / ``coupling_scale`` when it has them);
* driver layer ``exp(-i a_k H_D) = prod_j (cos a_k + i sin a_k X_j)`` (``H_D = -sum_j X_j``). It is applied as
  a few Kronecker blocks: the qubits are split into groups of ``g`` (default 4) qubits and each group's
  ``RX^{(x) g}`` (a ``2**g x 2**g`` matrix, symmetric, entries ``cos^(g-d) (i sin)^d`` with ``d`` the Hamming
  distance) is one GEMM over the whole batch. No ``2**n x 2**n`` matrix is ever built; a slice costs
  ``O(2**n (n / g) 2**g)`` per problem in ``~n/g + 1`` kernel calls;
* ``order=2`` schedules split the driver into two half layers around the problem layer (adjacent halves merged);
  the layer sequence is :func:`hybrid_attention.circuits.program.layers` (``merge_drivers=True``).

The energies of all configurations are built by doubling: adding spin ``m`` to the table of spins ``0..m-1``
costs one GEMM with the ``(2**m, m)`` configuration matrix, so a batch with per-problem couplings needs
``O(B n 2**n)`` work and no ``(B, 2**n, n)`` tensor. Without autograd the sampler runs the in-place engine of
:mod:`.inplace` (rotating frame, phase recurrence, scratch buffers) on chunks of the batch, on the chunk threads of
:mod:`hybrid_attention.backends.parallel`.

Everything is plain torch (complex64 by default, complex128 on request, any device), so
:meth:`StatevectorSampler.differentiable_marginals` returns the exact output marginals of the DQA circuit with
their exact autograd gradients with respect to ``h`` and ``J`` (something hardware cannot give: the reference for
the covariance surrogate of the bridge). Like the circuit samplers, the program encodes ``beta * H_P``: the problem's
``beta`` scales ``h`` and ``J`` inside the circuit, and the output is approximately Boltzmann at the effective inverse
temperatures of :meth:`StatevectorSampler.effective_beta` (leading order, :mod:`hybrid_attention.circuits.temperature`).

Example:
    >>> import torch
    >>> from hybrid_attention import IsingProblem
    >>> from hybrid_attention.circuits import DQASchedule
    >>> sv = StatevectorSampler(DQASchedule(tau=1.0, steps=20), dtype=torch.complex128)
    >>> p = sv.probabilities(IsingProblem(torch.tensor([[0.5, -0.5]], dtype=torch.float64)))
    >>> tuple(p.shape), round(float(p.sum()), 12)
    ((1, 4), 1.0)
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import torch
from torch.utils.checkpoint import checkpoint

from hybrid_attention.checks import as_generator, check_device, check_memory, check_positive_int, describe_seed
from hybrid_attention.circuits.program import layers as program_layers
from hybrid_attention.circuits.schedule import DQASchedule
from hybrid_attention.exact import enumerate_states
from hybrid_attention.ising import IsingProblem
from hybrid_attention.sampler import SamplerCapabilities
from hybrid_attention.sampleset import SampleSet

from ..parallel import chunk_workers, run_chunks
from .base import DQASampler
from .driver import REAL, apply_driver, driver_groups, phase, rx_block
from .inplace import dqa_inplace, linear_phases, scaled_energies
from .readout import draw_spins_into

__all__ = ["StatevectorSampler", "configuration_energies", "dqa_statevector"]

logger = logging.getLogger(__name__)

#: fixed cost of one sampler call in units of (problem x configuration) work, for the bridge's prefix grouping
#: (chosen by timing the T = 12 training step of bench.samplers with several values: 2e3, 6e3, 2e4, 5e4, 1e5)
_CALL_OVERHEAD = 20000


# ---------------------------------------------------------------------- building blocks (plain torch)
def configuration_energies(h: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
    """``E(z) = -sum_j h_j s_j - sum_{j<k} J_jk s_j s_k`` for all ``2**n`` configurations, by doubling.

    Args:
        h: ``(B, n)`` real.
        J: ``(n, n)`` or ``(B, n, n)``, symmetric with zero diagonal (masked spins already decoupled).

    Returns:
        ``(B, 2**n)``, index ``c = sum_j b_j 2**j``; differentiable with respect to ``h`` and ``J``.
    """
    B, n = h.shape
    E = torch.zeros(B, 1, dtype=h.dtype, device=h.device)
    for m in range(n):
        loc = h[:, m : m + 1]
        if m > 0:
            Sm = enumerate_states(m, dtype=h.dtype, device=h.device)  # (2^m, m)
            col = J[..., m, :m]  # (m,) or (B, m)
            loc = loc + col @ Sm.transpose(0, 1)  # (2^m,) shared or (B, 2^m)
        # bit m = 0 (s_m = +1) lowers the energy by loc, bit m = 1 raises it: index c + 2**m b_m
        E = torch.cat([E - loc, E + loc], dim=-1)
    return E


_RX_CACHE: dict[tuple, torch.Tensor] = {}


def dqa_statevector(
    h: torch.Tensor, J: torch.Tensor, schedule: DQASchedule, *, dtype: torch.dtype = torch.complex64, group: int = 4
) -> torch.Tensor:
    """Final DQA state for a batch of problems.

    Args:
        h: ``(B, n)`` fields (masked spins zeroed); J: ``(n, n)`` or ``(B, n, n)`` couplings (masked decoupled).
        schedule: the :class:`DQASchedule`; its ``field_scale`` / ``coupling_scale`` (if present) scale h and J.
        dtype: ``torch.complex64`` or ``torch.complex128``.
        group: qubits per Kronecker block of the driver layer.

    Returns:
        ``(B, 2**n)`` complex amplitudes, index ``c = sum_j b_j 2**j``; differentiable in ``h`` and ``J``.
    """
    if torch.is_grad_enabled() and (h.requires_grad or J.requires_grad):
        return _dqa_autograd(h, J, schedule, dtype, group)
    return dqa_inplace(h, J, schedule, dtype, group, reuse=False)


def _dqa_autograd(h: torch.Tensor, J: torch.Tensor, schedule: DQASchedule, dtype: torch.dtype, group: int):
    """:func:`dqa_statevector` with autograd: every layer a new tensor (complex driver blocks)."""
    n = h.shape[-1]
    E = configuration_energies(*scaled_energies(h, J, schedule, REAL[dtype]))
    psi = torch.full((E.shape[0], 1 << n), 2.0 ** (-n / 2), dtype=dtype, device=h.device)
    layers = program_layers(schedule, merge_drivers=True)
    recur, step_b = linear_phases(layers)
    if recur:  # exp(-i b_k E) from the previous slice by one complex128 multiply (no rounding build-up)
        E64 = E.to(torch.float64)
        step_ph, ph = phase(-step_b * E64), None
    groups, cache = driver_groups(n, group), {}
    for kind, val in layers:
        if kind == "P":
            if not recur:
                psi = psi * phase(-val * E)
            else:
                ph = phase(-val * E64) if ph is None else ph * step_ph
                psi = psi * ph.to(dtype)
        else:
            if val not in cache:
                cache[val] = [(lo, g, rx_block(g, val, dtype, h.device)) for lo, g in groups]
            psi = apply_driver(psi, cache[val], n)
    return psi


def _scaled_by_beta(h: torch.Tensor, J: torch.Tensor, beta: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The circuit encodes ``beta * H_P`` (as the qiskit emitter does): scale ``h (B, n)`` and ``J``."""
    if not isinstance(beta, torch.Tensor) or beta.numel() == 1:
        b = beta if not isinstance(beta, torch.Tensor) else beta.reshape(()).to(h.device, h.dtype)
        return h * b, J * b
    b = torch.broadcast_to(beta.to(h.device, h.dtype), h.shape[:-1])
    Jb = J if J.ndim == 3 else J.expand(h.shape[0], *J.shape)
    return h * b[:, None], Jb * b[:, None, None]


# ---------------------------------------------------------------------- the sampler
class StatevectorSampler(DQASampler):
    """Batched statevector simulation of the Trotterized DQA circuit (exact output distribution).

    Shares the DQA base (:class:`~hybrid_attention.backends.dqa.base.DQASampler`: schedule, :meth:`effective_beta`,
    :meth:`reference_probabilities`, the exact output's read-outs) with the circuit samplers.

    Args:
        schedule: the :class:`DQASchedule` (default ``DQASchedule(tau=1.0, steps=20)``).
        dtype: ``torch.complex64`` (default; TV error ~1e-7) or ``torch.complex128`` (~1e-15).
        device: torch device for the simulation (default: the problem's device).
        max_spins: size limit (default 20: ``2**20`` amplitudes per problem).
        memory_limit: bytes of amplitudes (and energies) per chunk of problems; the batch is simulated in chunks
            that fit (default 64 MiB). With autograd each chunk is checkpointed, so the backward pass keeps one
            chunk's graph at a time.
        group: qubits per Kronecker block in the driver layer (4 measured fastest on a 2-core CPU).
        cache_limit: on CPU, bytes per sub-chunk that is run through all Trotter slices before the next one starts,
            in units of :meth:`_bytes_per_problem` (default 2 MiB: 64 problems at n = 10); not applied on other
            devices. Sub-chunks are the units the chunk threads share. The limit is a measured size, not an
            in-cache guarantee: a sub-chunk's real working set (state, buffer, energies, the phase recurrence's
            complex128 and complex64 tables) is about 2.6x the estimate, beyond a 512 KiB L2 at the default, yet at
            n = 10 and 128 problems halving the limit cost 1.17x and quartering it 1.32x the CPU time of a call
            (each sub-chunk pays ~100 kernel launches per 20 slices).

    ``sample(problem, num_reads=None)`` returns every configuration with its exact output probability
    (``SampleSet.exact`` is True); ``num_reads=N`` draws ``N`` shots per problem from that distribution.
    """

    name = "statevector"
    capabilities = SamplerCapabilities(
        differentiable=True,
        exact_output=True,
        per_call_overhead=_CALL_OVERHEAD,
        dqa=True,
        approximate=True,
        needs_circuit=True,
    )
    parameters: dict[str, str] = {}
    default_num_reads = None

    def __init__(
        self,
        schedule: DQASchedule | None = None,
        *,
        dtype: torch.dtype = torch.complex64,
        device: Any = None,
        max_spins: int = 20,
        memory_limit: int = 64 << 20,
        group: int = 4,
        cache_limit: int = 2 << 20,
    ) -> None:
        super().__init__(schedule)
        if dtype not in REAL:
            raise ValueError(f"dtype must be torch.complex64 or torch.complex128, got {dtype}")
        self.max_spins = check_positive_int(max_spins, "max_spins")
        self.memory_limit = check_positive_int(memory_limit, "memory_limit")
        self.group = check_positive_int(group, "group")
        self.cache_limit = check_positive_int(cache_limit, "cache_limit")
        self.dtype = dtype
        try:
            self.device = None if device is None else check_device(device)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"statevector: {exc}") from None

    @property
    def properties(self) -> dict[str, Any]:
        return {**super().properties, "dtype": str(self.dtype), "schedule": self.schedule}

    def __repr__(self) -> str:
        return f"StatevectorSampler(schedule={self.schedule!r}, dtype={self.dtype})"

    def validate(
        self, problem: Any, *, num_reads: Any = None, seed: Any = None, options: dict | None = None
    ) -> IsingProblem:
        """The base checks, then the memory of simulating one problem against
        :data:`hybrid_attention.checks.MEMORY_BUDGET`: ``2**n`` amplitudes times 4 working copies (state, phases,
        energies, temporaries) in ``dtype``, times ``1 + steps`` when autograd must keep every layer's state."""
        problem = super().validate(problem, num_reads=num_reads, seed=seed, options=options)
        per = float(self._bytes_per_problem(problem.n))
        grad = torch.is_grad_enabled() and (problem.h.requires_grad or problem.J.requires_grad)
        n = problem.n
        what = f"statevector: one problem of n = {n} spins (2**{n} amplitudes x 4 copies in {self.dtype})"
        if grad:
            per *= 1 + int(self.schedule.steps)
            what += f", x {1 + int(self.schedule.steps)} layers kept for autograd"
        check_memory(per, what, hint="use fewer spins (or Trotter steps when differentiating)")
        return problem

    # ------------------------------------------------------------------ core
    def _bytes_per_problem(self, n: int) -> int:
        return (1 << n) * (torch.finfo(REAL[self.dtype]).bits // 8) * 2 * 4  # psi, phase, energies, temporaries

    def _chunk(self, n: int, grad: bool) -> int:
        per = self._bytes_per_problem(n)
        if grad:  # a checkpointed chunk's backward keeps every layer's amplitudes
            per *= 1 + len(program_layers(self.schedule, merge_drivers=True)) // 2
        return max(1, self.memory_limit // per)

    def _subchunk(self, n: int, device: torch.device) -> int | None:
        """Rows per cache-sized sub-chunk on CPU (``None``: no sub-chunking)."""
        if device.type != "cpu":
            return None
        return max(1, self.cache_limit // self._bytes_per_problem(n))

    def _prepare(self, problem: IsingProblem) -> tuple[torch.Tensor, torch.Tensor, torch.device]:
        """The flattened problem's ``h (B, n)`` and ``J`` with ``beta`` applied, on the simulation device."""
        flat = problem.flatten()
        h, J = flat.dropped()
        dev = self.device or h.device
        h, J = _scaled_by_beta(h.to(dev), J.to(dev), flat.beta)
        return h, J, torch.device(dev)

    def _spans(self, B: int, n: int, device: torch.device, grad: bool) -> tuple[list[slice], bool]:
        """Row chunks of a batch of ``B`` problems and whether they are checkpointed (autograd over several memory
        chunks). Chunks hold at most the memory (and on CPU the cache) limit's rows, as equal as possible and an even
        number of them when there are several, so two threads share them evenly; they depend on the batch and the
        limits only, never on the thread count (the results are the same at any thread count)."""
        step = self._chunk(n, grad)
        checkpointed = grad and step < B  # several memory chunks: keep only one chunk's graph alive at a time
        sub = None if checkpointed else self._subchunk(n, device)
        if sub is not None:
            step = min(step, sub)
        count = -(-B // step)
        count += count % 2 if 1 < count < B else 0
        bounds = [i * (B // count) + min(i, B % count) for i in range(count + 1)]  # the first B % count get one more
        return [slice(a, b) for a, b in zip(bounds, bounds[1:])], checkpointed

    def _workers(self, chunks: int, B: int, n: int, device: torch.device) -> int:
        """Threads for ``chunks`` chunks of ``B`` problems (:func:`~hybrid_attention.backends.parallel.chunk_workers`
        from the driver layers' multiply-adds; one off the CPU)."""
        if device.type != "cpu":
            return 1
        return chunk_workers(chunks, float(B << n) * int(self.schedule.steps) * n * (1 << self.group) / self.group)

    def _probabilities(self, problem: IsingProblem) -> torch.Tensor:
        """Output probabilities ``(B, 2**n)`` of the flattened problem, in the real dtype (keeps autograd).

        Without autograd, the chunks of :meth:`_spans` run on :func:`~hybrid_attention.backends.parallel.chunk_workers`
        threads (one intra-op thread each; :mod:`hybrid_attention.backends.parallel`)."""
        h, J, dev = self._prepare(problem)
        n, B = problem.n, h.shape[0]
        if B == 0:  # an empty batch
            return h.new_zeros(0, 1 << n, dtype=REAL[self.dtype])
        grad = torch.is_grad_enabled() and (h.requires_grad or J.requires_grad)
        spans, checkpointed = self._spans(B, n, dev, grad)
        items = [(h[s], J if J.ndim == 2 else J[s]) for s in spans]
        if grad:
            return torch.cat(
                [checkpoint(self._run, *it, use_reentrant=False) if checkpointed else self._run(*it) for it in items],
                dim=0,
            )
        return torch.cat(run_chunks(self._run, items, self._workers(len(items), B, n, dev)), dim=0)

    def _shots(self, problem: IsingProblem, u: np.ndarray) -> np.ndarray:
        """Shots of the flattened problem at uniforms ``u`` ``(B, shots)``: int8 spins ``(B, shots, n)``, row ``r``'s
        shot ``k`` the inverse CDF of its exact output at ``u[r, k]``. Each chunk of :meth:`_spans` is simulated,
        drawn and read out into its rows of the result in one task of the chunk threads (no autograd)."""
        with torch.no_grad():
            h, J, dev = self._prepare(problem)
            n, B = problem.n, h.shape[0]
            spins = np.empty((B, u.shape[-1], n), dtype=np.int8)
            if B == 0:
                return spins
            spans, _ = self._spans(B, n, dev, False)
            items = [(h[s], J if J.ndim == 2 else J[s], u[s], spins[s]) for s in spans]
            run_chunks(self._run_draw, items, self._workers(len(items), B, n, dev))
        return spins

    def _run(self, h: torch.Tensor, J: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and (h.requires_grad or J.requires_grad):
            psi = _dqa_autograd(h, J, self.schedule, self.dtype, self.group)
        else:  # the state is a scratch buffer, read at once
            psi = dqa_inplace(h, J, self.schedule, self.dtype, self.group, reuse=True)
        return psi.real**2 + psi.imag**2  # the program is unitary: sums to 1 up to rounding

    def _run_draw(self, h: torch.Tensor, J: torch.Tensor, u: np.ndarray, out: np.ndarray) -> None:
        """Shots of one chunk into ``out`` ``(rows, shots, n)`` int8: the inverse CDF of its renormalised float64
        probabilities at ``u`` ``(rows, shots)`` (:func:`.readout.draw_spins_into`, the draws of
        :func:`~hybrid_attention.exact.inverse_cdf`), read out as spins."""
        p = self._run(h, J).to(torch.float64).cpu()
        draw_spins_into(p / p.sum(-1, keepdim=True), u, out)

    # ------------------------------------------------------------------ public API
    def probabilities(self, problem: IsingProblem) -> torch.Tensor:
        """Exact output distribution ``(*batch, 2**n)`` (real dtype of ``dtype``), index ``c = sum_j b_j 2**j``."""
        self.validate(problem)
        with torch.no_grad():
            p = self._probabilities(problem.detach())
            p = p / p.sum(-1, keepdim=True)
        return p.reshape(*problem.batch_shape, 1 << problem.n)

    def differentiable_marginals(self, problem: IsingProblem) -> torch.Tensor:
        """Exact output marginals ``<s_j>`` of the DQA circuit, ``(*batch, n)``, keeping the autograd graph.

        Gradients with respect to ``problem.h`` and ``problem.J`` are the exact derivatives of the circuit's
        output marginals (complex autograd through the simulation). Masked spins give 0. Returned in the
        problem's dtype and device.
        """
        self.validate(problem)
        m = self._masked_marginals(self._probabilities(problem), problem)
        return m.to(problem.h.device, problem.dtype)

    def _marginals(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> torch.Tensor:
        """Exact output marginals (float64, no graph), ``(*batch, n)``; the mean of ``num_reads`` shots drawn from the
        output distribution when ``num_reads`` is given."""
        if num_reads is not None:
            return super()._marginals(problem, num_reads=num_reads, seed=seed, **options)
        with torch.no_grad():
            return self.differentiable_marginals(problem.detach()).to(torch.float64).cpu()

    def _sample(self, problem: IsingProblem, *, num_reads: int | None, seed: Any) -> SampleSet:
        info: dict[str, Any] = {
            "backend": self.name,
            "schedule": self.schedule,
            "dtype": str(self.dtype),
            "seed": describe_seed(seed),
        }
        with torch.no_grad():
            if num_reads is None:
                p = self._probabilities(problem).to(torch.float64).cpu()
                return self._exact_sampleset(problem, p / p.sum(-1, keepdim=True), info)
        # the uniforms draw_states would take, then each chunk's shots drawn where its probabilities are made
        u = as_generator(seed).random((math.prod(problem.batch_shape), int(num_reads)))
        n, bs = problem.n, tuple(problem.batch_shape)
        info["num_reads"] = int(num_reads)
        spins = self._shots(problem, u).reshape(*bs, int(num_reads), n)
        return SampleSet(spins, np.full((*bs, int(num_reads)), 1.0 / num_reads), problem, info)
