"""Mixing of quantum-enhanced MCMC against classical proposals, from exact transition matrices."""
