"""The banded engine's block sweeps (dense, or factorised over half-windows) with their explicit adjoints.

Used by :func:`hybrid_attention.banded.layer_log_alpha` and :func:`~hybrid_attention.banded.log_marginals`
(docs/banded.md).

A block of ``k = W`` positions replaces the whole window, so one block is a ``2**k x 2**k`` transfer matrix
``M(w_out, w_in) = exp(beta E(w_out, w_in))``. It factorises over half-windows: with each window's ``k`` bits split
into ``lo`` newer bits (bits ``t < lo``, spins ``p - t``) and ``hi = k - lo`` older ones, a new spin ``p - t`` couples
only to old spins at most ``W`` back (old bit ``t' <= t``), so the newer half of ``w_out`` never meets the older half of
``w_in``, and ``M(o, i) = K1(o_hi, i_hi) K2[o_hi](o_lo, i_lo)``: ``K1`` the couplings between the older halves,
``K2`` every coupling into the newer half of ``w_in`` plus those inside the block. Applied to a message it is two
contractions of ``2**(3k/2)`` multiply-adds per column (``2 * 2**12`` at ``k = 8``) instead of ``2**(2k)`` (``2**16``),
and with messages laid out ``(P, G, 2**hi, columns, 2**lo)`` both are plain (batched) matrix products: ``K1`` times the
message viewed as ``(2**hi, columns * 2**lo)``, then per older half a ``(columns, 2**lo) x (2**lo, 2**lo)`` product.
``lo = 0`` is the dense matrix, ``K2`` then folded into ``K1`` (the dispatch serves bands below :data:`SPLIT_MIN_W`
with :class:`DenseBlockSweepFn`, the dense engine of the same recursions in a ``(P, G, columns, 2**k)`` layout).

Everything else follows the dense engine: per-column rescaling of the messages (detached constants that cancel),
the posterior ``A * B`` of each block window summed per bit, and the gradient as the adjoint of the two sweeps; the
factorised forward keeps the half-products ``K1 A`` and ``X K2`` that the adjoint needs again. Message and scratch
buffers come from :mod:`hybrid_attention.banded_workspace` (kept between calls, no page faults per step).
"""

from __future__ import annotations

from typing import Any

import torch

from . import banded_workspace as workspace

__all__ = ["BlockSweepFn", "DenseBlockSweepFn", "block_energies", "split", "state_bits", "SPLIT_MIN_W"]

#: the narrowest band whose transfer matrices are applied factorised (below it the dense product is faster: the
#: factors' matrix products are too small to run near the machine's matrix-product rate)
SPLIT_MIN_W = 8


def split(k: int) -> int:
    """The number of newer (low) bits of a block window of ``k`` bits that the factorised product splits off."""
    return k // 2 if k >= SPLIT_MIN_W else 0


def state_bits(k: int, device: Any) -> torch.Tensor:
    """``(2**k, k)`` bits of the window states: column ``t`` is bit ``t`` of the state index (spin ``p - t``)."""
    w = torch.arange(1 << k, device=device)
    return (w[:, None] >> torch.arange(k, device=device)) & 1


def _spins(k: int, like: torch.Tensor) -> torch.Tensor:
    return (1 - 2 * state_bits(k, like.device)).to(like.dtype)


def _onehot(k: int, like: torch.Tensor) -> torch.Tensor:
    """``(2**k, 2k)``: state ``w`` has a 1 in column ``2 t + bit t of w``."""
    if not k:
        return like.new_zeros(1, 0)
    oh = torch.nn.functional.one_hot(2 * torch.arange(k, device=like.device) + state_bits(k, like.device), 2 * k)
    return oh.sum(1).to(like.dtype)


def factors(C: torch.Tensor, lo: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``beta E1 (..., 2**hi, 2**hi)`` and ``beta E2 (..., 2**hi, 2**lo, 2**lo)`` of the block tables ``C (..., k,
    2k)`` (``C[t, u]``: spin ``p - t`` with bit ``u`` of ``w_out``, ``u < k``, or bit ``u - k`` of ``w_in``), with
    ``beta E(o, i) = E1(o_hi, i_hi) + E2(o_hi, o_lo, i_lo)``; for ``lo = 0`` all of it is in ``E1`` (``E2`` empty)."""
    k = C.shape[-2]
    hi = k - lo
    S, Sh, Sl = _spins(k, C), _spins(hi, C), _spins(lo, C)
    quad = ((S @ C[..., :k]) * S).sum(-1)  # (..., 2^k): the couplings inside the block
    E1 = (Sh @ C[..., lo:, k + lo :]) @ Sh.T  # older halves: out bit t >= lo with in bit t' >= lo
    if not lo:
        return E1 + quad[..., None], C.new_zeros(0)
    E2 = (S @ C[..., :, k : k + lo]) @ Sl.T + quad[..., None]  # (..., 2^k, 2^lo): every coupling into in bits < lo
    return E1, E2.unflatten(-2, (1 << hi, 1 << lo))


def factor_grads(gE1: torch.Tensor, gE2: torch.Tensor, k: int, lo: int) -> torch.Tensor:
    """The adjoint of :func:`factors`: ``dL/dC (..., k, 2k)`` from ``dL/dE1``, ``dL/dE2``."""
    hi = k - lo
    S, Sh, Sl = _spins(k, gE1), _spins(hi, gE1), _spins(lo, gE1)
    g = gE1.new_zeros(*gE1.shape[:-2], k, 2 * k)
    g[..., lo:, k + lo :] = Sh.T @ gE1 @ Sh
    if lo:
        gE2 = gE2.flatten(-3, -2)  # (..., 2^k, 2^lo)
        g[..., :, k : k + lo] = S.T @ gE2 @ Sl
        gq = gE2.sum(-1)
    else:
        gq = gE1.sum(-1)
    g[..., :k] = (S.T * gq.unsqueeze(-2)) @ S
    return g


class _Ops:
    """The factorised transfer matrix of one block: ``K1 (P, G, Hh, Hh)``, ``K2 (P, G, Hh, Hl, Hl)`` (or ``None``),
    applied to messages ``(P, G, Hh, N, Hl)`` (any ``N``-slice of a contiguous buffer)."""

    def __init__(self, K1: torch.Tensor, K2: torch.Tensor | None):
        self.K1, self.K2 = K1, K2
        self.K2T = None if K2 is None else K2.transpose(-1, -2)

    def step1(self, A: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``U[o_hi, n, i_lo] = sum_{i_hi} K1[o_hi, i_hi] A[i_hi, n, i_lo]``."""
        torch.matmul(self.K1, A.flatten(-2), out=out.flatten(-2))
        return out

    def fwd(self, A: torch.Tensor, out: torch.Tensor, tmp: torch.Tensor) -> torch.Tensor:
        """``M A`` per column (``tmp``, ``out``: buffers shaped like ``A``)."""
        if self.K2 is None:
            return self.step1(A, out)
        return torch.matmul(self.step1(A, tmp), self.K2T, out=out)

    def adj1(self, X: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        """``L[o_hi, n, i_lo] = sum_{o_lo} X[o_hi, n, o_lo] K2[o_hi, o_lo, i_lo]`` (``X`` itself when ``lo = 0``)."""
        return X if self.K2 is None else torch.matmul(X, self.K2, out=out)

    def adj(self, X: torch.Tensor, out: torch.Tensor, tmp: torch.Tensor) -> torch.Tensor:
        """``M^T X`` per column."""
        L = self.adj1(X, tmp)
        torch.matmul(self.K1.transpose(-1, -2), L.flatten(-2), out=out.flatten(-2))
        return out

    def grad(self, g1: torch.Tensor, g2: torch.Tensor | None, L: torch.Tensor, R: torch.Tensor, Lt, Rt) -> None:
        """Add ``sum_n L[n, o] R[n, i] dM(o, i)/dK`` to ``g1``, ``g2``: ``Lt = adj1(L)``, ``Rt = step1(R)``."""
        g1 += Lt.flatten(-2) @ R.flatten(-2).transpose(-1, -2)
        if g2 is not None:
            g2 += L.transpose(-1, -2) @ Rt


def block_energies(C: torch.Tensor) -> torch.Tensor:
    """``beta E(w_out, w_in) = sum_{t,u} C[t, u] s_t s_u`` of the block tables ``C (..., k, 2k)``
    (:func:`_block_couplings`): ``(..., 2**k out, 2**k in)``, the couplings inside the block (a function of
    ``w_out``) plus those into the previous window (a bilinear form)."""
    k = C.shape[-2]
    S = (1 - 2 * state_bits(k, C.device)).to(C.dtype)  # (2^k, k) spins
    quad = ((S @ C[..., :k]) * S).sum(-1)  # (..., 2^k)
    return (S @ C[..., k:]) @ S.T + quad[..., None]


class DenseBlockSweepFn(torch.autograd.Function):
    """The block sweep with moderate fields, dense transfer matrices (bands narrower than :data:`SPLIT_MIN_W`), with
    its adjoint as the backward pass.

    Messages are kept transposed, ``(P, G, columns, 2**k)`` (a column is a slot and a row of ``R``), so the slots
    still running are a contiguous run of rows and the window state is the contiguous dimension. Forward, per block
    ``b`` (``D_b``, ``E_b`` per-column rescaling constants, detached: the marginals do not depend on them):
    ``A_b = D_b F_b * (M_b A_{b-1})``, ``B_{b-1} = E_{b-1} M_b^T X_b`` with ``X_b = F_b * B_b`` (``B = 1`` on the slots
    whose chain ends at ``b``; ``F_b`` the window's field factors), the posterior ``A_b * B_b`` of the block's window
    (every field included) and its sums ``S[t, bit]`` over the states with that bit (a matrix product with the
    state/bit incidence), so ``log P(s_{p-t} = +1) = log S[t, 0] - log(S[t, 0] + S[t, 1])``.

    Backward, the adjoint of those recursions, with ``g post = incidence @ gS``: upward, ``gB_b = g post_b * A_b +
    F_b * (M_b V_b)`` with ``V_b = E_{b-1} gB_{b-1}`` (``gM_b += X_b V_b^T``, ``g log F_b += X_b * (M_b V_b)``);
    downward, ``gA_b = g post_b * B_b + M_{b+1}^T Y_{b+1}`` with ``Y_b = D_b F_b * gA_b`` (``gM_b += Y_b
    A_{b-1}^T``, ``g log F_b += A_b * gA_b``); ``g Phi_b = incidence^T g log F_b``. Only ``A``, ``B`` and ``F`` are
    kept; every other full-size tensor lives in a few scratch buffers reused from block to block (a fresh large
    allocation costs more in page faults than the arithmetic it holds).
    """

    @staticmethod
    def forward(ctx, C: torch.Tensor, X: torch.Tensor, first: tuple, limit: float, fast: float):
        nb, P, G, Q, R, k = X.shape
        k2, S = 2 * k, 1 << k
        ctx.first, ctx.shape = first, X.shape
        M = block_energies(C)  # (P, G, nb, S, S)
        top = C.abs().sum((-2, -1))  # >= max beta E: the span is at most twice it
        span = 2 * float(top.max())
        if span > min(limit, fast / 2):  # the bound does not settle it: the exact span
            lo, top = torch.aminmax(M.view(P, G, nb, -1), dim=-1)
            span = float((top - lo).max())
        status = torch.tensor(0 if span <= min(limit, fast / 2) else 1 if span > limit else 2)
        ctx.mark_non_differentiable(status)
        if int(status):
            return X.new_empty(0), status
        M.sub_(top[..., None, None]).exp_()  # exp(beta E - max) per block
        onehot = torch.nn.functional.one_hot(2 * torch.arange(k, device=M.device) + state_bits(k, M.device), k2)
        onehot = onehot.sum(1).to(M.dtype)  # (2^k, 2k): the field entries of each window state
        Ns = [(Q - first[b]) * R for b in range(nb)]
        es = [((first[b + 1] if b + 1 < nb else Q) - first[b]) * R for b in range(nb)]  # columns ending at b
        size = P * G * S
        bufA, bufF, bufB = (workspace.take(f"dense {r}", size * sum(Ns), M, ctx) for r in "AFB")
        token = workspace.Token()  # the scratch buffers (nothing saved views them) are free again after this call
        sc1, sc2 = (workspace.take(f"dense scratch {i}", size * Ns[0], M, token) for i in range(2))
        offs = [0]
        for N in Ns:
            offs.append(offs[-1] + size * N)

        def seg(buf: torch.Tensor, b: int) -> torch.Tensor:
            return buf[offs[b] : offs[b + 1]].view(P, G, Ns[b], S)

        def scratch(buf: torch.Tensor, N: int) -> torch.Tensor:
            return buf[: size * N].view(P, G, N, S)

        # log F(w) = sum_t x_t s_t(w) - |x_t| (at most 0, 0 for the favoured spins): [x, -sum |x|] @ [spins, 1]^T
        SpT = torch.cat([1 - 2 * state_bits(k, M.device), torch.ones(S, 1, dtype=torch.long, device=M.device)], 1)
        SpT = SpT.to(M.dtype).T.contiguous()  # (k + 1, 2^k)
        Xs = []
        As, Fs, Ds = [], [], []
        A = M.new_ones(P, G, Ns[0], S)
        for b in range(nb):
            Ain = A[:, :, A.shape[2] - Ns[b] :]  # the slots still running
            Fw = seg(bufF, b)
            x = X[b, :, :, first[b] :].flatten(2, 3)  # (P, G, N, k)
            Xs.append(x)
            torch.matmul(torch.cat([x, -x.abs().sum(-1, keepdim=True)], -1), SpT, out=Fw).exp_()  # the window's fields
            At = scratch(sc1, Ns[b])
            torch.matmul(Ain, M[:, :, b].transpose(-1, -2), out=At)
            A = torch.mul(At, Fw, out=seg(bufA, b))
            D = A.amax(-1, keepdim=True).reciprocal_()
            A.mul_(D)
            As.append(A)
            Fs.append(Fw)
            Ds.append(D)
        Bs: list[torch.Tensor] = [M] * nb
        Es: list[torch.Tensor] = [M] * nb
        Ss: list[torch.Tensor] = [M] * nb
        outs: list[torch.Tensor] = [M] * nb
        for b in range(nb - 1, -1, -1):
            B = seg(bufB, b)
            if b == nb - 1:
                B.fill_(1.0)
            else:
                Xb = torch.mul(Bs[b + 1], Fs[b + 1], out=scratch(sc1, Ns[b + 1]))
                Bn = torch.matmul(Xb, M[:, :, b + 1], out=scratch(sc2, Ns[b + 1]))
                Es[b] = Bn.amax(-1, keepdim=True).reciprocal_()
                B[:, :, : es[b]].fill_(1.0)
                torch.mul(Bn, Es[b], out=B[:, :, es[b] :])
            Bs[b] = B
            Sb = torch.mul(As[b], B, out=scratch(sc1, Ns[b])) @ onehot  # (P, G, N, 2k)
            Ss[b] = Sb
            S0, S1 = Sb.view(P, G, Ns[b], k, 2).unbind(-1)
            outs[b] = S0.log() - (S0 + S1).log()
        ctx.save_for_backward(C, M, onehot, SpT, *Xs, *As, *Fs, *Bs, *Ds, *Es[:-1], *Ss)
        return torch.cat(outs, dim=2), status  # (P, G, sum_b N_b, k)

    @staticmethod
    def backward(ctx, gout: torch.Tensor, _gstatus: Any):
        first = ctx.first
        nb, P, G, Q, R, k = ctx.shape
        C, M, onehot, SpT, *saved = ctx.saved_tensors
        Xs, saved = saved[:nb], saved[nb:]
        As, Fs, Bs, Ds = (saved[i * nb : (i + 1) * nb] for i in range(4))
        Es = saved[4 * nb : 5 * nb - 1]
        Ss = saved[5 * nb - 1 :]
        S = M.shape[-1]
        Ns = [(Q - first[b]) * R for b in range(nb)]
        es = [((first[b + 1] if b + 1 < nb else Q) - first[b]) * R for b in range(nb)]
        size = P * G * S
        token = workspace.Token()  # the scratch buffers are free again once this call returns
        bufs = [workspace.take(f"dense scratch {i}", size * Ns[0], M, token) for i in range(5)]

        def scratch(i: int, N: int) -> torch.Tensor:
            return bufs[i][: size * N].view(P, G, N, S)

        ohT = onehot.T.contiguous()
        gS = []
        for b, g in enumerate(
            gout.split(Ns, dim=2)
        ):  # (P, G, N, k): d/dS0 = g S1 / (S0 (S0 + S1)), d/dS1 = -g / (S0 + S1)
            S0, S1 = Ss[b].unflatten(-1, (-1, 2)).unbind(-1)
            gZ = g / (S0 + S1)
            gS.append(torch.stack([gZ * S1 / S0, -gZ], dim=-1).flatten(-2))  # (P, G, N, 2k)
        gM = torch.zeros_like(M)
        gXall = M.new_zeros(ctx.shape)
        Sp = SpT.T.contiguous()  # (2^k, k + 1)
        gL = [M.new_zeros(*s.shape[:-1], k + 1) for s in gS]  # g log F_b @ [spins, 1]: (P, G, N, k + 1)
        gB = None
        for b in range(nb):  # upward: the adjoint of the backward messages
            gpost = torch.matmul(gS[b], ohT, out=scratch(0, Ns[b]))
            gBb = torch.mul(gpost, As[b], out=scratch(1 + b % 2, Ns[b]))
            if b:
                V = gB[:, :, es[b - 1] :].mul_(Es[b - 1])
                X = torch.mul(Bs[b], Fs[b], out=scratch(3, Ns[b]))
                gX = torch.matmul(V, M[:, :, b].transpose(-1, -2), out=scratch(4, Ns[b]))
                gM[:, :, b] += X.transpose(-1, -2) @ V
                gL[b] += X.mul_(gX) @ Sp
                gBb.addcmul_(gX, Fs[b])
            gB = gBb
        gY = None
        for b in range(nb - 1, -1, -1):  # downward: the adjoint of the forward messages
            gpost = torch.matmul(gS[b], ohT, out=scratch(0, Ns[b]))
            gA = torch.mul(gpost, Bs[b], out=scratch(1 + b % 2, Ns[b]))
            if b < nb - 1:
                # gA += gY M_{b+1} in place (no full-size temporary): one batched product into the slice
                tgt = gA[:, :, es[b] :].view(P * G, Ns[b + 1], S)
                tgt.baddbmm_(gY.view(P * G, Ns[b + 1], S), M[:, :, b + 1].reshape(P * G, S, S))
            gL[b] += torch.mul(As[b], gA, out=scratch(3, Ns[b])) @ Sp
            gY = gA.mul_(Fs[b]).mul_(Ds[b])
            Ain = As[b - 1][:, :, es[b - 1] :] if b else None
            if Ain is not None:
                gM[:, :, b] += gY.transpose(-1, -2) @ Ain
            else:  # the first block's input is all ones
                gM[:, :, b] += gY.sum(2).unsqueeze(-1).expand(P, G, S, S)
            gx = gL[b][..., :k] - Xs[b].sign() * gL[b][..., k:]  # d/dx of x s - |x|
            gXall[b, :, :, first[b] :] = gx.unflatten(2, (-1, R))
        gE = gM.mul_(M)  # d/d(beta E): E = (S C_in) S^T + quad, quad = rows of (S C_out) S
        k = C.shape[-2]
        Sp = (1 - 2 * state_bits(k, C.device)).to(C.dtype)
        gin = Sp.T @ gE @ Sp  # (P, G, nb, k, k)
        gout_ = (Sp.T * gE.sum(-1).unsqueeze(-2)) @ Sp
        return torch.cat([gout_, gin], dim=-1), gXall, None, None, None


class BlockSweepFn(torch.autograd.Function):
    """The block sweep with moderate fields, with its adjoint as the backward pass (the dense engine's recursions,
    docs/banded.md, with the factorised transfer matrix of the module docstring).

    ``forward(C (P, G, nb, k, 2k), X (nb, P, G, Q, R, k), first, limit, fast) -> (out (P, G, sum_b N_b, k),
    status)``: ``log P(s_{p-t} = +1)`` per block, slot column and bit; ``status`` 0 (done), 1 (couplings too strong
    for the probability domain: nothing computed) or 2 (fields too large for the fast read-out: nothing computed).
    Forward per block ``b``: ``A_b = D_b F_b * (M_b A_{b-1})``, ``B_{b-1} = E_{b-1} M_b^T (F_b * B_b)`` (``D``, ``E``
    per-column rescaling constants; ``F_b = F_hi F_lo`` the window's field factors, a product over its halves),
    ``S[t, bit]`` the posterior ``A * B`` summed over the states with that bit.
    """

    @staticmethod
    def forward(ctx, C: torch.Tensor, X: torch.Tensor, first: tuple, limit: float, fast: float):
        nb, P, G, Q, R, k = X.shape
        lo = split(k)
        hi = k - lo
        E1, E2 = factors(C, lo)
        # entries of K1 K2 lie in [exp(-(span1 + span2)), 1]; sum |C| bounds each span by half
        span = 2 * float(C.abs().sum((-2, -1)).max())
        if span > min(limit, fast / 2):
            lo1, top1 = torch.aminmax(E1.flatten(-2), dim=-1)
            span = top1 - lo1
            if lo:
                lo2, top2 = torch.aminmax(E2.flatten(-3), dim=-1)
                span = span + top2 - lo2
            span = float(span.max())
        status = torch.tensor(0 if span <= min(limit, fast / 2) else 1 if span > limit else 2)
        ctx.mark_non_differentiable(status)
        if int(status):
            return X.new_empty(0), status
        K1 = (E1 - E1.amax((-2, -1), keepdim=True)).exp_()
        K2 = (E2 - E2.amax((-3, -2, -1), keepdim=True)).exp_() if lo else None
        ops = [_Ops(K1[:, :, b], None if K2 is None else K2[:, :, b]) for b in range(nb)]
        Hh, Hl = 1 << hi, 1 << lo
        Ns = [(Q - first[b]) * R for b in range(nb)]
        es = [((first[b + 1] if b + 1 < nb else Q) - first[b]) * R for b in range(nb)]  # columns ending at b
        token = workspace.Token()  # the scratch buffers (nothing saved views them) are free again after this call
        # U = K1 A_{b-1} and L = X_b K2 (the factorised products' halves) are kept for the adjoint, which needs both
        keys = ("A", "B", "U", "L") if lo else ("A", "B")
        bufs = _Buffers(C, P, G, Hh, Hl, Ns, owner=ctx, scratch_owner=token, keys=keys)
        Xs = [X[b, :, :, first[b] :].flatten(2, 3) for b in range(nb)]  # (P, G, N, k)
        Fs = [_field_factors(x, lo) for x in Xs]  # (P, G, Hh, N, Hl)
        As, Ds = [], []
        A = C.new_ones(P, G, Hh, Ns[0], Hl)
        for b in range(nb):
            Ain = A[:, :, :, A.shape[3] - Ns[b] :]  # the slots still running
            A = ops[b].fwd(Ain, bufs.seg("A", b), bufs.seg("U", b) if lo else bufs.scratch(0, Ns[b]))
            A.mul_(Fs[b])
            D = _column_max(A).reciprocal_()
            A.mul_(D)
            As.append(A)
            Ds.append(D)
        Bs: list[torch.Tensor] = [C] * nb
        Es: list[torch.Tensor] = [C] * nb
        Ss: list[torch.Tensor] = [C] * nb
        outs: list[torch.Tensor] = [C] * nb
        oh = (_onehot(lo, C), _onehot(hi, C))
        for b in range(nb - 1, -1, -1):
            B = bufs.seg("B", b)
            if b == nb - 1:
                B.fill_(1.0)
            else:
                Xb = torch.mul(Bs[b + 1], Fs[b + 1], out=bufs.scratch(0, Ns[b + 1]))
                tmp = bufs.seg("L", b + 1) if lo else bufs.scratch(2, Ns[b + 1])
                Bn = ops[b + 1].adj(Xb, bufs.scratch(1, Ns[b + 1]), tmp)
                Es[b] = _column_max(Bn).reciprocal_()
                B[:, :, :, : es[b]].fill_(1.0)
                torch.mul(Bn, Es[b], out=B[:, :, :, es[b] :])
            Bs[b] = B
            Ss[b] = _bit_sums(torch.mul(As[b], B, out=bufs.scratch(0, Ns[b])), oh)  # (P, G, N, 2k)
            S0, S1 = Ss[b].unflatten(-1, (k, 2)).unbind(-1)
            outs[b] = S0.log() - (S0 + S1).log()
        ctx.first, ctx.shape, ctx.lo = first, X.shape, lo
        UL = [bufs.seg(key, b) for key in ("U", "L") for b in range(1, nb)] if lo else []
        ctx.save_for_backward(K1, *(() if K2 is None else (K2,)), *Xs, *As, *Bs, *Ds, *Fs, *Es[:-1], *Ss, *UL)
        return torch.cat(outs, dim=2), status

    @staticmethod
    def backward(ctx, gout: torch.Tensor, _gstatus: Any):
        first, lo = ctx.first, ctx.lo
        nb, P, G, Q, R, k = ctx.shape
        hi = k - lo
        saved = list(ctx.saved_tensors)
        K1 = saved.pop(0)
        K2 = saved.pop(0) if lo else None
        Xs, As, Bs, Ds, Fs = (saved[i * nb : (i + 1) * nb] for i in range(5))
        Es = saved[5 * nb : 6 * nb - 1]
        Ss = saved[6 * nb - 1 : 7 * nb - 1]
        # the forward's K1 A_{b-1} and X_b K2 of blocks 1..nb-1 (factorised only), indexed by block
        Us = [None, *saved[7 * nb - 1 : 8 * nb - 2]] if lo else [None] * nb
        Ls = [None, *saved[8 * nb - 2 :]] if lo else [None] * nb
        ops = [_Ops(K1[:, :, b], None if K2 is None else K2[:, :, b]) for b in range(nb)]
        Hh, Hl = 1 << hi, 1 << lo
        Ns = [(Q - first[b]) * R for b in range(nb)]
        es = [((first[b + 1] if b + 1 < nb else Q) - first[b]) * R for b in range(nb)]
        token = workspace.Token()  # the scratch buffers are free again once this call returns
        bufs = _Buffers(K1, P, G, Hh, Hl, Ns, n_scratch=6, owner=token, scratch_owner=token)
        ohT = (_onehot(lo, K1).T, _onehot(hi, K1).T)
        gS = []
        for b, g in enumerate(gout.split(Ns, dim=2)):  # d/dS0 = g S1 / (S0 (S0 + S1)), d/dS1 = -g / (S0 + S1)
            S0, S1 = Ss[b].unflatten(-1, (-1, 2)).unbind(-1)
            gZ = g / (S0 + S1)
            gS.append(torch.stack([gZ * S1 / S0, -gZ], dim=-1).flatten(-2))  # (P, G, N, 2k)
        g1 = torch.zeros_like(K1)
        g2 = None if K2 is None else torch.zeros_like(K2)
        gLh = [K1.new_zeros(P, G, Hh, N) for N in Ns]  # g log F_hi per block
        gLl = [K1.new_zeros(P, G, N, Hl) for N in Ns]  # g log F_lo per block
        gB = None
        for b in range(nb):  # upward: the adjoint of the backward messages
            gBb = _posterior_grad(gS[b], ohT, lo, bufs.scratch(1 + b % 2, Ns[b])).mul_(As[b])
            if b:
                V = gB[:, :, :, es[b - 1] :].mul_(Es[b - 1])
                X = torch.mul(Bs[b], Fs[b], out=bufs.scratch(3, Ns[b]))
                Rt = ops[b].step1(V, bufs.scratch(4, Ns[b]))
                gX = Rt if K2 is None else torch.matmul(Rt, ops[b].K2T, out=bufs.scratch(5, Ns[b]))
                Lt = ops[b].adj1(X, bufs.scratch(0, Ns[b])) if Ls[b] is None else Ls[b]  # the forward's X_b K2
                ops[b].grad(g1[:, :, b], None if g2 is None else g2[:, :, b], X, V, Lt, Rt)
                _add_field_grad(gLh[b], gLl[b], X.mul_(gX))
                gBb.addcmul_(gX, Fs[b])
            gB = gBb
        gXall = K1.new_zeros(ctx.shape)
        gY = None
        for b in range(nb - 1, -1, -1):  # downward: the adjoint of the forward messages
            gA = _posterior_grad(gS[b], ohT, lo, bufs.scratch(1 + b % 2, Ns[b])).mul_(Bs[b])
            if b < nb - 1:  # gA += M_{b+1}^T gY_{b+1}, and M_{b+1}'s gradient with its input A_b
                Ain = As[b][:, :, :, es[b] :]
                Lt = ops[b + 1].adj1(gY, bufs.scratch(4, Ns[b + 1]))
                Rt = Us[b + 1]  # the forward's K1 A_b (None when lo = 0: no K2, no second factor)
                g2b = None if g2 is None else g2[:, :, b + 1]
                ops[b + 1].grad(g1[:, :, b + 1], g2b, gY, Ain, Lt, Rt)
                # gA += K1^T Lt in place (no full-size temporary): each older-half row of the slice is contiguous
                tgt = gA[:, :, :, es[b] :].view(P * G, Hh, Ns[b + 1] * Hl)
                tgt.baddbmm_(K1[:, :, b + 1].transpose(-1, -2).reshape(P * G, Hh, Hh), Lt.view(P * G, Hh, -1))
            _add_field_grad(gLh[b], gLl[b], torch.mul(As[b], gA, out=bufs.scratch(3, Ns[b])))
            gY = gA.mul_(Fs[b]).mul_(Ds[b])
            if b == 0:  # the first block's input is all ones
                Lt = ops[0].adj1(gY, bufs.scratch(4, Ns[0]))
                g1[:, :, 0] += Lt.sum((-2, -1)).unsqueeze(-1)
                if g2 is not None:
                    g2[:, :, 0] += (gY.sum(-2) * K1[:, :, 0].sum(-1, keepdim=True)).unsqueeze(-1)
            gXall[b, :, :, first[b] :] = _field_input_grad(gLh[b], gLl[b], Xs[b], lo).unflatten(2, (-1, R))
        gE1 = g1.mul_(K1)
        gE2 = None if g2 is None else g2.mul_(K2)
        return factor_grads(gE1, gE2, k, lo), gXall, None, None, None


class _Buffers:
    """Message segments ``(P, G, Hh, N_b, Hl)`` per block (``A``, ``B``, held by ``owner``) and scratch buffers for the
    largest block (held by ``scratch_owner``): a fresh large allocation per block costs more in page faults than the
    arithmetic it holds, and across calls they come back from :mod:`hybrid_attention.banded_workspace`."""

    def __init__(self, like: torch.Tensor, P: int, G: int, Hh: int, Hl: int, Ns: list[int], *, owner: Any,
                 scratch_owner: Any, n_scratch: int = 3, keys: tuple[str, ...] = ("A", "B")):  # fmt: skip
        self.shape, self.Ns = (P, G, Hh, Hl), Ns
        self.offs = [0]
        for N in Ns:
            self.offs.append(self.offs[-1] + P * G * Hh * Hl * N)
        self.full = {key: workspace.take(key, self.offs[-1], like, owner) for key in keys}
        self.scr = [
            workspace.take(f"scratch {i}", P * G * Hh * Hl * Ns[0], like, scratch_owner) for i in range(n_scratch)
        ]

    def seg(self, key: str, b: int) -> torch.Tensor:
        P, G, Hh, Hl = self.shape
        return self.full[key][self.offs[b] : self.offs[b + 1]].view(P, G, Hh, self.Ns[b], Hl)

    def scratch(self, i: int, N: int) -> torch.Tensor:
        P, G, Hh, Hl = self.shape
        return self.scr[i][: P * G * Hh * Hl * N].view(P, G, Hh, N, Hl)


def _column_max(A: torch.Tensor) -> torch.Tensor:
    """The largest entry of every column of ``A (P, G, Hh, N, Hl)``: ``(P, G, 1, N, 1)`` (over the contiguous newer
    half first: a reduction over two strided dimensions at once runs several times slower)."""
    return A.amax(-1, keepdim=True).amax(2, keepdim=True)


def _field_factors(x: torch.Tensor, lo: int) -> torch.Tensor:
    """The window's field factors ``F (P, G, Hh, N, Hl)``, ``log F = sum_t x_t s_t - |x_t|`` (at most 0: 0 for the
    favoured spins), from the fields ``x (P, G, N, k)``: the product of the older half's and the newer half's."""

    def part(xp: torch.Tensor) -> torch.Tensor:  # [x, -sum |x|] @ [spins, 1]^T: (P, G, N, 2^bits)
        m = xp.shape[-1]
        SpT = torch.cat([_spins(m, xp), xp.new_ones(1 << m, 1)], 1).T
        return torch.cat([xp, -xp.abs().sum(-1, keepdim=True)], -1).matmul(SpT).exp_()

    f_hi = part(x[..., lo:]).transpose(-1, -2).unsqueeze(-1)
    return f_hi.contiguous() if not lo else f_hi * part(x[..., :lo]).unsqueeze(2)


def _bit_sums(post: torch.Tensor, oh: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """``S[t, bit]`` of ``post (P, G, Hh, N, Hl)``: ``(P, G, N, 2k)``, the newer bits' columns first."""
    s_hi = post.sum(-1).transpose(-1, -2) @ oh[1]  # (P, G, N, 2 hi)
    if oh[0].shape[-1] == 0:
        return s_hi
    return torch.cat([post.sum(2) @ oh[0], s_hi], -1)


def _posterior_grad(gS: torch.Tensor, ohT, lo: int, out: torch.Tensor) -> torch.Tensor:
    """The adjoint of :func:`_bit_sums`: ``g post (P, G, Hh, N, Hl)`` from ``gS (P, G, N, 2k)``, into ``out``."""
    ghi = (gS[..., 2 * lo :] @ ohT[1]).transpose(-1, -2).unsqueeze(-1)  # (P, G, Hh, N, 1)
    if not lo:
        return out.copy_(ghi)
    return torch.add(ghi, (gS[..., : 2 * lo] @ ohT[0]).unsqueeze(2), out=out)


def _add_field_grad(gLh: torch.Tensor, gLl: torch.Tensor, gF: torch.Tensor) -> None:
    """Add ``g log F (P, G, Hh, N, Hl)`` (over the full window) to the halves' gradients."""
    gLh += gF.sum(-1)
    if gLl.shape[-1] > 1 or gF.shape[-1] > 1:
        gLl += gF.sum(2)


def _field_input_grad(gLh: torch.Tensor, gLl: torch.Tensor, x: torch.Tensor, lo: int) -> torch.Tensor:
    """``dL/dx (P, G, N, k)`` from the gradients of ``log F_hi``, ``log F_lo`` (:func:`_field_factors`)."""

    def part(g: torch.Tensor, xp: torch.Tensor) -> torch.Tensor:  # g (P, G, N, 2^m): d/dx of x s - |x|
        m = xp.shape[-1]
        gl = g @ torch.cat([_spins(m, xp), xp.new_ones(1 << m, 1)], 1)  # (P, G, N, m + 1)
        return gl[..., :m] - xp.sign() * gl[..., m:]

    ghi = part(gLh.transpose(-1, -2), x[..., lo:])
    return torch.cat([part(gLl, x[..., :lo]), ghi], -1) if lo else ghi
