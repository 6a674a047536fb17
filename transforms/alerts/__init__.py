"""Alerts over time: a monitoring layer over the published days whose false-alarm rate holds over a horizon."""
