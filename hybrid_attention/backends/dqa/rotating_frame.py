"""The driver layer in the rotating frame: real Kronecker blocks (shared by the statevector engines).

``exp(i x X) = S R(x) S^-1`` with ``S = diag(1, i)`` and the real rotation ``R(x) = [[cos x, -sin x], [sin x, cos x]]``.
``S^{(x) n}`` is diagonal, so it commutes with every problem layer ``exp(-i b E)``: a program of problem and driver
layers ``... D(x_2) P(b_1) D(x_1) ...`` equals ``S^{(x) n} (... R(x_2) P(b_1) R(x_1) ...) S^{-(x) n}`` with ``R(x)`` on
every qubit. So a simulator can start from ``S^-1`` of the initial state, run real driver blocks, and put ``S`` back
at the end (or drop it when only squared amplitudes are needed). A real block applied to complex amplitudes is a real
GEMM on their real view: half the flops of the complex GEMM of ``exp(i x X)^{(x) g}``; the block on the lowest qubits,
where the real view interleaves real and imaginary parts with the group's index, stays a complex GEMM.

``rotation_block(g, x)`` is ``R(x)^{(x) g}``; ``rotated_blocks`` splits ``n`` qubits into the groups of
:func:`.driver.driver_groups`; ``apply_block`` applies one block, written into a given buffer (``block_operand`` and
``apply_block_to``: the same on views made once, for loops over many layers).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

__all__ = [
    "rotation_block",
    "rotated_blocks",
    "apply_block",
    "apply_block_to",
    "block_operand",
    "block_operators",
    "frame_phases",
    "amplitude_table",
    "frame_codes",
    "Block",
]

_NP = {torch.complex64: np.complex64, torch.complex128: np.complex128}
_NP_REAL = {torch.complex64: np.float32, torch.complex128: np.float64}

Block = tuple[int, int, torch.Tensor, torch.Tensor]  # (lo, g, real block, its transpose as a complex matrix)


def rotation_block(g: int, x: float) -> np.ndarray:
    """``R(x)^{(x) g}`` ``(2**g, 2**g)`` float64: ``R[i, j] = cos^(g - d) sin^d (-1)^popcount(j & ~i)``, ``d`` the
    Hamming distance of ``i`` and ``j`` (one qubit: ``[[cos x, -sin x], [sin x, cos x]]``); ``exp(i x sum_j X_j)`` on
    ``g`` qubits is ``S R S^-1`` with ``S = diag(1, i)^{(x) g}``."""
    return amplitude_table(g, x)[frame_codes(g)].T  # frame_codes is indexed [input, output]


def amplitude_table(m: int, x: float) -> np.ndarray:
    """``[cos^(m - d) sin^d (-1)^p]`` ordered by ``(d, p)``, ``d = 0..m``, ``p = 0, 1``."""
    c, s = math.cos(x), math.sin(x)
    d = np.arange(m + 1)
    mag = c ** (m - d) * s**d
    return np.stack([mag, -mag], axis=-1).reshape(-1)


_CODES: dict[int, np.ndarray] = {}


def frame_codes(m: int) -> np.ndarray:
    """``code[b, b'] = 2 popcount(b ^ b') + (popcount(b & ~b') mod 2)`` ``(2**m, 2**m)`` (cached): the index of
    ``<b'|R^{(x) m}|b>`` in :func:`amplitude_table`."""
    if m not in _CODES:
        c = np.arange(1 << m)
        pc = ((c[:, None] >> np.arange(max(m, 1))) & 1).sum(-1)
        b, bp = c[:, None], c[None, :]
        _CODES[m] = 2 * pc[b ^ bp] + pc[b & ~bp & ((1 << m) - 1)] % 2
    return _CODES[m]


@functools.lru_cache(maxsize=256)
def rotated_blocks(n: int, group: int, x: float, dtype: torch.dtype) -> list[Block]:
    """The rotated driver layer ``R(x)^{(x) n}`` as Kronecker blocks ``(lo, g, block, its complex transpose)`` (CPU;
    cached: do not modify them)."""
    out = []
    from .driver import driver_groups

    for lo, g in driver_groups(n, group):
        M = rotation_block(g, x)
        out.append((lo, g, torch.from_numpy(M.astype(_NP_REAL[dtype])), torch.from_numpy(M.T.astype(_NP[dtype]))))
    return out


def apply_block(z: torch.Tensor, out: torch.Tensor, block: Block) -> torch.Tensor:
    """One Kronecker block of a rotated driver layer on ``z`` ``(R, 2**m)`` complex into ``out`` (same shape)."""
    apply_block_to(block_operand(z, block), block_operand(out, block), block)
    return out


def block_operand(z: torch.Tensor, block: Block) -> torch.Tensor:
    """The view of ``z`` ``(R, 2**m)`` complex (contiguous) that ``block`` multiplies: ``(R 2**m / 2**g, 2**g)``
    complex for the block on the lowest qubits (real and imaginary parts interleave with the group's index: a complex
    GEMM), else the real view ``(R 2**m / 2**(lo + g), 2**g, 2**(lo + 1))``. A loop over many layers can make these
    views once per buffer (each view is a few microseconds of Python per call)."""
    lo, g = block[0], block[1]
    if lo == 0:
        return z.view(-1, 1 << g)
    return torch.view_as_real(z).view(-1, 1 << g, 2 << lo)


def apply_block_to(zv: torch.Tensor, outv: torch.Tensor, block: Block) -> None:
    """:func:`apply_block` on operands from :func:`block_operand`, written into ``outv``. The real blocks are one
    ``bmm`` with the block broadcast over the batch (``matmul`` of a matrix by a batch measured 3-5x the call overhead
    and up to 1.3x the time at n = 10)."""
    lo, g, M, MT = block
    if lo == 0:
        torch.mm(zv, MT, out=outv)
    else:
        torch.bmm(M.expand(zv.shape[0], 1 << g, 1 << g), zv, out=outv)


@functools.lru_cache(maxsize=1024)
def block_operators(
    n: int, group: int, x: float, dtype: torch.dtype, rows: int, device: str = "cpu"
) -> tuple[tuple[int, int, torch.Tensor], ...]:
    """:func:`rotated_blocks` as the operands of one GEMM each on the :func:`block_operand` views of a ``(rows, 2**n)``
    state: ``(lo, g, A)`` with ``A`` the complex transpose for the block on the lowest qubits (``mm(view, A)``), else the
    real block broadcast over the view's batch (``bmm(A, view)``: an expanded view, no copy), on ``device``. Cached
    per layer angle and row count (a Trotter slice's blocks are otherwise expanded again on every call: a kernel call
    each); do not modify them."""
    out = []
    for lo, g, M, MT in rotated_blocks(n, group, x, dtype):
        if lo == 0:
            out.append((lo, g, MT.to(device)))
        else:
            out.append((lo, g, M.to(device).expand((rows << n) >> (lo + g), 1 << g, 1 << g)))
    return tuple(out)


@functools.lru_cache(maxsize=64)
def frame_phases(n: int, dtype: torch.dtype) -> torch.Tensor:
    """The diagonal of ``S^{(x) n}``: ``i^popcount(c)`` for ``c < 2**n`` (``dtype`` complex; cached: do not modify)."""
    c = np.arange(1 << n)
    pc = ((c[:, None] >> np.arange(max(n, 1))) & 1).sum(-1)
    return torch.from_numpy(np.array([1, 1j, -1, -1j], dtype=_NP[dtype])[pc % 4])
