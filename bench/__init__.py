"""Benchmarks: each module prints ratios measured side by side in one run. Run from the repository root as modules,
e.g. ``python -m bench.samplers --only bench_aer``; their tables are committed under ``results/bench/``."""
