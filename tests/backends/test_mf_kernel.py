"""The compiled loops of mean field's per-row solver (:mod:`hybrid_attention.backends.mcmc.mf_kernel`, float32)
against their oracles: ``tanh`` itself (``J = 0``: the solution is ``tanh(beta h)``), the fixed point and implicit
gradient of a float64 solve at a tolerance far below float32's (the stopping test bounds the distance to it through
``(I - A)^-1``, computed exactly at the fixed point), and the torch loops' hand-over rules (Newton, fallbacks)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends.mcmc import meanfield, mf_kernel
from hybrid_attention.backends.mcmc.fixed_point import SWITCH
from hybrid_attention.backends.mcmc.meanfield import MeanFieldSampler

pytest.importorskip("numba")

TOL = 1.2e-4  # the float32 default (1000 eps)
#: per-evaluation float32 error of the map: the rational tanh (3e-7) and an n-term product's rounding (n eps, n <= 64)
DELTA = 1e-5


def problem(G: int, B: int, T: int, scale: float, seed: int, masks: str = "causal"):
    """``G`` coupling groups of ``B * T`` rows of ``T`` spins: couplings ``N(0, scale^2 / T)``, fields ``N(0, 1)``,
    one inverse temperature per row in ``[0.5, 1.5]``; causal masks or random ones (not prefix-like: rows' widths
    run past masked spins). float64 (the oracle's dtype; the compiled loops get a float32 copy)."""
    rng = np.random.default_rng(seed)
    U = np.triu(rng.normal(scale=scale / np.sqrt(T), size=(G, T, T)), 1)
    J = torch.tensor(U + U.transpose(0, 2, 1))
    if masks == "causal":
        mask = torch.ones(T, T, dtype=torch.float64).tril().repeat(B, 1)[None].expand(G, -1, -1).contiguous()
    else:
        mask = torch.tensor(rng.random((G, B * T, T)) < 0.6, dtype=torch.float64)
    h = torch.tensor(rng.normal(size=(G, B * T, T))) * mask
    beta = torch.tensor(rng.uniform(0.5, 1.5, size=(G, B * T)))
    return h, J, beta, mask


def oracle(h, J, beta, mask):
    """The float64 fixed point (tolerance 1e-13) and, per row, ``||(I - A)^-1||_inf`` at it (``A = diag(D) J``,
    ``D = beta (1 - m^2)`` on the active spins): an iterate ``x`` with ``|f(x) - x| < tol`` is within about
    ``||(I - A)^-1|| tol`` of it."""
    with torch.no_grad():
        m, info = meanfield.mean_field(h, J, beta, mask, tol=1e-13, max_iter=5000, solver="rows", damping=1.0)
    assert info["converged"]
    D = beta[..., None] * (1 - m * m) * mask
    A = D[..., :, None] * J[:, None]  # (G, R, n, n)
    inv = torch.linalg.inv(torch.eye(J.shape[-1], dtype=J.dtype) - A)
    return m, inv.abs().sum(-1).amax(-1)  # (G, R)


def compiled(h, J, beta, mask, **kw):
    f32 = [t.float() for t in (h, J, beta, mask)]
    with torch.no_grad():
        return meanfield.mean_field(
            *f32, solver="rows", damping=kw.pop("damping", 1.0), tol=TOL, kernel="compiled", **kw
        )


def test_zero_couplings_give_tanh_within_float_eps():
    """``J = 0``: every spin is independent and the solution is ``tanh(beta h)`` exactly; the loop's rational
    ``tanh`` is within 1e-6 of torch's over ``beta h`` in ``[-20, 20]`` (both saturate at +-1 past about 9)."""
    z = torch.linspace(-20, 20, 64 * 301, dtype=torch.float64).reshape(301, 64)
    m, info = compiled(z[None], torch.zeros(1, 64, 64), torch.ones(1, 301), torch.ones(1, 301, 64))
    assert info["kernel"] == "compiled" and info["iterations"] == 1
    assert float((m[0].double() - torch.tanh(z)).abs().max()) < 1e-6


@pytest.mark.parametrize("masks", ["causal", "random"])
@pytest.mark.parametrize("G, B, T", [(1, 4, 64), (2, 3, 24)])
def test_compiled_solution_is_within_the_stopping_bound_of_the_fixed_point(masks, G, B, T):
    """Each row's value (``f(x)`` at the iterate ``x`` that passed) is within ``(1 + kappa) (tol + delta)`` of the
    float64 fixed point, ``kappa = ||(I - A)^-1||``: ``|f(x) - m*| <= |f(x) - x| + |x - m*|`` and ``x - m*`` is
    ``(I - A)^-1 (f(x) - x)`` to first order (a factor 1.5 for the second-order terms). Masked spins are exactly 0,
    and the torch loops on the same float32 problem are within the same bound."""
    h, J, beta, mask = problem(G, B, T, 0.6, seed=G * T + (masks == "random"), masks=masks)
    m_star, kappa = oracle(h, J, beta, mask)
    m, info = compiled(h, J, beta, mask)
    assert info["kernel"] == "compiled" and info["converged"]
    bound = 1.5 * (1 + kappa) * (TOL + DELTA)
    assert bool(((m.double() - m_star).abs().amax(-1) <= bound).all())
    # masked spins are held at 0, not computed: exact on any CPU (the loops write 0 there or multiply a finite value
    # by the mask's 0.0); no float kernel's result is compared
    assert float((m * (1 - mask.float())).abs().max()) == 0.0
    with torch.no_grad():
        t, _ = meanfield.mean_field(*(x.float() for x in (h, J, beta, mask)), solver="rows", damping=1.0, tol=TOL,
                                    kernel="torch")  # fmt: skip
    assert bool(((t.double() - m_star).abs().amax(-1) <= bound).all())


def test_damped_iteration_and_warm_start_reach_the_same_fixed_point():
    """Damping 0.5 (the sampler's default) and a start at a perturbed solution: the same fixed point, within the
    stopping bound (the stopping test is on ``|f(x) - x|`` whatever the damping)."""
    h, J, beta, mask = problem(1, 4, 32, 0.6, seed=3)
    m_star, kappa = oracle(h, J, beta, mask)
    bound = 1.5 * (1 + kappa) * (TOL + DELTA)
    start = (
        (m_star + 0.3 * torch.randn(m_star.shape, generator=torch.Generator().manual_seed(0))).clamp(-1, 1)
    ).float()
    for kw in ({"damping": 0.5}, {"start": start}):
        m, info = compiled(h, J, beta, mask, **kw)
        assert info["kernel"] == "compiled" and info["converged"]
        assert bool(((m.double() - m_star).abs().amax(-1) <= bound).all()), kw


def test_implicit_gradient_matches_the_float64_oracle():
    """The backward's adjoint (compiled, secant-accelerated) against the float64 solve's implicit gradient (tested
    against finite differences in test_meanfield_rows.py): both solve the same adjoint system, the compiled one to
    ``tol`` relative to the gradient's scale, at a solution within the stopping bound. Each of the two stopping
    tests (the forward's, the adjoint's) moves the result by up to ``kappa (tol + delta)`` relative to first order
    (``kappa = max ||(I - A)^-1||``, 4.9 here): the relative error of each parameter's gradient is bounded by
    ``4 kappa (tol + delta)`` (a factor 2 for the second-order terms; 2.6e-3, against about 2e-4 measured)."""
    h, J, beta, mask = problem(1, 4, 48, 0.3, seed=5)
    w = torch.randn(h.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    grads = {}
    for name, dt, kw in (("oracle", torch.float64, {"tol": 1e-13}), ("compiled", torch.float32, {"tol": TOL})):
        ps = [t.detach().to(dt, copy=True).requires_grad_() for t in (h, J, beta)]
        m, info = meanfield.mean_field(*ps, mask.to(dt), solver="rows", damping=1.0, kernel="auto", **kw)
        assert info["kernel"] == ("compiled" if dt == torch.float32 else "torch")
        (m * w.to(dt)).sum().backward()
        grads[name] = [p.grad.double() for p in ps]
    _, kappa = oracle(h, J, beta, mask)
    bound = 4 * float(kappa.max()) * (TOL + DELTA)
    for name, a, b in zip(("h", "J", "beta"), grads["oracle"], grads["compiled"]):
        rel = float((a - b).norm() / a.norm())
        assert rel < bound, (name, rel, bound)


def near_critical(seed: int):
    """Ferromagnetic couplings near the mean-field transition with weak fields (8 sequences of 32, causal): slow
    for the iteration (its rate of convergence near 1 in the rows that need more than SWITCH iterations)."""
    rng = np.random.default_rng(seed)
    T, B = 32, 8
    U = np.triu(rng.normal(scale=0.3 / np.sqrt(T), size=(1, T, T)) + 1.0 / T, 1)
    J = torch.tensor(U + U.transpose(0, 2, 1))
    mask = torch.ones(T, T, dtype=torch.float64).tril().repeat(B, 1)[None]
    h = 0.05 * torch.tensor(rng.normal(size=(1, B * T, T))) * mask
    beta = torch.tensor(rng.uniform(0.5, 1.5, size=(1, B * T)))
    return h, J, beta, mask


@pytest.mark.parametrize("seed", [1, 3])
def test_slow_rows_stop_on_their_distance_to_the_fixed_point(seed):
    """Rows past SWITCH iterations iterate on (no Newton) until the estimated distance ``r / (1 - rho)`` is below
    ``tol``: their values are within 2 tol of the float64 fixed point, where the residual test alone bounds the
    distance only by ``kappa tol`` (``kappa = ||(I - A)^-1||``, above 20 on some of these rows: asserted). The
    factor 2 allows for the rate estimate (``rho`` from 8 residuals, not the Jacobian's spectral radius)."""
    h, J, beta, mask = near_critical(seed)
    m_star, kappa = oracle(h, J, beta, mask)
    m, info = compiled(h, J, beta, mask, max_iter=500)
    assert info["kernel"] == "compiled" and info["converged"] and info["newton_rows"] == 0
    w = mf_kernel.widths(mask.float(), h.shape)
    _, count, _, _ = mf_kernel.forward(*(t[0].float() for t in (h, J, mask, beta)), w[0], None, damping=1.0, tol=TOL,
                                       max_iter=mf_kernel.LONG, switch=SWITCH)  # fmt: skip
    slow = count > SWITCH
    assert int(slow.sum()) >= 5 and info["iterations"] > SWITCH  # the case under test
    err = (m.double() - m_star).abs().amax(-1)[0]
    assert float(err[slow].max()) < 2 * TOL
    assert float(kappa[0][slow].max()) > 20  # the residual test alone would allow 20 tol there


def test_rows_the_iteration_cannot_settle_go_to_newton_from_the_switch():
    """Strong antiferromagnetic pairs (``J = -6``, nearly equal fields): the plain iteration oscillates for ever.
    Those rows go to Newton after LONG iterations, from the iterate after SWITCH (the same start as without the
    slow stage: with LONG = SWITCH the result is identical, the same compiled and torch operations on the same
    inputs in one process), and end at a true fixed point."""
    h = torch.tensor([[[0.1, 0.0], [0.3, 0.29], [0.5, 0.4]]])
    J = torch.tensor([[[0.0, -6.0], [-6.0, 0.0]]])
    beta, mask = torch.ones(1, 3), torch.ones(1, 3, 2)
    m, info = compiled(h, J, beta, mask, max_iter=500)
    assert info["kernel"] == "compiled" and info["converged"] and info["newton_rows"] > 0
    assert info["iterations"] > mf_kernel.LONG
    f = torch.tanh(beta[..., None] * (h + m.double() @ J.double())) * mask
    assert float((f - m.double()).abs().max()) < TOL + DELTA
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mf_kernel, "LONG", SWITCH)
        m_switch, info_switch = compiled(h, J, beta, mask, max_iter=500)
    assert info_switch["newton_rows"] == info["newton_rows"]
    assert torch.equal(m, m_switch)  # determinism in one process: the same operations on the same inputs


def test_non_finite_inputs_and_float64_run_the_torch_loops():
    h, J, beta, mask = problem(1, 2, 16, 0.6, seed=7)
    with torch.no_grad():
        _, info = meanfield.mean_field(h, J, beta, mask, solver="rows", kernel="auto")  # float64
        assert info["kernel"] == "torch"
        bad = h.float().clone()
        bad[0, 3, 0] = float("nan")
        _, info = meanfield.mean_field(bad, J.float(), beta.float(), mask.float(), solver="rows", kernel="compiled",
                                       warn=False)  # fmt: skip
        assert info["kernel"] == "torch"


def test_training_defaults_run_the_compiled_loops():
    """``train --sampler meanfield``'s options (solver rows, damping 1) with numba installed: the compiled loops."""
    s = MeanFieldSampler(solver="rows", damping=1.0)
    h, J, beta, mask = problem(1, 2, 16, 0.6, seed=8)
    p = IsingProblem(h[0].float(), J[0].float(), beta=beta[0].float(), mask=mask[0].bool())
    s.differentiable_marginals(p)
    assert s.last_info["kernel"] == "compiled" and s.properties["kernel"] == "auto"


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"kernel": "numba"}, "kernel must be one of"),
        ({"kernel": "compiled"}, "kernel='compiled' runs solver='rows' with method='naive'; got solver 'damped'"),
        ({"kernel": "compiled", "solver": "rows", "method": "tap"}, "got solver 'rows', method 'tap'"),
    ],
)
def test_bad_kernel_options_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        MeanFieldSampler(**kw)


def test_widths_are_the_last_active_spin():
    mask = torch.tensor([[[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]]], dtype=torch.float32)
    assert mf_kernel.widths(mask, (2, 3, 4)).tolist() == [[3, 0, 4], [3, 0, 4]]
    assert mf_kernel.widths(None, (1, 2, 5)).tolist() == [[5, 5]]
