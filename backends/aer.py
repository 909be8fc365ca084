"""qiskit-aer DQA sampler: one parametrised circuit plus a bindings array per chunk on Aer's ``SamplerV2``.

Needs the ``aer`` extra (``pip install 'hybrid-attention[aer]'``).

Example:
    >>> import torch
    >>> from hybrid_attention import IsingProblem
    >>> from hybrid_attention.backends import get_sampler
    >>> from hybrid_attention.circuits import DQASchedule
    >>> sampler = get_sampler("aer", schedule=DQASchedule(tau=1.0, steps=20))
    >>> ss = sampler.sample(IsingProblem(torch.randn(8, 3)), num_reads=256, seed=1)
    >>> ss.spins.shape
    (8, 256, 3)
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import qiskit
import qiskit_aer
from qiskit_aer import AerSimulator
from qiskit_aer.primitives import SamplerV2

from hybrid_attention.circuits.qiskit_dqa import CircuitOptions, DQATemplate
from hybrid_attention.circuits.schedule import DQASchedule

from ._dqa import DQASampler

__all__ = ["AerSampler"]

logger = logging.getLogger(__name__)

_METHODS = ("statevector", "matrix_product_state", "automatic", "density_matrix")


class AerSampler(DQASampler):
    """DQA circuits on qiskit-aer.

    Args:
        schedule: the :class:`DQASchedule`.
        method: Aer simulation method, ``"statevector"`` (default) or ``"matrix_product_state"`` (more
            qubits at low entanglement), ``"automatic"``, ``"density_matrix"``.
        noise_backend: a (fake) IBM backend, e.g. ``FakeTorino()``: its noise model is used and circuits are
            transpiled once per template to its gates and layout (``None``: ideal, untranspiled).
        chunk_size: problems per PUB.
        options: :class:`CircuitOptions` for the emitted circuits.
        default_num_reads: shots when ``num_reads`` is None.
        backend_options: extra ``AerSimulator`` options (e.g. ``max_parallel_threads``).
    """

    name = "aer"
    parameters: dict[str, str] = {}

    def __init__(self, *, schedule: DQASchedule | None = None, method: str = "statevector", noise_backend: Any = None,
                 chunk_size: int = 256, options: CircuitOptions | None = None, default_num_reads: int = 1024,
                 backend_options: dict[str, Any] | None = None) -> None:
        super().__init__(schedule=schedule, chunk_size=chunk_size, options=options, default_num_reads=default_num_reads)
        if method not in _METHODS:
            raise ValueError(f"aer: method must be one of {_METHODS}, got {method!r}")
        self.method = method
        self.noise_backend = noise_backend
        bo: dict[str, Any] = {"method": method, **(backend_options or {})}
        limit = AerSimulator(method=method).configuration().n_qubits
        if noise_backend is not None:
            from qiskit_aer.noise import NoiseModel

            if not hasattr(noise_backend, "target"):
                raise TypeError(f"aer: noise_backend must be a qiskit BackendV2 (e.g. FakeTorino()), got {type(noise_backend).__name__}")
            bo["noise_model"] = NoiseModel.from_backend(noise_backend)
            limit = min(limit, int(noise_backend.num_qubits))
        self.max_qubits = int(limit)
        self.backend_options = bo
        self._isa: dict[DQATemplate, Any] = {}

    @property
    def properties(self) -> dict[str, Any]:
        props = super().properties
        props.update({"method": self.method, "noise": None if self.noise_backend is None else getattr(self.noise_backend, "name", "custom"),
                      "versions": {"qiskit": qiskit.__version__, "qiskit_aer": qiskit_aer.__version__}})
        return props

    def circuit_for(self, tmpl: DQATemplate) -> Any:
        """The circuit actually run for a template (transpiled once to the noise backend when one is set)."""
        if self.noise_backend is None:
            return tmpl.circuit
        if tmpl not in self._isa:
            from qiskit.transpiler import generate_preset_pass_manager

            pm = generate_preset_pass_manager(optimization_level=1, backend=self.noise_backend,
                                              initial_layout=list(self.circuit_options.layout[: tmpl.n]) if self.circuit_options.layout else None,
                                              seed_transpiler=0)
            isa = pm.run(tmpl.circuit)
            if isa.num_parameters != tmpl.num_parameters:
                raise RuntimeError(f"transpilation changed the parameter count ({tmpl.num_parameters} -> {isa.num_parameters})")
            self._isa[tmpl] = isa
        return self._isa[tmpl]

    def _run_chunk(self, tmpl: DQATemplate, values: np.ndarray, shots: int, seed: int) -> np.ndarray:
        circ = self.circuit_for(tmpl)
        sampler = SamplerV2(seed=seed, options={"backend_options": self.backend_options})
        res = sampler.run([(circ, values)], shots=shots).result()
        return res[0].data.meas.to_bool_array(order="little")

    def _extra_info(self, tmpl: DQATemplate) -> dict[str, Any]:
        circ = self.circuit_for(tmpl)
        return {"depth": circ.depth(), "method": self.method}
