"""Layouts and fractional RZZ gates of the DQA circuit on IBM fake backends (results/device_gates)."""
