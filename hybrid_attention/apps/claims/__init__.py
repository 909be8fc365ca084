"""Settling the paper's claims: statistics, the claims report, and the resumable experiment plan.

Modules: ``stats`` (paired differences with t confidence intervals, paired tests with Holm's correction, a trend
test over T, the seeds needed for a given power), ``runner`` (studies, learning-rate sweeps, two workers, resumable),
``plan_cli`` (the command line of a plan: experiments/run_plan.py), ``costs``
(the per-run cost table), ``report`` (a subpackage: reading the runs, the paper's findings as data and the
verdict rules, per finding the paper's number, ours with CI and seeds, a verdict; the tables and plots), ``command``
(``hybrid-attention claims``).
"""
