"""Layouts and two-qubit gates of the DQA circuit on IBM fake backends, scored against the exact DQA distribution:
the functions behind ``experiments/device_gates`` (``results/device_gates``).

* :func:`chain_problems`: band-1 (chain) problems, ``h_j ~ N(0, 1)``, ``J_{j,j+1} ~ N(0, 1)``, ``beta = 1``: the
  problems a line of qubits runs without SWAPs (``docs/banded.md``).
* :func:`dqa_point`: one problem's bound DQA circuit transpiled to a backend (optimization level 1, transpiler seed
  0) with a layout choice (:data:`LAYOUTS`), and scored: two-qubit gate count and depth, the circuit's estimated
  duration, and the TV of its exact output under the backend's Aer noise model
  (:func:`~hybrid_attention.apps.noise_study.exact_noisy_distribution`: density matrix, read-out applied) to the
  noiseless circuit's exact output (statevector) and to Boltzmann.

Layouts: ``"default"`` (the transpiler's own choice: VF2Layout, which already scores candidate placements by the
target's error rates, else Sabre), ``"line"`` (:func:`~hybrid_attention.backends.ibm.line_layout.line_layout` from
two-qubit and read-out errors), ``"line-t1t2"`` (the same plus each qubit's decoherence over the circuit's estimated
duration, from T1 and T2).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from hybrid_attention import IsingProblem, exact
from hybrid_attention.metrics import expected_tv, total_variation

__all__ = ["LAYOUTS", "chain_problems", "transpile_dqa", "dqa_point", "summarize"]

#: layout choices of :func:`transpile_dqa`
LAYOUTS = ("default", "line", "line-t1t2")


def chain_problems(n: int, count: int, seed: int) -> IsingProblem:
    """``count`` chain problems of ``n`` spins: ``h ~ N(0, 1)``, ``J_{j,j+1} ~ N(0, 1)`` (others 0), ``beta = 1``;
    problem ``k`` depends on ``(n, seed, k)`` only (a longer list starts with the shorter one)."""
    hs, cs = [], []
    for k in range(count):
        g = torch.Generator().manual_seed((int(seed) * 1000 + n) * 1000 + k)
        hs.append(torch.randn(n, generator=g, dtype=torch.float64))
        cs.append(torch.randn(n - 1, generator=g, dtype=torch.float64))
    J = torch.diag_embed(torch.stack(cs), offset=1)
    return IsingProblem(torch.stack(hs), J + J.transpose(-1, -2))


def transpile_dqa(circuit: Any, backend: Any, layout: str) -> Any:
    """``circuit`` (bound, measured) transpiled to ``backend`` at optimization level 1 with the ``layout`` choice
    (:data:`LAYOUTS`); ``"line-t1t2"`` charges decoherence over the duration of the ``"default"`` transpilation."""
    from qiskit.transpiler import generate_preset_pass_manager

    from hybrid_attention.backends.ibm.line_layout import line_layout

    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    n = circuit.num_qubits
    initial = None
    if layout != "default":
        duration = 0.0
        if layout == "line-t1t2":
            duration = transpile_dqa(circuit, backend, "default").estimate_duration(backend.target, unit="s")
        initial = line_layout(backend, n, duration=float(duration))
    pm = generate_preset_pass_manager(optimization_level=1, backend=backend, initial_layout=initial, seed_transpiler=0)
    return pm.run(circuit)


def dqa_point(
    problem: IsingProblem, backend: Any, *, layout: str = "default", fold_rzz: bool = False, schedule: Any = None
) -> dict[str, Any]:
    """One problem's DQA circuit on ``backend`` with a layout choice, scored exactly (module docstring).

    Args:
        problem: one problem (batch size 1 or none). backend: a fake backend (its target and noise model).
        layout: one of :data:`LAYOUTS`. fold_rzz: emit every RZZ as the folded pair of non-negative angles (the
            sampler's parametrised form for fractional-gate backends; without it a bound circuit's negative angles
            are folded by the transpiler with X gates, one RZZ each). schedule: the anneal (default
            ``DQASchedule(tau=1.0, steps=20)``, the device-noise study's).

    Returns:
        ``{"n", "layout", "qubits", "two_qubit_gates", "two_qubit_depth", "duration_s", "tv_circuit",
        "tv_boltzmann", "tv_ideal_boltzmann", "floor_4096", "seconds"}``: ``tv_circuit`` the exact noisy output's
        TV to the noiseless circuit's, ``floor_4096`` the shot-noise floor (:func:`expected_tv`) a 4096-shot
        histogram of the noisy output would add.
    """
    from qiskit.quantum_info import Statevector

    from hybrid_attention.apps.noise_study import exact_noisy_distribution
    from hybrid_attention.backends.ibm.fractional import two_qubit_count, two_qubit_depth
    from hybrid_attention.backends.ibm.mitigation import measured_qubits
    from hybrid_attention.circuits import CircuitOptions, DQASchedule
    from hybrid_attention.circuits.qiskit_dqa import dqa_circuit

    schedule = schedule or DQASchedule(tau=1.0, steps=20)
    t0 = time.perf_counter()
    one = problem.detach().flatten()
    if one.h.shape[0] != 1:
        raise ValueError(f"dqa_point takes one problem, got batch shape {tuple(problem.batch_shape)}")
    circ = dqa_circuit(one[0], schedule, options=CircuitOptions(fold_rzz=fold_rzz))
    ideal = Statevector(circ.remove_final_measurements(inplace=False)).probabilities()  # c = sum_j b_j 2**j
    isa = transpile_dqa(circ, backend, layout)
    noisy = exact_noisy_distribution(isa, backend)
    boltz = exact.probabilities(one).numpy().reshape(-1)
    return {
        "n": one.n,
        "layout": layout,
        "fold_rzz": fold_rzz,
        "qubits": measured_qubits(isa),
        "two_qubit_gates": two_qubit_count(isa),
        "two_qubit_depth": two_qubit_depth(isa),
        "duration_s": float(isa.estimate_duration(backend.target, unit="s")),
        "tv_circuit": float(total_variation(noisy, ideal)),
        "tv_boltzmann": float(total_variation(noisy, boltz)),
        "tv_ideal_boltzmann": float(total_variation(ideal, boltz)),
        "floor_4096": float(expected_tv(noisy, 4096)),
        "seconds": time.perf_counter() - t0,
    }


def summarize(points: list[dict[str, Any]]) -> dict[str, float]:
    """Means over problems of a list of :func:`dqa_point` results (one backend, size, layout and gate set)."""
    keys = ("two_qubit_gates", "two_qubit_depth", "duration_s", "tv_circuit", "tv_boltzmann", "floor_4096")
    return {k: float(np.mean([p[k] for p in points])) for k in keys} | {"problems": len(points)}
