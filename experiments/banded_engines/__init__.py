"""Issue #41 item 3: mean field, TAP, persistent Gibbs and qemcmc against the exact banded engine.

On trained banded models (``python -m experiments.banded_engines.run``, ``python -m experiments.banded_engines.report``).
"""
