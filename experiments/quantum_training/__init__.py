"""Training attention from quantum-enhanced MCMC samples: runs, burn-in, proposal tuning, gradient check (results/quantum_training/)."""
