"""Qiskit emitter: Ising problem + :class:`DQASchedule` -> Trotterized DQA ``QuantumCircuit`` (docs/theory.md section 4).

Qubit ``j`` is spin ``j`` and is measured into clbit ``j`` of the register ``"meas"`` (so
``BitArray.to_bool_array(order="little")`` puts spin ``j`` in column ``j``). Slice ``k`` applies
``RZ(-2 b_k h_j)`` on every qubit, ``RZZ(-2 b_k J_jk)`` on every coupled pair, then ``RX(-2 a_k)``, with
``(b_k, a_k) = schedule.coefficients()``; the problem's ``beta`` multiplies ``h`` and ``J`` (the circuit
encodes ``beta * H_P``) and ``schedule.field_scale`` / ``coupling_scale`` are applied on top.

A pure emitter: the program (its layers, values, angles, sizes, hardware options) is :mod:`.program`'s
:class:`~.program.DQAProgram`; :class:`DQATemplate` adds the parametrised ``QuantumCircuit`` of it. A batch of
problems of one size and coupling pattern shares one template (cached) whose parameters are the RZ/RZZ gate angles
of every slice: :meth:`DQATemplate.bindings` is the ``(*batch, num_parameters)`` parameter-values array of a
SamplerV2 PUB.

Hardware options (:class:`CircuitOptions`): ``coupling_map`` restricts couplings to a device graph (raise
listing the offending pairs, or drop them); ``fold_rzz`` emits every ``RZZ(theta)`` as
``RZZ((pi/2 + theta)/2) . X_a RZZ((pi/2 - theta)/2) X_a`` so both angles lie in ``[0, pi/2]`` (IBM fractional
gates), valid for ``|theta| <= pi/2`` (checked when binding). The ``ibm`` sampler turns it on by itself for a backend
whose native ``rzz`` has such angle bounds (``hybrid_attention.backends.ibm.sampler.has_fractional_rzz``).

Example:
    >>> import torch
    >>> from hybrid_attention import IsingProblem
    >>> from hybrid_attention.circuits import DQASchedule, dqa_circuit
    >>> p = IsingProblem(torch.tensor([0.5, -0.3]), torch.tensor([[0.0, 0.8], [0.8, 0.0]]))
    >>> qc = dqa_circuit(p, DQASchedule(tau=1.0, steps=3))
    >>> qc.num_qubits, dict(qc.count_ops())["rzz"]
    (2, 3)
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import numpy as np

from hybrid_attention.ising import IsingProblem

from .program import CircuitOptions, DQAProgram, Edge, check_program_request, drop_missing_couplings, program_edges
from .schedule import DQASchedule

__all__ = ["DQATemplate", "dqa_template", "template_for", "dqa_circuit", "dqa_qasm3"]

logger = logging.getLogger(__name__)


class DQATemplate(DQAProgram):
    """Parametrised DQA circuit of a :class:`~.program.DQAProgram` (values, angles, bindings come from the program).

    Attributes:
        circuit: the ``QuantumCircuit`` with ``ParameterVector("theta", num_parameters)`` (gate angles).
        n, edges, schedule, options: what it was built for.
    """

    @functools.cached_property
    def params(self) -> Any:
        """The ``ParameterVector("theta", num_parameters)`` of gate angles (see :meth:`angles`)."""
        from qiskit.circuit import ParameterVector

        return ParameterVector("theta", self.num_parameters)

    @functools.cached_property
    def circuit(self) -> Any:
        """The parametrised ``QuantumCircuit`` (built on first use: bindings alone need no qiskit).

        Every RZ/RZZ angle is its own parameter (numeric binding is fast in Aer and lets the runtime check
        bound values); the driver angles are constants.
        """
        from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister

        n, edges, schedule, options = self.n, self.edges, self.schedule, self.options
        qc = QuantumCircuit(QuantumRegister(n, "q"), name=f"dqa_n{n}_K{schedule.steps}")
        if options.measure:
            qc.add_register(ClassicalRegister(n, "meas"))
        th = iter(self.params)
        qc.h(range(n))
        for kind, val in self.layers():
            if kind == "D":  # exp(-i a H_D) = RX(-2a) on every qubit
                qc.rx(-2.0 * val, range(n))
                continue
            for j in range(n):
                qc.rz(next(th), j)
            for j, k in edges:
                if options.fold_rzz:  # RZZ(theta) = RZZ((pi/2 + theta)/2) . X_j RZZ((pi/2 - theta)/2) X_j
                    qc.x(j)
                    qc.rzz(next(th), j, k)
                    qc.x(j)
                    qc.rzz(next(th), j, k)
                else:
                    qc.rzz(next(th), j, k)
        if options.measure:
            qc.measure(range(n), range(n))
        return qc

    def bind(self, values: np.ndarray) -> Any:
        """One bound ``QuantumCircuit`` from a ``(num_parameters,)`` row of :meth:`bindings`."""
        values = np.asarray(values, dtype=float)
        if values.shape != (self.num_parameters,):
            raise ValueError(f"values must have shape ({self.num_parameters},), got {values.shape}")
        return self.circuit.assign_parameters(values.tolist())  # circuit.parameters is in ParameterVector order


@functools.lru_cache(maxsize=128)
def dqa_template(
    n: int, edges: tuple[Edge, ...], schedule: DQASchedule, options: CircuitOptions = CircuitOptions()
) -> DQATemplate:
    """Cached :class:`DQATemplate` per ``(n, edges, schedule, options)``.

    Raises:
        ValueError: ``n < 1``, or a program of more than :data:`~.program.MAX_GATES` gates (:func:`~.program.check_circuit_size`).
    """
    return DQATemplate(int(n), check_program_request(n, edges, schedule, options), schedule, options)


def template_for(
    problem: IsingProblem, schedule: DQASchedule, options: CircuitOptions = CircuitOptions()
) -> DQATemplate:
    """The template for a (batched) problem: its union coupling pattern, restricted by ``options``."""
    return dqa_template(problem.n, program_edges(problem, options), schedule, options)


def dqa_circuit(
    problem: IsingProblem, schedule: DQASchedule, *, measure: bool = True, options: CircuitOptions | None = None
) -> Any:
    """Bound DQA ``QuantumCircuit`` for one problem instance.

    Args:
        problem: an unbatched :class:`IsingProblem` (or batch size one); masked spins become decoupled qubits.
        schedule: the :class:`DQASchedule`.
        measure: append measurements (qubit ``j`` into clbit ``j``); overrides ``options.measure``.
        options: :class:`CircuitOptions` (coupling map, folded RZZ).

    Returns:
        a ``qiskit.QuantumCircuit`` on ``n`` qubits without free parameters.

    Raises:
        ValueError: a batch of problems; a program of more than :data:`~.program.MAX_GATES` gates (refused before building).
    """
    if not isinstance(problem, IsingProblem):
        raise TypeError(f"expected an IsingProblem, got {type(problem).__name__}")
    if problem.h.numel() != problem.n:
        raise ValueError(
            f"dqa_circuit needs one problem instance, got batch shape {tuple(problem.batch_shape)}; "
            "use template_for(...).bindings(problem) for batches"
        )
    opts = options or CircuitOptions()
    if opts.measure != measure:
        opts = CircuitOptions(measure, opts.fold_rzz, opts.coupling_map, opts.layout, opts.on_missing)
    problem = problem.flatten()
    tmpl = template_for(problem, schedule, opts)
    if opts.coupling_map is not None and opts.on_missing == "drop":
        problem = drop_missing_couplings(problem, tmpl.edges)
    return tmpl.bind(tmpl.bindings(problem)[0])


def dqa_qasm3(problem: IsingProblem, schedule: DQASchedule, **kwargs: Any) -> str:
    """OpenQASM 3 text of :func:`dqa_circuit` (same arguments), as ``qiskit.qasm3.dumps`` writes it (``rzz`` through a
    custom gate definition); :func:`~.export.to_qasm3` writes standard gates only (readable by PennyLane too)."""
    from qiskit import qasm3

    return qasm3.dumps(dqa_circuit(problem, schedule, **kwargs))
