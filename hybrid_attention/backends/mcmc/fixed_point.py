"""Fast fixed-point solves for mean field (``solver="rows"`` of
:class:`~hybrid_attention.backends.mcmc.meanfield.MeanFieldSampler`): the forward equations ``m = f(m)`` and the
implicit backward's adjoint system ``v = g + (df/dm)^T v`` (:mod:`.mf_adjoint`), each row (one Ising problem) with
its own stopping test.

The legacy solver (``solver="damped"``) runs the damped iteration ``m <- m + d (f(m) - m)`` on the whole batch until
its largest residual is below ``tol``: every row pays for the slowest. In training the couplings grow and a few rows
become very slow (a Tiny Shakespeare run at T = 64: 5 iterations at initialisation; from about step 70 more than 500,
unconverged, while most rows still converged in tens). Here:

* the same damped iteration (same map, damping and start), but each row has its own stopping test on its residual
  ``max_j |f(m)_j - m_j| < tol``: the rows that pass when :data:`COMPACT` of the batch passes are recorded and leave
  it (by integer gathers: boolean indexing and ``linalg.vector_norm`` cost several times the map on CPU; rows that
  passed earlier iterate on until then, one gather per compaction instead of one per iteration with a stop);
* causal row blocks (:func:`~hybrid_attention.backends.mcmc.meanfield.width_blocks`) iterate apart in rounds of
  :data:`MERGE` iterations until their unconverged rows cost less as one zero-padded batch (:func:`iterate_blocks`):
  the slow rows' long tail pays one iteration's fixed cost per step instead of one per block;
* naive mean field evaluates ``tanh(z)`` as ``2 sigmoid(2 z) - 1`` (3-4x faster on CPU, equal within float eps);
* rows of naive mean field still unconverged after :data:`SWITCH` iterations switch to Newton's method on the
  mean-field free energy (:mod:`.mf_newton`). These rows are slow for any first-order method: on the way to their
  fixed point the free energy is nearly flat along a collective flip of several spins (an exploratory measurement at
  step 100 of that run: 9 rows of 4096 took the damped iteration 1600-1900 steps and Gauss-Seidel sweeps 400, to a
  well conditioned fixed point that Newton reached in 17 steps, within 6e-5);
* the adjoint iterates with a secant step (:func:`_secant`, Anderson acceleration with memory 1); its stragglers are
  solved directly (``(I - A^T) v = g`` per row, float64 LU);
* the rows are gathered once into block order (:func:`block_layout`), so each block is a slice; a row's ``f(m)`` at the
  iterate that passed the test is recorded with it (the value :func:`solve_rows` returns, as the legacy implicit
  step did, and the implicit gradient's ``D = beta (1 - f^2)``: no further map evaluation); for one inverse
  temperature per group ``2 beta`` is folded into ``h`` and ``J`` once; the Newton stragglers of all blocks of a group
  go in one zero-padded call.

Descent keeps the fixed point the damped iteration heads for in most rows, but where the free energy has several
minima (strong couplings) a row can settle in another one. Acceleration of the forward iteration: full Anderson was
tried in an earlier exploration and dropped (it left the damped iteration's basin in about 2 % of the rows, and its
per-row least squares cost several times the map). The secant step of :func:`_secant` with its coefficient clipped to
``[-1, 1]`` kept every row's fixed point in an exploratory test on training checkpoints (T = 64 steps 60, 100, 150 and
T = 128 step 60: no row moved by 1e-2, against 93 of 4096 rows clipped at 1.5 and 101-778 unclipped) and cut the
mean iterations per row by a third, but the rows it still left unconverged took Newton longer: the forward solve at
T = 128 steps 100 and 200 became 1.3-1.8x slower. So the forward iteration is not accelerated (``accelerate`` of
:func:`iterate_rows` is off there); the adjoint, a linear system whose solution the step cannot change, is. Tried
again with Newton in the fields (:mod:`.mf_newton`) on captured training states (mf-speed4): 1-5 rows of 8192 moved
by more than 1e-2 at T = 128 steps 100-250, forward solves 1-5 % faster; still off.

Warm start: the solve may start from any guess (``start``); the stopping test alone decides when a row is done.

These are the torch loops; naive mean field in float32 (training's problems) runs the same iterations in compiled
per-row loops when numba is installed (:mod:`.mf_kernel`, ``kernel=`` of the sampler). There the rows past
:data:`SWITCH` iterate on in a slow stage, which stops on the estimated distance to the fixed point, and only the rows
that still fail go to this module's Newton stage (:mod:`.mf_kernel`'s docstring explains why and what it changes).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .mf_newton import newton_free_energy

__all__ = [
    "iterate_rows",
    "iterate_blocks",
    "block_layout",
    "newton_free_energy",
    "solve_rows",
    "stragglers",
    "SWITCH",
    "MERGE",
]

#: compact the batch once this fraction of its rows has converged
COMPACT = 0.25
#: iterations before the rows still unconverged switch to Newton (forward) or a direct solve (adjoint)
SWITCH = 50
#: iterations of each row block on its own before the blocks' unconverged rows iterate on as one batch
MERGE = 8


def iterate_rows(
    fmap: Callable[[torch.Tensor, dict[str, torch.Tensor]], torch.Tensor],
    x: torch.Tensor,
    data: dict[str, torch.Tensor],
    *,
    damping: float,
    tol: float,
    max_iter: int,
    accelerate: bool = False,
    image: bool = False,
) -> tuple[torch.Tensor, ...]:
    """The damped iteration ``x <- g = x + d (fmap(x) - x)``, optionally accelerated (:func:`_secant`), with a
    stopping test per row: ``max |fmap(x) - x| < tol``. The rows that pass at an iteration where at least
    :data:`COMPACT` of the batch passes (or all of it, or the last) are recorded at that iterate and leave the batch;
    until then every row iterates on (a row that passed keeps iterating towards its fixed point and is recorded at a
    later iterate that passes the test again: one gather per compaction instead of one per iteration with a stop).

    Args:
        fmap: ``(x (r, n), data) -> (r, n)``, applied to the rows still in the batch (``data`` holds their rows).
        x: ``(R, n)`` start.
        data: per-row tensors ``(R, ...)`` that ``fmap`` reads (gathered with the rows when the batch is compacted).
        damping, tol, max_iter: the step ``d``, the stopping tolerance, the iterations at most.
        accelerate: the secant step of :func:`_secant` (else the plain damped iteration).
        image: also return each converged row's ``fmap(x)`` at that iterate (unconverged rows: undefined).

    Returns:
        ``(x (R, n), iterations (R,), residual (R,))``: each converged row at the recorded iterate (whose residual
        passed the test), an unconverged one at its next iterate (where another call resumes the same iteration), its
        count of map evaluations, its last ``max |fmap(x) - x|``; with ``image``, ``fmap(x) (R, n)`` after them.
    """
    R, n = x.shape
    out, res = x.clone(), x.new_full((R,), float("inf"))
    count = torch.full((R,), max_iter, dtype=torch.long)
    img = torch.empty_like(x) if image else None
    if R == 0 or n == 0:  # nothing to solve: every row passes at the first test
        return (out, count.fill_(1), res.zero_()) + ((img,) if image else ())
    rows = torch.arange(R)
    size, r, prev = R, res, None
    for it in range(1, max_iter + 1):
        fx = fmap(x, data)
        step = fx - x
        # a row-wise inf-norm (linalg.vector_norm is 15x slower on CPU); in place when the step is not used again
        r = (step.abs_() if damping == 1 and not accelerate else step.abs()).amax(-1)
        done = r < tol
        stopped = int(done.sum())
        if stopped and (stopped >= COMPACT * size or it == max_iter):
            # integer gathers: index_select is several times faster than boolean or advanced indexing
            idx = done.nonzero().squeeze(1)
            gone = rows.index_select(0, idx)
            out.index_copy_(0, gone, x.index_select(0, idx))
            if img is not None:
                img.index_copy_(0, gone, fx.index_select(0, idx))
            count.index_fill_(0, gone, it)
            res.index_copy_(0, gone, r.index_select(0, idx))
            if stopped == size:
                return (out, count, res) + ((img,) if image else ())
            keep = done.logical_not_().nonzero().squeeze(1)  # drop the recorded rows
            rows, x, fx, r = (t.index_select(0, keep) for t in (rows, x, fx, r))
            step = step.index_select(0, keep) if damping != 1 or accelerate else step
            prev = None if prev is None else tuple(t.index_select(0, keep) for t in prev)
            data = {k: v.index_select(0, keep) for k, v in data.items()}
            size -= stopped
        g = fx if damping == 1 else torch.add(x, step, alpha=damping)
        x, prev = (g if prev is None else _secant(g, step, *prev)), ((g, step) if accelerate else None)
    out.index_copy_(0, rows, x)
    res.index_copy_(0, rows, r)
    return (out, count, res) + ((img,) if image else ())


def _secant(g: torch.Tensor, step: torch.Tensor, g_prev: torch.Tensor, step_prev: torch.Tensor) -> torch.Tensor:
    """One step of Anderson acceleration with memory 1 (a secant step), per row: ``g - c (g - g_prev)`` with
    ``c = <dr, r> / <dr, dr>`` (``r = fmap(x) - x``, ``dr`` its change), the coefficient that minimises the
    linearised next residual, clipped to ``[-1, 1]``: between the last two damped iterates or at most one step
    beyond (the module docstring: where it is used and why)."""
    dr = step - step_prev
    c = (torch.linalg.vecdot(dr, step) / torch.linalg.vecdot(dr, dr).clamp_min(torch.finfo(dr.dtype).tiny)).clamp_(
        -1, 1
    )
    return torch.addcmul(g, c[:, None], g - g_prev, value=-1)


def iterate_blocks(
    fmap: Callable[[int], Callable[[torch.Tensor, dict[str, torch.Tensor]], torch.Tensor]],
    xs: list[torch.Tensor],
    datas: list[dict[str, torch.Tensor]],
    wide: tuple[str, ...],
    *,
    damping: float,
    tol: float,
    max_iter: int,
    accelerate: bool,
    image: bool = False,
) -> list[tuple[torch.Tensor, ...]]:
    """:func:`iterate_rows` on row blocks of different widths (one coupling matrix): each block alone in rounds of
    :data:`MERGE` iterations (on its own block's narrow products) until merging is cheaper (:func:`_merge_pays`),
    then the blocks' rows still unconverged as one batch at the widest of their widths, zero-padded (padded spins are
    masked: the map keeps them at 0), so that the long tail of slow rows costs one iteration's overhead per step, not
    one per block. A row's iterates are those of one uninterrupted iteration (a round resumes from the next iterate),
    except that the secant step's memory restarts at each round.

    Args:
        fmap: ``width -> map`` as :func:`iterate_rows` takes it, on the leading ``width`` spins.
        xs, datas: per block, the start ``(r_k, L_k)`` and the per-row data; ``wide``: the data keys of width ``L_k``
            (zero-padded when merged; the others are ``(r_k, 1)``).
        damping, tol, max_iter, accelerate, image: as :func:`iterate_rows`.

    Returns:
        per block, :func:`iterate_rows`'s ``(x, iterations, residual)`` (and ``fmap(x)`` with ``image``).
    """
    kw = {"damping": damping, "tol": tol, "accelerate": accelerate, "image": image}
    first = max_iter if len(xs) == 1 else min(max_iter, MERGE)
    out = [iterate_rows(fmap(x.shape[1]), x, d, max_iter=first, **kw) for x, d in zip(xs, datas)]
    done = first
    while done < max_iter:
        sel = [(k, idx) for k, idx in enumerate((o[2] >= tol).nonzero().squeeze(1) for o in out) if len(idx)]
        if not sel:
            break
        widths = [out[k][0].shape[1] for k, _ in sel]
        if _merge_pays([len(idx) for _, idx in sel], widths):
            width = max(widths)
            pad = lambda t, width=width: torch.nn.functional.pad(t, (0, width - t.shape[1]))  # noqa: E731
            x = torch.cat([pad(out[k][0].index_select(0, idx)) for k, idx in sel])
            data = {
                key: torch.cat(
                    [(pad if key in wide else lambda t: t)(datas[k][key].index_select(0, idx)) for k, idx in sel]
                )
                for key in datas[0]
            }
            _scatter(out, sel, iterate_rows(fmap(width), x, data, max_iter=max_iter - done, **kw), done)
            break
        chunk = min(MERGE, max_iter - done)  # another round of each block alone, on its unconverged rows
        for k, idx in sel:
            d = {key: v.index_select(0, idx) for key, v in datas[k].items()}
            x = out[k][0].index_select(0, idx)
            _scatter(out, [(k, idx)], iterate_rows(fmap(x.shape[1]), x, d, max_iter=chunk, **kw), done)
        done += chunk
    return out


#: the fixed cost of one iteration of :func:`iterate_rows` (about 15 torch operations' dispatch) in units of the
#: cost per spin of a row: 20-30 us against 2.5-3.5 ns per row and spin on the 2-core CPU this was tuned on (one
#: thread; batches of 16-1024 rows, 16-64 spins, where the elementwise passes cost more than the product)
OVERHEAD = 8192


def _merge_pays(rows: list[int], widths: list[int]) -> bool:
    """Whether one padded batch (the blocks' ``rows`` at the widest of ``widths``) costs less per iteration than
    the blocks apart: the padding's spins against :data:`OVERHEAD` per block saved."""
    W = max(widths)
    return sum(r * (W - L) for r, L in zip(rows, widths)) <= OVERHEAD * (len(rows) - 1)


def _scatter(out: list[tuple[torch.Tensor, ...]], sel, got: tuple[torch.Tensor, ...], offset: int) -> None:
    """Write :func:`iterate_rows`'s result ``got`` on the rows ``sel`` (``(block, row indices)``, in that order, at
    most their block's width) into the blocks' results ``out``, the iteration counts after ``offset``."""
    at = 0
    for k, idx in sel:
        end, L = at + len(idx), out[k][0].shape[1]
        x, count, res, *img = out[k]
        x.index_copy_(0, idx, got[0][at:end, :L])
        count.index_copy_(0, idx, got[1][at:end] + offset)
        res.index_copy_(0, idx, got[2][at:end])
        if img:
            img[0].index_copy_(0, idx, got[3][at:end, :L])
        at = end


def _mean_field_map(tap: bool, J: torch.Tensor, J2: torch.Tensor | None):
    """``f(m)`` on a block of rows: ``data`` holds ``h`` and, for TAP, ``b`` (``(r, 1)``) and ``mask`` (or no mask);
    for naive mean field ``b2 = 2 b`` (or no ``b2`` when ``h`` and ``J`` come scaled by ``2 b``: one inverse temperature
    for all rows) and, with a mask, ``mask2 = 2 mask``, ``nmask = -mask``: it evaluates
    ``tanh(z) = 2 sigmoid(2 z) - 1`` (about 3x faster than ``tanh`` on CPU, within a few float eps of it in absolute
    value, which is what the stopping test measures)."""

    def fmap(m: torch.Tensor, data: dict[str, torch.Tensor]) -> torch.Tensor:
        field = torch.addmm(data["h"], m, J)
        mask = data.get("mask")
        if tap:
            q = 1 - m * m if mask is None else (1 - m * m) * mask
            field.sub_(data["b"] * m * (q @ J2))
            out = field.mul_(data["b"]).tanh_()
            return out if mask is None else out.mul_(mask)
        s = (field if "b2" not in data else field.mul_(data["b2"])).sigmoid_()
        return s.mul_(2).sub_(1) if "mask2" not in data else torch.addcmul(data["nmask"], s, data["mask2"])

    return fmap


def block_layout(blocks, R: int) -> tuple[torch.Tensor | None, list[tuple[int, int, int]]]:
    """``(order, spans)``: the rows of ``blocks`` (:func:`~hybrid_attention.backends.mcmc.meanfield.width_blocks`)
    in block order, and each block as ``(start, stop, width)`` of that order; ``blocks=None``: every row at full
    width (``order`` ``None``). Solving on rows gathered once into this order makes each block a slice."""
    if blocks is None:
        return None, [(0, R, -1)]
    spans, at = [], 0
    for rows, L in blocks:
        spans.append((at, at + len(rows), L))
        at += len(rows)
    return torch.cat([rows for rows, _ in blocks]), spans


def _group(t: torch.Tensor | None, g: int, order: torch.Tensor | None) -> torch.Tensor | None:
    """Group ``g`` of ``t (G or 1, R or 1, k)``, its rows in ``order``."""
    if t is None:
        return None
    t = t[g if t.shape[0] > 1 else 0]
    return t if order is None or t.shape[0] == 1 else t.index_select(0, order)


def _block(hg, mg, bg, sg, a: int, c: int, L: int, tap: bool, scaled: bool):
    """Rows ``a:c`` of a group's rows in block order (:func:`block_layout`), their leading ``L`` spins: the start, the
    map's data, fields, inverse temperatures ``(r, 1)`` and mask (or ``None``); ``scaled``: the map's ``J`` is
    ``2 beta J`` (one ``beta`` for the group), so its data hold ``2 beta h`` and no ``b2``."""
    hh = hg[a:c, :L]
    mk = None if mg is None else mg[a:c, :L]
    bb = bg[a:c] if bg.shape[0] > 1 else bg.expand(c - a, 1)
    if tap:
        x0 = torch.tanh(bb * hh) if sg is None else sg[a:c, :L].clamp(-1, 1)
        data = {"h": hh, "b": bb} | ({} if mk is None else {"mask": mk})
        return (x0 if mk is None else x0 * mk), data, hh, bb, mk
    bh = 2 * bb * hh
    data = ({"h": bh} if scaled else {"h": hh, "b2": 2 * bb}) | ({} if mk is None else {"mask2": 2 * mk, "nmask": -mk})
    if sg is not None:
        x0 = sg[a:c, :L].clamp(-1, 1)
        x0 = x0 if mk is None else x0 * mk
    else:  # tanh(beta h) as the map evaluates it: 2 sigmoid(2 beta h) - 1, masked
        s = torch.sigmoid(bh)
        x0 = s.mul_(2).sub_(1) if mk is None else torch.addcmul(data["nmask"], s, data["mask2"])
    return x0, data, hh, bb, mk


def _image(x, hh, J, bb, mk) -> torch.Tensor:
    """Naive mean field's ``f(x) = tanh(beta (h + x J))`` (masked) on a few rows."""
    out = torch.tanh(bb * torch.addmm(hh, x, J))
    return out if mk is None else out * mk


def stragglers(m, f, h, J, b, mask, late, tol: float, max_iter: int) -> tuple[int, float]:
    """Naive mean field's rows still unconverged after :data:`SWITCH` iterations, of all blocks of one group at once
    (zero-padded to the widest block's width ``W``; padded spins are masked): :func:`newton_free_energy` (when
    ``max_iter > SWITCH``), written into ``m`` and ``f = f(m)`` ``(R, n)`` in place.

    Args: ``h, mask (R, n)`` and ``b (R or 1, 1)`` of the group in block order, ``J (n, n)``; ``late``: per block
    with such rows ``(their rows, width, iteration counts)``. Returns ``(Newton steps of the slowest, largest
    final residual)``."""
    rows = torch.cat([r for r, _, _ in late])
    W = max(L for _, L, _ in late)
    x, hh = m.index_select(0, rows)[:, :W], h.index_select(0, rows)[:, :W]
    bb = b.index_select(0, rows) if b.shape[0] > 1 else b.expand(len(rows), 1)
    mk = None if mask is None else mask.index_select(0, rows)[:, :W]
    steps = torch.zeros(len(rows), dtype=torch.long)
    if max_iter > SWITCH:
        x, steps, _ = newton_free_energy(x, hh, J[:W, :W], bb, mk, tol=tol / 4, max_iter=max_iter - SWITCH)
    image = _image(x, hh, J[:W, :W], bb, mk)
    m[:, :W].index_copy_(0, rows, x)
    if f is not None:
        f[:, :W].index_copy_(0, rows, image)
    r = (image - x).abs().amax(-1) if len(rows) else x.new_zeros(0)
    return int(steps.max()) if len(rows) else 0, float(r.max()) if len(rows) else 0.0


def solve_rows(
    h, J, mask, tap: bool, b, damping: float, tol: float, max_iter: int, blocks, start: torch.Tensor | None = None
) -> tuple[torch.Tensor, int, float, dict[str, float], torch.Tensor | None]:
    """The mean-field equations per row (no gradient): :func:`iterate_rows` for :data:`SWITCH` iterations, then
    (naive mean field) :func:`newton_free_energy` for the rows still unconverged, per coupling group and row block.

    Args: as :func:`~hybrid_attention.backends.mcmc.meanfield.solve` (``h, mask (G, R, n)``, ``J (G, n, n)``,
    ``b (G, R, 1)``, ``damping``, ``blocks``), and ``start (G, R, n)``: the initial guess (``None``: ``tanh(beta h)``,
    the damped iteration's start), clamped to ``[-1, 1]`` and zero on masked spins.

    Returns:
        ``(m (G, R, n), iterations, residual, extra, image)``: the iterations (and Newton steps) of the slowest row,
        the largest final residual, ``extra = {"work": the damped iterations' work in units of one full-width
        iteration of every row (rows leave once converged and blocks are narrower than n), "newton_rows": rows that
        switched to Newton, "kernel": "torch"}`` (:mod:`.mf_kernel`'s loops say ``"compiled"``), and (naive mean
        field; ``None`` for TAP) ``image = f(m) (G, R, n)``, the map at each row's solution (:func:`~hybrid_attention.backends.mcmc.mf_adjoint.RowsFixedPoint` returns it).
    """
    G, R, n = h.shape
    order, spans = block_layout(blocks, R)
    spans = [(a, c, n if L < 0 else L) for a, c, L in spans]
    m = h.new_zeros(h.shape)
    f = None if tap else h.new_zeros(h.shape)
    iters, res, spent, newton = 0, 0.0, 0.0, 0
    first = max_iter if tap else min(max_iter, SWITCH)
    for g in range(G):
        Jg = J[g if J.shape[0] > 1 else 0]
        hg, mg, bg, sg = (_group(t, g, order) for t in (h, mask, b, start))
        scaled = not tap and bool((bg == bg[0]).all())  # one beta: 2 beta folded into h and J once
        probs = [_block(hg, mg, bg, sg, a, c, L, tap, scaled) for a, c, L in spans]
        Jm = 2 * bg[0] * Jg if scaled else Jg
        fmap = lambda L, Jm=Jm: _mean_field_map(tap, Jm[:L, :L], Jm[:L, :L] ** 2 if tap else None)  # noqa: E731
        solved = iterate_blocks(
            fmap,
            [p[0] for p in probs],
            [p[1] for p in probs],
            ("h", "mask", "mask2", "nmask"),
            damping=damping,
            tol=tol,
            max_iter=first,
            accelerate=False,  # forward: see the module docstring
            image=not tap,
        )
        late = []
        for (a, c, L), (x, count, rr, *img) in zip(spans, solved):
            spent += float(count.sum()) * L * L
            m[g, a:c, :L] = x
            if f is not None:
                f[g, a:c, :L] = img[0]
            slow = None if tap else rr >= tol  # naive mean field: the stragglers, solved below
            if slow is not None and bool(slow.any()):
                late.append((a + slow.nonzero().squeeze(1), L, count))
                rr = rr.masked_fill(slow, 0.0)
            if count.numel():
                iters, res = max(iters, int(count.max())), max(res, float(rr.max()))
        if late:
            steps, rr = stragglers(m[g], f[g], hg, Jg, bg, mg, late, tol, max_iter)
            newton += sum(len(rows) for rows, _, _ in late) if max_iter > SWITCH else 0
            iters = max(iters, max(int(count.max()) for _, _, count in late) + steps)
            res = max(res, rr)
    if order is not None:  # back from block order
        m = torch.empty_like(m).index_copy_(1, order, m)
        f = None if f is None else torch.empty_like(f).index_copy_(1, order, f)
    return m, iters, res, {"work": spent / max(1, G * R * n * n), "newton_rows": newton, "kernel": "torch"}, f
