"""The core every other room stands on: the validated config, the run's state, stage timing, fault points."""
