"""IsingProblem: validation, conventions, energies, conversions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.ising import bits_to_spins, index_to_spins, spins_to_bits, spins_to_index
from tests.conftest import random_couplings, to_t


def test_energy_physics_sign_and_shapes(rng):
    n = 4
    h = rng.normal(size=(3, n))
    J = random_couplings(rng, n)
    p = IsingProblem(to_t(h), to_t(J))
    S = np.array(list(itertools.product([1, -1], repeat=n)), dtype=float)
    E = p.energy(to_t(S).expand(3, *S.shape))
    assert E.shape == (3, 2**n)
    for b in range(3):
        for c, s in enumerate(S):
            ref = -(h[b] @ s) - sum(J[j, k] * s[j] * s[k] for j in range(n) for k in range(j + 1, n))
            assert abs(E[b, c].item() - ref) < 1e-12
    # one configuration per problem
    assert p.energy(to_t(S[:3])).shape == (3,)


def test_ferromagnetic_coupling_lowers_aligned_energy():
    p = IsingProblem(torch.zeros(2), torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
    assert p.energy(torch.tensor([1, 1])) < p.energy(torch.tensor([1, -1]))


def test_mask_ignores_dropped_spins_in_energy():
    J = torch.tensor([[0.0, 2.0], [2.0, 0.0]])
    p = IsingProblem(torch.tensor([1.0, 5.0]), J, mask=torch.tensor([True, False]))
    assert p.energy(torch.tensor([1, 1])).item() == pytest.approx(-1.0)
    assert p.energy(torch.tensor([1, -1])).item() == pytest.approx(-1.0)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(h=[[1.0, float("nan")]]), ValueError, "h must be finite"),
        (dict(h=[1.0, 2.0], J=[[0.0, 1.0], [2.0, 0.0]]), ValueError, "symmetric"),
        (dict(h=[1.0, 2.0], J=[[1.0, 0.0], [0.0, 0.0]]), ValueError, "zero diagonal"),
        (dict(h=[1.0, 2.0], J=[[0.0, 1.0, 0.0]] * 3), ValueError, r"shape \(n, n\).*n = 2"),
        (dict(h=[1.0, 2.0], beta=0.0), ValueError, "beta must be finite and > 0"),
        (dict(h=[1.0, 2.0], beta=-1.0), ValueError, "beta"),
        (dict(h=[1.0, 2.0], beta="hot"), TypeError, "beta must be"),
        (dict(h=[1.0, 2.0], mask=[1, 0]), TypeError, "mask must be boolean"),
        (dict(h=[1.0, 2.0], mask=[True, False, True]), ValueError, "mask must have the shape"),
        (dict(h="abc"), TypeError, "h must be"),
        (dict(h=[]), ValueError, "n = 0"),
        (dict(h=[[1.0, 0.0]], J=[[[0.0, float("inf")], [float("inf"), 0.0]]]), ValueError, "J must be finite"),
    ],
)
def test_validation_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        IsingProblem(**kwargs)


def test_batched_J_shape_mismatch():
    with pytest.raises(ValueError, match="does not broadcast"):
        IsingProblem(torch.zeros(3, 2), torch.zeros(4, 2, 2))


def test_from_couplings_upper_and_average():
    J = torch.tensor([[5.0, 1.0, 2.0], [9.0, 5.0, 3.0], [9.0, 9.0, 5.0]])
    p = IsingProblem.from_couplings(torch.zeros(3), J, symmetrize="upper")
    torch.testing.assert_close(p.J, torch.tensor([[0.0, 1, 2], [1, 0, 3], [2, 3, 0]]))
    q = IsingProblem.from_couplings(torch.zeros(3), J, symmetrize="average")
    torch.testing.assert_close(q.J, torch.tensor([[0.0, 5, 5.5], [5, 0, 6], [5.5, 6, 0]]))
    with pytest.raises(ValueError, match="symmetrize"):
        IsingProblem.from_couplings(torch.zeros(3), J, symmetrize="lower")


def test_dimod_round_trip_flips_sign():
    p = IsingProblem.from_dimod({0: 1.0, 1: -0.5}, {(0, 1): 2.0})
    torch.testing.assert_close(p.h, torch.tensor([-1.0, 0.5], dtype=torch.float64))
    assert p.J[0, 1].item() == -2.0
    hd, Jd = p.to_dimod()
    assert hd == {0: 1.0, 1: -0.5} and Jd == {(0, 1): 2.0}
    # dimod energy E = h.s + J s s equals ours
    s = torch.tensor([1.0, -1.0], dtype=torch.float64)
    assert p.energy(s).item() == pytest.approx(1.0 * 1 + (-0.5) * (-1) + 2.0 * (1 * -1))


def test_bit_conventions():
    s = np.array([[1, -1, -1, 1]])
    assert spins_to_bits(s).tolist() == [[0, 1, 1, 0]]
    assert bits_to_spins([[0, 1, 1, 0]]).tolist() == s.tolist()
    # qubit 0 least significant: bits 0110 (q3..q0 = 0,1,1,0) -> index 6
    assert spins_to_index(s).tolist() == [6]
    np.testing.assert_array_equal(
        index_to_spins(np.arange(16), 4)[spins_to_index(index_to_spins(np.arange(16), 4))],
        index_to_spins(np.arange(16), 4),
    )


def test_flatten_index_and_edges(rng):
    h = to_t(rng.normal(size=(2, 3, 4)))
    J = torch.zeros(4, 4, dtype=torch.float64)
    J[0, 2] = J[2, 0] = 1.0
    p = IsingProblem(h, J, mask=torch.ones(2, 3, 4, dtype=torch.bool))
    assert p.mask is None  # an all-True mask is no mask
    f = p.flatten()
    assert f.batch_shape == (6,) and f.shared_couplings
    assert p[1].batch_shape == (3,)
    assert p.coupling_edges() == [(0, 2)]
    assert p.expanded_couplings().shape == (2, 3, 4, 4)
    assert "n=4" in repr(p)


def test_one_element_tensor_beta_survives_flatten_and_indexing():
    p = IsingProblem(torch.zeros(1, 1, 3), beta=torch.tensor([[0.5]]))
    assert torch.equal(p.flatten().beta_tensor(), torch.tensor([0.5]))
    q = IsingProblem(torch.zeros(4, 3), beta=torch.tensor([0.5]))
    assert torch.equal(q[1:3].beta_tensor(), torch.tensor([0.5, 0.5]))


# ---------------------------------------------------------------------- issue #10: beta checked in the problem's dtype
@pytest.mark.parametrize(
    "beta", [1e40, 1e-50, torch.tensor(1e40, dtype=torch.float64), torch.tensor([1.0, 1e300], dtype=torch.float64)]
)
def test_beta_must_be_finite_and_positive_in_the_problem_dtype(beta):
    """float32 IsingProblem(beta=1e40) used to pass validation and return NaN (1e40 is inf in float32)."""
    with pytest.raises(ValueError, match="beta must be finite and > 0"):
        IsingProblem(torch.zeros(2, 2, dtype=torch.float32), beta=beta)
    IsingProblem(torch.zeros(2, 2, dtype=torch.float64), beta=beta)  # fine in float64


@pytest.mark.parametrize("beta", [np.float32(2.0), np.int64(2), np.array(2.0), 2])
def test_beta_accepts_real_scalars(beta):
    p = IsingProblem(torch.zeros(2), beta=beta)
    assert p.beta == 2.0 and isinstance(p.beta, float)


@pytest.mark.parametrize("beta", [True, np.bool_(True), 1 + 2j, torch.tensor(True), torch.tensor(1 + 1j)])
def test_beta_rejects_non_real_types(beta):
    with pytest.raises(TypeError, match="beta must be"):
        IsingProblem(torch.zeros(2), beta=beta)
