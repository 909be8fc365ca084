"""aer-mps equals the statevector DQA output within shot noise (z = 5) at n <= 12, and refuses bad input."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("qiskit_aer")

from hybrid_attention import IsingProblem  # noqa: E402
from hybrid_attention.backends import get_sampler  # noqa: E402
from hybrid_attention.banded import dense_couplings  # noqa: E402
from hybrid_attention.circuits import DQASchedule  # noqa: E402


def test_mps_matches_statevector_within_shot_noise():
    n, W, N = 10, 2, 4000
    g = torch.Generator().manual_seed(3)
    c = torch.randn(W, n, generator=g, dtype=torch.float64)
    p = IsingProblem(torch.randn(2, n, generator=g, dtype=torch.float64), dense_couplings(c, n))
    sched = DQASchedule(tau=1.0, steps=8)
    m_ref = get_sampler("aer", schedule=sched).marginals(p)  # exact output of the circuit
    m = torch.from_numpy(get_sampler("aer-mps", schedule=sched).sample(p, num_reads=N, seed=1).marginals())
    tol = 5 * torch.sqrt((1 - m_ref**2).clamp_min(1e-12) / N)
    assert torch.all((m - m_ref).abs() <= tol)


def test_mps_refuses_wide_band_and_too_many_qubits():
    s = get_sampler("aer-mps", schedule=DQASchedule(tau=1.0, steps=2))
    J = torch.ones(30, 30, dtype=torch.float64) - torch.eye(30, dtype=torch.float64)
    with pytest.raises(ValueError, match="band"):
        s.sample(IsingProblem(torch.zeros(30, dtype=torch.float64), J), num_reads=4)
    with pytest.raises(ValueError):
        s.sample(IsingProblem(torch.zeros(101, dtype=torch.float64)), num_reads=4)
