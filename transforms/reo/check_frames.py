"""Frames the output suites of the REO family validate: columns derived
across rows (group totals, the √(K−1) bound of REO, undefined A/B rows
without a reason) that GX, checking one row at a time, cannot derive
(``expectations/group_counts.json``, ``reo.json``, ``reo_ab.json``). Each
table's declaration names its builder (``Table.check_frame``)."""

from __future__ import annotations

import polars as pl


def group_counts_check_frame(counts: pl.DataFrame, traffic_totals: pl.DataFrame) -> pl.DataFrame:
    """group_counts with ``n_attribute_sum`` (sum of n over the attribute's
    groups) and ``n_traffic_total`` (rows staged for that traffic and arm,
    counted independently: ``traffic_totals`` has traffic, arm, n)."""
    sums = counts.group_by("traffic", "arm", "attribute").agg(pl.col("n").sum().alias("n_attribute_sum"))
    return counts.join(sums, on=["traffic", "arm", "attribute"], how="left").join(
        traffic_totals.rename({"n": "n_traffic_total"}), on=["traffic", "arm"], how="left"
    )


def reo_check_frame(reo: pl.DataFrame) -> pl.DataFrame:
    """reo with ``reo_max`` = √(K−1), the largest std/mean of K non-negative
    numbers, and ``reo_below_ci_high``: the plug-in REO, or ``reo_bc`` on a
    row whose plug-in lies above ci_high.

    The plug-in is a norm, biased upwards (E‖ΔÛ‖² = ‖ΔU‖² + tr Σ, DESIGN
    §4.1), and the interval inverts the distribution of ‖ΔÛ‖², bias
    included: with many groups (tr Σ grows with K) the bias can exceed the
    interval's half-width, so an honest interval lies below the plug-in
    (e.g. dozens of groups at parity with about a hundred expected positives
    each). The
    bias-corrected REO must then lie inside: ``reo_le_ci_high`` checks
    ``reo_below_ci_high`` ≤ ci_high. Input: reo rows (K, reo, ci_high and,
    when present, reo_bc)."""
    out = reo.with_columns((pl.col("K").cast(pl.Float64) - 1).clip(0).sqrt().alias("reo_max"))
    if "reo" not in reo.columns:
        return out
    plug_in = pl.col("reo")
    below = plug_in
    if {"reo_bc", "ci_high"} <= set(reo.columns):
        below = pl.when(plug_in > pl.col("ci_high")).then(pl.col("reo_bc")).otherwise(plug_in)
    return out.with_columns(below.alias("reo_below_ci_high"))


def reo_ab_check_frame(reo_ab: pl.DataFrame) -> pl.DataFrame:
    """reo_ab with ``undefined_without_reason``: True on a row whose
    standard error is NaN or null while ``reason`` is null or empty. An
    undefined difference with its reason is an answer (e.g. ``delta_paper``
    on clustered rows, DESIGN §4.1); one without is a defect."""
    se, reason = pl.col("se"), pl.col("reason")
    return reo_ab.with_columns(
        ((se.is_null() | se.is_nan()) & (reason.is_null() | (reason.str.strip_chars() == ""))).alias(
            "undefined_without_reason"
        )
    )
