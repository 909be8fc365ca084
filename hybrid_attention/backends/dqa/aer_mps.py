"""``aer-mps``: the ``aer`` DQA sampler on qiskit-aer's ``matrix_product_state`` method, for chain (banded) problems.

A thin registration of :class:`~hybrid_attention.backends.dqa.aer.AerSampler` with ``method="matrix_product_state"``
and shots read-out (Aer's ``SamplerV2``): the same emitted circuit, the same chunks, bindings and seeds. An MPS
holds a chain of qubits with a bond dimension bounded by the entanglement across each cut; a band-W problem's circuit
entangles each cut through at most ``W (W + 1) / 2`` couplings per Trotter step, so chains of ~100 spins at small
W and modest Trotter depth run in seconds, where a statevector stops near 30 qubits.

Limits (checked before any circuit is built): ``n <= max_qubits`` (100 by default), and above
:data:`DENSE_MAX_QUBITS` spins the couplings must lie in a band ``|j - k| <= max_band`` (default 8): a full ``J``
at large ``n`` has no low-entanglement cut and the MPS would grow towards a statevector. Options of the MPS method:
``max_bond_dimension`` (Aer's ``matrix_product_state_max_bond_dimension``; ``None``: no truncation beyond
``truncation_threshold``) and ``truncation_threshold`` (``matrix_product_state_truncation_threshold``, Aer's default
1e-16).

Noise: ``noise_backend=`` a (fake) IBM backend, as for ``aer``: its noise model and ISA transpilation (with the
circuit options' ``layout``, e.g. the line of :func:`hybrid_attention.backends.ibm.line_layout.line_layout`).
Aer's MPS method accepts the noise model (its instruction set has ``kraus``, ``quantum_channel`` and ``roerror``),
but it carries noise by one stochastic trajectory per shot: about 1 s per shot for a 16-spin chain with 10 Trotter
steps on fake_torino on a loaded 2-core machine, against ~0.1 s for all shots of a noiseless run.

Example:
    >>> import torch
    >>> from hybrid_attention import IsingProblem
    >>> from hybrid_attention.backends import get_sampler
    >>> from hybrid_attention.circuits import DQASchedule
    >>> sampler = get_sampler("aer-mps", schedule=DQASchedule(tau=1.0, steps=4))
    >>> J = torch.diag(torch.full((39,), 0.5), 1)
    >>> ss = sampler.sample(IsingProblem(torch.randn(2, 40), J + J.T), num_reads=64, seed=1)
    >>> ss.spins.shape
    (2, 64, 40)
"""

from __future__ import annotations

from typing import Any

from hybrid_attention import banded
from hybrid_attention.checks import check_positive_int
from hybrid_attention.circuits.program import CircuitOptions
from hybrid_attention.circuits.schedule import DQASchedule
from hybrid_attention.ising import IsingProblem

from .aer import AerSampler

__all__ = ["AerMPSSampler", "DENSE_MAX_QUBITS", "MAX_QUBITS"]

#: above this many spins ``aer-mps`` needs couplings in a band (``max_band``)
DENSE_MAX_QUBITS = 24
#: the default ``max_qubits`` of ``aer-mps``
MAX_QUBITS = 100


class AerMPSSampler(AerSampler):
    """DQA circuits on qiskit-aer's matrix-product-state simulator (registry name ``aer-mps``).

    Args:
        schedule, chunk_size, options, default_num_reads, backend_options, executor: as :class:`AerSampler`.
        max_qubits: the largest ``n`` accepted (default 100).
        max_band: above :data:`DENSE_MAX_QUBITS` spins, the widest coupling band accepted (default 8).
        max_bond_dimension: Aer's ``matrix_product_state_max_bond_dimension`` (``None``: unbounded; a bound
            truncates the state and makes the output approximate).
        truncation_threshold: Aer's ``matrix_product_state_truncation_threshold`` (``None``: Aer's default).
        noise_backend: a (fake) IBM backend whose noise model and gates are simulated (module docstring); the
            qubit limit is then also the backend's qubit count.
    """

    name = "aer-mps"

    def __init__(
        self,
        *,
        schedule: DQASchedule | None = None,
        chunk_size: int = 256,
        options: CircuitOptions | None = None,
        default_num_reads: int = 1024,
        backend_options: dict[str, Any] | None = None,
        executor: Any = None,
        max_qubits: int = MAX_QUBITS,
        max_band: int = 8,
        max_bond_dimension: int | None = None,
        truncation_threshold: float | None = None,
        noise_backend: Any = None,
    ) -> None:
        bo = dict(backend_options or {})
        if max_bond_dimension is not None:
            bo["matrix_product_state_max_bond_dimension"] = check_positive_int(
                max_bond_dimension, "aer-mps: max_bond_dimension"
            )
        if truncation_threshold is not None:
            if not isinstance(truncation_threshold, (int, float)) or not 0 <= truncation_threshold < 1:
                raise ValueError(
                    f"aer-mps: truncation_threshold must be a number in [0, 1), got {truncation_threshold!r}"
                )
            bo["matrix_product_state_truncation_threshold"] = float(truncation_threshold)
        super().__init__(
            schedule=schedule,
            method="matrix_product_state",
            chunk_size=chunk_size,
            options=options,
            default_num_reads=default_num_reads,
            backend_options=bo,
            readout="shots",
            executor=executor,
            noise_backend=noise_backend,
        )
        self.max_qubits = check_positive_int(max_qubits, "aer-mps: max_qubits")
        if noise_backend is not None:
            self.max_qubits = min(self.max_qubits, int(noise_backend.num_qubits))
        self.max_band = check_positive_int(max_band, "aer-mps: max_band")

    @property
    def properties(self) -> dict[str, Any]:
        props = super().properties
        props.update({"max_band": self.max_band, "dense_max_qubits": DENSE_MAX_QUBITS})
        return props

    def validate(
        self, problem: Any, *, num_reads: Any = None, seed: Any = None, options: dict | None = None
    ) -> IsingProblem:
        """The base checks, then: above :data:`DENSE_MAX_QUBITS` spins the couplings' bandwidth must be at most
        ``max_band`` (``ValueError`` naming both)."""
        problem = super().validate(problem, num_reads=num_reads, seed=seed, options=options)
        if problem.n > DENSE_MAX_QUBITS:
            W = banded.bandwidth(problem.J)
            if W > self.max_band:
                raise ValueError(
                    f"aer-mps: n = {problem.n} spins need couplings in a band |j - k| <= max_band = {self.max_band} "
                    f"(a chain), got couplings up to key distance {W}; use a banded J, raise max_band, or "
                    f"n <= {DENSE_MAX_QUBITS}"
                )
        return problem
