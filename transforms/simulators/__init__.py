"""Simulators with known truths: impressions, labelers and an envy world (for the demo, tests and bench/)."""
