"""The noisy qemcmc kernel (:mod:`hybrid_attention.backends.mcmc.noisy`): without noise the channel is the unitary
proposal and the chain is the exact transition matrix (oracle); with a device's noise model the channel is a
stochastic matrix; full depolarisation of the last layer turns it into the uniform proposal; asymmetric read-out."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("qiskit_aer")

from qiskit_aer.noise import NoiseModel, ReadoutError, depolarizing_error  # noqa: E402

from hybrid_attention import IsingProblem  # noqa: E402
from hybrid_attention.backends.mcmc import analysis as mcmc  # noqa: E402
from hybrid_attention.backends.mcmc.noisy import (  # noqa: E402
    ProposalNoise,
    absolute_gap,
    noisy_kernel,
    proposal_channels,
    readout_matrices,
    symmetric_acceptance_matrix,
)
from hybrid_attention.circuits.proposal import ProposalParams, proposal_matrix  # noqa: E402


def _problem(n: int, seed: int = 0) -> IsingProblem:
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, generator=g, dtype=torch.float64)
    U = torch.randn(n, n, generator=g, dtype=torch.float64).triu(1)
    return IsingProblem(h[None], U + U.T)


FIXED = ProposalParams(gamma=0.45, time=6.0, steps=3)


@pytest.mark.parametrize("backend", [None, "fake_manila"])
def test_noiseless_channel_is_the_unitary_proposal(backend):
    """An empty noise model: the density-matrix channel (logical circuit, or the ISA circuit of a 5-qubit device
    with its layout and routing) equals the numpy oracle ``|U|^2`` at each parameter pair."""
    p = _problem(3)
    h, J = p.h[0].numpy(), p.J.numpy()
    noise = ProposalNoise(backend=backend, noise_model=NoiseModel())
    Q = proposal_channels(h, J, FIXED, [0.3, 0.45], [4.0, 6.0], noise)
    for m, (g, t) in enumerate([(0.3, 4.0), (0.45, 6.0)]):
        np.testing.assert_allclose(Q[m], proposal_matrix(h, J, FIXED, g, t), atol=1e-9)


def test_noiseless_kernel_is_the_exact_transition_matrix():
    """Random parameters, no noise: the sampled noise difference vanishes and the chain is
    :func:`~hybrid_attention.backends.mcmc.analysis.transition_matrix` with the same quadrature."""
    p = _problem(3, seed=1)
    params = ProposalParams(steps=3)
    out = noisy_kernel(p, ProposalNoise(noise_model=NoiseModel(), draws=3), params, nodes=(3, 6), boots=20)
    P = mcmc.transition_matrix(p, params, nodes=(3, 6))
    np.testing.assert_allclose(out["P"], P, atol=1e-9)
    assert out["gap"] == pytest.approx(out["gap_ideal"], abs=1e-9)
    assert out["tv_bias"] < 1e-9 and out["gap_err"] < 1e-9


def test_device_noise_gives_a_stochastic_channel_and_a_biased_chain():
    p = _problem(3, seed=2)
    h, J = p.h[0].numpy(), p.J.numpy()
    Q = proposal_channels(h, J, FIXED, [0.45], [6.0], ProposalNoise(backend="fake_manila"))[0]
    assert Q.shape == (8, 8) and (Q >= 0).all()
    np.testing.assert_allclose(Q.sum(1), 1.0, atol=1e-12)
    assert np.abs(Q - proposal_matrix(h, J, FIXED)).max() > 1e-3  # noise is visible
    out = noisy_kernel(p, ProposalNoise(backend="fake_manila"), FIXED)
    assert 0 < out["gap"] < 1 and out["tv_bias"] > 0 and out["gap_err"] == 0.0  # fixed parameters: no draws


def test_full_depolarisation_gives_the_uniform_proposal():
    """Every RX fully depolarised: the last layer (a driver layer) leaves the maximally mixed state, the proposal is
    uniform, and the noisy chain's gap is the uniform chain's."""
    p = _problem(3, seed=3)
    model = NoiseModel()
    model.add_all_qubit_quantum_error(depolarizing_error(1.0, 1), ["rx"])
    out = noisy_kernel(p, ProposalNoise(noise_model=model, draws=2), ProposalParams(steps=3), nodes=2, boots=10)
    gaps = mcmc.spectral_gaps(p, proposals=("uniform",))
    assert out["gap"] == pytest.approx(float(gaps["uniform"][0]), abs=1e-9)
    assert out["tv_bias"] < 1e-9  # uniform is symmetric: no bias


def test_asymmetric_readout():
    """The mean read-out error is kept and split by the asymmetry; the noisy proposal of a no-op circuit is the
    read-out channel itself, whose asymmetry biases the chain."""
    model = NoiseModel()
    model.add_all_qubit_readout_error(ReadoutError([[0.96, 0.04], [0.04, 0.96]]))
    (A,) = readout_matrices(model, [0], 0.5)
    np.testing.assert_allclose(A, [[0.98, 0.06], [0.02, 0.94]])  # A[measured, prepared]
    np.testing.assert_allclose(readout_matrices(model, [0], 0.0)[0], [[0.96, 0.04], [0.04, 0.96]])
    p = _problem(2, seed=4)
    h, J = p.h[0].numpy(), p.J.numpy()
    still = ProposalParams(gamma=0.5, time=0.0, steps=1)  # U = identity: Q is the read-out channel
    Q = proposal_channels(h, J, still, [0.5], [0.0], ProposalNoise(noise_model=model, readout_asymmetry=1.0))[0]
    np.testing.assert_allclose(Q[1], [0.08, 0.92, 0.0, 0.0], atol=1e-12)  # s = bit 0 set: decays to 0 only
    with pytest.raises(ValueError, match="readout_asymmetry"):
        ProposalNoise(noise_model=model, readout_asymmetry=2.0)


def test_absolute_gap_is_the_spectral_gap_of_a_reversible_chain():
    E = np.array([0.0, 1.0, -0.5, 0.3])
    P = mcmc.metropolis_matrix(mcmc.local_proposal(2) * 0.5 + 0.5 * mcmc.uniform_proposal(2), E, 1.0)
    pi = np.exp(-E) / np.exp(-E).sum()
    assert absolute_gap(P) == pytest.approx(mcmc.spectral_gap(P, pi), abs=1e-12)
    np.testing.assert_allclose(
        symmetric_acceptance_matrix(mcmc.uniform_proposal(2), E, 1.0),
        mcmc.metropolis_matrix(mcmc.uniform_proposal(2), E, 1.0),
    )


def test_restricted_noise_model_matches_the_device_wide_one():
    """The channel simulated under the noise model restricted to the circuit's qubits equals the existing
    device-wide construction of :func:`hybrid_attention.apps.noise_study.noisy_proposal_matrix` (same ISA circuit,
    full ``NoiseModel.from_backend``, the model's read-out)."""
    from hybrid_attention.apps.noise_study import noisy_proposal_matrix
    from hybrid_attention.backends.ibm.sampler import fake_backend

    p = _problem(3, seed=5)
    backend = fake_backend("fake_manila")
    ref, _ = noisy_proposal_matrix(p, backend, gamma=0.45, time_=6.0, steps=3)
    Q = proposal_channels(p.h[0].numpy(), p.J.numpy(), FIXED, [0.45], [6.0], ProposalNoise(backend=backend))[0]
    np.testing.assert_allclose(Q, ref, atol=1e-9)
