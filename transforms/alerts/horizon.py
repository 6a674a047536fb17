"""The per-day error that makes alerts hold over a horizon of days (DESIGN §4.9).

A daily verdict is a 95 % statement about one day. A person who watches every
day and acts on the first ``exceeds`` makes one look a day, and neighbouring
days read the same random-traffic pools, so their errors are strongly
dependent and a per-day 2.5 % compounds over a month.

The method: **Bonferroni α-spending over a sliding horizon.** Each day spends
α/H of the error budget, with H = ``horizon_days``: a day raises an
``exceeds`` alert only when the one-sided lower bound at level 1 − α/H of its
REO lies above the line (the two-sided interval at level 1 − 2α/H). By
Boole's inequality, over any H consecutive days a system whose true REO stays
at or below the line raises such an alert with probability at most
Σ_days α/H = α, **whatever the dependence between the days** (shared random
pools, overlapping windows, the same default traffic re-read): the union bound
needs no model of it. It is α-spending with the uniform spending function
α(t) = α·t/H (Lan & DeMets 1983, Biometrika 70(3):659–663, eq. 1 with
α*(t) = αt) bounded by Bonferroni instead of the joint distribution of the
looks, which is what makes it hold under unknown dependence; since every day
spends the same amount, the guarantee holds for every window of H days, not
only the first, so a monitor that runs for years needs no restart.

What it assumes: each day's interval is valid at its level 1 − 2α/H, i.e.
the normal approximation of seed 001 Algorithm 1 holds at that tail (for two
groups on the log scale of U_1/U_2, :func:`fairmon.transforms.reo.intervals_delta.alert_interval`;
for more, the near-parity inversion of DESIGN §4.1); and the truth stays at
or below the line on every day of the window (a system that crosses the line
is the case an alert is for). The union bound loses little here even though
days share random pools: a day's extreme error needs its own default traffic
to be extreme too, and that is fresh every day, so extreme days rarely repeat
within a horizon. So the per-day tail must be accurate, not just roughly so;
bench/alerts.py measures it, the false-alarm rate over 90 days and the days
to detection it costs (figures in bench/README.md).

A/B differences of REO use the same per-day error, two-sided: a change is
alerted when the day's p-value of no difference is at most α/H.
"""

from __future__ import annotations

from fairmon.transforms.registry import Column, F, probability

#: Defaults of ``[alerts]``: the false-alarm probability over the horizon and the horizon in days.
DEFAULT_ALPHA = 0.05
DEFAULT_HORIZON_DAYS = 90

#: The ``reo`` table's evidence for alerts: REO's interval at the alerts' level (DESIGN §4.9).
ALERT_COLUMNS = (
    Column(
        "alert_level",
        F,
        "probability",
        "Level 1 − 2α/H of the alert interval ([alerts] alpha, horizon_days): α/H per day, α over any H days.",
        bounds=probability("alert_level_is_probability"),
    ),
    Column("alert_low", F, "ratio", "REO's lower bound at `alert_level`: an `exceeds` alert when above the line."),
    Column("alert_high", F, "ratio", "REO's upper bound at `alert_level`: `back_within` when at or below the line."),
)


def day_alpha(alpha: float, horizon_days: int) -> float:
    """The error one day may spend, α/H (probability).

    ``alpha`` in (0, 1): the false-alarm probability allowed over any
    ``horizon_days`` (H ≥ 1) consecutive days. Raises ValueError outside
    those ranges. Source: Bonferroni (Boole's inequality); Lan & DeMets
    (1983) eq. 1 with the uniform spending function (module docstring).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alerts alpha must be in (0, 1), got {alpha}")
    if int(horizon_days) != horizon_days or horizon_days < 1:
        raise ValueError(f"alerts horizon_days must be an integer >= 1, got {horizon_days}")
    return alpha / horizon_days


def alert_level(alpha: float, horizon_days: int) -> float:
    """The two-sided confidence level 1 − 2α/H whose lower (upper) bound is
    the one-sided 1 − α/H bound an ``exceeds`` (``back_within``) alert reads
    (probability, in (0, 1)). Raises ValueError as :func:`day_alpha`, and
    when α/H ≥ 1/2 (no two-sided level is left)."""
    a = day_alpha(alpha, horizon_days)
    if a >= 0.5:
        raise ValueError(f"alerts alpha / horizon_days must be below 1/2, got {a:g}")
    return 1.0 - 2.0 * a


def configured_alert_level(cfg) -> float | None:
    """The alerts' level of config ``cfg`` (``[alerts]``), None when alerts are off."""
    a = getattr(cfg, "alerts", None)
    return None if a is None or not a.enabled else alert_level(a.alpha, a.horizon_days)
