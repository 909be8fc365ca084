"""Round 2's mean-field validation (experiments/long_context_2/validate_meanfield.py): its exact references agree with
each other, and its verdict passes mean field where mean field is exact (J = 0) and fails it where it is not (strong
couplings)."""

from __future__ import annotations

import pytest
import torch

from experiments.long_context_2 import validate_meanfield as vm
from hybrid_attention.apps import cli


@pytest.fixture(autouse=True)
def one_thread():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)  # train() sets the thread count from --threads


def test_the_banded_reference_equals_enumeration():
    T, W = 9, 2
    g = torch.Generator().manual_seed(0)
    h = torch.randn(3, 2, T, T, generator=g, dtype=torch.float64)
    J = torch.randn(2, T, T, generator=g, dtype=torch.float64)
    far = (torch.arange(T)[:, None] - torch.arange(T)[None, :]).abs() > W
    J = ((J + J.transpose(1, 2)) / 2).masked_fill(far, 0.0)
    J.diagonal(dim1=1, dim2=2).zero_()
    beta = torch.tensor([0.7, 1.3], dtype=torch.float64)
    a, b = vm.exact_marginals(h, J, beta, W), vm.exact_marginals(h, J, beta, 0)
    # two exact float64 engines: rounding of T-term sums of O(1) terms, far below 1e-12
    assert torch.allclose(a, b, rtol=0, atol=1e-12)
    assert (a.triu(1) == 0).all()
    w = vm.weights_of(a)
    assert torch.allclose(w.sum(-1), torch.ones(3, 2, T, dtype=torch.float64), atol=1e-12)


def _model_with_couplings(tmp_path, name: str, value: float):
    """A tiny exact-trained hj run (brackets, T = 8) whose couplings are then set to ``value`` at every pair."""
    out = tmp_path / name
    argv = ["train", "--task", "brackets", "--attention", "hj", "--sampler", "exact", "--block-size", "8",
            "--steps", "2", "--eval-interval", "2", "--n-embd", "8", "--batch-size", "4", "--no-progress",
            "--warmup", "1", "--eval-size", "16", "--out", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    ck = torch.load(out / "checkpoint.pt", weights_only=False)
    (key,) = [k for k in ck["model"] if k.endswith("J_raw")]
    ck["model"][key].fill_(value)
    torch.save(ck, out / "checkpoint.pt")
    return out


def test_mean_field_passes_where_it_is_exact_and_fails_under_strong_couplings(tmp_path, monkeypatch):
    monkeypatch.setattr(vm, "REPO", tmp_path)
    free = vm.validate("free", _model_with_couplings(tmp_path, "free", 0.0))
    # J = 0: mean field is exact (the spins are independent); float32 marginals from the model's own scores
    assert free["largest_eigenvalue_beta_J"] == 0.0
    assert free["meanfield"]["marginal_error_max"] < 1e-5
    assert vm.deviation(free)[1] < 1e-3
    assert vm.passes(free)
    strong = vm.validate("strong", _model_with_couplings(tmp_path, "strong", 3.0))
    # beta J with every pair at 3: a ferromagnet far below its critical temperature, where the naive fixed point
    # misses the exact law's symmetric mixture of the two aligned states
    assert strong["largest_eigenvalue_beta_J"] > 1.0
    assert strong["meanfield"]["marginal_error_max"] > 0.1
    assert not vm.passes(strong)
    text = vm.report([free, strong], [])
    assert "| free |" in text and "| strong |" in text and "**no**" in text and "mean field fails** (on strong)" in text
