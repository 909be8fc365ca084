"""The rows solver's bookkeeping and Newton in the fields (:mod:`hybrid_attention.backends.mcmc.fixed_point`,
:mod:`~hybrid_attention.backends.mcmc.mf_newton`) against their oracles: the mean-field equations (residual), the
unique fixed point of a contracting map, Newton in the magnetisations alone; and the legacy damped solver, which
none of this may touch (``experiments/long_context_2`` pins it)."""

from __future__ import annotations

import pytest
import torch

from hybrid_attention.backends.mcmc import fixed_point, meanfield, mf_kernel, mf_newton


def contracting(r: int, n: int, seed: int, *, field: float = 1.0, masked: bool = True):
    """``r`` rows of ``n`` spins, float64: fields ``N(0, field^2)``, couplings with ``max_j sum_k |J_jk| < 0.9``
    (``beta = 1``: the map ``tanh(h + J m)`` is a contraction in the max norm, its fixed point unique), every other
    row's last quarter masked."""
    g = torch.Generator().manual_seed(seed)
    U = torch.randn(n, n, generator=g, dtype=torch.float64).triu(1)
    J = U + U.T
    J *= 0.9 / float(J.abs().sum(-1).max())
    mask = torch.ones(r, n, dtype=torch.float64)
    if masked:
        mask[::2, n - n // 4 :] = 0
    h = field * torch.randn(r, n, generator=g, dtype=torch.float64) * mask
    return h, J, torch.ones(r, 1, dtype=torch.float64), mask


def image(m, h, J, b, mask) -> torch.Tensor:
    return torch.tanh(b * (h + m @ J)) * mask


def test_iterate_rows_records_each_row_at_an_iterate_that_passes():
    """Rows are recorded when the batch compacts, not when they first pass: every converged row's recorded iterate
    still passes ``max |f(x) - x| < tol``, and its recorded image is ``f(x)`` (recomputed on all rows at once: a
    product of another shape, equal within float64 rounding of ``n``-term sums, 1e-13). Contraction 0.9: both
    within ``tol / (1 - 0.9)`` of the unique fixed point."""
    h, J, b, mask = contracting(64, 24, 0)
    fmap = fixed_point._mean_field_map(False, 2 * J, None)
    data = {"h": 2 * h, "mask2": 2 * mask, "nmask": -mask}
    x0 = torch.zeros_like(h)
    tol = 1e-9
    x, count, res, img = fixed_point.iterate_rows(fmap, x0, data, damping=1.0, tol=tol, max_iter=400, image=True)
    assert bool((res < tol).all()) and int(count.max()) < 400
    f = image(x, h, J, b, mask)
    assert float((f - x).abs().amax()) < tol + 1e-13
    assert float((img - f).abs().amax()) < 1e-13
    fixed = x.clone()
    for _ in range(2000):  # the unique fixed point, to rounding
        fixed = image(fixed, h, J, b, mask)
    assert float((x - fixed).abs().amax()) < tol / (1 - 0.9) + 1e-13


@pytest.mark.parametrize("merge", [True, False])
def test_blocks_alone_or_merged_reach_the_same_fixed_point(monkeypatch, merge):
    """Row blocks of widths 8-32 iterate alone in rounds of MERGE iterations or merged into one padded batch
    (:func:`fixed_point._merge_pays` forced either way): each row's result passes ``tol`` and lies within
    ``tol / (1 - 0.9)`` of the unique fixed point, whichever way its blocks went (padded spins stay exactly 0:
    masked multiplications of exact zeros)."""
    monkeypatch.setattr(fixed_point, "_merge_pays", lambda rows, widths: merge)
    monkeypatch.setattr(fixed_point, "MERGE", 2)  # rounds after 2 iterations: most rows are still unconverged
    h, J, b, mask = contracting(96, 32, 1, field=2.0, masked=False)
    widths = (8, 16, 24, 32)
    causal = torch.ones(96, 32, dtype=torch.float64)
    for k, L in enumerate(widths):
        causal[24 * k : 24 * (k + 1), L:] = 0
    h = h * causal
    blocks = [(torch.arange(24 * k, 24 * (k + 1)), L) for k, L in enumerate(widths)]
    tol = 1e-9
    with torch.no_grad():
        m, it, res, _, f = fixed_point.solve_rows(h[None], J[None], causal[None], False, b[None], 1.0, tol, 400, blocks)
    assert res < tol and it < 400
    assert float((f[0] * (1 - causal)).abs().max()) == 0.0  # masked spins: products of exact zeros
    fixed = torch.zeros_like(h)
    for _ in range(2000):
        fixed = image(fixed, h, J, b, causal)
    assert float((m[0] - fixed).abs().amax()) < tol / (1 - 0.9) + 1e-13


def test_newton_in_the_fields_converges_where_saturated_spins_slow_newton_in_m():
    """Three spins per row start saturated at the wrong sign (``|m| = 1 - 1e-9``) under strong fields: Newton along
    straight lines in ``m`` alone (``M_STEPS`` above ``max_iter``) needs about 20 steps, the default (3 steps in
    ``m``, then in the fields) a handful; both pass ``tol`` and, the map contracting (0.9), lie within
    ``tol / (1 - 0.9)`` of its unique fixed point, so within twice that of each other. Masked spins stay 0."""
    h, J, b, mask = contracting(16, 12, 2, field=8.0)
    m0 = torch.tanh(h)
    m0[:, :3] = -m0[:, :3].sign() * (1 - 1e-9)
    m0 = m0 * mask
    tol = 1e-10
    got = {}
    for steps_in_m in (1000, mf_newton.M_STEPS):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(mf_newton, "M_STEPS", steps_in_m)
            got[steps_in_m] = mf_newton.newton_free_energy(m0.clone(), h, J, b, mask, tol=tol, max_iter=200)
    (m_only, steps_m, res_m), (fields, steps_u, res_u) = got[1000], got[mf_newton.M_STEPS]
    assert bool((res_m < tol).all()) and bool((res_u < tol).all())
    assert int(steps_m.min()) > 10 and int(steps_u.max()) <= 8  # the case under test: slow in m, fast in u
    assert float((fields - m_only).abs().max()) <= 2 * tol / (1 - 0.9)
    assert float((fields * (1 - mask)).abs().max()) == 0.0
    assert float((image(fields, h, J, b, mask) - fields).abs().amax()) < tol


def test_newton_leaves_a_float64_start_as_the_caller_gave_it():
    """``newton_free_energy`` updates its iterate in place: a float64 start (which ``.double()`` would not copy)
    must come back unchanged."""
    h, J, b, mask = contracting(8, 6, 3, field=4.0)
    m0 = (-torch.tanh(h)) * mask  # the wrong sign: Newton must move every row
    before = m0.clone()
    m, _, _ = mf_newton.newton_free_energy(m0, h, J, b, mask, tol=1e-10, max_iter=50)
    # bitwise equality of the caller's buffer with its copy taken before the call: no float kernel is compared here
    assert m0.dtype == torch.float64 and torch.equal(m0, before)
    # the solve did move the rows (to the other sign), by far more than rounding
    assert float((m - before).abs().amax()) > 0.5


def test_the_damped_solver_iterates_exactly_as_before(monkeypatch):
    """``solver="damped"`` (pinned by ``experiments/long_context_2``) runs none of the rows solver's code (each entry
    point of :mod:`.fixed_point` and :mod:`.mf_newton` raises if called), and its result is the reference damped
    iteration ``m <- m + d (f(m) - m)`` from ``tanh(beta h)`` with :func:`meanfield.update` as ``f``, bit for bit:
    the same float operations in the same order in one process (``_residual`` is ``update`` in place); in float32
    (what the round's runs train in) it runs no compiled loop either."""

    def forbidden(*args, **kwargs):
        raise AssertionError("the damped solver called the rows solver's code")

    for name in ("solve_rows", "iterate_rows", "iterate_blocks", "newton_free_energy"):
        monkeypatch.setattr(fixed_point, name, forbidden)
    monkeypatch.setattr(mf_newton, "newton_free_energy", forbidden)
    for name in ("solve_rows", "forward", "adjoint"):  # nor the compiled loops (float32 below too)
        monkeypatch.setattr(mf_kernel, name, forbidden)
    h, J, b, mask = contracting(12, 16, 3, field=1.5)
    beta = torch.full((1, 12), 1.3, dtype=torch.float64)
    tol = 1e-9
    with torch.no_grad():
        got, info = meanfield.mean_field(h[None], J[None], beta, mask[None], damping=0.5, tol=tol, solver="damped")
    m = torch.tanh(beta[..., None] * h[None])
    for it in range(1, 501):  # noqa: B007 (the count is compared after the loop)
        step = meanfield.update(m, h[None], J[None], mask[None], False, beta[..., None]) - m
        if float(step.abs().max()) < tol:
            break
        m = m + 0.5 * step
    assert info["iterations"] == it
    assert torch.equal(got, m)  # same operations, same order, one process
    with torch.no_grad():
        _, info32 = meanfield.mean_field(
            *(t[None].float() for t in (h, J)), beta.float(), mask[None].float(), damping=0.5, solver="damped"
        )
    assert "kernel" not in info32
    m_grad, _ = meanfield.mean_field(
        h[None].requires_grad_(), J[None], beta, mask[None], damping=0.5, tol=tol, solver="damped"
    )
    m_grad.sum().backward()  # the legacy implicit backward: no rows-solver code either
