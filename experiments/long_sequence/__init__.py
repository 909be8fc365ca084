"""Training at T = 64, beyond enumeration, with mean-field and Gibbs attention (results/long_sequence/)."""
