"""Compiled (numba) ``columns``-mode proposal draw of the ``qemcmc`` statevector engine: one problem at a time, its
chains side by side.

The same draw as :func:`.qemcmc_draw.draw_basis_proposals` (its module docstring: rotating frame, first layer written
down, last layer only as far as the draw needs it), with a different layout and less arithmetic:

* **Chains innermost.** A problem's ``C`` chains share its problem phases, so its state is one ``(2**n, 2 C)`` real
  array: row ``z`` holds the real parts of the ``C`` chains' amplitudes at ``z``, then their imaginary parts. Every
  operation is then a loop over a contiguous row of ``2 C`` floats (vectorised by LLVM), whatever qubit it acts on,
  and the whole state stays in cache (256 KiB at ``n = 12``, ``C = 8``, float32).
* **One qubit at a time.** A driver layer ``R(x)^{(x) n}`` is applied as ``n`` two-row rotations, two qubits per pass
  over the state (4 multiply-adds per amplitude and qubit, against 16 per amplitude and block of four qubits as a
  dense Kronecker block).
* **The last layer bit by bit.** Its rotations on the ``top`` most significant qubits run on every chain at once;
  each chain then draws those bits from their marginal, takes the slice of its state at the drawn value and draws
  the lower bits one after another, each after the rotation of its own qubit (the rotations of the lower qubits are
  unitary on them and drop out of each marginal). One inverse-CDF uniform per chain, rescaled within each drawn bin:
  the same outcome as the inverse CDF of the whole distribution in index order (up to rounding at the bin edges).

The problem phases ``exp(-i v alpha E)`` are computed before the loop by numpy's vectorised sine and cosine, as the
torch path does (:func:`.qemcmc_draw._phases_into`). Compiled on first use and cached on disk by numba (the ``fast``
extra); :func:`.qemcmc_draw.draw_basis_proposals` calls it when numba is installed (``kernel="auto"``).
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import torch

from ..workspace import scratch as _scratch

__all__ = ["available", "draw"]

#: qubits of the last layer rotated on all chains at once before each chain draws on alone
TOP = 4
_LOOPS: dict[str, object] = {}


def available() -> bool:
    """Whether the compiled draw can run (``numba`` importable; not imported here)."""
    return importlib.util.find_spec("numba") is not None


def _jit(name: str):
    """The jitted ``name`` (compiled on first use, cached on disk), its helpers (:data:`_HELPERS`) compiled first."""
    if name not in _LOOPS:
        import numba

        opts = {"cache": True, "nogil": True, "fastmath": True, "error_model": "numpy"}
        for helper in _HELPERS:
            if helper not in _LOOPS:
                _LOOPS[helper] = globals()[helper] = numba.njit(**opts)(globals()[helper])
        _LOOPS[name] = numba.njit(**opts)(globals()[name])
    return _LOOPS[name]


def _rotate(f, q, W, c, s):
    """The rotation ``[[c, -s], [s, c]]`` of qubit ``q`` on the state ``f``, a ``(2**n, W)`` array flattened: for each
    pair of row blocks ``j0 : j0 + 2**q`` and ``j0 + 2**q : j0 + 2**(q + 1)``, one loop over the two as separate
    contiguous views (LLVM vectorises this form; a loop over rows with the ``W`` columns innermost, or over one array
    at two offsets, ran slower in trials at ``W = 16``)."""
    h = (1 << q) * W
    for j0 in range(0, len(f), 2 * h):
        x = f[j0 : j0 + h]
        y = f[j0 + h : j0 + 2 * h]
        for i in range(h):
            a = x[i]
            b = y[i]
            x[i] = c * a - s * b
            y[i] = s * a + c * b


def _rotate2(f, q, W, c, s):
    """:func:`_rotate` of qubits ``q`` and ``q + 1`` in one pass over the state (four contiguous views per block: half
    the passes through memory)."""
    h = (1 << q) * W
    for j0 in range(0, len(f), 4 * h):
        x0 = f[j0 : j0 + h]
        x1 = f[j0 + h : j0 + 2 * h]
        x2 = f[j0 + 2 * h : j0 + 3 * h]
        x3 = f[j0 + 3 * h : j0 + 4 * h]
        for i in range(h):
            a, b, d, e = x0[i], x1[i], x2[i], x3[i]
            a1 = c * a - s * b
            b1 = s * a + c * b
            d1 = c * d - s * e
            e1 = s * d + c * e
            x0[i] = c * a1 - s * d1
            x2[i] = s * a1 + c * d1
            x1[i] = c * b1 - s * e1
            x3[i] = s * b1 + c * e1


def _layer(f, lo, n, W, c, s):
    """The rotations of qubits ``lo .. n - 1`` on ``f`` (two qubits per pass)."""
    q = lo
    while q + 1 < n:
        _rotate2(f, q, W, c, s)
        q += 2
    if q < n:
        _rotate(f, q, W, c, s)


def _phase(psi, cz, sz, C):
    """``psi *= cz + i sz`` (per row ``z``; real parts in columns ``:C``, imaginary parts in ``C:``)."""
    for z in range(psi.shape[0]):
        cc = cz[z]
        ss = sz[z]
        for m in range(C):
            re = psi[z, m]
            im = psi[z, C + m]
            psi[z, m] = re * cc - im * ss
            psi[z, C + m] = re * ss + im * cc


def _pick(w, total, u):
    """Inverse-CDF draw from the non-negative weights ``w`` (float64, summing to ``total``) at the uniform ``u``:
    ``(index, u rescaled within the drawn bin)``."""
    target = u * total
    acc = 0.0
    t = 0
    last = len(w) - 1
    while t < last and acc + w[t] < target:
        acc += w[t]
        t += 1
    wt = w[t]
    r = (target - acc) / wt if wt > 0 else 1.0
    return t, min(max(r, 0.0), 1.0)


def _draw_loop(idx, cos_ph, sin_ph, kinds, cs, sn, which, c0, s0, cl, sl, u, top, out):
    """Body of the compiled draw (:func:`draw`); plain Python in numba's nopython subset."""
    N, C = idx.shape
    size = cos_ph.shape[2]
    n = 0
    while (1 << n) < size:
        n += 1
    W = 2 * C
    dt = cos_ph.dtype
    flat = np.empty(size * W, dtype=dt)
    psi = flat.reshape((size, W))
    r0 = np.empty(C, dtype=dt)
    r1 = np.empty(C, dtype=dt)
    g = min(top, n)
    lo = n - g
    G = 1 << g
    L = 1 << lo
    wt = np.empty((G, C), dtype=np.float64)
    wcol = np.empty(G, dtype=np.float64)
    vre = np.empty(L, dtype=dt)
    vim = np.empty(L, dtype=dt)
    layers = len(kinds)
    for p in range(N):
        # the first driver layer on each chain's basis state: a real product state, built one qubit at a time
        for m in range(C):
            psi[0, m] = 1.0
        for q in range(n):
            h = 1 << q
            for m in range(C):
                if (idx[p, m] >> q) & 1:
                    r0[m] = -s0
                    r1[m] = c0
                else:
                    r0[m] = c0
                    r1[m] = s0
            for k in range(h):
                for m in range(C):
                    v = psi[k, m]
                    psi[k, m] = v * r0[m]
                    psi[k + h, m] = v * r1[m]
        start = 0
        if layers > 0 and kinds[0] == 1:  # a problem layer next: multiplied into the real product state
            k = which[0]
            for z in range(size):
                cc = cos_ph[k, p, z]
                ss = sin_ph[k, p, z]
                for m in range(C):
                    v = psi[z, m]
                    psi[z, m] = v * cc
                    psi[z, C + m] = v * ss
            start = 1
        else:
            for z in range(size):
                for m in range(C):
                    psi[z, C + m] = 0.0
        for li in range(start, layers):
            if kinds[li] == 1:
                _phase(psi, cos_ph[which[li], p], sin_ph[which[li], p], C)
            else:
                _layer(flat, 0, n, W, cs[li], sn[li])
        # the last driver layer: its top g qubits on every chain, then each chain's draw
        _layer(flat, lo, n, W, cl, sl)
        for t in range(G):
            for m in range(C):
                wt[t, m] = 0.0
            for k in range(t * L, (t + 1) * L):
                for m in range(C):
                    a = np.float64(psi[k, m])
                    b = np.float64(psi[k, C + m])
                    wt[t, m] += a * a + b * b
        for m in range(C):
            total = 0.0
            for t in range(G):
                wcol[t] = wt[t, m]
                total += wcol[t]
            t, ur = _pick(wcol, total, u[p * C + m])
            base = t * L
            for k in range(L):
                vre[k] = psi[base + k, m]
                vim[k] = psi[base + k, C + m]
            off = 0
            for q in range(lo - 1, -1, -1):  # the lower bits, most significant first
                h = 1 << q
                w0 = 0.0
                w1 = 0.0
                for k in range(h):
                    a, b = vre[off + k], vre[off + k + h]
                    x, y = cl * a - sl * b, sl * a + cl * b
                    vre[off + k], vre[off + k + h] = x, y
                    a2, b2 = vim[off + k], vim[off + k + h]
                    x2, y2 = cl * a2 - sl * b2, sl * a2 + cl * b2
                    vim[off + k], vim[off + k + h] = x2, y2
                    w0 += np.float64(x) * x + np.float64(x2) * x2
                    w1 += np.float64(y) * y + np.float64(y2) * y2
                target = ur * (w0 + w1)
                if w0 < target:
                    base += h
                    off += h
                    ur = (target - w0) / w1 if w1 > 0 else 1.0
                else:
                    ur = target / w0 if w0 > 0 else 1.0
                ur = min(max(ur, 0.0), 1.0)
            out[p * C + m] = base


#: the jitted functions that the loop calls, compiled before it (:func:`_jit`)
_HELPERS = ("_rotate", "_rotate2", "_layer", "_phase", "_pick")


def draw(idx: np.ndarray, E: np.ndarray, layers: list, u: np.ndarray, dtype: type = np.float32, top: int = TOP):
    """One proposal per chain from ``|<s'|U|idx>|^2`` for the program ``layers`` (:func:`proposal_layers`: driver
    and problem layers, starting and ending with a driver layer).

    Args:
        idx: ``(N, C)`` int64 basis states. E: ``(N, 2**n)`` each problem's ``alpha E(z)`` (numpy).
        layers: ``[("D", x) | ("P", v), ...]``. u: ``(N * C,)`` float64 uniforms, row ``p * C + c``.
        dtype: ``np.float32`` (complex64 amplitudes) or ``np.float64``. top: :data:`TOP`.

    Returns:
        ``(N, C)`` int64 proposals (the inverse CDF of ``|U|idx>|^2`` at ``u``, up to rounding at the bin edges).
    """
    if layers[0][0] != "D" or layers[-1][0] != "D":
        raise ValueError(f"qemcmc_kernel.draw: the program must start and end with a driver layer, got {layers}")
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"qemcmc_kernel.draw: dtype must be np.float32 or np.float64, got {dtype}")
    N, C = idx.shape
    size = E.shape[-1]
    (_, x0), middle, (_, xl) = layers[0], layers[1:-1], layers[-1]
    pvals = sorted({v for kd, v in layers if kd == "P"})
    Ed = np.ascontiguousarray(E, dtype=dtype)
    real = torch.float32 if dtype == np.float32 else torch.float64
    # reused buffers (fresh ones of this size cost a page fault per 4 KiB on every call)
    cos_ph = _scratch("kernel cos", (len(pvals), N, size), real).numpy()
    sin_ph = _scratch("kernel sin", (len(pvals), N, size), real).numpy()
    angle = _scratch("kernel angle", (N, size), real).numpy()
    for k, v in enumerate(pvals):  # exp(-i v E) = cos(-v E) + i sin(-v E)
        np.multiply(Ed, dtype(-v), out=angle)
        np.cos(angle, out=cos_ph[k])
        np.sin(angle, out=sin_ph[k])
    kinds = np.array([kd == "P" for kd, _ in middle], dtype=np.int64)
    cs = np.array([math.cos(v) if kd == "D" else 0.0 for kd, v in middle], dtype=dtype)
    sn = np.array([math.sin(v) if kd == "D" else 0.0 for kd, v in middle], dtype=dtype)
    which = np.array([pvals.index(v) if kd == "P" else 0 for kd, v in middle], dtype=np.int64)
    out = np.empty(N * C, dtype=np.int64)
    f = dtype
    _jit("_draw_loop")(
        np.ascontiguousarray(idx, dtype=np.int64),
        cos_ph,
        sin_ph,
        kinds,
        cs,
        sn,
        which,
        f(math.cos(x0)),
        f(math.sin(x0)),
        f(math.cos(xl)),
        f(math.sin(xl)),
        np.ascontiguousarray(u, dtype=np.float64),
        int(top),
        out,
    )
    return out.reshape(N, C)
