"""The DQA wing: samplers of the Trotterized diabatic quantum anneal, simulated or on circuit simulators.

* ``base``: :class:`~hybrid_attention.backends.dqa.base.DQASampler`, what every DQA sampler shares (schedule,
  effective temperature, exact reference output);
* ``statevector``: the batched PyTorch simulator (registry name ``statevector``), on the driver layers of
  ``driver`` and ``rotating_frame`` (shared with the qemcmc proposals);
* ``circuit``: the machinery of the samplers that run emitted circuits (templates, chunks, transpilation);
* ``aer`` (qiskit-aer) and ``pennylane`` (any PennyLane device). The IBM sampler lives in the ``ibm`` wing.

Modules that need qiskit or PennyLane are imported by the registry on use, never here.
"""
