"""The statevector read-out's vectorised inverse CDF (:mod:`hybrid_attention.backends.dqa.readout`) against
:func:`hybrid_attention.exact.inverse_cdf` (``torch.searchsorted``): the same draws, index for index, on flat and
peaked rows, empty bins, uniforms equal to table entries, and the smallest tables. Exact equality: both search the
same cumulative table, built by the same torch operations on the same input in this process (determinism on one
machine, whatever its float kernels), so only the search differs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hybrid_attention.backends.dqa import readout
from hybrid_attention.backends.dqa.readout import draw_spins_into, inverse_cdf
from hybrid_attention.exact import inverse_cdf as searchsorted_inverse_cdf
from hybrid_attention.ising import index_to_spins


def _rows(kind: str, R: int, N: int, rng: np.random.Generator) -> torch.Tensor:
    if kind == "flat":
        p = rng.random((R, N)) + 0.5
    elif kind == "peaked":  # most mass on a few entries, the rest tiny (many table entries per 1/N of probability)
        p = np.exp(6 * rng.normal(size=(R, N)))
    else:  # "empty": half of each row's bins empty (runs of equal table entries)
        p = rng.random((R, N))
        p[:, rng.permutation(N)[: N // 2]] = 0.0
    return torch.from_numpy(p)


@pytest.mark.parametrize("kind", ["flat", "peaked", "empty"])
@pytest.mark.parametrize("N", [1, 2, 8, 1024])
def test_draws_equal_searchsorted(kind, N):
    rng = np.random.default_rng(N)
    p = _rows(kind, 5, N, rng).to(torch.float32 if kind == "flat" else torch.float64)
    u = rng.random((5, 300))
    assert np.array_equal(inverse_cdf(p, u), searchsorted_inverse_cdf(p, u))


def test_uniforms_on_table_entries_and_at_zero():
    """Ties: a uniform equal to a table entry draws the first entry that reaches it (the start of a run of equal
    entries that empty bins make), one just below draws the same, and u = 0 draws index 0 (even an empty first bin,
    whose entry 0 reaches it), all as torch.searchsorted does."""
    p = torch.tensor([[0.0, 0.25, 0.0, 0.25, 0.5, 0.0, 0.0, 0.0], [0.125] * 8], dtype=torch.float64)
    cdf = (torch.cumsum(p, -1) / torch.cumsum(p, -1)[:, -1:]).numpy()
    u = np.concatenate([cdf[:, :7], np.zeros((2, 1)), np.nextafter(cdf[:, :7], 0.0)], axis=1)
    assert np.array_equal(inverse_cdf(p, u), searchsorted_inverse_cdf(p, u))


def test_other_table_sizes_fall_back_to_searchsorted():
    rng = np.random.default_rng(1)
    p, u = torch.from_numpy(rng.random((3, 12))), rng.random((3, 40))
    assert np.array_equal(inverse_cdf(p, u), searchsorted_inverse_cdf(p, u))
    assert inverse_cdf(p[:0], u[:0]).shape == (0, 40)


@pytest.mark.parametrize("block", [50, 1 << 14], ids=["blocks-of-2-rows", "one-block"])
def test_spins_written_in_place(block, monkeypatch):
    """Each block of rows (2, 2 and 1 rows of 25 shots with 50 shots a block) writes its rows' spins."""
    monkeypatch.setattr(readout, "BLOCK_SHOTS", block)
    rng = np.random.default_rng(2)
    for n in (3, 17):
        p, u = _rows("flat", 5, 1 << n, rng), rng.random((5, 25))
        out = np.zeros((5, 25, n), dtype=np.int8)
        draw_spins_into(p, u, out)
        assert np.array_equal(out, index_to_spins(searchsorted_inverse_cdf(p, u), n))
