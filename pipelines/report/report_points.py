"""The report's figures for a single day: each estimate as a point with its
interval, attributes on a categorical axis and arms side by side within
each, since a one-point time series says nothing a point estimate does not.
REO: seed 001 eq. 19; A/B differences: Algorithm 2."""

from __future__ import annotations

import matplotlib.pyplot as plt
import polars as pl

from fairmon.pipelines.report.report_figures import arm_colors, ci_label, fmt, point_tips, svg_text, verdict_line
from fairmon.pipelines.report.report_words import pfmt


def _dodged_points(ax, frame: pl.DataFrame, series: str, value: str, colors: dict, tip, prefix: str) -> dict:
    """Per attribute (x) one point and whisker per value of ``series`` (dodged
    within the attribute), in its colour, with hover texts. Returns the tips."""
    attrs = sorted(set(frame.get_column("attribute")), key=lambda a: ("×" in a, a))
    names = sorted(set(frame.get_column(series)))
    width = 0.7 / max(1, len(names))
    tips: dict[str, str] = {}
    for k, name in enumerate(names):
        xs, ys, lo, hi, texts = [], [], [], [], []
        for i, a in enumerate(attrs):
            rows = frame.filter((pl.col("attribute") == a) & (pl.col(series) == name)).to_dicts()
            if not rows or rows[0][value] is None or rows[0][value] != rows[0][value]:
                continue
            r = rows[0]
            xs.append(i + (k - (len(names) - 1) / 2) * width)
            ys.append(r[value])
            lo.append(max(r[value] - r["ci_low"], 0) if r["ci_low"] == r["ci_low"] else 0)
            hi.append(max(r["ci_high"] - r[value], 0) if r["ci_high"] == r["ci_high"] else 0)
            texts.append(tip(a, name, r))
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", ms=5, capsize=3, color=colors.get(name), label=name)
        point_tips(ax, xs, ys, texts, prefix, tips)
    ax.set_xticks(range(len(attrs)), attrs, rotation=15 if len(attrs) > 3 else 0)
    ax.set_xlim(-0.6, len(attrs) - 0.4)
    return tips


def reo_point_figure(reo: pl.DataFrame, colors: dict[str, str] | None = None) -> str:
    """REO per attribute and arm on the one day in ``reo`` (rows of the ``reo``
    table) with its interval and each attribute's line (1/9 for K = 2, else
    ``reo_threshold``, drawn over that attribute only), as SVG."""
    colors = colors or arm_colors(reo.get_column("arm"))
    fig, ax = plt.subplots(figsize=(7.5, 3.0), layout="constrained")
    tips = _dodged_points(
        ax, reo, "arm", "reo", colors,
        lambda a, arm, r: f"{a} · arm {arm} · REO {fmt(r['reo'])} [{fmt(r['ci_low'])}, {fmt(r['ci_high'])}] · "
        f"{r['verdict_80pct']}",
        "reo",
    )  # fmt: skip
    attrs = sorted(set(reo.get_column("attribute")), key=lambda a: ("×" in a, a))
    top = 0.0
    for i, a in enumerate(attrs):
        line_at, label = verdict_line(reo.filter(pl.col("attribute") == a))
        ax.hlines(line_at, i - 0.45, i + 0.45, color="crimson", ls="--", lw=1)
        ax.annotate("80 % rule" if label.startswith("80%") else "reo_threshold", (i + 0.45, line_at), ha="right",
                    va="bottom", color="crimson", fontsize=7)  # fmt: skip
        top = max(top, 1.25 * line_at)
    ax.set_ylim(0, max(ax.get_ylim()[1], top))
    ax.set_ylabel("REO (0 = parity)")
    ax.legend(title="arm", fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    day = reo.get_column("ds").max()
    ax.set_title(f"REO by attribute and arm, {day} (whiskers: {ci_label(reo)}; dashed: the line)", loc="left")
    return svg_text(fig, tips)


def ab_point_figure(ab: pl.DataFrame, colors: dict[str, str] | None = None) -> str:
    """D_REO = REO(treatment) − REO(control) per attribute and treatment on
    the one day in ``ab`` (``reo_ab`` rows, ``reo`` metric, the first method
    listed that has a finite interval), with its interval, as SVG."""
    sub = ab.filter((pl.col("metric") == "reo") & pl.col("ci_low").is_not_nan())
    method = sub.get_column("method").head(1).item() if sub.height else ""  # as the daily figure: the first listed
    sub = sub.filter(pl.col("method") == method)
    colors = colors or arm_colors(sub.get_column("treatment"))
    fig, ax = plt.subplots(figsize=(7.5, 3.0), layout="constrained")
    tips = _dodged_points(
        ax, sub, "treatment", "diff", colors,
        lambda a, t, r: f"{a} · {t} − {r['control']} · D_REO {fmt(r['diff'])} [{fmt(r['ci_low'])}, "
        f"{fmt(r['ci_high'])}] · p {pfmt(r['p_value'])}",
        "ab",
    )  # fmt: skip
    ax.axhline(0, color="black", lw=0.6)
    ax.set_ylabel("change in REO (below 0: fairer)")
    ax.legend(title="treatment", fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"Change in REO against the control ({ci_label(sub)}, method {method})", loc="left")
    return svg_text(fig, tips)
