"""Proposal engines of the ``qemcmc`` sampler.

An engine draws, for every chain of a chunk of problems, one proposal ``s'`` from ``|<s'|U|s>|^2`` where ``U`` is
the proposal circuit of :mod:`hybrid_attention.circuits.proposal` and ``s`` the chain's current state
(``propose(cur (N, C) int64, gamma, t, rng) -> (N, C)``, states indexed ``c = sum_j b_j 2**j``):

* :class:`StatevectorEngine`: the batched PyTorch simulator (the energy table and Kronecker-block driver layers of
  :mod:`.statevector`; :func:`evolve_proposal`, :func:`proposal_rows`; in ``"columns"`` mode the fused draw of
  :mod:`.qemcmc_draw`, checked against :func:`evolve_basis_states`);
* :class:`CircuitEngine`: the emitted qiskit circuit (:class:`~hybrid_attention.circuits.proposal.ProposalTemplate`),
  one shot per chain per step in one PUB per step, run by a callable: qiskit-aer's ``SamplerV2``
  (:func:`aer_runner`) or the IBM runtime Sampler of an :class:`~hybrid_attention.backends.ibm.sampler.IBMSampler`
  (:func:`ibm_runner`: fake backends offline, real devices behind its ``allow_hardware`` opt-in).

:func:`hybrid_attention.backends.mcmc.analysis.transition_matrix` builds the exact kernel of a small problem's chain from
:func:`proposal_rows`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from hybrid_attention.circuits.program import CircuitOptions
from hybrid_attention.circuits.proposal import (
    ProposalParams,
    proposal_layers,
    proposal_template,
    proposal_values,
)
from hybrid_attention.ising import index_to_bits

from ..dqa.driver import apply_driver, apply_driver_into, driver_groups, phase, rx_block
from .qemcmc_draw import draw_basis_proposals

__all__ = [
    "evolve_proposal",
    "evolve_basis_states",
    "proposal_rows",
    "StatevectorEngine",
    "CircuitEngine",
    "aer_runner",
    "ibm_runner",
    "REAL",
]

logger = logging.getLogger(__name__)

REAL = {torch.complex64: torch.float32, torch.complex128: torch.float64}

#: ``run(circuit, bindings (rows, P), seed) -> bool bits (rows, n)``: one shot per bindings row
Runner = Callable[[Any, np.ndarray, int], np.ndarray]


def evolve_proposal(
    psi: torch.Tensor, E: torch.Tensor, a: float, b: float, steps: int, *, group: int = 4, cache_limit: int = 2 << 20
) -> torch.Tensor:
    """``U psi`` for the palindromic product ``[D(a/2) P(b) D(a/2)]^steps`` (docs/theory.md section 6).

    Args:
        psi: ``(R, 2**n)`` complex states, one row per execution (overwritten on CPU without autograd).
        E: ``(R, 2**n)`` real: each row's ``alpha E(z)`` (the proposal's problem term, energies of every basis state).
        a, b: driver and problem phases per slice, ``(steps,)`` (:meth:`ProposalParams.slices`), or numbers.
        steps: Trotter steps.
        group: qubits per Kronecker block of a driver layer.
        cache_limit: on CPU without autograd, rows are run through every layer in sub-chunks of about this many bytes
            of state (so a sub-chunk stays in cache), in place on preallocated buffers (as the ``statevector``
            sampler does: fresh multi-MiB tensors per layer cost page faults).

    Returns:
        ``(R, 2**n)`` evolved states.
    """
    n = int(psi.shape[-1]).bit_length() - 1
    groups = driver_groups(n, group)
    layers = proposal_layers(a, b, steps)
    blocks = {v: [(lo, g, rx_block(g, v, psi.dtype, psi.device)) for lo, g in groups] for k, v in layers if k == "D"}

    def phases(Ei: torch.Tensor) -> dict[float, torch.Tensor]:  # exp(-i b_k E) per distinct problem phase
        return {v: phase((-v) * Ei).to(psi.dtype) for v in {v for k, v in layers if k == "P"}}

    if torch.is_grad_enabled() and (psi.requires_grad or E.requires_grad) or psi.device.type != "cpu":
        ph = phases(E)
        for kind, val in layers:
            psi = psi * ph[val] if kind == "P" else apply_driver(psi, blocks[val], n)
        return psi
    psi = psi.contiguous()
    rows = max(1, cache_limit // (psi.shape[-1] * psi.element_size() * 3))
    for r0 in range(0, psi.shape[0], rows):
        sub = psi[r0 : r0 + rows]
        cur, buf = sub.clone(), torch.empty_like(sub)
        ph = phases(E[r0 : r0 + rows])
        for kind, val in layers:
            if kind == "P":
                cur.mul_(ph[val])
            else:
                cur, buf = apply_driver_into(cur, buf, blocks[val])
        sub.copy_(cur)
    return psi


def evolve_basis_states(
    idx: torch.Tensor,
    E: torch.Tensor,
    a: Any,
    b: Any,
    steps: int,
    *,
    dtype: torch.dtype = torch.complex64,
    group: int = 4,
    cache_limit: int = 2 << 20,
) -> torch.Tensor:
    """``U |idx_r>`` for the proposal of :func:`evolve_proposal`, from basis states, without autograd, on CPU.

    Equal to ``evolve_proposal(onehot(idx), E.repeat_interleave(C, 0), ...)`` but cheaper: the first layer is a
    driver ``exp(i x sum_j X_j)``, which takes a basis state to a product state (each qubit
    ``cos(x) |b> + i sin(x) |1 - b>``), written directly as a Kronecker product instead of simulated; and the
    problem phases ``exp(-i b alpha E)`` are computed once per problem, not once per chain.

    Args:
        idx: ``(N, C)`` int64 basis states, ``C`` chains per problem; E: ``(N, 2**n)`` real, each problem's
            ``alpha E(z)``; a, b, steps: as :func:`evolve_proposal`; dtype: complex dtype of the state.

    Returns:
        ``(N * C, 2**n)`` evolved states, row ``p * C + c`` for chain ``c`` of problem ``p``.
    """
    N, C = idx.shape
    size = E.shape[-1]
    n = int(size).bit_length() - 1
    layers = proposal_layers(a, b, steps)
    (kind0, x0), rest = layers[0], layers[1:]
    if kind0 != "D":
        raise ValueError(f"evolve_basis_states: the proposal must start with a driver layer, got {kind0!r}")
    c, s = float(np.cos(x0)), float(np.sin(x0))
    pair = torch.tensor([[c, 1j * s], [1j * s, c]], dtype=dtype)  # exp(i x X)|b> over b' = 0, 1, for b = 0, 1
    shifts = torch.arange(n)
    groups = driver_groups(n, group)
    blocks = {v: [(lo, g, rx_block(g, v, dtype, E.device)) for lo, g in groups] for kd, v in rest if kd == "D"}
    pvals = sorted({v for kd, v in rest if kd == "P"})
    out = torch.empty(N * C, size, dtype=dtype)
    per = max(1, cache_limit // (size * out.element_size() * 3) // C)  # problems per sub-chunk
    flat = idx.reshape(-1)
    for p0 in range(0, N, per):
        p1 = min(N, p0 + per)
        rows = slice(p0 * C, p1 * C)
        V = pair[(flat[rows, None] >> shifts) & 1]  # (rows, n, 2): qubit q's state after the first driver layer
        cur = V[:, n - 1]
        for q in range(n - 2, -1, -1):  # the product state, qubit n - 1 the most significant index bit
            cur = (cur[:, :, None] * V[:, q, None, :]).reshape(cur.shape[0], -1)
        buf = torch.empty_like(cur)
        ph = {v: phase((-v) * E[p0:p1]).to(dtype)[:, None, :] for v in pvals}  # (problems, 1, 2**n)
        for kd, val in rest:
            if kd == "P":
                cur.view(p1 - p0, C, size).mul_(ph[val])
            else:
                cur, buf = apply_driver_into(cur, buf, blocks[val])
        out[rows] = cur
    return out


def proposal_rows(
    E: torch.Tensor, a: Any, b: Any, steps: int, *, dtype: torch.dtype = torch.complex128, group: int = 4
) -> torch.Tensor:
    """The whole proposal matrix of a batch: ``Q[r, s, s'] = |<s'|U_r|s>|^2``, ``(R, 2**n, 2**n)`` real.

    Args:
        E: ``(R, 2**n)`` the rows' ``alpha E(z)``; a, b, steps, group: as :func:`evolve_proposal`.
    """
    R, N = E.shape
    eye = torch.eye(N, dtype=dtype, device=E.device).expand(R, N, N).reshape(R * N, N)
    psi = evolve_proposal(eye, E.repeat_interleave(N, dim=0), a, b, steps, group=group)
    return (psi.real**2 + psi.imag**2).reshape(R, N, N)


def _draw_one(cdf: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One state per row from cumulative distributions ``cdf (..., 2**n)`` (inverse CDF, rows renormalised)."""
    u = rng.random(cdf.shape[:-1]) * cdf[..., -1]
    return np.minimum((cdf < u[..., None]).sum(-1), cdf.shape[-1] - 1)


class StatevectorEngine:
    """Proposals for one chunk of problems from the PyTorch simulator: ``propose(cur (N, C), gamma, t, rng)`` draws
    one proposal per chain from ``|<s'|U|cur>|^2`` (``mode`` ``"unitary"`` or ``"columns"``, see :mod:`.qemcmc`).

    Args:
        E: ``(N, 2**n)`` classical energies; alpha: ``(N,)`` scales of the proposal's problem term.
        params, mode, dtype, group: the proposal, the mode, the simulation dtype, qubits per driver block.
        kernel: the ``"columns"`` draw's loops (:func:`.qemcmc_draw.draw_basis_proposals`).
    """

    def __init__(
        self,
        E: torch.Tensor,
        alpha: Any,
        params: ProposalParams,
        mode: str,
        *,
        dtype: torch.dtype,
        group: int,
        kernel: str = "auto",
    ) -> None:
        self.params, self.mode, self.dtype, self.group, self.kernel = params, mode, dtype, group, kernel
        alpha = torch.as_tensor(np.asarray(alpha, dtype=np.float64))
        self.PE = (alpha[:, None] * E).to(REAL[dtype])  # (N, 2**n): the proposal's problem term
        self._cdf: np.ndarray | None = None  # unitary mode: cumulative rows of Q (N, 2**n, 2**n)

    def propose(self, cur: np.ndarray, gamma: float, t: float, rng: np.random.Generator) -> np.ndarray:
        N, C = cur.shape
        a, b = self.params.slices(gamma, t)
        K, g, dt = self.params.steps, self.group, self.dtype
        if self.mode == "unitary":
            if self._cdf is None or not self.params.fixed:
                Q = proposal_rows(self.PE, a, b, K, dtype=dt, group=g).to(torch.float64).numpy()
                self._cdf = np.cumsum(Q, axis=-1)
            return _draw_one(self._cdf[np.arange(N)[:, None], cur], rng)
        # columns: the fused draw (rotating frame, last layer only as far as the draw needs it), equal to the inverse
        # CDF of |evolve_basis_states(cur)|^2 at the same uniforms (tests/backends/test_qemcmc_draw.py)
        return draw_basis_proposals(cur, self.PE, a, b, K, rng.random(N * C), dtype=dt, group=g, kernel=self.kernel)


class CircuitEngine:
    """Proposals for one chunk of problems from the emitted proposal circuit: per step one PUB with a bindings row
    per chain (basis-state preparation of the chain's state, the problem's values, the step's ``gamma`` and ``t``),
    one shot each.

    Args:
        h: ``(N, n)`` fields, J: ``(N, n, n)`` couplings (masked spins decoupled), mask: ``None`` or ``(N, n)``.
        params: the proposal; options: :class:`CircuitOptions` (folded RZZ, coupling map).
        circuit_for: ``template -> circuit`` actually run (e.g. transpiled to a device's ISA).
        run: a :data:`Runner`.
    """

    def __init__(
        self,
        h: np.ndarray,
        J: np.ndarray,
        mask: Any,
        params: ProposalParams,
        options: CircuitOptions,
        circuit_for: Callable[[Any], Any],
        run: Runner,
    ) -> None:
        n = h.shape[-1]
        nz = np.abs(J).reshape(-1, n, n).max(0) > 0
        edges = tuple((j, k) for j in range(n) for k in range(j + 1, n) if nz[j, k])
        self.tmpl = proposal_template(n, edges, params.steps, options, params.shape)
        if len(self.tmpl.edges) < len(edges):  # couplings dropped by the device graph (on_missing="drop")
            keep = np.zeros((n, n), dtype=bool)
            for j, k in self.tmpl.edges:
                keep[j, k] = keep[k, j] = True
            J = J * keep
        self.values = proposal_values(h, J, params, self.tmpl.edges, mask)  # (N, n + E)
        self.params, self.run = params, run
        self.circuit = circuit_for(self.tmpl)
        self.executions = 0

    def propose(self, cur: np.ndarray, gamma: float, t: float, rng: np.random.Generator) -> np.ndarray:
        N, C = cur.shape
        n = self.tmpl.n
        binds = self.tmpl.bindings(index_to_bits(cur.reshape(-1), n), np.repeat(self.values, C, axis=0), gamma, t)
        bits = np.asarray(self.run(self.circuit, binds, int(rng.integers(0, 2**31 - 1))))
        self.executions += N * C
        return (bits.reshape(N * C, n).astype(np.int64) << np.arange(n)).sum(-1).reshape(N, C)


def aer_runner(backend_options: dict[str, Any]) -> Runner:
    """A :data:`Runner` on qiskit-aer's ``SamplerV2`` with ``backend_options`` (method, noise model...)."""
    from qiskit_aer.primitives import SamplerV2

    def run(circuit: Any, binds: np.ndarray, seed: int) -> np.ndarray:
        res = SamplerV2(seed=seed, options={"backend_options": backend_options}).run([(circuit, binds)], shots=1)
        return res.result()[0].data.meas.to_bool_array(order="little")[:, 0, :]

    return run


def ibm_runner(ibm: Any) -> tuple[Callable[[Any], Any], Runner]:
    """``(circuit_for, run)`` through an :class:`~hybrid_attention.backends.ibm.sampler.IBMSampler`: its ISA transpilation
    (cached per template), its runtime Sampler (executor-based or the legacy fallback) and its job/batch/session
    context; fake backends run locally, real devices only with the sampler's ``allow_hardware=True``. Job ids are
    collected on ``run.job_ids``."""
    job_ids: list[str] = []

    def run(circuit: Any, binds: np.ndarray, seed: int) -> np.ndarray:
        bits, job_id = ibm.run_isa(circuit, binds, shots=1, seed=seed)
        job_ids.append(job_id)
        return bits[:, 0, :]

    run.job_ids = job_ids  # type: ignore[attr-defined]
    return ibm.isa_circuit, run
