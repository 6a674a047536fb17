"""Planning: random-traffic volume needed for a target accuracy (seed 001 App. E)."""
