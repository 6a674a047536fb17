"""REO with missing labels and its intervals, A/B differences, stage-wise REO, RSP and user-side
precision (seed 001)."""
