"""Conformance suite for samplers, shipped with the package (like ``dimod.testing``).

Any :class:`~hybrid_attention.sampler.Sampler`, a third-party one included, can be checked against the interface
contract and against exact answers with :func:`assert_sampler_conforms`; the project's own test suite runs it over
every registered sampler (``tests/backends/test_conformance.py``). Each part is a public function too, so a test file can
parametrise over them. Failures raise ``AssertionError`` with the values involved (no pytest needed).

What is checked:

* the problem ladder (:func:`problem_ladder`: one spin, a pair, a frustrated triangle, a masked spin) against the
  expected marginals (:func:`expected_marginals`): exact Boltzmann enumeration, or for a ``capabilities.dqa``
  sampler the ideal circuit's output (``sampler.reference_probabilities``); tolerances come from the number of
  reads, ``z * sqrt((1 - m**2) / N)`` (exact-output results: ``1e-5``);
* SampleSet shapes and dtypes (int8 ±1 spins ``(*batch, reads, n)``, weights summing to 1, masked spins 0);
* ``marginals()`` and flip symmetry (``h -> -h`` flips ``m``), ``num_reads`` and ``seed`` on every call;
* seed reproducibility (the same seed gives the same result);
* empty batches (shapes without rows, for ``sample`` and ``marginals``);
* validation before any work: unknown options, a non-problem, float/bool/str seeds, bad ``num_reads``, an output
  above the memory budget (``_sample`` must not have been called).

``approximate=True`` declares a deterministic approximation (e.g. mean field): its values are checked only where
the spins are independent.

Example:
    >>> from hybrid_attention.backends import get_sampler
    >>> from hybrid_attention.backends.testing import assert_sampler_conforms
    >>> assert_sampler_conforms(get_sampler("exact"), num_reads=2000, seed=7)
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from hybrid_attention import exact
from hybrid_attention.ising import IsingProblem
from hybrid_attention.sampler import Sampler, SamplerCapabilities, capabilities_of

__all__ = [
    "Z",
    "BAD_SEEDS",
    "BAD_NUM_READS",
    "problem_ladder",
    "INDEPENDENT",
    "expected_marginals",
    "deviates",
    "assert_ladder_rung",
    "assert_masked_equals_removed",
    "assert_flip_symmetry",
    "assert_marginals_num_reads_and_seed",
    "assert_empty_batch",
    "assert_rejects_bad_input",
    "assert_rejects_seed",
    "assert_rejects_num_reads",
    "assert_refuses_huge_num_reads",
    "assert_sampler_conforms",
]

#: z-score of the shot-noise tolerances
Z = 5.0
#: seeds every sampler must refuse with a TypeError
BAD_SEEDS = (1.9, True, 2.0, "1", np.float64(3.0))
#: ``(num_reads, exception)`` every sampler must refuse
BAD_NUM_READS = ((0, ValueError), (-3, ValueError), (True, TypeError), (2.0, TypeError), ("9", TypeError))
#: the rungs whose spins are independent (checked for approximate samplers too)
INDEPENDENT = frozenset({"one spin"})


def _t(x: Any) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


def problem_ladder() -> dict[str, IsingProblem]:
    """The ladder: ``{"one spin", "pair", "frustrated triangle", "masked spin"}`` -> float64 problems."""
    tri = [[0, -1.0, -1.0], [-1.0, 0, -1.0], [-1.0, -1.0, 0]]
    return {
        "one spin": IsingProblem(_t([[0.8], [-0.4]])),
        "pair": IsingProblem(_t([0.3, -0.5]), _t([[0.0, 0.9], [0.9, 0.0]]), beta=1.2),
        "frustrated triangle": IsingProblem(_t([0.2, 0.0, -0.1]), _t(tri)),
        "masked spin": IsingProblem(
            _t([0.5, 2.0, -0.7]),
            _t([[0, 0.6, 0.4], [0.6, 0, 1.5], [0.4, 1.5, 0]]),
            mask=torch.tensor([True, False, True]),
        ),
    }


def _check(ok: Any, message: str) -> None:
    if not bool(ok):
        raise AssertionError(message)


def _raises(exc: type[BaseException], pattern: str, fn: Callable[[], Any], what: str) -> None:
    """``fn()`` must raise ``exc`` with a message matching ``pattern`` (``re.search``)."""
    try:
        fn()
    except exc as e:
        _check(re.search(pattern, str(e)), f"{what}: {type(e).__name__} message {str(e)!r} does not match {pattern!r}")
        return
    except Exception as e:  # the wrong kind of error
        raise AssertionError(f"{what}: expected {exc.__name__}, got {type(e).__name__}: {e}") from e
    raise AssertionError(f"{what}: expected {exc.__name__}, nothing was raised")


@contextlib.contextmanager
def _no_work(sampler: Sampler) -> Iterator[None]:
    """Inside, a call that reaches the sampler's ``_sample`` fails: validation must come first."""

    def work(*a: Any, **k: Any) -> Any:
        raise AssertionError(f"{type(sampler).__name__}._sample was called before the input was refused")

    sampler._sample = work  # type: ignore[method-assign]
    try:
        yield
    finally:
        del sampler._sample


def expected_marginals(sampler: Sampler, problem: IsingProblem) -> np.ndarray:
    """What ``sampler``'s output marginals should be, ``(*batch, n)``: exact Boltzmann enumeration, or for a
    ``capabilities.dqa`` sampler the ideal circuit's exact output (``reference_probabilities``); 0 on masked spins."""
    if not capabilities_of(sampler).dqa:
        return exact.marginals(problem).numpy()
    m = exact.table_marginals(np.asarray(sampler.reference_probabilities(problem))).numpy()
    return m if problem.mask is None else m * problem.mask.numpy()


def assert_ladder_rung(
    sampler: Sampler,
    problem: IsingProblem,
    *,
    num_reads: int,
    seed: Any,
    approximate: bool | None = None,
    independent: bool = False,
    z: float = Z,
) -> None:
    """One rung: SampleSet structure, then marginals within ``z`` shot-noise standard deviations of the expected
    ones (skipped for an approximate sampler unless the spins are ``independent``; ``approximate=None``: what the
    sampler declares, :func:`deviates`)."""
    approximate = deviates(sampler) if approximate is None else approximate
    ss = sampler.sample(problem, num_reads=num_reads, seed=seed)
    bs, n = tuple(problem.batch_shape), problem.n
    _check(
        ss.spins.dtype == np.int8 and set(np.unique(ss.spins)) <= {-1, 1},
        f"spins must be int8 ±1, got {ss.spins.dtype}",
    )
    _check(
        ss.spins.shape[: len(bs)] == bs and ss.spins.shape[-1] == n,
        f"spins shape {ss.spins.shape} for batch {bs}, n {n}",
    )
    _check(np.allclose(ss.weights.sum(-1), 1.0), "weights must sum to 1 per problem")
    m = ss.marginals()
    _check(m.shape == (*bs, n) and np.all(np.abs(m) <= 1 + 1e-12), f"marginals shape {m.shape} or out of [-1, 1]")
    if problem.mask is not None:
        _check(np.all(m[..., ~problem.mask.numpy()] == 0), "masked spins must have marginal 0")
    if approximate and not independent:
        return  # an approximation for coupled spins (its own tests bound its error)
    m_ref = expected_marginals(sampler, problem)
    reads = ss.num_reads if not ss.exact else np.inf
    tol = z * np.sqrt(np.clip(1 - m_ref**2, 0, None) / reads) + (1e-5 if ss.exact or approximate else 1e-12)
    _check(np.all(np.abs(m - m_ref) <= tol), f"marginals {m} differ from the expected {m_ref} by more than {tol}")


def assert_masked_equals_removed(sampler: Sampler) -> None:
    """Dropping a spin leaves the others distributed as if it were absent (exact Boltzmann and DQA alike)."""
    masked = problem_ladder()["masked spin"]
    removed = IsingProblem(_t([0.5, -0.7]), _t([[0, 0.4], [0.4, 0]]))
    a, b = expected_marginals(sampler, masked)[[0, 2]], expected_marginals(sampler, removed)
    _check(np.allclose(a, b, atol=1e-12), f"masked {a} != removed {b}")


def deviates(sampler: Sampler) -> bool:
    """Whether the sampler's output may differ from :func:`expected_marginals` beyond shot noise: it declares
    ``capabilities.approximate`` and is not a DQA sampler (whose reference is its own ideal circuit output)."""
    caps = capabilities_of(sampler)
    return caps.approximate and not caps.dqa


def _exactish(sampler: Sampler, approximate: bool) -> bool:
    return capabilities_of(sampler).exact_output or approximate


def assert_flip_symmetry(sampler: Sampler, *, num_reads: int, approximate: bool | None = None, z: float = Z) -> None:
    """``marginals()`` returns a ``(n,)`` tensor, and ``E(s; h) = E(-s; -h)``: flipping ``h`` flips ``m``
    (``approximate=None``: :func:`deviates`)."""
    approximate = deviates(sampler) if approximate is None else approximate
    problem = problem_ladder()["pair"]
    flipped = IsingProblem(-problem.h, problem.J, beta=problem.beta)
    exactish = _exactish(sampler, approximate)
    kw = [{}, {}] if exactish else [{"num_reads": num_reads, "seed": 1}, {"num_reads": num_reads, "seed": 2}]
    m, mf = sampler.marginals(problem, **kw[0]), sampler.marginals(flipped, **kw[1])
    _check(isinstance(m, torch.Tensor) and tuple(m.shape) == (2,), f"marginals() must give a (2,) tensor, got {m!r}")
    tol = 1e-5 if exactish else 2 * z * np.sqrt(1.0 / num_reads)
    _check(np.all(np.abs(m.numpy() + mf.numpy()) <= tol), f"flipping h does not flip m: {m} vs {mf}")


def assert_marginals_num_reads_and_seed(
    sampler: Sampler, *, num_reads: int, approximate: bool | None = None, z: float = Z
) -> None:
    """``marginals`` takes ``num_reads`` and ``seed`` on every sampler, is reproducible with a seed, and (exact
    output) ``num_reads=None`` is the exact output whatever the seed (``approximate=None``: :func:`deviates`)."""
    approximate = deviates(sampler) if approximate is None else approximate
    problem = problem_ladder()["pair"]
    m1 = sampler.marginals(problem, num_reads=num_reads, seed=3)
    m2 = sampler.marginals(problem, num_reads=num_reads, seed=3)
    _check(tuple(m1.shape) == (2,) and torch.equal(m1, m2), f"the same seed gave {m1} and {m2}")
    _check(
        sampler.marginals(problem, seed=np.random.SeedSequence(5), num_reads=50).shape == (2,),
        "a SeedSequence seed must be accepted",
    )
    m_ref = expected_marginals(sampler, problem)
    if not approximate:
        tol = z * np.sqrt(np.clip(1 - m_ref**2, 0, None) / num_reads) + 1e-5
        _check(np.all(np.abs(m1.numpy() - m_ref) <= tol), f"marginals {m1} differ from the expected {m_ref}")
    if capabilities_of(sampler).exact_output:  # num_reads=None is the exact output, the seed is unused
        torch.testing.assert_close(sampler.marginals(problem, seed=1), sampler.marginals(problem))
        _check(np.abs(sampler.marginals(problem).numpy() - m_ref).max() < 1e-5, "exact output marginals are off")


def assert_empty_batch(sampler: Sampler, num_reads: int | None) -> None:
    """A batch shape with a zero gives empty results of the right shapes from ``sample`` and ``marginals``."""
    J = _t([[0, 0.5, 0.0], [0.5, 0, -0.3], [0.0, -0.3, 0]])
    empty = IsingProblem(torch.zeros(0, 3, dtype=torch.float64), J)
    ss = sampler.sample(empty, num_reads=num_reads, seed=0)
    reads = ss.num_reads
    _check(num_reads is None or reads == num_reads, f"num_reads={num_reads} gave {reads} reads")
    _check(
        ss.spins.shape == (0, reads, 3) and ss.spins.dtype == np.int8 and ss.weights.shape == (0, reads),
        f"empty SampleSet has spins {ss.spins.shape} {ss.spins.dtype}, weights {ss.weights.shape}",
    )
    _check(
        ss.marginals().shape == (0, 3) and ss.correlations().shape == (0, 3, 3) and ss.energies.shape == (0, reads),
        "empty SampleSet statistics have the wrong shapes",
    )
    m = sampler.marginals(empty, num_reads=num_reads, seed=0)
    _check(isinstance(m, torch.Tensor) and tuple(m.shape) == (0, 3), f"empty marginals: {m!r}")
    nested = IsingProblem(torch.zeros(2, 0, 3))
    _check(sampler.sample(nested, num_reads=5, seed=0).spins.shape == (2, 0, 5, 3), "nested empty batch: spins shape")
    _check(tuple(sampler.marginals(nested).shape) == (2, 0, 3), "nested empty batch: marginals shape")


def assert_rejects_bad_input(sampler: Sampler) -> None:
    """Unknown options and non-problems raise ``TypeError`` before any work; capabilities and properties exist."""
    pair = problem_ladder()["pair"]
    with _no_work(sampler):
        _raises(
            TypeError, "unknown option", lambda: sampler.sample(pair, num_reads=10, no_such_option=1), "unknown option"
        )
        _raises(TypeError, "", lambda: sampler.sample({"h": [1.0]}, num_reads=10), "a dict instead of a problem")
    _check(isinstance(sampler.capabilities, SamplerCapabilities), "capabilities must be a SamplerCapabilities")
    _check("max_spins" in sampler.properties and "exact" in sampler.properties, "properties lack max_spins/exact")


def assert_rejects_seed(sampler: Sampler, seed: Any) -> None:
    """A float, bool or str seed raises ``TypeError`` naming the accepted types, in ``sample`` and ``marginals``."""
    pattern = r"seed must be an int, a numpy.random.Generator.*got (float|bool|str)"
    with _no_work(sampler):
        for call in (sampler.sample, sampler.marginals):
            _raises(
                TypeError,
                pattern,
                lambda call=call: call(problem_ladder()["pair"], num_reads=10, seed=seed),
                f"seed={seed!r}",
            )


def assert_rejects_num_reads(sampler: Sampler, num_reads: Any, exc: type[BaseException]) -> None:
    """A bad ``num_reads`` raises ``exc`` ("num_reads must be an integer >= 1") in ``sample`` and ``marginals``."""
    with _no_work(sampler):
        for call in (sampler.sample, sampler.marginals):
            _raises(
                exc,
                "num_reads must be an integer >= 1",
                lambda call=call: call(problem_ladder()["pair"], num_reads=num_reads),
                f"num_reads={num_reads!r}",
            )


def assert_refuses_huge_num_reads(sampler: Sampler) -> None:
    """An output above the memory budget is refused with a ``ValueError`` before anything is allocated."""
    one = problem_ladder()["one spin"]
    with _no_work(sampler):
        _raises(
            ValueError,
            r"needs an estimated .*TiB, above the memory budget",
            lambda: sampler.sample(one, num_reads=10**12, seed=0),
            "sample(num_reads=10**12)",
        )
        _raises(
            ValueError,
            "memory budget",
            lambda: sampler.marginals(one, num_reads=10**12, seed=0),
            "marginals(num_reads=10**12)",
        )


def assert_sampler_conforms(
    sampler: Sampler, *, num_reads: int = 3000, seed: Any = 7, approximate: bool = False, z: float = Z
) -> None:
    """Run the whole suite on ``sampler`` (module docstring); raises ``AssertionError`` at the first failure.

    Args:
        sampler: the sampler under test (it is not closed).
        num_reads: reads per problem for the statistical checks (tolerances scale as ``1 / sqrt(num_reads)``).
        seed: seed of the ladder's ``sample`` calls.
        approximate: the sampler is a deterministic approximation (values checked for independent spins only).
        z: z-score of the tolerances.
    """
    for rung, problem in problem_ladder().items():
        assert_ladder_rung(
            sampler,
            problem,
            num_reads=num_reads,
            seed=seed,
            approximate=approximate,
            independent=rung in INDEPENDENT,
            z=z,
        )
    assert_masked_equals_removed(sampler)
    assert_flip_symmetry(sampler, num_reads=num_reads, approximate=approximate, z=z)
    assert_marginals_num_reads_and_seed(sampler, num_reads=num_reads, approximate=approximate, z=z)
    for reads in (None, 7):
        assert_empty_batch(sampler, reads)
    assert_rejects_bad_input(sampler)
    for bad in BAD_SEEDS:
        assert_rejects_seed(sampler, bad)
    for bad, exc in BAD_NUM_READS:
        assert_rejects_num_reads(sampler, bad, exc)
    assert_refuses_huge_num_reads(sampler)
