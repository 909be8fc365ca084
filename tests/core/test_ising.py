"""IsingProblem: validation, conventions, energies, conversions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from hybrid_attention import IsingProblem
from hybrid_attention.ising import (
    bits_to_index,
    bits_to_spins,
    index_to_bits,
    index_to_spins,
    spins_to_bits,
    spins_to_index,
)
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


# ---------------------------------------------------------------------- beta checked in the problem's dtype
@pytest.mark.parametrize(
    "beta", [1e40, 1e-50, torch.tensor(1e40, dtype=torch.float64), torch.tensor([1.0, 1e300], dtype=torch.float64)]
)
def test_beta_must_be_finite_and_positive_in_the_problem_dtype(beta):
    """float32 IsingProblem(beta=1e40) is refused: 1e40 is inf in float32 (it would make every result NaN)."""
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


# ---------------------------------------------------------------------- dimod dicts and BQMs
def test_from_dimod_accepts_non_integer_labels():
    """Was ``TypeError: can only concatenate str (not "int") to str``; labels keep their order of appearance."""
    p = IsingProblem.from_dimod({"a": 1.0, "b": -0.5}, {("b", "c"): 2.0})
    assert p.n == 3 and p.mask is None
    torch.testing.assert_close(p.h, torch.tensor([-1.0, 0.5, 0.0], dtype=torch.float64))
    assert p.J[1, 2].item() == -2.0 and p.J[0, 1].item() == 0.0
    q = IsingProblem.from_dimod({"a": 1.0}, {("b", "c"): 2.0}, labels=["c", "x", "b", "a"])
    assert q.mask.tolist() == [True, False, True, True] and q.h.tolist() == [0.0, 0.0, 0.0, -1.0]
    with pytest.raises(ValueError, match="not in the spin order"):
        IsingProblem.from_dimod({"a": 1.0}, {}, labels=["b"])
    with pytest.raises(ValueError, match="integer labels"):
        IsingProblem.from_dimod({"a": 1.0}, {}, n=3)
    with pytest.raises(ValueError, match="self-coupling"):
        IsingProblem.from_dimod({}, {("a", "a"): 1.0})


@pytest.mark.parametrize("masked", [[True, False, True, True], [True, True, True, False], [False, True, True, True]])
def test_dimod_round_trip_keeps_the_mask_and_n(masked):
    """Was: the mask dropped and n shrunk when the last spin is masked."""
    g = torch.Generator().manual_seed(0)
    U = torch.triu(torch.randn(4, 4, generator=g, dtype=torch.float64), 1)
    p = IsingProblem(torch.randn(4, generator=g, dtype=torch.float64), U + U.T, mask=torch.tensor(masked))
    hd, Jd = p.to_dimod()
    assert sorted(hd) == [j for j in range(4) if masked[j]]
    q = IsingProblem.from_dimod(hd, Jd, n=4)
    assert q.n == 4 and q.mask.tolist() == masked
    torch.testing.assert_close(q.dropped()[0], p.dropped()[0])
    torch.testing.assert_close(q.dropped()[1], p.dropped()[1])
    named = p.to_dimod(labels=["w", "x", "y", "z"])[0]
    assert sorted(named) == sorted("wxyz"[j] for j in range(4) if masked[j])
    with pytest.raises(ValueError, match="out of range"):
        IsingProblem.from_dimod({5: 1.0}, {}, n=4)


def test_dimod_energy_equals_ours_on_every_configuration():
    """dimod's E = sum h_i s_i + sum J_ij s_i s_j of the converted dicts equals our E(s) on all 2**n states."""
    g = torch.Generator().manual_seed(1)
    U = torch.triu(torch.randn(4, 4, generator=g, dtype=torch.float64), 1)
    p = IsingProblem(torch.randn(4, generator=g, dtype=torch.float64), U + U.T)
    hd, Jd = p.to_dimod()
    S = index_to_spins(np.arange(16), 4)
    ours = p.energy(torch.from_numpy(S.astype(np.float64))).numpy()
    theirs = [sum(hd[j] * s[j] for j in hd) + sum(v * s[a] * s[b] for (a, b), v in Jd.items()) for s in S]
    np.testing.assert_allclose(theirs, ours, atol=1e-12)


def test_from_bqm_handles_labels_binary_and_offset():
    dimod = pytest.importorskip("dimod")
    bqm = dimod.BinaryQuadraticModel({"x": 1.0, ("y", 2): -2.0}, {("x", ("y", 2)): 0.5}, 3.0, "BINARY")
    p, offset = IsingProblem.from_bqm(bqm, return_offset=True)
    assert p.n == 2 and p.dtype == torch.float64
    # BINARY x = 1 is s = +1: E_dimod(x(s)) = E(s) + offset on every configuration
    S = index_to_spins(np.arange(4), 2)
    ours = p.energy(torch.from_numpy(S.astype(np.float64))).numpy() + offset
    theirs = [bqm.energy({"x": (s[0] + 1) // 2, ("y", 2): (s[1] + 1) // 2}) for s in S]
    np.testing.assert_allclose(theirs, ours, atol=1e-12)
    q = IsingProblem.from_bqm(bqm, labels=[("y", 2), "gone", "x"], beta=2.0)
    assert q.mask.tolist() == [True, False, True] and float(q.beta) == 2.0
    assert q.h[0].item() == p.h[1].item() and q.J[0, 2].item() == p.J[0, 1].item()
    with pytest.raises(ValueError, match="not in the spin order"):
        IsingProblem.from_bqm(bqm, labels=["x"])
    with pytest.raises(ValueError, match="distinct"):
        IsingProblem.from_bqm(bqm, labels=["x", "x", ("y", 2)])
    with pytest.raises(TypeError, match="BinaryQuadraticModel"):
        IsingProblem.from_bqm({"x": 1.0})
    with pytest.raises(ValueError, match="at least one spin"):
        IsingProblem.from_bqm(dimod.BinaryQuadraticModel("SPIN"))


def test_from_dimod_refuses_negative_integer_labels_unless_ordered():
    """ "Spin j is label j" has no place for -1: refused with the fix named; labels= gives the order."""
    with pytest.raises(ValueError, match=r"negative integer label\(s\) \[-2, -1\]; pass labels=sorted\(variables\)"):
        IsingProblem.from_dimod({-1: 0.5, 0: 1.0}, {(-2, 0): 0.25})
    p = IsingProblem.from_dimod({-1: 0.5, 0: 1.0}, {(-2, 0): 0.25}, labels=[-2, -1, 0])
    assert p.h.tolist() == [0.0, -0.5, -1.0] and p.J[0, 2].item() == -0.25 and p.mask is None
    assert IsingProblem.from_dimod({3: 1.0}, {}).mask.tolist() == [False, False, False, True]  # >= 0: label j is spin j


@pytest.mark.parametrize("n", [1, 5, 16, 17, 20])
def test_index_bits_and_spins_round_trip_on_both_paths(n):
    """``index_to_bits`` looks bits up in a table up to n = 16 and shifts above: both give bit j of c in column j."""
    rng = np.random.default_rng(n)
    c = rng.integers(0, 1 << n, size=(3, 7))
    bits = index_to_bits(c, n)
    assert bits.shape == (3, 7, n) and bits.dtype == bool
    np.testing.assert_array_equal(bits, (c[..., None] // 2 ** np.arange(n)) % 2 == 1)  # independent arithmetic
    np.testing.assert_array_equal(bits_to_index(bits), c)
    np.testing.assert_array_equal(index_to_spins(c, n), bits_to_spins(bits))
    np.testing.assert_array_equal(spins_to_index(index_to_spins(c, n)), c)
