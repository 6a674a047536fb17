"""Simulated inputs with known truth, written as a user's files would be (logs, labelers, swap traffic)."""
