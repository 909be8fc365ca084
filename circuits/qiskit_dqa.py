"""Qiskit emitter: Ising problem + :class:`DQASchedule` -> Trotterized DQA ``QuantumCircuit`` (SPEC section 4).

Qubit ``j`` is spin ``j`` and is measured into clbit ``j`` of the register ``"meas"`` (so
``BitArray.to_bool_array(order="little")`` puts spin ``j`` in column ``j``). Slice ``k`` applies
``RZ(-2 b_k h_j)`` on every qubit, ``RZZ(-2 b_k J_jk)`` on every coupled pair, then ``RX(-2 a_k)``, with
``(b_k, a_k) = schedule.coefficients()``; the problem's ``beta`` multiplies ``h`` and ``J`` (the circuit
encodes ``beta * H_P``) and ``schedule.field_scale`` / ``coupling_scale`` are applied on top.

A batch of problems of one size and coupling pattern shares one parametrised template (cached) whose parameters
are the RZ/RZZ gate angles of every slice. :meth:`DQATemplate.values` gives the physical values (``beta * h``, then
``beta * J_e`` over ``template.edges``), :meth:`DQATemplate.angles` the gate angles, and
:meth:`DQATemplate.bindings` the ``(*batch, num_parameters)`` parameter-values array of a SamplerV2 PUB.

Hardware options (:class:`CircuitOptions`): ``coupling_map`` restricts couplings to a device graph (raise
listing the offending pairs, or drop them); ``fold_rzz`` emits every ``RZZ(theta)`` as
``RZZ((pi/2 + theta)/2) . X_a RZZ((pi/2 - theta)/2) X_a`` so both angles lie in ``[0, pi/2]`` (IBM fractional
gates), valid for ``|theta| <= pi/2`` (checked when binding).

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
import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from hybrid_attention.checks import format_bytes
from hybrid_attention.ising import IsingProblem

from .schedule import DQASchedule

__all__ = ["CircuitOptions", "DQATemplate", "dqa_template", "template_for", "dqa_circuit", "dqa_qasm3",
           "resolve_coupling_map", "restrict_edges", "count_gates", "check_circuit_size", "MAX_GATES"]

logger = logging.getLogger(__name__)

Edge = tuple[int, int]

#: Largest DQA program (in gates) a template, circuit or PennyLane tape is built for; larger requests raise
#: ``ValueError`` before anything is allocated. A parametrised qiskit gate costs about :data:`BYTES_PER_GATE` and
#: ~25 us to build, so the default (2 million gates) is ~2 GiB and about a minute. Assign
#: ``hybrid_attention.circuits.qiskit_dqa.MAX_GATES = ...`` to change it (read on every check).
MAX_GATES = 2_000_000
#: measured memory of one parametrised gate in a qiskit ``QuantumCircuit`` (instruction, parameter, bookkeeping)
BYTES_PER_GATE = 1024


def count_gates(n: int, num_edges: int, schedule: DQASchedule, *, fold_rzz: bool = False, measure: bool = True) -> int:
    """Gates of the DQA program: ``n`` Hadamards, per Trotter step ``n`` RZ, one RZZ per edge (four gates folded:
    X, RZZ, X, RZZ) and ``n`` RX (``2 n`` for ``order=2``), then ``n`` measurements."""
    per_step = n * (3 if schedule.order == 2 else 2) + num_edges * (4 if fold_rzz else 1)
    return n + int(schedule.steps) * per_step + (n if measure else 0)


def check_circuit_size(n: int, num_edges: int, schedule: DQASchedule, *, fold_rzz: bool = False,
                       measure: bool = True) -> int:
    """Raise ``ValueError`` if the program has more than :data:`MAX_GATES` gates (the message gives the estimated
    gates and memory); return the gate count."""
    gates = count_gates(n, num_edges, schedule, fold_rzz=fold_rzz, measure=measure)
    if gates > MAX_GATES:
        raise ValueError(
            f"the DQA program for n = {n} spins, {num_edges} couplings and steps = {schedule.steps} has an estimated "
            f"{gates:,} gates (count_gates), needing about {format_bytes(gates * BYTES_PER_GATE)} as a "
            f"circuit, above the limit MAX_GATES = {MAX_GATES:,} (hybrid_attention.circuits.qiskit_dqa.MAX_GATES); "
            "use fewer Trotter steps or fewer couplings")
    return gates


@dataclass(frozen=True)
class CircuitOptions:
    """Emitter options (hashable: part of the template cache key).

    Args:
        measure: append ``measure(j, j)`` on every qubit.
        fold_rzz: two-gate folded RZZ with angles in ``[0, pi/2]`` (fractional-gate backends).
        coupling_map: undirected physical edges allowed for two-qubit gates (``None``: all-to-all). Build it
            with :func:`resolve_coupling_map` from a list of pairs, a qiskit ``CouplingMap`` or a backend.
        layout: physical qubit of each spin (``None``: spin ``j`` on physical qubit ``j``); used for the
            coupling-map check and as the transpiler's initial layout.
        on_missing: ``"raise"`` (default) or ``"drop"`` couplings between spins not adjacent on the device.
    """

    measure: bool = True
    fold_rzz: bool = False
    coupling_map: tuple[Edge, ...] | None = None
    layout: tuple[int, ...] | None = None
    on_missing: str = "raise"

    def __post_init__(self) -> None:
        if self.on_missing not in ("raise", "drop"):
            raise ValueError(f"on_missing must be 'raise' or 'drop', got {self.on_missing!r}")


def resolve_coupling_map(obj: Any) -> tuple[Edge, ...] | None:
    """Undirected, sorted edge tuple from ``None``, a sequence of pairs, a ``CouplingMap`` or a backend."""
    if obj is None:
        return None
    if hasattr(obj, "coupling_map") and not isinstance(obj, (list, tuple)):  # BackendV2
        obj = obj.coupling_map
    if hasattr(obj, "get_edges"):  # qiskit CouplingMap
        obj = obj.get_edges()
    try:
        edges = {tuple(sorted((int(a), int(b)))) for a, b in obj}
    except (TypeError, ValueError):
        raise TypeError(f"coupling_map must be pairs of ints, a CouplingMap or a backend, got {type(obj).__name__}") from None
    return tuple(sorted(e for e in edges if e[0] != e[1]))


def restrict_edges(edges: Sequence[Edge], n: int, options: CircuitOptions) -> tuple[Edge, ...]:
    """Couplings allowed by ``options.coupling_map`` (raise listing the offending spin pairs, or drop them)."""
    edges = tuple(edges)
    if options.coupling_map is None:
        return edges
    layout = options.layout if options.layout is not None else tuple(range(n))
    if len(layout) < n:
        raise ValueError(f"layout must give a physical qubit for each of the {n} spins, got {len(layout)}")
    graph = set(options.coupling_map)
    bad = [(a, b) for a, b in edges if tuple(sorted((layout[a], layout[b]))) not in graph]
    if bad and options.on_missing == "raise":
        raise ValueError(
            f"{len(bad)} coupled spin pair(s) are not adjacent on the device coupling graph (spin pairs {bad[:20]}"
            f"{' ...' if len(bad) > 20 else ''}, layout {list(layout[:n])}); pass on_missing='drop' to drop them "
            "or choose a layout/couplings that fit the graph")
    if bad:
        logger.warning("dropping %d coupling(s) not on the device graph: %s", len(bad), bad[:20])
    return tuple(e for e in edges if e not in set(bad))


class DQATemplate:
    """Parametrised DQA circuit for one (n, coupling pattern, schedule, options).

    Attributes:
        circuit: the ``QuantumCircuit`` with ``ParameterVector("theta", num_parameters)`` (gate angles).
        n, edges, schedule, options: what it was built for.
    """

    def __init__(self, n: int, edges: tuple[Edge, ...], schedule: DQASchedule, options: CircuitOptions) -> None:
        self.n, self.edges, self.schedule, self.options = n, edges, schedule, options

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
        _, a = schedule.coefficients()
        th = iter(self.params)
        qc.h(range(n))
        for ak in a:
            if schedule.order == 2:
                qc.rx(-float(ak), range(n))
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
            qc.rx(-float(ak) if schedule.order == 2 else -2.0 * float(ak), range(n))
        if options.measure:
            qc.measure(range(n), range(n))
        return qc

    @property
    def num_values(self) -> int:
        """Physical values per problem: ``n`` fields and ``len(edges)`` couplings."""
        return self.n + len(self.edges)

    @property
    def num_parameters(self) -> int:
        """Circuit parameters (gate angles) per problem: ``steps * (n + len(edges) * (2 if fold_rzz else 1))``."""
        return int(self.schedule.steps) * (self.n + len(self.edges) * (2 if self.options.fold_rzz else 1))

    def values(self, problem: IsingProblem) -> np.ndarray:
        """Physical values of a batch, ``(*batch, n + len(edges))`` float64: ``beta * h`` then ``beta * J_e``
        over :attr:`edges` (masked spins decoupled). This is the PennyLane emitter's input.

        Raises:
            ValueError: wrong ``n``; a coupling outside ``edges`` (a different pattern needs another template).
        """
        if not isinstance(problem, IsingProblem):
            raise TypeError(f"expected an IsingProblem, got {type(problem).__name__}")
        if problem.n != self.n:
            raise ValueError(f"template has n = {self.n} qubits, problem has n = {problem.n} spins")
        h, J = problem.dropped()
        beta = problem.beta_tensor().detach().double().numpy()[..., None]
        h = h.detach().double().numpy() * beta
        Jx = np.broadcast_to(J.detach().double().numpy(), (*problem.batch_shape, self.n, self.n)) * beta[..., None]
        allowed = np.zeros((self.n, self.n), dtype=bool)
        for j, k in self.edges:
            allowed[j, k] = allowed[k, j] = True
        off = (np.abs(Jx) > 0) & ~allowed
        if off.any():
            pairs = sorted({tuple(sorted(map(int, ix[-2:]))) for ix in np.argwhere(off)})
            raise ValueError(f"couplings on pairs {pairs[:20]} are not in this template's edges; build a template with them")
        ja = np.array([e[0] for e in self.edges], dtype=int)
        kb = np.array([e[1] for e in self.edges], dtype=int)
        return np.concatenate([h, Jx[..., ja, kb]], axis=-1)

    def angles(self, values: np.ndarray) -> np.ndarray:
        """Gate angles ``(*batch, num_parameters)`` from physical values ``(*batch, n + len(edges))``.

        Per slice ``k``: ``-2 b_k field_scale x_j`` for the RZ gates, then per edge ``theta = -2 b_k coupling_scale
        x_e`` (or the folded pair ``((pi/2 - theta)/2, (pi/2 + theta)/2)``).

        Raises:
            ValueError: a folded RZZ angle ``|theta| > pi/2`` (hardware range ``[0, pi/2]`` would be violated).
        """
        values = np.asarray(values, dtype=np.float64)
        if values.shape[-1] != self.num_values:
            raise ValueError(f"values must have last dimension {self.num_values} (n + edges), got shape {values.shape}")
        b, _ = self.schedule.coefficients()
        fs, cs = float(self.schedule.field_scale), float(self.schedule.coupling_scale)
        rz = -2.0 * b[:, None] * fs * values[..., None, : self.n]  # (*batch, K, n)
        theta = -2.0 * b[:, None] * cs * values[..., None, self.n :]  # (*batch, K, E)
        if self.options.fold_rzz:
            worst = float(np.max(np.abs(theta), initial=0.0))
            if worst > math.pi / 2 + 1e-12:
                raise ValueError(f"fold_rzz needs |RZZ angle| <= pi/2, got {worst:.4g} (max |2 dt B(t) beta J| over slices); "
                                 "use more Trotter steps or a smaller energy_scale")
            theta = np.stack([(math.pi / 2 - theta) / 2, (math.pi / 2 + theta) / 2], axis=-1).reshape(*theta.shape[:-1], -1)
        return np.concatenate([rz, theta], axis=-1).reshape(*values.shape[:-1], self.num_parameters)

    def bindings(self, problem: IsingProblem) -> np.ndarray:
        """Parameter values of a batch for a SamplerV2 PUB: ``angles(values(problem))``, ``(*batch, num_parameters)``."""
        return self.angles(self.values(problem))

    def bind(self, values: np.ndarray) -> Any:
        """One bound ``QuantumCircuit`` from a ``(num_parameters,)`` row of :meth:`bindings`."""
        values = np.asarray(values, dtype=float)
        if values.shape != (self.num_parameters,):
            raise ValueError(f"values must have shape ({self.num_parameters},), got {values.shape}")
        return self.circuit.assign_parameters(values.tolist())  # circuit.parameters is in ParameterVector order

    def __repr__(self) -> str:
        return f"DQATemplate(n={self.n}, edges={len(self.edges)}, steps={self.schedule.steps}, options={self.options})"


@functools.lru_cache(maxsize=128)
def dqa_template(n: int, edges: tuple[Edge, ...], schedule: DQASchedule, options: CircuitOptions = CircuitOptions()) -> DQATemplate:
    """Cached :class:`DQATemplate` per ``(n, edges, schedule, options)``.

    Raises:
        ValueError: ``n < 1``, or a program of more than :data:`MAX_GATES` gates (:func:`check_circuit_size`).
    """
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not isinstance(schedule, DQASchedule):
        raise TypeError(f"schedule must be a DQASchedule, got {type(schedule).__name__}")
    edges = tuple(edges)
    check_circuit_size(int(n), len(edges), schedule, fold_rzz=options.fold_rzz, measure=options.measure)
    return DQATemplate(int(n), edges, schedule, options)


def template_for(problem: IsingProblem, schedule: DQASchedule, options: CircuitOptions = CircuitOptions()) -> DQATemplate:
    """The template for a (batched) problem: its union coupling pattern, restricted by ``options``."""
    if not isinstance(problem, IsingProblem):
        raise TypeError(f"expected an IsingProblem, got {type(problem).__name__}")
    edges = restrict_edges(problem.coupling_edges(), problem.n, options)
    return dqa_template(problem.n, edges, schedule, options)


def _drop_missing(problem: IsingProblem, tmpl: DQATemplate) -> IsingProblem:
    """Zero the couplings a ``on_missing='drop'`` template does not carry."""
    keep = np.zeros((problem.n, problem.n))
    for j, k in tmpl.edges:
        keep[j, k] = keep[k, j] = 1.0
    import torch

    Jk = problem.J.detach() * torch.as_tensor(keep, dtype=problem.dtype)
    return IsingProblem(problem.h.detach(), Jk, beta=problem.beta, mask=problem.mask)


def dqa_circuit(problem: IsingProblem, schedule: DQASchedule, *, measure: bool = True, options: CircuitOptions | None = None) -> Any:
    """Bound DQA ``QuantumCircuit`` for one problem instance.

    Args:
        problem: an unbatched :class:`IsingProblem` (or batch size one); masked spins become decoupled qubits.
        schedule: the :class:`DQASchedule`.
        measure: append measurements (qubit ``j`` into clbit ``j``); overrides ``options.measure``.
        options: :class:`CircuitOptions` (coupling map, folded RZZ).

    Returns:
        a ``qiskit.QuantumCircuit`` on ``n`` qubits without free parameters.

    Raises:
        ValueError: a batch of problems; a program of more than :data:`MAX_GATES` gates (refused before building).
    """
    if not isinstance(problem, IsingProblem):
        raise TypeError(f"expected an IsingProblem, got {type(problem).__name__}")
    if problem.h.numel() != problem.n:
        raise ValueError(f"dqa_circuit needs one problem instance, got batch shape {tuple(problem.batch_shape)}; "
                         "use template_for(...).bindings(problem) for batches")
    opts = options or CircuitOptions()
    if opts.measure != measure:
        opts = CircuitOptions(measure, opts.fold_rzz, opts.coupling_map, opts.layout, opts.on_missing)
    problem = problem.flatten()
    tmpl = template_for(problem, schedule, opts)
    if opts.coupling_map is not None and opts.on_missing == "drop":
        problem = _drop_missing(problem, tmpl)
    return tmpl.bind(tmpl.bindings(problem)[0])


def dqa_qasm3(problem: IsingProblem, schedule: DQASchedule, **kwargs: Any) -> str:
    """OpenQASM 3 text of :func:`dqa_circuit` (same arguments)."""
    from qiskit import qasm3

    return qasm3.dumps(dqa_circuit(problem, schedule, **kwargs))
