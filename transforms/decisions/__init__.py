"""Decisions: prevalence at the threshold for models and SDT criteria and cost ratios for labelers (seed 002)."""
