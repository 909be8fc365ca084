"""The symmetric proposal program of qemcmc (hybrid_attention/circuits/proposal.py): layers, symmetry of the unitary, the qiskit
template against the numpy oracle, parameters and their validation."""

from __future__ import annotations

import numpy as np
import pytest

from hybrid_attention.circuits.program import CircuitOptions
from hybrid_attention.circuits.proposal import (
    ProposalParams,
    alpha_of,
    proposal_layers,
    proposal_matrix,
    proposal_template,
    proposal_unitary,
    proposal_values,
)
from hybrid_attention.circuits.reference import apply_driver, problem_energies


def random_problem(n, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    J = np.triu(rng.normal(0, scale, (n, n)), 1)
    return rng.normal(0, scale, n), J + J.T


def test_layers_are_palindromic_and_merge_adjacent_drivers():
    seq = proposal_layers(0.2, 0.3, 3)
    assert seq == seq[::-1]
    assert seq[0] == ("D", 0.1) and [k for k, _ in seq].count("P") == 3 and ("D", 0.2) in seq
    assert proposal_layers(0.2, 0.3, 2, merge_drivers=False) == [("D", 0.1), ("P", 0.3), ("D", 0.1)] * 2


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6])
@pytest.mark.parametrize("gamma, time, steps", [(0.4, 3.0, 1), (0.25, 12.0, 7), (0.9, 0.5, 4), (0.0, 2.0, 2)])
@pytest.mark.parametrize("shape", ["constant", "reverse"])
def test_unitary_is_unitary_and_symmetric(n, gamma, time, steps, shape):
    """Real symmetric generators in a palindromic product: U^T = U, so Q(s'|s) = Q(s|s') (docs/theory.md sec. 6).
    The reverse-anneal segment changes the mixer weight from slice to slice, symmetrically in time."""
    h, J = random_problem(n, seed=n * 31 + steps)
    params = ProposalParams(gamma=gamma, time=time, steps=steps, shape=shape)
    U = proposal_unitary(h, J, params)
    np.testing.assert_allclose(U.conj().T @ U, np.eye(1 << n), atol=1e-12)
    np.testing.assert_allclose(U, U.T, atol=1e-12)
    Q = proposal_matrix(h, J, params)
    np.testing.assert_allclose(Q, Q.T, atol=1e-13)
    np.testing.assert_allclose(Q.sum(1), 1.0, atol=1e-12)


def _product(n, E, layers):
    psi = np.eye(1 << n, dtype=complex)  # row s: |s>, evolved layer by layer
    for kind, val in layers:
        psi = apply_driver(psi, val, n) if kind == "D" else psi * np.exp(-1j * val * E)
    return np.abs(psi) ** 2  # Q[s, s']


def test_symmetry_needs_a_palindrome_up_to_diagonal_end_factors():
    """A first-order product U = [D(a) P(b)]^K with constant phases is not palindromic, yet its Q is symmetric:
    U^T = [P(b) D(a)]^K = P(b) U P(b)^-1 differs from U only by diagonal phases, which Z measurement cannot see.
    A time-dependent anneal segment (a linear ramp: DQA forward) is not symmetric: the test has teeth."""
    n, (h, J) = 3, random_problem(3, seed=4)
    E = float(alpha_of(h, J)) * problem_energies(h, J)
    first_order = _product(n, E, [("P", 0.5), ("D", 0.3)] * 4)
    np.testing.assert_allclose(first_order, first_order.T, atol=1e-13)
    K = 4
    ramp = [layer for k in range(K) for layer in (("P", 0.5 * (k + 0.5) / K), ("D", 0.5 * (1 - (k + 0.5) / K)))]
    Q = _product(n, E, ramp)
    assert np.abs(Q - Q.T).max() > 1e-2
    Qp = _product(n, E, ramp + ramp[::-1])  # forward then reversed: palindromic again
    np.testing.assert_allclose(Qp, Qp.T, atol=1e-13)


def test_limits_match_closed_forms():
    """gamma = 1: the mixer alone, Q(s'|s) = cos^2(t)^(n-d) sin^2(t)^d (d the Hamming distance); t = 0: identity."""
    n, (h, J), t = 3, random_problem(3, seed=1), 0.7
    Q = proposal_matrix(h, J, ProposalParams(gamma=1.0, time=t, steps=5))
    c = np.arange(1 << n)
    d = np.array([[bin(x ^ y).count("1") for y in c] for x in c])
    np.testing.assert_allclose(Q, np.cos(t) ** (2 * (n - d)) * np.sin(t) ** (2 * d), atol=1e-12)
    np.testing.assert_allclose(proposal_matrix(h, J, ProposalParams(gamma=0.5, time=0.0)), np.eye(1 << n), atol=1e-14)


def test_alpha_is_laydens_normalisation():
    h, J = np.array([3.0, 0.0]), np.array([[0.0, 4.0], [4.0, 0.0]])
    assert alpha_of(h, J) == pytest.approx(np.sqrt(2) / 5)
    assert alpha_of(np.zeros(3), np.zeros((3, 3))) == 0.0  # no problem term: the mixer alone
    assert alpha_of(h, J, mask=np.array([True, False])) == pytest.approx(1 / 5)
    v = proposal_values(h, J, ProposalParams(alpha=2.0), ((0, 1),))
    np.testing.assert_allclose(v, [6.0, 0.0, 8.0])


def test_reverse_slices_are_symmetric_and_start_classical():
    a, b = ProposalParams(gamma=0.6, time=4.0, steps=6, shape="reverse").slices(0.6, 4.0)
    np.testing.assert_allclose(a, a[::-1], atol=1e-15)
    np.testing.assert_allclose(a + b, 4.0 / 6)  # dt per slice
    assert a[0] == pytest.approx(0.6 * (1 / 6) * 4.0 / 6) and a.max() == pytest.approx(0.6 * (5 / 6) * 4.0 / 6)
    a2, b2 = ProposalParams(shape="reverse").slices(np.array([0.3, 0.5]), np.array([2.0, 3.0]))
    assert a2.shape == b2.shape == (2, 12)
    with pytest.raises(ValueError, match="shape must be one of"):
        ProposalParams(shape="forward")


@pytest.mark.parametrize(
    "fold, shape, steps",
    [
        (False, "constant", 8),
        (True, "constant", 8),
        (False, "reverse", 5),
        (True, "reverse", 5),
        (False, "constant", 1),
    ],
)
def test_qiskit_template_matches_the_oracle_on_every_basis_state(fold, shape, steps):
    """Statevector of the bound template (preparation of |s>, the product) = U|s> up to a global phase."""
    pytest.importorskip("qiskit")
    from qiskit.quantum_info import Statevector

    n, (h, J) = 3, random_problem(3, seed=9, scale=0.5)
    params = ProposalParams(gamma=0.35, time=2.5, steps=steps, shape=shape)
    U = proposal_unitary(h, J, params)
    edges = ((0, 1), (0, 2), (1, 2))
    tmpl = proposal_template(n, edges, params.steps, CircuitOptions(measure=False, fold_rzz=fold), shape)
    assert tmpl.circuit.num_parameters == tmpl.num_parameters
    vals = proposal_values(h, J, params, tmpl.edges)
    bits = ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1).astype(float)
    binds = tmpl.bindings(bits, np.repeat(vals[None], 1 << n, 0), 0.35, 2.5)
    assert binds.shape == (1 << n, tmpl.num_parameters)
    for s in range(1 << n):
        v = Statevector(tmpl.circuit.assign_parameters(binds[s].tolist())).data
        assert abs(abs(np.vdot(v, U[:, s])) - 1.0) < 1e-10


def test_template_is_cached_and_counts_parameters():
    t = proposal_template(4, ((0, 1), (2, 3)), 5)
    assert t is proposal_template(4, ((0, 1), (2, 3)), 5)
    assert t.num_parameters == 2 * 4 + 2 + 2
    assert proposal_template(4, ((0, 1), (2, 3)), 5, shape="reverse").num_parameters == 4 + 5 * (4 + 2) + 6
    with pytest.raises(ValueError, match="bits must be"):
        t.bindings(np.zeros((2, 3)), np.zeros((2, 6)), 0.5, 1.0)


def test_params_validation_and_draws():
    p = ProposalParams()
    assert not p.fixed and p.ranges() == ((0.25, 0.6), (2.0, 20.0))
    g, t = p.draw(np.random.default_rng(0), 1000)
    assert 0.25 <= g.min() and g.max() <= 0.6 and 2.0 <= t.min() and t.max() <= 20.0
    assert ProposalParams(gamma=(0.5, 0.5), time=3).fixed
    for bad, match in [
        ({"gamma": 1.5}, "gamma must lie in"),
        ({"gamma": (0.6, 0.2)}, "low <= high"),
        ({"time": -1.0}, "time must lie in"),
        ({"time": float("nan")}, "finite"),
        ({"steps": 0}, "steps must be an integer"),
        ({"steps": 2.0}, "steps must be an integer"),
        ({"alpha": -1.0}, "alpha must be"),
        ({"gamma": (0.1, 0.2, 0.3)}, "pair"),
    ]:
        with pytest.raises(ValueError, match=match):
            ProposalParams(**bad)
    with pytest.raises(ValueError, match="must be given"):
        proposal_unitary(np.zeros(2), np.zeros((2, 2)), ProposalParams())
