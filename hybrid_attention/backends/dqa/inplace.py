"""The in-place engine of the ``statevector`` sampler (no autograd): every Trotter layer in place on two buffers.

:func:`dqa_inplace` runs the program of :func:`hybrid_attention.backends.dqa.statevector.dqa_statevector` in the
rotating frame (:mod:`.rotating_frame`: real driver blocks, half the GEMM flops; ``S`` put back at the end), with the
linear schedule's problem phases from a recurrence (:func:`_recurrence_phases`) instead of a cos/sin pass per slice.
The energies of all configurations are one GEMM with a cached table of spin products up to
:data:`PAIR_MAX_SPINS` spins (:func:`energies64_into`), the doubling of :func:`_energies_into` beyond; the driver
blocks are cached with their batch views (:func:`~.rotating_frame.block_operators`). A chunk of the sampler makes
about 110 kernel calls for 20 slices at n = 10 (each costs a few microseconds of Python whatever its size), so these
caches decide how small a chunk can be.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
import torch

from hybrid_attention.circuits.program import layers as program_layers
from hybrid_attention.circuits.schedule import DQASchedule
from hybrid_attention.exact import enumerate_states

from ..workspace import scratch
from .driver import REAL, phase, phase_into
from .rotating_frame import block_operand, block_operators, frame_phases

__all__ = ["dqa_inplace", "energies64_into", "linear_phases", "scaled_energies", "PAIR_MAX_SPINS"]

#: complex64 problem-phase slices between two complex128 updates of the linear schedule's recurrence
_PHASE_STRIDE = 2
#: most spins whose energy table is one GEMM with the ``(n + n (n - 1) / 2, 2**n)`` table of spin products
#: (2.5 MB at n = 12); the doubling of :func:`_energies_into` beyond (``O(n 2**n)`` work instead of ``O(n**2 2**n)``)
PAIR_MAX_SPINS = 12

Buffer = Callable[[str, tuple, torch.dtype], torch.Tensor]  # (name, shape, dtype) -> a tensor to write into


def scaled_energies(h: torch.Tensor, J: torch.Tensor, schedule: DQASchedule, real: torch.dtype) -> tuple:
    """``h (B, n)`` and ``J`` in the real dtype ``real``, times the schedule's ``field_scale`` / ``coupling_scale``."""
    fs = float(getattr(schedule, "field_scale", 1.0))
    cs = float(getattr(schedule, "coupling_scale", 1.0))
    return fs * h.to(real), cs * J.to(real)


def linear_phases(layers: list) -> tuple[bool, float]:
    """Whether the problem phases ``b_k`` of ``layers`` form an arithmetic progression, and its step."""
    pvals = np.array([v for kind, v in layers if kind == "P"])
    step_b = float(pvals[1] - pvals[0]) if len(pvals) > 2 else 0.0
    return len(pvals) > 2 and bool(np.allclose(np.diff(pvals), step_b, rtol=1e-12, atol=0.0)), step_b


@functools.lru_cache(maxsize=64)
def _program(schedule: DQASchedule) -> tuple[tuple[tuple[str, float], ...], bool, float]:
    """The schedule's merged layers and :func:`linear_phases` of them (cached per schedule, a frozen dataclass: a
    chunk of a call needs them again, and they cost about as much Python as a small chunk's kernels)."""
    layers = program_layers(schedule, merge_drivers=True)
    return tuple(layers), *linear_phases(layers)


def dqa_inplace(
    h: torch.Tensor, J: torch.Tensor, schedule: DQASchedule, dtype: torch.dtype, group: int, *, reuse: bool
) -> torch.Tensor:
    """:func:`~.statevector.dqa_statevector` without autograd: every layer in place on two buffers, in the rotating
    frame. With ``reuse`` (CPU) the buffers are scratch tensors (:mod:`.workspace`): the result is valid until the next
    such call on the same thread.

    Args:
        h: ``(B, n)`` fields; J: ``(n, n)`` or ``(B, n, n)`` couplings (``beta`` applied, masked spins decoupled).
        schedule: the :class:`DQASchedule`; dtype: ``torch.complex64`` or ``torch.complex128``; group: driver
            block qubits.

    Returns:
        ``(B, 2**n)`` amplitudes.
    """
    n, B, dev = h.shape[-1], h.shape[0], h.device
    buffer = scratch if reuse and dev.type == "cpu" else _fresh(dev)
    size = 1 << n
    psi = buffer("dqa psi", (B, size), dtype).copy_(_initial_row(n, dtype, str(dev)).expand(B, size))  # S^-1 |+>^n
    buf = buffer("dqa buf", (B, size), dtype)
    layers, recur, step_b = _program(schedule)
    problem_layer = (_recurrent if recur else _direct)(h, J, schedule, dtype, buffer, layers, step_b)
    bufs, cur, views = (psi, buf), 0, None  # the state is bufs[cur]; driver blocks ping-pong between the two
    for kind, val in layers:
        if kind == "P":
            problem_layer(bufs[cur])
            continue
        ops = block_operators(n, group, val, dtype, B, str(dev))
        if views is None:  # each block's operand views of both buffers, made once
            views = [[block_operand(b, op) for op in ops] for b in bufs]
        for i, (lo, _, A) in enumerate(ops):
            if lo == 0:  # complex GEMM on the lowest qubits
                torch.mm(views[cur][i], A, out=views[1 - cur][i])
            else:  # real blocks, broadcast over the batch (no copy)
                torch.bmm(A, views[cur][i], out=views[1 - cur][i])
            cur = 1 - cur
    return bufs[cur].mul_(frame_phases(n, dtype).to(dev))


def _fresh(dev: torch.device) -> Buffer:
    """Fresh tensors on ``dev`` in place of :func:`~hybrid_attention.backends.workspace.scratch` buffers."""

    def buffer(name: str, shape: tuple, dt: torch.dtype) -> torch.Tensor:
        return torch.empty(shape, dtype=dt, device=dev)

    return buffer


@functools.lru_cache(maxsize=64)
def _initial_row(n: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    """``S^-1 |+>^n`` ``(1, 2**n)`` (cached: do not modify)."""
    return (frame_phases(n, dtype).conj() * 2.0 ** (-n / 2)).to(device)[None]


def _direct(
    h: torch.Tensor,
    J: torch.Tensor,
    schedule: DQASchedule,
    dtype: torch.dtype,
    buffer: Buffer,
    layers: tuple[tuple[str, float], ...],
    step_b: float,
) -> Callable[[torch.Tensor], None]:
    """Problem layers ``exp(-i b_k E)`` from a cos/sin pass each (schedules whose phases are no progression): a
    function applying the next one to the state, in place (``step_b`` unused: the signature of :func:`_recurrent`)."""
    B, n = h.shape
    E = _energies_into(*scaled_energies(h, J, schedule, REAL[dtype]), buffer("dqa E", (B, 1 << n), REAL[dtype]))
    vals = iter([v for kind, v in layers if kind == "P"])

    def layer(psi: torch.Tensor) -> None:
        psi.mul_(phase(-next(vals) * E))

    return layer


def _recurrent(
    h: torch.Tensor,
    J: torch.Tensor,
    schedule: DQASchedule,
    dtype: torch.dtype,
    buffer: Buffer,
    layers: tuple[tuple[str, float], ...],
    step_b: float,
) -> Callable[[torch.Tensor], None]:
    """Problem layers of the linear schedule, whose phases ``b_k`` form an arithmetic progression: ``exp(-i b_k E)``
    follows from the previous slice by one complex multiply instead of a cos/sin pass; the recurrence runs in
    complex128 so its rounding does not accumulate over the slices. With complex64 amplitudes the complex128 value is
    advanced (and cast) every _PHASE_STRIDE slices and the slices between follow in complex64 (a complex128 multiply
    and its cast cost 5x a complex64 multiply; a stride of 2 keeps the amplitude error at ~4e-7 as with the recurrence
    in complex128 throughout, 4 doubles it). The energies are float64 (:func:`energies64_into`)."""
    B, size, c128 = h.shape[0], 1 << h.shape[1], torch.complex128
    stride = 1 if dtype == c128 else _PHASE_STRIDE
    E64 = energies64_into(h, J, schedule, buffer("dqa E64", (B, size), torch.float64))
    ph, far = buffer("dqa phase", (B, size), c128), buffer("dqa far", (B, size), c128)
    near = None if dtype == c128 else buffer("dqa near", (B, size), dtype)
    b0 = next(v for kind, v in layers if kind == "P")
    _recurrence_phases(E64, b0, step_b, stride, ph, far, near, buffer("dqa angle", (B, size), torch.float64))
    if dtype == c128:
        state = {"k": 0}

        def layer128(psi: torch.Tensor) -> None:
            if state["k"] > 0:  # k = 0: ph is exp(-i b_0 E) already
                ph.mul_(far)
            state["k"] += 1
            psi.mul_(ph)

        return layer128
    phc, state = buffer("dqa phase64", (B, size), dtype), {"k": 0}

    def layer64(psi: torch.Tensor) -> None:
        k = state["k"]
        if k % stride == 0:
            if k > 0:
                ph.mul_(far)
            phc.copy_(ph)
        else:
            phc.mul_(near)
        state["k"] = k + 1
        psi.mul_(phc)

    return layer64


@functools.lru_cache(maxsize=2 * (PAIR_MAX_SPINS + 1))
def _pair_table(n: int, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(F, j, k)``: ``F`` ``(n + n (n - 1) / 2, 2**n)`` float64 with rows ``-s_i(c)`` then ``-s_j(c) s_k(c)`` for
    the pairs ``j < k`` of ``torch.triu_indices`` (cached: do not modify)."""
    S = enumerate_states(n, dtype=torch.float64)  # (2**n, n), row c = s(c)
    j, k = torch.triu_indices(n, n, offset=1)
    F = torch.cat([S, S[:, j] * S[:, k]], dim=1).T.neg().contiguous()
    return F.to(device), j.to(device), k.to(device)


def energies64_into(h: torch.Tensor, J: torch.Tensor, schedule: DQASchedule, out: torch.Tensor) -> torch.Tensor:
    """Float64 energies ``E(z)`` of the schedule-scaled problems (``field_scale``, ``coupling_scale``) into ``out``
    ``(B, 2**n)``: ``[h, J_jk (j < k)] @ F`` with the table of :func:`_pair_table` (one GEMM, a few kernel calls instead
    of the doubling's ~6 n) up to :data:`PAIR_MAX_SPINS` spins, :func:`_energies_into` beyond. The two agree to float64
    rounding (a sum of ``n + n (n - 1) / 2`` terms in a different order); no autograd."""
    B, n = h.shape
    if n > PAIR_MAX_SPINS:
        return _energies_into(*scaled_energies(h, J, schedule, torch.float64), out)
    F, j, k = _pair_table(n, str(h.device))
    fs = float(getattr(schedule, "field_scale", 1.0))
    cs = float(getattr(schedule, "coupling_scale", 1.0))
    pairs = J[..., j, k].to(torch.float64)  # (P,) shared or (B, P)
    coef = torch.cat([h.to(torch.float64) * fs, (pairs * cs).expand(B, -1)], dim=1)
    return torch.mm(coef, F, out=out)


def _recurrence_phases(
    E64: torch.Tensor,
    b0: float,
    step_b: float,
    stride: int,
    ph: torch.Tensor,
    far: torch.Tensor,
    near: torch.Tensor | None,
    ang: torch.Tensor,
) -> None:
    """The linear schedule's phase recurrence, from as few cos/sin passes over ``E64`` ``(B, 2**n)`` as possible.

    Writes ``ph = exp(-i b0 E)`` and ``far = exp(-i stride step_b E)`` (complex128) and, when given,
    ``near = exp(-i step_b E)`` (cast to its dtype); ``ang`` is float64 scratch. When the first slice is half a step
    (the midpoint slices ``t_k = (k + 1/2) dt`` of the linear schedule), one cos/sin pass gives ``ph`` and the rest are
    its powers by complex128 products (relative error ~1e-16, far below complex64's rounding); otherwise two passes.
    """
    if math.isclose(b0, step_b / 2, rel_tol=1e-12):
        phase_into(torch.mul(E64, -b0, out=ang), ph)
        torch.mul(ph, ph, out=far)  # exp(-i step_b E)
    else:
        phase_into(torch.mul(E64, -step_b, out=ang), far)
        phase_into(torch.mul(E64, -b0, out=ang), ph)
    if near is not None:
        near.copy_(far)
    if stride > 1:
        one = far if stride == 2 else far.clone()  # x.mul_(x) squares elementwise
        for _ in range(stride - 1):
            far.mul_(one)


def _energies_into(h: torch.Tensor, J: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """:func:`configuration_energies` (the same operations, so the same values) written into ``out`` ``(B, 2**n)``
    without intermediate tables; no autograd."""
    B, n = h.shape
    out[:, :1].zero_()
    for m in range(n):
        loc = h[:, m : m + 1]
        if m > 0:
            Sm = enumerate_states(m, dtype=h.dtype, device=h.device)
            loc = loc + J[..., m, :m] @ Sm.transpose(0, 1)
        half = 1 << m
        torch.add(out[:, :half], loc, out=out[:, half : 2 * half])
        out[:, :half].sub_(loc)
    return out
