"""DQA circuits of band-W Ising chains on heavy-hex fake backends: SWAPs, two-qubit gates and depth (issue #41 item 5).

Spin ``j`` of a random band-W problem goes to ``line[j]`` of :func:`~hybrid_attention.backends.ibm.line_layout.line_layout`
(a path of the coupling map chosen by reported two-qubit and read-out errors); the Trotterized DQA circuit (the
``qiskit_dqa`` emitter, ``--steps`` Trotter steps) is transpiled with that initial layout at optimization level 3
(seed 0). SWAPs are counted after the layout and routing stages of the same preset pass manager (before the SWAPs are
decomposed into native gates); two-qubit gates and depth on the final ISA circuit.

    python -m bench.banded_circuits                       # n = 16 32 64 100, bands 1 2 4, fake_torino and fake_sherbrooke
    python -m bench.banded_circuits --n 16 --bands 1 --backends fake_torino
"""

from __future__ import annotations

import argparse
import time

import torch

from hybrid_attention import IsingProblem
from hybrid_attention.backends.ibm.devices import fake_backend
from hybrid_attention.backends.ibm.line_layout import line_layout
from hybrid_attention.banded import dense_couplings
from hybrid_attention.circuits import DQASchedule
from hybrid_attention.circuits.qiskit_dqa import template_for


def band_problem(n: int, W: int, seed: int = 0) -> IsingProblem:
    """A random band-W problem: unit-normal fields and band couplings (every coupling in the band nonzero)."""
    g = torch.Generator().manual_seed(seed)
    c = torch.randn(W, n, generator=g, dtype=torch.float64)
    for d in range(1, W + 1):
        c[d - 1, :d] = 0.0  # c[d-1, j] = J[j-d, j] does not exist for j < d
    return IsingProblem(torch.randn(n, generator=g, dtype=torch.float64), dense_couplings(c, n))


def transpile_counts(backend, n: int, W: int, steps: int, seed: int = 0) -> dict:
    """SWAPs, two-qubit gates and depth of the band-W DQA circuit on ``backend`` with the error-chosen line."""
    from qiskit.transpiler import generate_preset_pass_manager
    from qiskit.transpiler.passmanager import StagedPassManager

    line = line_layout(backend, n)
    circ = template_for(band_problem(n, W, seed), DQASchedule(tau=1.0, steps=steps)).circuit
    pm = generate_preset_pass_manager(optimization_level=3, backend=backend, initial_layout=line, seed_transpiler=seed)
    routed = StagedPassManager(["init", "layout", "routing"], init=pm.init, layout=pm.layout, routing=pm.routing).run(
        circ
    )
    isa = pm.run(circ)
    two_q = sum(1 for inst in isa.data if inst.operation.num_qubits == 2)
    return {"swaps": routed.count_ops().get("swap", 0), "two_qubit": two_q, "depth": isa.depth(), "line": line}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[16, 32, 64, 100])
    p.add_argument("--bands", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--backends", nargs="+", default=["fake_torino", "fake_sherbrooke"])
    p.add_argument("--steps", type=int, default=4, help="Trotter steps")
    args = p.parse_args(argv)
    for W in args.bands:
        if W < 1:
            p.error(f"--bands must be >= 1, got {W}")
        bad = [n for n in args.n if W >= n]
        if bad:
            p.error(f"band {W} needs n > {W}, got n = {bad}")
    print(f"Trotter steps {args.steps}, optimization_level 3, seed_transpiler 0")
    print("| backend | n | band | SWAPs | 2q gates | 2q gates without SWAPs | depth | transpile s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in args.backends:
        backend = fake_backend(name)
        for n in args.n:
            for W in args.bands:
                t0 = time.perf_counter()
                try:
                    r = transpile_counts(backend, n, W, args.steps)
                except ValueError as exc:  # no line of n working qubits found
                    print(f"| {name} | {n} | {W} | no line: {exc} | | | | |", flush=True)
                    continue
                ideal = args.steps * sum(n - d for d in range(1, W + 1)) * 2  # two native gates per RZZ
                print(
                    f"| {name} | {n} | {W} | {r['swaps']} | {r['two_qubit']} | {ideal} | {r['depth']} | "
                    f"{time.perf_counter() - t0:.1f} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
