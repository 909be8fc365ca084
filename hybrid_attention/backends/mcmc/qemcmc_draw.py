"""The ``columns``-mode proposal draw of the ``qemcmc`` statevector engine (:mod:`.qemcmc_engines`), fused.

For every chain ``r`` of every problem it draws ``s'`` from ``|<s'|U|s_r>|^2``, ``U = [D(a/2) P(b) D(a/2)]^K`` the
proposal of :mod:`hybrid_attention.circuits.proposal` (``D(x) = exp(i x sum_j X_j)``, ``P(b) = exp(-i b alpha E)``),
exactly as simulating ``U`` from the basis state and drawing from the squared amplitudes would
(:func:`.qemcmc_engines.evolve_basis_states`; ``tests/backends/test_qemcmc_draw.py`` checks the draws are equal), but
with about half the arithmetic and a fraction of the kernel calls:

* **Rotating frame.** ``exp(i x X) = S R(x) S^-1`` with ``S = diag(1, i)`` and the real rotation
  ``R(x) = [[cos x, -sin x], [sin x, cos x]]``. ``S^{(x) n}`` is diagonal, so it commutes with the problem phases, and
  ``U = S^{(x) n} R(x_0) P R(x_1) P ... R(x_K) S^{-(x) n}`` (``R(x)`` on every qubit): the outer ``S`` factors only
  put phases on the prepared basis state and on the measured amplitudes, which the squared amplitudes do not see.
  Driver layers become real Kronecker blocks, applied to the complex amplitudes as real GEMMs on their real view
  (half the flops of a complex GEMM; the block on the lowest qubits, where the real view interleaves real and
  imaginary parts, stays a complex GEMM).
* **First layer written down.** ``R(x_0)^{(x) n} |s>`` is a real product state: the outer product of its low and
  high halves, each a table look-up by the Hamming distance (and sign pattern) to the chain's bits; the first
  problem phase multiplies it in the same pass.
* **Last layer only as far as the draw needs it.** The outcome's most significant qubit group is drawn from its
  marginal, which needs only that group's block (the other blocks are unitary on their own qubits and drop out of the
  sum over them); the lower groups are drawn one after the other from the slice of the state at the drawn value.
  One inverse-CDF uniform per chain, rescaled within each drawn bin: the same outcome as the inverse CDF of the whole
  distribution in index order ``c = sum_j b_j 2**j`` (up to rounding at the bin edges).
* **Cache-sized sub-chunks.** Each sub-chunk of problems (its chains' states, about ``cache_limit`` bytes) runs
  through every layer in place on two reused buffers; only the top group's output (``1/2**g`` of it is read back) is
  kept for a whole macro-chunk, whose draws then take a handful of kernel calls.

No autograd, CPU. When numba is installed, :func:`draw_basis_proposals` runs the compiled loops of
:mod:`.qemcmc_kernel` instead (``kernel="auto"``): the same draw with the chains of a problem side by side and the
driver layers one qubit at a time; this module's GEMMs remain the ``kernel="torch"`` path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from hybrid_attention.circuits.proposal import proposal_layers

from ..dqa.driver import REAL, phase_into
from ..dqa.rotating_frame import Block, amplitude_table, apply_block, block_operand, frame_codes, rotated_blocks
from ..workspace import scratch as _scratch
from . import qemcmc_kernel as compiled

__all__ = ["draw_basis_proposals"]

_NP = {torch.complex64: np.complex64, torch.complex128: np.complex128}
_NP_REAL = {torch.complex64: np.float32, torch.complex128: np.float64}
#: the draw's loops: ``auto`` (compiled when numba is installed), ``compiled`` (:mod:`.qemcmc_kernel`), ``torch``
KERNELS = ("auto", "compiled", "torch")
#: macro-chunk (rows whose top-group output is kept for one draw) in units of ``cache_limit``
_MACRO = 16


def _half_amplitudes(bits: np.ndarray, m: int, x: float, dtype: torch.dtype) -> torch.Tensor:
    """``<b'|R(x)^{(x) m}|bits_r>`` ``(R, 2**m)`` (real values, in the complex ``dtype``) for every row's input: rows
    of the ``(2**m, 2**m)`` table (one gather of ``R`` rows, not one per amplitude)."""
    return torch.from_numpy(amplitude_table(m, x).astype(_NP[dtype])[frame_codes(m)]).index_select(
        0, torch.from_numpy(bits)
    )


def _phases_into(E: torch.Tensor, v: float, angle: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``exp(-i v E)`` into the complex ``out`` (``angle``: scratch of ``E``'s shape and dtype). float32: numpy's
    sine and cosine (vectorised for float32; torch's ran ~1.7x slower on AVX2), within a few float32 ulps of torch's,
    so a draw can change only where its uniform lies that close to a bin edge (``tests/backends/test_qemcmc_draw.py``
    counts them)."""
    torch.mul(E, -v, out=angle)
    if angle.dtype != torch.float32:
        return phase_into(angle, out)
    a, o = angle.numpy(), torch.view_as_real(out).numpy()
    np.cos(a, out=o[..., 0])
    np.sin(a, out=o[..., 1])
    return out


def _draw_group(p: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse-CDF draw of one index per row of the unnormalised weights ``p`` ``(R, G)`` at the uniforms ``u`` ``(R,)``
    float64: ``(t (R,) int64, u')``, ``u'`` the position of ``u`` within the drawn bin rescaled to ``[0, 1]`` (the
    uniform of the next, conditional, draw). numpy: these arrays are small, and numpy's calls cost a third of torch's;
    but the cumulative sums in torch (numpy's ``cumsum`` along rows runs ~10x slower; the same sequential sums)."""
    cdf = torch.cumsum(torch.from_numpy(p).to(torch.float64), dim=-1).numpy()
    target = u * cdf[:, -1]
    t = np.minimum((cdf < target[:, None]).sum(-1), p.shape[-1] - 1)  # searchsorted, left side, per row
    rows = np.arange(len(t))
    pt = p[rows, t].astype(np.float64)
    below = cdf[rows, t] - pt
    return t, np.clip((target - below) / np.where(pt > 0, pt, 1.0), 0.0, 1.0)


def _weights(y: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """``sum_l |y[r, t, l]|^2`` ``(R, G)`` of ``y`` ``(R, G, L)`` complex: the norm of the real view (one pass, no
    temporary; torch's complex ``vector_norm`` is ~50x slower on CPU), squared."""
    R, G = y.shape[0], y.shape[1]
    w = torch.linalg.vector_norm(torch.view_as_real(y).view(R, G, -1), dim=-1, out=out)
    return w.square_()


def _squared(z: torch.Tensor) -> np.ndarray:
    """``|z|^2`` ``(R, L)`` float of ``z`` ``(R, L)`` complex, from its real view in numpy (torch's reductions over the
    real view's last axis of 2 run ~10x slower)."""
    zr = torch.view_as_real(z).numpy()
    return np.square(zr[..., 0]) + np.square(zr[..., 1])


def _draw_low(z: torch.Tensor, blocks: list[Block], u: np.ndarray) -> np.ndarray:
    """The lower groups' bits ``(R,)`` of the outcome, drawn from the most significant group of ``blocks`` down;
    ``z`` ``(R, 2**m)`` holds each row's state (before the layer) at its drawn higher groups."""
    R = z.shape[0]
    rows, idx = torch.arange(R), np.zeros(R, dtype=np.int64)
    for block in reversed(blocks):
        lo, g = block[0], block[1]
        y = apply_block(z, torch.empty_like(z), block).view(R, 1 << g, 1 << lo)
        t, u = _draw_group(_weights(y).numpy() if lo else _squared(y.view(R, -1)), u)
        idx += t << lo
        if lo:
            z = y[rows, torch.from_numpy(t)]
    return idx


def _middle_calls(middle: list, blocks: dict, work: torch.Tensor, rows: int, size: int) -> tuple[list, torch.Tensor]:
    """The kernel calls of the middle layers on a sub-chunk of ``rows`` rows in the ping-pong buffers ``work``
    ``(2, >= rows, size)``, their operand views made once (a view is a few microseconds of Python; a call has ~10 of
    them): ``([("P", value, state view (rows, size)) | ("G", gemm, args, out)], the buffer holding the result)``."""
    cur, buf = work[0, :rows], work[1, :rows]
    calls: list = []
    for kd, val in middle:
        if kd == "P":
            calls.append(("P", val, cur))
            continue
        for block in blocks[val]:
            lo, g, M, MT = block
            zv, ov = block_operand(cur, block), block_operand(buf, block)
            if lo == 0:
                calls.append(("G", torch.mm, (zv, MT), ov))
            else:
                calls.append(("G", torch.bmm, (M.expand(zv.shape[0], 1 << g, 1 << g), zv), ov))
            cur, buf = buf, cur
    return calls, cur


def draw_basis_proposals(
    idx: Any,
    E: torch.Tensor,
    a: Any,
    b: Any,
    steps: int,
    u: Any,
    *,
    dtype: torch.dtype = torch.complex64,
    group: int = 4,
    cache_limit: int = 2 << 20,
    kernel: str = "auto",
) -> np.ndarray:
    """One proposal per chain from ``|<s'|U|idx>|^2`` (module docstring).

    Args:
        idx: ``(N, C)`` int64 basis states (numpy or torch), ``C`` chains per problem.
        E: ``(N, 2**n)`` real, each problem's ``alpha E(z)`` (the proposal's problem term).
        a, b, steps: driver and problem phases per slice (``(steps,)`` or numbers) and the Trotter steps, as
            :func:`.qemcmc_engines.evolve_proposal`.
        u: ``(N * C,)`` float64 uniforms in ``[0, 1)`` (numpy or torch), row ``p * C + c`` for chain ``c`` of
            problem ``p``.
        dtype: ``torch.complex64`` or ``torch.complex128``; group: qubits per Kronecker block;
        cache_limit: bytes of one sub-chunk's working set (torch kernel).
        kernel: ``"compiled"`` (:mod:`.qemcmc_kernel`: numba, every chain of a problem side by side, one qubit at
            a time; ``python -m bench.qemcmc`` times the two side by side), ``"torch"`` (this module's GEMMs) or
            ``"auto"`` (default: compiled when numba is installed). The two draw the same proposals up to rounding
            at the bin edges.

    Returns:
        ``(N, C)`` int64 numpy proposals: the inverse CDF of ``|U|idx>|^2`` at ``u`` (up to rounding at the bin
        edges).
    """
    idx = np.asarray(idx, dtype=np.int64)
    u = np.asarray(u, dtype=np.float64)
    N, C = idx.shape
    size = E.shape[-1]
    n = int(size).bit_length() - 1
    real = REAL[dtype]
    layers = proposal_layers(a, b, steps)
    if layers[0][0] != "D" or layers[-1][0] != "D":
        raise ValueError("draw_basis_proposals: the proposal must start and end with a driver layer")
    if kernel not in KERNELS:
        raise ValueError(f"draw_basis_proposals: kernel must be one of {KERNELS}, got {kernel!r}")
    if kernel == "compiled" and not compiled.available():
        raise ImportError("draw_basis_proposals: kernel='compiled' needs numba: pip install numba (or kernel='torch')")
    if N == 0:
        return np.empty((0, C), dtype=np.int64)
    if kernel == "compiled" or kernel == "auto" and compiled.available():
        E = E.detach().cpu().numpy() if isinstance(E, torch.Tensor) else np.asarray(E)
        return compiled.draw(idx, E, layers, u, _NP_REAL[dtype])
    (_, x0), middle, (_, x_last) = layers[0], layers[1:-1], layers[-1]
    blocks = {v: rotated_blocks(n, group, v, dtype) for kd, v in layers[1:] if kd == "D"}
    *low, top = blocks[x_last]
    lo_t, g_t = top[0], top[1]
    h = n // 2  # the prepared product state's low half
    flat = idx.reshape(-1)
    hi_amp = _half_amplitudes(flat >> h, n - h, x0, dtype)  # (N * C, 2**(n - h)), real values
    lo_amp = _half_amplitudes(flat & ((1 << h) - 1), h, x0, dtype)  # (N * C, 2**h)
    pvals = sorted({v for kd, v in layers if kd == "P"})
    ph_all = _scratch("phases", (len(pvals), N, size), dtype)
    angle = _scratch("angle", (N, size), E.dtype)
    phases = {v: _phases_into(E, v, angle, ph_all[k]) for k, v in enumerate(pvals)}  # (N, 2**n) each
    # the middle layers start with a problem layer: multiplied in with the prepared state
    first, inner = middle[0][1], middle[1:]
    per = max(1, cache_limit // (size * torch.empty(0, dtype=dtype).element_size() * 3) // C)  # problems/sub-chunk
    macro = min(N, per * _MACRO)
    work = _scratch("work", (2, min(per, N) * C, size), dtype)  # ping-pong buffers, reused by every sub-chunk
    Y = _scratch("top", (macro * C, 1 << g_t, 1 << lo_t), dtype)  # the top group's output of a macro-chunk
    W = _scratch("weights", (macro * C, 1 << g_t), real)  # its group weights
    std = min(per, N)  # problems of every sub-chunk but a last partial one: their calls made once
    full = _middle_calls(inner, blocks, work, std * C, size)
    out = np.empty(N * C, dtype=np.int64)
    for m0 in range(0, N, macro):
        m1 = min(N, m0 + macro)
        for p0 in range(m0, m1, per):
            p1 = min(m1, p0 + per)
            P, rows = p1 - p0, slice(p0 * C, p1 * C)
            calls, cur = full if P == std else _middle_calls(inner, blocks, work, P * C, size)
            _prepare(work[0, : P * C], hi_amp[rows], lo_amp[rows], phases[first][p0:p1], P, C)
            for call in calls:
                if call[0] == "P":
                    call[2].view(P, C, size).mul_(phases[call[1]][p0:p1, None, :])
                else:
                    call[1](*call[2], out=call[3])
            r0, r1 = (p0 - m0) * C, (p1 - m0) * C
            apply_block(cur, Y[r0:r1].view(P * C, size), top)
            if lo_t:  # while in cache
                _weights(Y[r0:r1], out=W[r0:r1])
            else:  # (a single block: the real view's last axis is 2)
                W[r0:r1].numpy()[:] = _squared(Y[r0:r1].view(P * C, -1))
        R = (m1 - m0) * C
        y = Y[:R]
        t, u_low = _draw_group(W[:R].numpy(), u[m0 * C : m1 * C])
        drawn = t << lo_t
        if low:
            drawn += _draw_low(y[torch.arange(R), torch.from_numpy(t)], low, u_low)
        out[m0 * C : m1 * C] = drawn
    return out.reshape(N, C)


def _prepare(cur: torch.Tensor, hi: torch.Tensor, lo: torch.Tensor, ph: Any, P: int, C: int) -> None:
    """``cur`` ``(P * C, 2**n)`` = the product states ``hi (x) lo`` times the problem phases ``ph`` ``(P, 2**n)`` (all
    complex; none: no phases) in two passes (broadcasts over the real view are ~3x slower)."""
    H, L = hi.shape[1], lo.shape[1]
    out = cur.view(P, C, H, L)
    torch.mul(hi.view(P, C, H, 1), ph.view(P, 1, H, L) if ph is not None else 1.0, out=out)
    out.mul_(lo.view(P, C, 1, L))
