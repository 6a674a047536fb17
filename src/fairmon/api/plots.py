"""REO over days, drawn: the picture a monitor's reader looks at first (Matplotlib, into the caller's axes, so it
works in a notebook, a script or a report alike)."""

from __future__ import annotations

from typing import Any

import polars as pl

from fairmon.api.frames import as_polars, require_columns
from fairmon.extras import require
from fairmon.transforms.reo.estimate import EIGHTY_PERCENT_RULE_REO


def plot_reo(reo_rows: Any, *, attribute: str | None = None, ax: Any = None) -> Any:
    """Daily REO per arm with its confidence interval as a band, and the line its verdict is judged against.

    Parameters
    ----------
    reo_rows : pandas, Polars or PyArrow frame
        Rows of the ``reo`` table, one per day × arm × attribute: what :func:`fairmon.reo` returns for dated rows
        (its ``ds`` column), or ``fairmon.read_table(config, "reo", start, end)``. Needs the columns ``ds``,
        ``reo``, ``ci_low`` and ``ci_high`` (ratios); ``arm`` (one line per arm), ``attribute`` and
        ``reo_threshold`` are used when present.
    attribute : str, optional
        The sensitive attribute to draw when the rows hold several; required then.
    ax : matplotlib.axes.Axes, optional
        Where to draw; a new figure's axes when omitted.

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on: one line with markers per arm, its interval as a shaded band, and a dashed line at
        ``reo_threshold`` (the largest in the rows), else at 1/9, the 80 % rule for two groups.

    Raises
    ------
    ValueError
        A required column is missing (named, with the columns present), or the rows hold several attributes and
        ``attribute`` does not name one of them.
    TypeError
        ``reo_rows`` is not a data frame.
    fairmon.extras.MissingExtraError
        Matplotlib is not installed (the ``report`` extra: ``pip install 'fairmon[report]'``).

    Notes
    -----
    A day is ``exceeds`` when its whole interval lies above the line and ``within`` when it lies at or below it.
    Days with an undefined REO (NaN) leave a gap.

    Source: seed 001 eq. 19 (REO) and §4.3 (the 80 % rule read as REO ≤ 1/9 for two groups); DESIGN §4.1.
    """
    require("fairmon.plot_reo", "report")
    import matplotlib.pyplot as plt

    rows, _ = as_polars(reo_rows, "reo_rows")
    require_columns(rows, ("ds", "reo", "ci_low", "ci_high"), "reo_rows")
    rows = _one_attribute(rows, attribute)
    if rows.schema["ds"] == pl.String:  # read back from a CSV: dates as text
        rows = rows.with_columns(pl.col("ds").str.to_date())
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 3.0), layout="constrained")
    arms = rows.get_column("arm") if "arm" in rows.columns else pl.Series("arm", ["all"] * rows.height)
    rows = rows.with_columns(arms.alias("arm")).sort("arm", "ds")
    for (arm,), part in rows.group_by("arm", maintain_order=True):
        ds = part.get_column("ds").to_list()
        (line,) = ax.plot(ds, part.get_column("reo").to_numpy(), marker="o", ms=3, label=str(arm))
        low, high = part.get_column("ci_low").to_numpy(), part.get_column("ci_high").to_numpy()
        ax.fill_between(ds, low, high, color=line.get_color(), alpha=0.2, lw=0)
    threshold = _line(rows)
    ax.axhline(threshold, color="crimson", ls="--", lw=1, label=f"line: REO = {threshold:.3f}")
    ax.set_ylim(0, max(ax.get_ylim()[1], 1.25 * threshold))
    _day_axis(ax, sorted(set(rows.get_column("ds").to_list())))
    ax.set_ylabel("REO (std/mean of U)")
    ax.set_xlabel("day")
    ax.legend(title="arm", frameon=False)
    return ax


def _day_axis(ax: Any, days: list) -> None:
    """Ticks at days, never at hours: each day when there are at most a month of them, else Matplotlib's
    concise date labels."""
    import matplotlib.dates as mdates

    if len(days) <= 31:
        ax.set_xticks(days)
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d"))
        ax.tick_params(axis="x", labelrotation=45 if len(days) > 10 else 0)
    else:
        locator = mdates.AutoDateLocator(minticks=3, maxticks=10)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def _one_attribute(rows: pl.DataFrame, attribute: str | None) -> pl.DataFrame:
    """The rows of ``attribute``; all rows when they hold at most one attribute and none is asked for."""
    if "attribute" not in rows.columns:
        return rows
    present = sorted(set(rows.get_column("attribute").drop_nulls().to_list()))
    if attribute is None:
        if len(present) > 1:
            raise ValueError(f"reo_rows hold the attributes {present}: name one with attribute=")
        return rows
    if attribute not in present:
        raise ValueError(f"reo_rows: no rows of attribute {attribute!r}; present: {present}")
    return rows.filter(pl.col("attribute") == attribute)


def _line(rows: pl.DataFrame) -> float:
    """The verdict's line: the rows' ``reo_threshold`` (largest), else 1/9."""
    if "reo_threshold" in rows.columns:
        value = rows.get_column("reo_threshold").drop_nulls().max()
        if value is not None and value == value:
            return float(value)
    return EIGHTY_PERCENT_RULE_REO
