# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The same circuits on IBM Quantum
#
# The DQA circuits the Aer and PennyLane samplers simulate can be submitted unchanged to IBM Quantum through
# `qiskit-ibm-runtime` (`get_sampler("ibm", backend=...)`). This notebook runs **offline**: a fake backend puts the
# runtime in local mode (Aer with the device's noise model) with the same transpile-submit-collect code path. The last
# section shows what changes with a real account. Nothing here contacts IBM unless you set `RUN_ON_HARDWARE = True`
# and have credentials.

# %%

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from IPython.display import Markdown, display

# %%
from qiskit_ibm_runtime.fake_provider import FakeGuadalupeV2, FakeTorino

from hybrid_attention import exact, metrics
from hybrid_attention.apps.fidelity.problems import random_problems
from hybrid_attention.apps.notebook import QUICK, show
from hybrid_attention.backends import get_sampler
from hybrid_attention.circuits import DQASchedule
from hybrid_attention.circuits.qiskit_dqa import dqa_circuit

n, count = 4, (4 if QUICK else 16)
shots = 512 if QUICK else 4096
schedule = DQASchedule(tau=1.0, steps=10 if QUICK else 20)
problems = random_problems(n, count, seed=3)
qc = dqa_circuit(problems[0], schedule)
print("logical circuit:", qc.num_qubits, "qubits, depth", qc.depth(), dict(qc.count_ops()))

# %% [markdown]
# ## Transpiling to the device's ISA
#
# Circuits must be in the backend's instruction set before submission (local mode enforces it too). All-to-all couplings
# on a heavy-hex device need SWAPs; `restrict_couplings="drop"` keeps only couplings between neighbouring qubits instead.
# (Without fractional gates every `RZZ` becomes two CZ; see below.)

# %%
from hybrid_attention.circuits.qiskit_dqa import template_for

rows = []
for label, kw in [
    ("all-to-all", {}),
    ("restricted to device edges", {"restrict_couplings": "drop", "layout": [0, 1, 2, 3]}),
]:
    s = get_sampler("ibm", backend=FakeTorino(), schedule=schedule, **kw)
    tmpl = template_for(problems, schedule, s.circuit_options)
    isa = s.isa_circuit(tmpl)
    ops = isa.count_ops()
    rows.append(
        f"| {label} | {len(tmpl.edges)} | {isa.depth()} | {ops.get('cz', 0)} | {ops.get('rzz', 0)} | "
        + ", ".join(f"{k}: {v}" for k, v in ops.items())
        + " |"
    )
display(
    Markdown("| FakeTorino | couplings | depth | CZ | RZZ | gates |\n|---|---|---|---|---|---|\n" + "\n".join(rows))
)

# %% [markdown]
# ## Fractional RZZ gates
#
# Heron devices can run `RZZ(theta)` natively (fractional gates), but only for `theta` in `[0, pi/2]`, and the runtime
# checks the *bound* parameter values. A DQA slice applies `RZZ(-2 dt B J)`, negative for ferromagnetic couplings, so the
# plain circuit is rejected; `fold_rzz=True` emits `RZZ((pi/2 + theta)/2) . X RZZ((pi/2 - theta)/2) X`, both angles in
# range (`docs/theory.md` section 4). `FakeFractionalBackend` has fractional gates and shows the difference offline.

# %%
from qiskit_ibm_runtime.fake_provider import FakeFractionalBackend

for fold in (False, True):
    s = get_sampler("ibm", backend=FakeFractionalBackend(), schedule=schedule, fold_rzz=fold)
    isa = s.isa_circuit(template_for(problems, schedule, s.circuit_options))
    try:
        out = s.sample(problems, num_reads=128, seed=1)
        result = f"ran: {out.num_reads} shots per problem"
    except Exception as exc:  # the runtime's own input check rejects RZZ angles outside [0, pi/2]
        result = f"rejected: {type(exc).__name__}: {str(exc)[:150]}..."
    print(f"fold_rzz={fold}: depth {isa.depth()}, gates {dict(isa.count_ops())}\n    {result}")

# %% [markdown]
# ## Running offline on a fake device
#
# `FakeGuadalupeV2` (16 qubits) keeps the local noisy simulation fast. We compare with the ideal circuit output and with
# the exact Boltzmann target, using `hybrid_attention.metrics`.

# %%
with get_sampler("ibm", backend=FakeGuadalupeV2(), schedule=schedule) as ibm:
    ss = ibm.sample(problems, num_reads=shots, seed=5)
    p_ideal = ibm.reference_probabilities(problems)
print({k: ss.info[k] for k in ("backend_name", "local", "depth", "two_qubit_gates", "job_ids")})
aer = get_sampler("aer", schedule=schedule).sample(problems, num_reads=shots, seed=5)
p_exact = exact.probabilities(problems).numpy()
lines = ["| sampler | TV to ideal circuit | TV to exact (beta=1) | max marginal error vs ideal |", "|---|---|---|---|"]
for name, s in (("aer (ideal)", aer), ("ibm local, FakeGuadalupeV2 noise", ss)):
    p = s.probabilities()
    lines.append(
        f"| {name} | {metrics.total_variation(p, p_ideal).mean():.3f} | {metrics.total_variation(p, p_exact).mean():.3f} | "
        f"{metrics.marginal_error(s.marginals(), exact.table_marginals(p_ideal).numpy()).max.mean():.3f} |"
    )
display(Markdown("\n".join(lines)))

# %%
fig, ax = plt.subplots(figsize=(6, 3.6))
m_ideal = exact.table_marginals(p_ideal).numpy()
ax.scatter(m_ideal.ravel(), aer.marginals().ravel(), s=12, label="aer (ideal, shots)")
ax.scatter(m_ideal.ravel(), ss.marginals().ravel(), s=12, label="fake device (noise model)")
lim = [min(-0.6, m_ideal.min()), max(0.6, m_ideal.max())]
ax.plot(lim, lim, "k:")
ax.set_xlabel("ideal circuit <s_j>")
ax.set_ylabel("sampled <s_j>")
ax.legend(fontsize=8)
ax.set_title("device noise biases spins toward +1 (relaxation to |0>) and shrinks correlations", fontsize=9)
show(fig)

# %% [markdown]
# ## With a real account
#
# What changes: the backend is a device name, credentials come from `QiskitRuntimeService.save_account(...)` or the
# `QISKIT_IBM_TOKEN` / `QISKIT_IBM_INSTANCE` environment variables, and submission needs the explicit opt-in
# `allow_hardware=True` (QPU time is billed). `mode="batch"` or `"session"` groups the jobs; `info["job_ids"]` records
# them. Everything else (the circuit, the bindings array, one PUB per chunk, transpilation once per template, the
# `SampleSet`) is identical. `fold_rzz=True` and `restrict_couplings="drop"` matter most on hardware: they keep RZZ angles
# legal for fractional gates and avoid the SWAP overhead.

# %%
RUN_ON_HARDWARE = False  # set True to submit (needs credentials; billed)
from hybrid_attention.backends.ibm import has_credentials

if RUN_ON_HARDWARE and has_credentials():
    with get_sampler(
        "ibm",
        backend="ibm_torino",
        schedule=schedule,
        allow_hardware=True,
        mode="batch",
        fold_rzz=True,
        restrict_couplings="drop",
        layout=[0, 1, 2, 3],
    ) as hw:
        hw_ss = hw.sample(problems, num_reads=shots)
    print(hw_ss.info["job_ids"], metrics.total_variation(hw_ss.probabilities(), p_ideal).mean())
else:
    print(
        "offline: no job submitted (RUN_ON_HARDWARE =", RUN_ON_HARDWARE, ", credentials found =", has_credentials(), ")"
    )
