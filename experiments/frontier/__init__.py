"""The sampler frontier: mixing scaling on Layden's ensemble and the coupling-strength crossover (results/frontier/)."""
