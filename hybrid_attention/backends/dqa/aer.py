"""qiskit-aer DQA sampler: one parametrised circuit plus a bindings array per chunk.

Two read-outs of the same Aer simulation (``readout=``):

- ``"shots"``: Aer's ``SamplerV2`` measures the circuit (one PUB per chunk). Needed for noise models (readout
  errors act at measurement, noise on a statevector is a trajectory) and for ``matrix_product_state``.
- ``"probabilities"``: the chunk's circuits end in ``save_probabilities`` instead of measurements, run through
  ``AerSimulator.run(circuit, parameter_binds=...)`` (what ``SamplerV2`` calls underneath), and the shots are drawn
  from the ideal output distribution in numpy. Same distribution, no Aer per-shot bookkeeping, and
  :meth:`AerSampler.marginals` / :meth:`AerSampler.probabilities` return the exact output of the circuit.
- ``"auto"`` (default): ``"probabilities"`` for ideal ``statevector`` / ``density_matrix`` simulation of at most
  :data:`PROBABILITIES_MAX_QUBITS` qubits, ``"shots"`` otherwise.

Many circuits on a cluster: ``executor=`` a Dask ``distributed.Client`` (or any ``concurrent.futures.Executor``)
runs each chunk of ``chunk_size`` problems as one task on it (:func:`run_chunk_task`), with the chunk's seed, so the
SampleSet is bitwise the same as without it. (qiskit-aer's own ``AerSimulator(executor=..., max_job_size=...)``
options are accepted but ignored by qiskit-aer 0.18, which runs every job on its internal thread; the sampler
therefore submits the chunks itself.)

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
import torch
from qiskit_aer import AerSimulator
from qiskit_aer.primitives import SamplerV2

from hybrid_attention.checks import check_positive_int
from hybrid_attention.circuits.program import CircuitOptions
from hybrid_attention.circuits.qiskit_dqa import DQATemplate
from hybrid_attention.circuits.schedule import DQASchedule
from hybrid_attention.ising import IsingProblem, index_to_bits

from ..base import draw_states, progress
from .circuit import CircuitSampler

__all__ = ["AerSampler", "PROBABILITIES_MAX_QUBITS", "run_chunk_task"]

logger = logging.getLogger(__name__)

_METHODS = ("statevector", "matrix_product_state", "automatic", "density_matrix")
_READOUTS = ("auto", "probabilities", "shots")
#: ``readout="auto"`` reads probabilities up to this many qubits (a chunk holds ``chunk * 2**n`` float64)
PROBABILITIES_MAX_QUBITS = 16
#: bytes of probability tables one probabilities chunk may hold (the chunk is shrunk to fit)
_PROB_BYTES = 256 << 20


class AerSampler(CircuitSampler):
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
        backend_options: extra ``AerSimulator`` options (e.g. ``max_parallel_threads``). By default a chunk's
            experiments run in parallel over the machine's cores (``max_parallel_experiments=0``; Aer's own default
            runs them one at a time, and below 14 qubits it does not parallelise inside one state either).
        readout: ``"auto"`` (default), ``"probabilities"`` or ``"shots"`` (see the module docstring).
            ``"probabilities"`` needs an ideal simulation (no ``noise_backend``) with method ``statevector``,
            ``density_matrix`` or ``automatic``.
        executor: a Dask ``distributed.Client`` or a ``concurrent.futures.Executor``: each chunk is one task on it
            (``None``: chunks run here one after another). The tasks run with ``backend_options`` and, unless
            given there, ``max_parallel_threads=1`` (one core per single-threaded Dask worker). Results are the same
            as without an executor.
        twirling: Pauli twirling of the ISA circuit's two-qubit gates done here (qiskit's ``pauli_twirl_2q_gates``;
            Aer has no runtime to do it): ``0`` (off) or the number of random twirls per chunk, the shots split
            evenly between them. Needs ``noise_backend`` (shots read-out).
        readout_mitigation: mitigate read-out errors (:mod:`.mitigation`, mthree) with a calibration of the noise
            backend's measured qubits (2 circuits x ``calibration_shots``, run on the same noisy simulator, once per
            measured qubit set); the SampleSet holds every configuration weighted by its mitigated probability.
            Needs ``noise_backend``.
        calibration_shots: shots per calibration circuit.
    """

    name = "aer"
    parameters: dict[str, str] = {}

    def __init__(
        self,
        *,
        schedule: DQASchedule | None = None,
        method: str = "statevector",
        noise_backend: Any = None,
        chunk_size: int = 256,
        options: CircuitOptions | None = None,
        default_num_reads: int = 1024,
        backend_options: dict[str, Any] | None = None,
        readout: str = "auto",
        executor: Any = None,
        twirling: int = 0,
        readout_mitigation: bool = False,
        calibration_shots: int = 8192,
    ) -> None:
        super().__init__(schedule=schedule, chunk_size=chunk_size, options=options, default_num_reads=default_num_reads)
        if method not in _METHODS:
            raise ValueError(f"aer: method must be one of {_METHODS}, got {method!r}")
        if readout not in _READOUTS:
            raise ValueError(f"aer: readout must be one of {_READOUTS}, got {readout!r}")
        if readout == "probabilities" and (noise_backend is not None or method == "matrix_product_state"):
            raise ValueError(
                "aer: readout='probabilities' needs an ideal statevector/density_matrix simulation "
                f"(got method={method!r}, noise_backend={'set' if noise_backend is not None else None}); "
                "use readout='shots'"
            )
        if executor is not None and not callable(getattr(executor, "submit", None)):
            raise TypeError(
                f"aer: executor must be a distributed.Client or a concurrent.futures.Executor (with submit), "
                f"got {type(executor).__name__}"
            )
        if (twirling or readout_mitigation) and noise_backend is None:
            raise ValueError(
                f"aer: twirling and readout_mitigation act on a noisy device model: they need noise_backend= "
                f"(got twirling={twirling!r}, readout_mitigation={readout_mitigation!r}, noise_backend=None)"
            )
        if not isinstance(readout_mitigation, bool):
            raise TypeError(f"aer: readout_mitigation must be True or False, got {readout_mitigation!r}")
        self.twirling = check_positive_int(twirling, "aer: twirling", minimum=0)
        if self.twirling and executor is not None:
            raise ValueError("aer: twirling runs in process; it does not combine with executor=")
        self.readout_mitigation = readout_mitigation
        self.calibration_shots = check_positive_int(calibration_shots, "aer: calibration_shots")
        self._calibrations: dict[tuple[int, ...], dict[str, Any]] = {}
        self.executor = executor
        self.readout = readout
        self.method = method
        self.noise_backend = noise_backend
        bo: dict[str, Any] = {"method": method, "max_parallel_experiments": 0, **(backend_options or {})}
        limit = AerSimulator(method=method).configuration().n_qubits
        if noise_backend is not None:
            from qiskit_aer.noise import NoiseModel

            if not hasattr(noise_backend, "target"):
                raise TypeError(
                    f"aer: noise_backend must be a qiskit BackendV2 (e.g. FakeTorino()), got {type(noise_backend).__name__}"
                )
            if bo.get("noise_model") is None:  # a model given in backend_options (e.g. built once, reused) is kept
                bo["noise_model"] = NoiseModel.from_backend(noise_backend)
            limit = min(limit, int(noise_backend.num_qubits))
        self.max_qubits = int(limit)
        self.backend_options = bo
        self._prob_circuits: dict[DQATemplate, Any] = {}
        self._simulator: AerSimulator | None = None

    @property
    def properties(self) -> dict[str, Any]:
        props = super().properties
        props.update(
            {
                "method": self.method,
                "readout": self.readout,
                "noise": None if self.noise_backend is None else getattr(self.noise_backend, "name", "custom"),
                "twirling": self.twirling,
                "readout_mitigation": self.readout_mitigation,
                "versions": {"qiskit": qiskit.__version__, "qiskit_aer": qiskit_aer.__version__},
            }
        )
        return props

    def circuit_for(self, tmpl: DQATemplate) -> Any:
        """The circuit actually run for a template (transpiled once to the noise backend when one is set)."""
        if self.noise_backend is None:
            return tmpl.circuit
        return self._transpiled(tmpl, self.noise_backend)

    def _state_bytes(self, n: int) -> tuple[float, str] | None:
        """Aer's state per experiment: ``16 * 2**n`` bytes (complex128 statevector; 8 with ``precision="single"``),
        ``16 * 4**n`` for ``density_matrix``; no bound for ``matrix_product_state`` / ``automatic``."""
        amp = 8 if self.backend_options.get("precision") == "single" else 16
        if self.method == "statevector":
            return float(amp) * 2.0**n, f"statevector: {amp} * 2**{n} bytes per experiment"
        if self.method == "density_matrix":
            return float(amp) * 4.0**n, f"density matrix: {amp} * 4**{n} bytes per experiment"
        return None

    def reads_probabilities(self, n: int) -> bool:
        """Whether ``n``-qubit problems are read out as probabilities (see ``readout``)."""
        if self.readout != "auto":
            return self.readout == "probabilities"
        return (
            self.noise_backend is None
            and self.method in ("statevector", "density_matrix")
            and n <= PROBABILITIES_MAX_QUBITS
        )

    def _run_chunks(
        self, tmpl: DQATemplate, values: np.ndarray, starts: list[int], shots: int, seeds: list[int]
    ) -> np.ndarray:
        if self.executor is not None:
            return np.concatenate(self._map_chunks(tmpl, values, starts, shots, seeds))
        if not self.reads_probabilities(tmpl.n):
            return super()._run_chunks(tmpl, values, starts, shots, seeds)
        out = []
        for st, sd in progress(zip(starts, seeds), len(starts), self.name):
            p = self._probabilities_chunk(tmpl, values[st : st + self.chunk_size])
            idx = draw_states(p, shots, np.random.default_rng(sd))
            out.append(index_to_bits(idx, tmpl.n))
        return np.concatenate(out, axis=0)

    def _run_chunk(self, tmpl: DQATemplate, values: np.ndarray, shots: int, seed: int) -> np.ndarray:
        if not self.twirling:
            return _shots_rows(self.circuit_for(tmpl), values, shots, seed, self.backend_options)
        from qiskit.circuit import pauli_twirl_2q_gates

        # K twirled copies of the ISA circuit (random Paulis around each 2q gate, equal to it as a unitary), the shots
        # split between them (the first shots % K copies one more): one PUB per copy, bits joined along the shots
        K = min(self.twirling, shots)
        rng = np.random.default_rng(seed)
        twirled = pauli_twirl_2q_gates(self.circuit_for(tmpl), seed=int(rng.integers(2**31)), num_twirls=K)
        twirled = twirled if isinstance(twirled, list) else [twirled]
        per = [shots // K + (k < shots % K) for k in range(K)]
        out = [_shots_rows(c, values, m, int(rng.integers(2**31)), self.backend_options) for c, m in zip(twirled, per)]
        return np.concatenate(out, axis=1)

    def _readout_calibration(self, tmpl: DQATemplate) -> dict[str, Any]:
        from ..ibm.mitigation import assignment_matrices, calibration_circuits, measured_qubits

        qubits = tuple(measured_qubits(self.circuit_for(tmpl)))
        if qubits in self._calibrations:
            return {**self._calibrations[qubits], "ran": False}
        bits = []
        for k, circ in enumerate(calibration_circuits(int(self.noise_backend.num_qubits), list(qubits))):
            sampler = SamplerV2(seed=7919 + k, options={"backend_options": self.backend_options})
            res = sampler.run([circ], shots=self.calibration_shots).result()
            bits.append(res[0].data.meas.to_bool_array(order="little").reshape(-1, len(qubits)))
        cal = {"matrices": assignment_matrices(*bits), "qubits": qubits, "shots": self.calibration_shots}
        self._calibrations[qubits] = cal
        return {**cal, "ran": True}

    def _map_chunks(
        self, tmpl: DQATemplate, values: np.ndarray, starts: list[int], shots: int | None, seeds: list[Any]
    ) -> list[np.ndarray]:
        """Each chunk as one :func:`run_chunk_task` on the executor; the results in chunk order. ``shots=None``:
        the chunks' output probabilities instead of bits."""
        probs = shots is None or self.reads_probabilities(tmpl.n)
        circ = self._probabilities_circuit(tmpl) if probs else self.circuit_for(tmpl)
        opts = {"max_parallel_threads": 1, **self.backend_options}
        futures = [
            self.executor.submit(
                run_chunk_task, circ, list(tmpl.params), values[st : st + self.chunk_size], shots, sd, opts, probs
            )
            for st, sd in zip(starts, seeds)
        ]
        return [f.result() for f in futures]

    def _probabilities_circuit(self, tmpl: DQATemplate) -> Any:
        if tmpl not in self._prob_circuits:
            circ = tmpl.circuit.remove_final_measurements(inplace=False)
            circ.save_probabilities(label="probabilities")
            self._prob_circuits[tmpl] = circ
        return self._prob_circuits[tmpl]

    def _probabilities_chunk(self, tmpl: DQATemplate, values: np.ndarray) -> np.ndarray:
        """Ideal output probabilities ``(C, 2**n)`` of one chunk of bindings: one parametrised circuit ending in
        ``save_probabilities``, run with a bindings array (sub-chunked to bounded memory)."""
        circ = self._probabilities_circuit(tmpl)
        if self._simulator is None:
            self._simulator = AerSimulator(**self.backend_options)
        return _probability_rows(self._simulator, circ, list(tmpl.params), values)

    def probabilities(self, problem: IsingProblem) -> torch.Tensor:
        """Exact output distribution of the simulated circuit, ``(*batch, 2**n)`` float64, index
        ``c = sum_j b_j 2**j`` (masked spins are decoupled qubits). Needs the probabilities read-out."""
        problem = self.validate(problem)
        if not self.reads_probabilities(problem.n):
            raise ValueError(
                f"aer: probabilities need readout='probabilities' (this sampler reads shots at n = {problem.n}: "
                f"readout={self.readout!r}, method={self.method!r}, noise={'yes' if self.noise_backend is not None else 'no'})"
            )
        flat = problem.detach().flatten()
        tmpl = self._template(flat)
        values = self._chunk_values(tmpl, flat)
        starts = list(range(0, len(values), self.chunk_size))
        if self.executor is not None:
            p = np.concatenate(self._map_chunks(tmpl, values, starts, None, [None] * len(starts)))
        else:
            p = np.concatenate([self._probabilities_chunk(tmpl, values[s : s + self.chunk_size]) for s in starts])
        return torch.from_numpy(p / p.sum(-1, keepdims=True)).reshape(*problem.batch_shape, 1 << problem.n)

    def _marginals(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> torch.Tensor:
        """``<s_j>`` of the output, ``(*batch, n)`` float64: exact (from :meth:`probabilities`) when this sampler
        reads probabilities and no ``num_reads`` is given (``seed`` is then unused), the mean of sampled shots
        otherwise."""
        if num_reads is not None or not self.reads_probabilities(problem.n):
            return super()._marginals(problem, num_reads=num_reads, seed=seed, **options)
        return self._masked_marginals(self.probabilities(problem).reshape(-1, 1 << problem.n), problem)

    def _extra_info(self, tmpl: DQATemplate) -> dict[str, Any]:
        circ = self.circuit_for(tmpl)
        return {
            "depth": circ.depth(),
            "method": self.method,
            "readout": "probabilities" if self.reads_probabilities(tmpl.n) else "shots",
        }


def _probability_rows(simulator: Any, circ: Any, params: list[Any], values: np.ndarray) -> np.ndarray:
    """Ideal output probabilities ``(C, 2**n)`` of ``values (C, P)`` bound to ``circ`` (ending in
    ``save_probabilities``): one run with a bindings array per sub-chunk of bounded memory."""
    rows = max(1, _PROB_BYTES // (8 << circ.num_qubits))
    out = []
    for s in range(0, len(values), rows):
        v = values[s : s + rows]
        binds = [{p: v[:, i] for i, p in enumerate(params)}]
        result = simulator.run(circ, parameter_binds=binds, shots=1).result()
        for i, exp in enumerate(result.results):
            if not exp.success:
                raise RuntimeError(f"aer: simulation of problem {s + i} of the chunk failed: {exp.status}")
        out.append(np.stack([np.asarray(result.data(i)["probabilities"], dtype=np.float64) for i in range(len(v))]))
    return np.concatenate(out, axis=0)


def _shots_rows(circ: Any, values: np.ndarray, shots: int, seed: Any, backend_options: dict[str, Any]) -> np.ndarray:
    """Measured bits ``(C, shots, n)`` (column ``j`` = qubit ``j``) of one PUB through Aer's ``SamplerV2``."""
    sampler = SamplerV2(seed=seed, options={"backend_options": backend_options})
    res = sampler.run([(circ, values)], shots=shots).result()
    return res[0].data.meas.to_bool_array(order="little")


def run_chunk_task(
    circ: Any,
    params: list[Any],
    values: np.ndarray,
    shots: int | None,
    seed: Any,
    backend_options: dict[str, Any],
    probabilities: bool,
) -> np.ndarray:
    """One chunk as an executor task (in a Dask worker): ``values (C, P)`` bound to ``circ``.

    ``probabilities`` (``circ`` ends in ``save_probabilities``): the output probabilities ``(C, 2**n)`` when ``shots``
    is ``None``, else ``shots`` reads drawn from them with ``numpy.random.default_rng(seed)``; otherwise the measured
    shots of Aer's ``SamplerV2`` with ``seed``. Bits ``(C, shots, n)``, as the chunk would give in-process.
    """
    if not probabilities:
        return _shots_rows(circ, values, shots, seed, backend_options)
    p = _probability_rows(AerSimulator(**backend_options), circ, params, values)
    if shots is None:
        return p
    return index_to_bits(draw_states(p, shots, np.random.default_rng(seed)), circ.num_qubits)
