"""Applications over the model and the samplers: training, the ablation, sampler fidelity, the demo and the CLI.

The top floor: imports
:mod:`hybrid_attention` (core), :mod:`hybrid_attention.circuits` and :mod:`hybrid_attention.backends`, never the
other way. Samplers are built by name through :mod:`hybrid_attention.backends.registry`; qiskit, pennylane,
qiskit-ibm-runtime and matplotlib are imported inside the functions that need them.

* ``train/``: :class:`~hybrid_attention.apps.train.TrainConfig`, :func:`~hybrid_attention.apps.train.train`, the
  command-line flags shared by ``train`` and ``ablate``, run directories and ``--resume``;
* ``ablate/``: the four-way ablation grid, its tables and plots;
* ``fidelity/``: sampler-fidelity sweeps against exact enumeration (problem ensembles, measurement, report, plots);
* ``demo``: the main demonstration; ``cli``: the ``hybrid-attention`` command (also ``python -m hybrid_attention.apps``);
* ``run_files``: run-directory locks, atomic writes and safe checkpoint loading, shared by all of them.
"""
