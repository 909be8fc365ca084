"""hybrid_attention.checks: the one owner of input checks (beta, seeds, counts, couplings, memory budget)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from hybrid_attention import checks


@pytest.mark.parametrize("seed", [None, 0, 7, np.int64(7), np.random.default_rng(1), np.random.SeedSequence(3)])
def test_seed_accepts_seedlike(seed):
    assert checks.check_seed(seed) is seed
    assert isinstance(checks.as_generator(seed), np.random.Generator)


@pytest.mark.parametrize(
    "seed, got",
    [
        (1.9, "float 1.9"),
        (True, "bool True"),
        (np.bool_(False), "bool"),
        ("3", "str '3'"),
        (2.0, "float 2.0"),
        ([1], "list [1]"),
    ],
)
def test_seed_rejects_floats_bools_and_others(seed, got):
    expected = "seed must be an int, a numpy.random.Generator, a numpy.random.SeedSequence or None, got "
    for f in (checks.check_seed, checks.as_generator, lambda s: checks.spawn_seeds(s, 2)):
        with pytest.raises(TypeError) as info:
            f(seed)
        assert str(info.value).startswith(expected) and got in str(info.value)


def test_negative_seed_is_a_value_error():
    with pytest.raises(ValueError, match="non-negative"):
        checks.check_seed(-1)


def test_spawn_seeds_keeps_the_previous_streams():
    """Same child seeds as the two implementations it replaces (backends.base.spawn_seeds, bridge._spawn)."""
    old = [int(c.generate_state(1)[0] & 0x7FFFFFFF) for c in np.random.SeedSequence(5).spawn(3)]
    assert checks.spawn_seeds(5, 3) == old == checks.spawn_seeds(np.int32(5), 3, keep_none=True)
    assert checks.spawn_seeds(np.random.SeedSequence(5), 3) == old
    g1, g2 = np.random.default_rng(2), np.random.default_rng(2)
    assert checks.spawn_seeds(g1, 4) == [int(x) for x in g2.integers(0, 2**31 - 1, size=4)]
    assert checks.spawn_seeds(None, 2, keep_none=True) == [None, None]
    fresh = checks.spawn_seeds(None, 2)
    assert len(fresh) == 2 and all(isinstance(x, int) for x in fresh)
    assert checks.describe_seed(np.int64(4)) == 4 and checks.describe_seed(np.random.default_rng()) == "generator"


def test_backends_reexport_the_single_owner():
    from hybrid_attention import backends
    from hybrid_attention.backends import base

    assert backends.as_generator is base.as_generator is checks.as_generator
    assert backends.spawn_seeds is base.spawn_seeds is checks.spawn_seeds


@pytest.mark.parametrize(
    "value, exc",
    [(True, TypeError), (1.0, TypeError), ("2", TypeError), (None, TypeError), (0, ValueError), (-2, ValueError)],
)
def test_positive_int(value, exc):
    with pytest.raises(exc, match=r"num_reads must be an integer >= 1"):
        checks.check_num_reads(value, allow_none=False)


def test_integer_type_errors_are_also_value_errors():
    """A count of the wrong type is a TypeError and also a ValueError: both catch clauses catch it."""
    with pytest.raises(ValueError):
        checks.check_positive_int(1.5, "burn_in", minimum=0)
    assert checks.check_positive_int(np.int16(3), "steps") == 3 and checks.check_num_reads(None) is None


def test_beta_per_head():
    like = torch.zeros(1, dtype=torch.float64)
    torch.testing.assert_close(checks.beta_per_head(0.8, 3, like), torch.full((3,), 0.8, dtype=torch.float64))
    assert float(checks.beta_per_head(np.float32(0.5), 2, like)[0]) == 0.5
    assert checks.beta_per_head([1.0, 2.0], 2, like).tolist() == [1.0, 2.0]
    b = torch.tensor([1.0, 2.0], requires_grad=True)
    assert checks.beta_per_head(b, 2, like).requires_grad
    with pytest.raises(TypeError, match="beta must be a real number"):
        checks.beta_per_head(True, 2, like)
    with pytest.raises(ValueError, match=r"shape \(H,\) = \(2,\)"):
        checks.beta_per_head(torch.ones(3), 2, like)
    with pytest.raises(ValueError, match="finite and > 0"):
        checks.beta_per_head(1e40, 2, torch.zeros(1))  # inf in float32


def test_memory_check_and_budget(monkeypatch):
    checks.check_memory(100, "small", budget=1000)
    with pytest.raises(ValueError, match=r"big needs an estimated 1.95 KiB, above the memory budget of 1000 B.*; try"):
        checks.check_memory(2000, "big", budget=1000, hint="try less")
    monkeypatch.setattr(checks, "MEMORY_BUDGET", 10)
    with pytest.raises(ValueError, match="memory budget of 10 B"):
        checks.check_memory(11, "x")
    monkeypatch.setenv("HYBRID_ATTENTION_MEMORY_BUDGET", "12345")
    assert checks._default_budget() == 12345
    monkeypatch.delenv("HYBRID_ATTENTION_MEMORY_BUDGET")
    assert 0 < checks._default_budget() <= 8 << 30


def test_checks_import_no_quantum_packages():
    code = (
        "import sys, hybrid_attention, hybrid_attention.checks, hybrid_attention.attention, "
        "hybrid_attention.bridge; "
        "bad = [m for m in ('qiskit', 'pennylane') if m in sys.modules]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_symmetric_couplings_rule_and_tolerances():
    """One rule for every J: symmetric (allclose tolerances) and a zero diagonal (to ``diagonal_atol``)."""
    J = torch.tensor([[0.0, 1.0], [1.0 + 1e-9, 0.0]])
    checks.check_symmetric_couplings(J)  # within rtol 1e-5
    with pytest.raises(ValueError, match=r"J must be symmetric .*got max \|J - J\^T\| = 0.1; build it"):
        checks.check_symmetric_couplings(torch.tensor([[0.0, 1.0], [1.1, 0.0]]), hint="build it")
    with pytest.raises(ValueError, match="zero diagonal"):
        checks.check_symmetric_couplings(torch.tensor([[1e-9, 0.0], [0.0, 0.0]]))
    checks.check_symmetric_couplings(torch.tensor([[1e-9, 0.0], [0.0, 0.0]]), diagonal_atol=1e-6)
    checks.check_symmetric_couplings(torch.tensor([[1.0, 0.0], [0.0, 0.0]]), zero_diagonal=False)
    with pytest.raises(ValueError, match=r"J must have a zero diagonal, got max \|J\[h, j, j\]\||zero diagonal"):
        checks.check_head_couplings(torch.eye(3)[None], 1, 3)


def test_check_finite_names_the_value_and_its_index():
    with pytest.raises(ValueError, match=r"J must be finite, got a non-finite value inf at index \[1, 0\]"):
        checks.check_finite(np.array([[0.0, 1.0], [np.inf, 0.0]]), "J")
    checks.check_finite(torch.ones(3), "h")
    checks.check_finite(np.arange(3), "c")  # integers are always finite
