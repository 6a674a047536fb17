"""Reachability and stability of a matrix-factorisation recommender (seed 003)."""
