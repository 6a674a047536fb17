"""Private audit release: the Laplace-noised score histograms and what can be concluded from them (seed 000)."""
