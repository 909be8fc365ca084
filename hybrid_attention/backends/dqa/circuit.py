"""The circuit machinery of the DQA samplers that run emitted circuits (aer, pennylane, ibm).

:class:`CircuitSampler` extends the DQA base (:class:`~hybrid_attention.backends.dqa.base.DQASampler`: schedule,
effective beta, exact reference output) with chunking, seeds, templates and results: a batch of problems of one
size becomes one parametrised template (per coupling pattern) plus a bindings array, run in chunks of
``chunk_size`` problems (one PUB / one broadcast tape per chunk). Subclasses implement
``_run_chunk(template, values, shots, seed) -> bool bits (C, shots, n)`` with column ``j`` = qubit ``j``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from hybrid_attention.checks import check_memory, check_positive_int, describe_seed, spawn_seeds
from hybrid_attention.circuits.program import CircuitOptions, DQAProgram
from hybrid_attention.circuits.qiskit_dqa import template_for
from hybrid_attention.circuits.schedule import DQASchedule
from hybrid_attention.ising import IsingProblem, bits_to_spins
from hybrid_attention.sampleset import SampleSet

from ..base import progress
from .base import DQASampler

__all__ = ["CircuitSampler"]

logger = logging.getLogger(__name__)


class CircuitSampler(DQASampler):
    """Base class of the circuit samplers: ``sample`` runs the DQA program of ``schedule`` on each problem.

    The circuit encodes ``beta * H_P`` (the problem's ``beta`` scales ``h`` and ``J``); the output is
    approximately Boltzmann at the effective inverse temperatures :meth:`effective_beta` (leading order, see
    :mod:`hybrid_attention.circuits.temperature`).

    Args:
        schedule: the :class:`DQASchedule` (default :data:`~hybrid_attention.backends.dqa.base.DEFAULT_SCHEDULE`).
        chunk_size: problems per PUB / broadcast batch.
        options: :class:`CircuitOptions` for the emitted circuits (folded RZZ, coupling map).
        default_num_reads: shots per problem when ``num_reads`` is None.
    """

    parameters: dict[str, str] = {}
    max_qubits: int | None = None

    def __init__(
        self,
        *,
        schedule: DQASchedule | None = None,
        chunk_size: int = 256,
        options: CircuitOptions | None = None,
        default_num_reads: int = 1024,
    ) -> None:
        super().__init__(schedule)
        self.chunk_size = check_positive_int(chunk_size, f"{self.name}: chunk_size")
        if options is not None and not isinstance(options, CircuitOptions):
            raise TypeError(f"{self.name}: options must be a CircuitOptions, got {type(options).__name__}")
        self.default_num_reads = check_positive_int(default_num_reads, f"{self.name}: default_num_reads")
        self.circuit_options = options or CircuitOptions()
        self._isa: dict[DQAProgram, Any] = {}  # template -> ISA circuit (see _transpiled)

    @property
    def max_spins(self) -> int | None:  # type: ignore[override]
        """The qubit limit of the simulator or device (``max_qubits``)."""
        return self.max_qubits

    def validate(
        self, problem: Any, *, num_reads: Any = None, seed: Any = None, options: dict | None = None
    ) -> IsingProblem:
        """The base checks, then the simulator's memory for one ``n``-qubit state (:meth:`_state_bytes`) against
        :data:`hybrid_attention.checks.MEMORY_BUDGET`, before any circuit is built."""
        problem = super().validate(problem, num_reads=num_reads, seed=seed, options=options)
        need = self._state_bytes(problem.n)
        if need is not None:
            check_memory(
                need[0],
                f"{self.name}: simulating n = {problem.n} qubits ({need[1]})",
                hint="use fewer spins, or a method that does not hold the full state (e.g. aer's matrix_product_state)",
            )
        return problem

    def _state_bytes(self, n: int) -> tuple[float, str] | None:
        """``(bytes, formula)`` one simulated ``n``-qubit state needs, or ``None`` (no local state: hardware)."""
        return None

    # ------------------------------------------------------------------ sampling
    def _template(self, problem: IsingProblem) -> DQAProgram:
        """The program run for a flattened batch: here the qiskit template (a :class:`DQAProgram` with its circuit)."""
        return template_for(problem, self.schedule, self.circuit_options)

    def _sample(self, problem: IsingProblem, *, num_reads: int | None, seed: Any, **options: Any) -> SampleSet:
        shots = self.default_num_reads if num_reads is None else int(num_reads)
        flat = problem.flatten()
        tmpl = self._template(flat)
        values = self._chunk_values(tmpl, flat)  # validates pattern and fold angles before any work
        B = values.shape[0]
        starts = list(range(0, B, self.chunk_size))
        seeds = spawn_seeds(seed, len(starts))
        t0 = time.perf_counter()
        mitigation = None
        if self.readout_mitigation:  # calibrated first (before the problems' PUBs), once per measured qubit set
            mitigation = self._readout_calibration(tmpl)
        bits = self._run_chunks(tmpl, values, starts, shots, seeds)
        spins = bits_to_spins(bits).reshape(*problem.batch_shape, shots, problem.n)
        info = {
            "backend": self.name,
            "num_reads": shots,
            "shots": shots,
            "seed": describe_seed(seed),
            "chunk_seeds": seeds,
            "chunks": len(starts),
            "schedule": self.schedule,
            "edges": len(tmpl.edges),
            "timing": {"run": time.perf_counter() - t0},
        }
        info.update(self._extra_info(tmpl))
        if mitigation is not None:
            return self._mitigated(bits, mitigation, problem, info)
        w = np.full(spins.shape[:-1], 1.0 / shots)
        return SampleSet(spins, w, problem, info)

    # ------------------------------------------------------------------ readout mitigation
    readout_mitigation: bool = False
    calibration_shots: int = 8192

    def _readout_calibration(self, tmpl: DQAProgram) -> dict[str, Any]:
        """``{"matrices": [2 x 2 per measured bit], "qubits": physical qubits, "shots": calibration shots,
        "ran": bool}`` for the template's measured qubits (subclasses with a noisy read-out implement it)."""
        raise NotImplementedError(f"{self.name}: readout mitigation is not available")

    def _mitigated(self, bits: np.ndarray, cal: dict[str, Any], problem: IsingProblem, info: dict) -> SampleSet:
        """The SampleSet of the mitigated distributions: every configuration once, weighted by its clipped and
        renormalised mitigated probability (:mod:`.mitigation`)."""
        from hybrid_attention.exact import enumerate_states

        from ..ibm.mitigation import mitigated_probabilities

        probs, neg = mitigated_probabilities(bits, cal["matrices"])
        n = problem.n
        states = enumerate_states(n).numpy().astype(np.int8)  # (2**n, n) ±1, index c = sum_j b_j 2**j
        spins = np.broadcast_to(states, (*problem.batch_shape, 1 << n, n)).copy()
        info.update(  # flat keys (reports keep scalar and list entries of info)
            readout_mitigation="mthree, clipped and renormalised",
            mitigation_physical_qubits=[int(q) for q in cal["qubits"]],
            mitigation_calibration_shots=int(cal["shots"]),
            mitigation_calibrated_in_this_call=bool(cal["ran"]),
            mitigation_negative_mass=neg.reshape(problem.batch_shape).tolist(),
        )
        return SampleSet(spins, probs.reshape(*problem.batch_shape, 1 << n), problem, info)

    def _run_chunks(
        self, tmpl: DQAProgram, values: np.ndarray, starts: list[int], shots: int, seeds: list[int]
    ) -> np.ndarray:
        out = []
        for st, sd in progress(zip(starts, seeds), len(starts), self.name):
            out.append(self._run_chunk(tmpl, values[st : st + self.chunk_size], shots, sd))
        return np.concatenate(out, axis=0)

    def _transpiled(self, tmpl: DQAProgram, backend: Any, optimization_level: int = 1) -> Any:
        """``tmpl.circuit`` transpiled to ``backend``'s ISA, once per template (cached on the sampler), with the
        circuit options' layout; the parameter count must survive transpilation."""
        cache = self._isa
        if tmpl not in cache:
            from qiskit.transpiler import generate_preset_pass_manager

            layout = list(self.circuit_options.layout[: tmpl.n]) if self.circuit_options.layout else None
            pm = generate_preset_pass_manager(
                optimization_level=optimization_level, backend=backend, initial_layout=layout, seed_transpiler=0
            )
            isa = pm.run(tmpl.circuit)
            if isa.num_parameters != tmpl.num_parameters:
                raise RuntimeError(
                    f"transpilation changed the parameter count ({tmpl.num_parameters} -> {isa.num_parameters})"
                )
            cache[tmpl] = isa
        return cache[tmpl]

    def _chunk_values(self, tmpl: DQAProgram, flat: IsingProblem) -> np.ndarray:
        """Per-problem rows handed to :meth:`_run_chunk`: the qiskit parameter bindings (gate angles)."""
        return tmpl.bindings(flat)

    def _extra_info(self, tmpl: DQAProgram) -> dict[str, Any]:
        return {"depth": tmpl.circuit.depth()}

    def _run_chunk(self, tmpl: DQAProgram, values: np.ndarray, shots: int, seed: int) -> np.ndarray:
        """Run one chunk: ``values (C, P)`` -> bool bits ``(C, shots, n)``, column ``j`` = qubit ``j``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(schedule={self.schedule})"
