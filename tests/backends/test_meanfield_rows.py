"""Mean field's per-row solver (``solver="rows"``, :mod:`hybrid_attention.backends.mcmc.fixed_point`) against its
oracles: the mean-field equations themselves (residual), the legacy damped iteration where that converges, finite
differences for the gradients, and the free energy's curvature where the damped iteration does not converge."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends.mcmc import fixed_point, meanfield
from hybrid_attention.backends.mcmc.meanfield import MeanFieldSampler


def causal(B: int, T: int, scale: float, seed: int, ferro: float = 0.0):
    """``B`` causal rows of ``T`` keys in the grouped layout: couplings ``N(0, scale^2 / T)`` plus ``ferro / T`` on
    every pair, fields ``N(0, 1)``, float64."""
    rng = np.random.default_rng(seed)
    U = np.triu(rng.normal(scale=scale / np.sqrt(T), size=(1, T, T)) + ferro / T, 1)
    J = torch.tensor(U + U.transpose(0, 2, 1))
    mask = torch.ones(T, T, dtype=torch.float64).tril().repeat(B, 1)[None]
    h = torch.tensor(rng.normal(size=(1, B * T, T))) * mask
    beta = torch.tensor(rng.uniform(0.5, 1.5, size=(1, B * T)))
    return h, J, beta, mask


def residual(m, h, J, beta, mask) -> torch.Tensor:
    """``max_j |f(m)_j - m_j|`` per row: how far ``m`` is from satisfying the mean-field equations."""
    return (meanfield.update(m, h, J, mask, False, beta[..., None]) - m).abs().amax(-1)


@pytest.mark.parametrize("method", ["naive", "tap"])
@pytest.mark.parametrize("B, T", [(4, 16), (16, 64)])  # (16, 64): the causal row blocks of meanfield.width_blocks
def test_rows_solver_satisfies_the_equations_and_agrees_with_the_damped_iteration(method, B, T):
    """Where the damped iteration converges, both stop at a residual below ``tol = 1e-10`` (float64 rounding of the
    ``n``-term products is ~1e-15 per step); the damped map contracts at rate below 0.9 here (spectral radius of
    ``beta J`` about 0.4), which bounds the gap of two iterates that both pass by ``2 tol / (1 - 0.9)``."""
    h, J, beta, mask = causal(B, T, 0.2, 0)
    got = {}
    for solver in ("damped", "rows"):
        with torch.no_grad():
            got[solver], info = meanfield.mean_field(
                h, J, beta, mask, method=method, tol=1e-10, max_iter=2000, solver=solver
            )
        assert info["converged"]
    if method == "naive":
        assert float(residual(got["rows"], h, J, beta, mask).max()) < 1e-10
    assert float((got["rows"] - got["damped"]).abs().max()) < 2e-10 / 0.1
    assert float((got["rows"] * (1 - mask)).abs().max()) == 0.0  # masked spins are set to 0, not computed


def test_stragglers_switch_to_newton_and_reach_the_damped_fixed_point():
    """Near-critical ferromagnetic couplings make the damped iteration slow (over a thousand steps): the rows solver
    hands the rows unconverged after SWITCH iterations to Newton, which reaches the fixed point the damped iteration
    reaches when given enough steps. Both pass ``tol``; near the fixed point the damped map contracts at
    ``rho = max |1 - d + d lambda|`` over the eigenvalues of ``D^1/2 J D^1/2`` (``D = beta (1 - m^2)``), so two
    iterates that pass differ by at most ``2 tol / (1 - rho)`` (to first order)."""
    h, J, beta, mask = causal(8, 32, 0.3, 1, ferro=1.0)
    h, tol = 0.05 * h, 1e-11
    with torch.no_grad():
        slow, info_d = meanfield.mean_field(h, J, beta, mask, tol=tol, max_iter=200_000)
        fast, info_r = meanfield.mean_field(h, J, beta, mask, tol=tol, max_iter=500, solver="rows")
    assert info_d["converged"] and info_r["converged"]
    assert info_d["iterations"] > 10 * fixed_point.SWITCH  # the case under test: slow for the damped iteration
    assert info_r["newton_rows"] > 0 and info_r["iterations"] < 200
    assert float(residual(fast, h, J, beta, mask).max()) < tol
    s = (beta[0, :, None] * (1 - slow[0] ** 2)).sqrt() * mask[0]
    lam = torch.linalg.eigvalsh(s[:, :, None] * J[0] * s[:, None, :])
    rho = float(torch.maximum((0.5 + 0.5 * lam).abs().amax(-1), torch.tensor(0.5)).max())
    assert float((fast - slow).abs().max()) < 2 * tol / (1 - rho) * 1.5  # 1.5: the first-order bound's slack


def test_where_the_damped_iteration_never_converges_newton_returns_a_free_energy_minimum():
    """Strong antiferromagnetic pairs (``J = -6``) with nearly equal fields: near ``m1 = m2`` the damped map's
    Jacobian has an eigenvalue near ``1 - d + d (-6) = -2.5``, so the iteration oscillates (residual about 1.3 after 500
    steps). The rows solver returns a true fixed point (residual below tol) at which the free energy's Hessian
    ``diag(1 / (beta (1 - m^2))) - J`` is positive definite: a local minimum, the antiferromagnetic state."""
    h = torch.tensor([[[0.1, 0.0], [0.3, 0.29], [0.5, 0.4]]], dtype=torch.float64)
    J = torch.tensor([[[0.0, -6.0], [-6.0, 0.0]]], dtype=torch.float64)
    beta = torch.ones(1, 3, dtype=torch.float64)
    with torch.no_grad():
        _, info_d = meanfield.mean_field(h, J, beta, tol=1e-10, max_iter=500, warn=False)
        m, info_r = meanfield.mean_field(h, J, beta, tol=1e-10, max_iter=500, solver="rows")
    assert not info_d["converged"]
    assert info_r["converged"] and float(residual(m, h, J, beta, None).max()) < 1e-10
    hess = torch.diag_embed(1 / (1 - m[0] ** 2)) - J[0]
    assert float(torch.linalg.eigvalsh(hess).min()) > 0
    assert bool((m[0, :, 0] * m[0, :, 1] < 0).all())  # antiferromagnetic


@pytest.mark.parametrize("method", ["naive", "tap"])
@pytest.mark.parametrize("critical", [False, True])
def test_rows_solver_gradients_match_finite_differences(method, critical, monkeypatch):
    """gradcheck (float64) of the implicit backward with per-row stopping; ``critical``: near-critical couplings, and
    SWITCH lowered to 5 (the accelerated iteration needs about 35 steps here) so that naive mean field's stragglers
    go to Newton in the forward and are solved directly in the adjoint."""
    if critical:
        monkeypatch.setattr(fixed_point, "SWITCH", 5)
    rng = np.random.default_rng(4)
    n = 5
    iu = torch.triu_indices(n, n, offset=1)
    mf = MeanFieldSampler(method=method, tol=1e-13, max_iter=20_000, solver="rows")

    def f(h, v, beta):
        U = torch.zeros(n, n, dtype=torch.float64).index_put((iu[0], iu[1]), v)
        return mf.differentiable_marginals(IsingProblem(h, U + U.T, beta=beta))

    h = torch.tensor(rng.normal(scale=0.05 if critical else 1.0, size=(2, n)), requires_grad=True)
    c = 0.23 if critical else 0.0  # ferromagnetic: the largest eigenvalue of beta J near 1
    v = torch.tensor(rng.normal(scale=0.02 if critical else 0.3, size=iu.shape[1]) + c, requires_grad=True)
    beta = torch.tensor([0.95, 1.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(f, (h, v, beta), eps=1e-6, atol=1e-5, check_undefined_grad=False)
    if critical and method == "naive":
        f(h, v, beta).sum().backward()
        assert mf.last_info["backward_iterations"] > fixed_point.SWITCH  # the direct solve ran


def test_a_warm_start_is_only_a_guess():
    """Starting from another batch's solution (unrelated fields), from noise or from the answer itself gives the
    cold start's fixed point within the tolerance's reach: an iterate ``x`` with ``|f(x) - x| < tol`` is, to first
    order, within ``||(I - A)^-1||_inf tol`` of the fixed point (``A = diag(beta (1 - m^2)) J``, the map's Jacobian
    there; spectral radius about 0.8 here), so two of them differ by at most twice that (1.5: the slack of the first
    order)."""
    h, J, beta, mask = causal(8, 32, 0.5, 5)
    h2 = causal(8, 32, 0.5, 6)[0]
    tol = 1e-10
    with torch.no_grad():
        cold, _ = meanfield.mean_field(h, J, beta, mask, tol=tol, solver="rows")
        A = (beta[0, :, None] * (1 - cold[0] ** 2) * mask[0])[:, :, None] * J[0] * mask[0][:, None, :]
        eye = torch.eye(A.shape[-1], dtype=A.dtype)
        reach = float(torch.linalg.inv(eye - A).abs().sum(-1).amax()) * tol
        other, _ = meanfield.mean_field(h2, J, beta, mask, tol=tol, solver="rows")
        noise = torch.rand(h.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2 - 1
        for start in (other, noise, cold):
            warm, info = meanfield.mean_field(h, J, beta, mask, tol=tol, solver="rows", start=start)
            assert info["converged"] and float((warm - cold).abs().max()) <= 2 * reach * 1.5
    with pytest.raises(ValueError, match="needs solver='rows'"):
        meanfield.mean_field(h, J, beta, mask, start=cold)
    with pytest.raises(ValueError, match="solver must be one of"):
        MeanFieldSampler(solver="anderson")


def test_blocked_gradients_agree_with_the_damped_solver():
    """Causal rows in width blocks (16 x 64 rows: :func:`meanfield.width_blocks` splits them) whose adjoint rows are
    merged into one padded batch after MERGE iterations: the implicit gradients of the rows solver match the legacy
    damped solver's (its own adjoint iteration, unblocked tail). Both adjoints stop at a residual below ``tol`` times
    the incoming gradient's scale, ``1e-12``; the adjoint map contracts at the forward rate (spectral radius of
    ``beta D J`` about 0.4 here, below 0.5), so each is within ``2 tol / (1 - 0.5)`` of the exact adjoint per entry and
    the parameter gradients (sums over at most R n entries of size <= 1 times beta) within ``R n`` times that."""
    h, J, beta, mask = causal(16, 64, 0.2, 7)
    assert meanfield.width_blocks(mask, 64) is not None  # the case under test
    w = torch.tensor(np.random.default_rng(8).normal(size=h.shape))
    grads = {}
    for solver in ("damped", "rows"):
        hh, JJ = h.clone().requires_grad_(), J.clone().requires_grad_()
        d = 0.5 if solver == "damped" else 1.0  # each solver's own default: the same fixed point and adjoint
        m, _ = meanfield.mean_field(hh, JJ, beta, mask, tol=1e-12, max_iter=2000, solver=solver, damping=d)
        (m * w).sum().backward()
        grads[solver] = (hh.grad, JJ.grad)
    bound = 2 * 1e-12 / 0.5 * float(w.abs().max()) * h.shape[1] * h.shape[2]
    for a, b in zip(grads["rows"], grads["damped"]):
        assert float((a - b).abs().max()) < bound


def test_closed_form_gradients_agree_with_the_legacy_implicit_step_per_group_and_beta():
    """The rows solver's closed-form backward (``mf_adjoint.RowsFixedPoint``: ``D v`` for ``h``, ``m*^T D v`` for
    ``J``, ``sum_j v_j (1 - f_j^2) (h + m* J)_j`` for ``beta``) against the legacy route, a differentiable step
    ``f(m*, theta)`` whose gradient the damped solver's hook completes, on two coupling groups of causal rows in width
    blocks with a per-row ``beta`` that takes a gradient. Both adjoints stop at a residual ``r`` below ``tol`` times
    the incoming gradient's scale ``s``; an adjoint iterate is then ``(I - A^T)^-1 r`` from the exact one (``A`` the
    map's Jacobian per row), within ``||(I - A^T)^-1||_inf tol s`` per entry (the norm computed here), so the two
    within twice that; the parameter gradients are sums over at most ``R n`` such entries, each multiplied by at most
    ``beta`` (``beta (1 - f^2)``, for ``h`` one entry, for ``J`` a sum over the ``R`` rows with ``|m| <= 1``) or by
    ``|h| + sum |J|`` (the field, for ``beta``: a sum over ``n`` spins)."""
    h1, J1, b1, mask = causal(16, 64, 0.2, 11)
    h2, J2, b2, _ = causal(16, 64, 0.2, 12)
    h, J, beta, mask = torch.cat([h1, h2]), torch.cat([J1, J2]), torch.cat([b1, b2]), mask.expand(2, -1, -1)
    assert meanfield.width_blocks(mask, 64) is not None  # the case under test
    w = torch.tensor(np.random.default_rng(13).normal(size=h.shape))
    tol, grads = 1e-12, {}
    for solver in ("damped", "rows"):
        hh, JJ, bb = h.clone().requires_grad_(), J.clone().requires_grad_(), beta.clone().requires_grad_()
        d = 0.5 if solver == "damped" else 1.0
        m, info = meanfield.mean_field(hh, JJ, bb, mask, tol=tol, max_iter=2000, solver=solver, damping=d)
        assert info["converged"]
        (m * w).sum().backward()
        grads[solver] = (hh.grad, JJ.grad, bb.grad)
        if solver == "rows":
            A = (bb[..., None] * (1 - m**2) * mask).detach()[..., None] * J[:, None] * mask[..., None, :]
            eye = torch.eye(A.shape[-1], dtype=A.dtype)
            reach = float(torch.linalg.inv(eye - A.transpose(-1, -2)).abs().sum(-1).amax())
    dv = 2 * reach * tol * float(w.abs().max())
    R, n = h.shape[1], h.shape[2]
    dfield = float(h.abs().max() + J.abs().sum(-1).max())
    bounds = (dv * float(beta.max()), dv * float(beta.max()) * R, dv * dfield * n)
    for a, b, bound in zip(grads["rows"], grads["damped"], bounds):
        assert float((a - b).abs().max()) <= bound


def test_without_numba_the_rows_solver_runs_its_torch_loops(monkeypatch):
    """No numba (``mf_kernel.available()`` false): ``kernel="auto"`` runs the torch loops on training's float32
    problems, and asking for the compiled loops is refused before any work."""
    from hybrid_attention.backends.mcmc import mf_kernel

    monkeypatch.setattr(mf_kernel, "available", lambda: False)
    h, J, beta, mask = (t.float() for t in causal(2, 8, 0.3, 0))
    with torch.no_grad():
        _, info = meanfield.mean_field(h, J, beta, mask, solver="rows", damping=1.0, tol=1e-4)
    assert info["kernel"] == "torch" and info["converged"]
    with pytest.raises(ImportError, match="kernel='compiled' needs numba"):
        MeanFieldSampler(solver="rows", kernel="compiled")
