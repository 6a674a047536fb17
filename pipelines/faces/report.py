"""The HTML report: one self-contained file (inline SVG plots, inline CSS, no
network), built only from days whose data passed the checks."""

from __future__ import annotations

import datetime as dt
import html
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import polars as pl
from jinja2 import Environment

from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.storage.warehouse import latest_runs, read_table
from fairmon.transforms.reo.estimate import EIGHTY_PERCENT_RULE_REO
from fairmon.transforms.report_data import (
    ReportData,
    envy_findings,
    labeler_finding,
    prevalence_finding,
    reach_findings,
    reo_verdict_paragraphs,
    report_data,
)

plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False, "axes.spines.right": False})
MAX_GROUP_LINES = 6


def _svg(fig, tips: dict[str, str] | None = None) -> str:
    """The figure as inline SVG text; ``tips`` maps an artist's gid to the
    hover text the browser shows on it (an SVG <title>, works offline)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    for gid, tip in (tips or {}).items():
        text = text.replace(f'<g id="{gid}">', f'<g id="{gid}"><title>{html.escape(tip)}</title>', 1)
    return text


#: One colour per arm, the same in every plot of a report (matplotlib's tab10, by sorted arm name).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def arm_colors(arms) -> dict[str, str]:
    """{arm: colour} for every arm of the report, by sorted name (cycling after 10)."""
    return {a: PALETTE[i % len(PALETTE)] for i, a in enumerate(sorted(set(arms)))}


def _point_tips(ax, x: list, y, texts: list[str], prefix: str, tips: dict[str, str]) -> None:
    """Near-invisible hover targets on each finite point, their texts in ``tips``."""
    for i, (xi, yi, t) in enumerate(zip(x, y, texts, strict=True)):
        if yi is None or yi != yi:
            continue
        gid = f"{prefix}-{len(tips)}-{i}"
        ax.scatter([xi], [yi], s=60, alpha=0.01, gid=gid, zorder=4)
        tips[gid] = t


def _daily(frame: pl.DataFrame, start: dt.date, end: dt.date) -> pl.DataFrame:
    """One row per calendar day (nulls where a day is missing), so plotted lines
    break at excluded days instead of bridging them."""
    days = pl.DataFrame({"ds": pl.date_range(start, end, "1d", eager=True)})
    return days.join(frame, on="ds", how="left").sort("ds")


def _span(d: dt.date, half_days: float = 0.5) -> tuple[dt.datetime, dt.datetime]:
    t = dt.datetime.combine(d, dt.time())
    return t - dt.timedelta(days=half_days), t + dt.timedelta(days=half_days)


def _date_axis(ax, start: dt.date, end: dt.date) -> None:
    """Day ticks (at most about 8 labels), a half-day margin either side."""
    n = (end - start).days + 1
    ax.xaxis.set_major_locator(mdates.DayLocator(interval=max(1, -(-n // 8))))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d"))
    ax.set_xlim(_span(start, 0.7)[0], _span(end, 0.7)[1])


def ci_label(frame: pl.DataFrame) -> str:
    """``95% CI (delta)``: the interval label from the rows' own ``level`` and
    ``ci_method`` (config), never hard-coded."""
    if frame.is_empty() or "level" not in frame.columns:
        return "CI"
    level = frame.get_column("level").drop_nulls()
    method = (
        frame.get_column("ci_method").drop_nulls() if "ci_method" in frame.columns else pl.Series([], dtype=pl.String)
    )
    text = f"{100 * level[-1]:g}% CI" if level.len() else "CI"
    return f"{text} ({method[-1]})" if method.len() else text


def verdict_line(reo: pl.DataFrame) -> tuple[float, str]:
    """The REO line of one attribute's rows and its label: the 80 % rule (1/9)
    for K = 2, the configured ``reo_threshold`` for K > 2 (DESIGN §4.1)."""
    if reo.is_empty() or "reo_threshold" not in reo.columns:
        return EIGHTY_PERCENT_RULE_REO, "80% rule: REO = 11.1%"
    line = float(reo.get_column("reo_threshold").drop_nulls().max() or EIGHTY_PERCENT_RULE_REO)
    K = int(reo.get_column("K").max() or 2)
    if K <= 2:
        return line, f"80% rule: REO = {100 * line:.1f}%"
    return line, f"configured reo_threshold = {100 * line:.1f}% (K = {K}; the 80% rule is for 2 groups)"


def reo_figure(
    reo: pl.DataFrame,
    attribute: str,
    excluded: list[dt.date],
    start: dt.date,
    end: dt.date,
    colors: dict[str, str] | None = None,
) -> str:
    """Daily REO per arm (colours from ``colors``) with its CI band and the
    80 %-rule line (REO = 1/9), as SVG; hovering a point shows its day, REO,
    interval and verdict."""
    fig, ax = plt.subplots(figsize=(7.5, 3.0), layout="constrained")
    sub = reo.filter(pl.col("attribute") == attribute)
    colors = colors or arm_colors(sub.get_column("arm"))
    tips: dict[str, str] = {}
    for arm in sorted(set(sub.get_column("arm"))):
        a = _daily(sub.filter(pl.col("arm") == arm), start, end)
        x = a.get_column("ds").to_list()
        c = colors.get(arm)
        ax.fill_between(
            x, a.get_column("ci_low").to_numpy(), a.get_column("ci_high").to_numpy(), alpha=0.2, color=c, lw=0
        )
        y = a.get_column("reo").to_numpy()
        (line,) = ax.plot(x, y, marker="o", ms=3, label=f"{arm}", color=c)
        _point_tips(
            ax,
            x,
            y,
            [
                f"{d} · arm {arm} · REO {_fmt(r)} [{_fmt(lo)}, {_fmt(hi)}] · {v}"
                for d, r, lo, hi, v in a.select("ds", "reo", "ci_low", "ci_high", "verdict_80pct").iter_rows()
            ],
            f"reo-{attribute}",
            tips,
        )
        ax.errorbar(
            x,
            y,
            yerr=[y - a.get_column("ci_low").to_numpy(), a.get_column("ci_high").to_numpy() - y],
            fmt="none",
            ecolor=line.get_color(),
            elinewidth=0.8,
            capsize=2,
            alpha=0.7,
        )
    if "look_ahead" in sub.columns and sub.get_column("look_ahead").fill_null(False).any():
        ahead = sub.filter(pl.col("look_ahead").fill_null(False))
        ax.scatter(
            ahead.get_column("ds").to_list(),
            ahead.get_column("reo").to_numpy(),
            s=60,
            facecolors="none",
            edgecolors="#a15c07",
            lw=1,
            label="uses random traffic from after the day",
            zorder=3,
        )
    line_at, line_label = verdict_line(sub)
    ax.axhline(line_at, color="crimson", ls="--", lw=1)
    ax.annotate(
        line_label,
        xy=(0.01, line_at),
        xycoords=("axes fraction", "data"),
        xytext=(0, 3),
        textcoords="offset points",
        color="crimson",
        fontsize=8,
    )
    for i, d in enumerate(excluded):
        ax.axvspan(*_span(d), color="#8a8f9c", alpha=0.3, lw=0, label="excluded day" if i == 0 else None)
    ax.set_ylim(0, max(ax.get_ylim()[1], 1.25 * line_at))
    ax.set_ylabel("REO (std/mean of U)")
    ax.set_title(f"Daily REO by arm, attribute '{attribute}' (band: {ci_label(sub)}; grey: excluded day)", loc="left")
    ax.legend(title="arm", fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _date_axis(ax, start, end)
    return _svg(fig, tips)


def delta_u_figure(group: pl.DataFrame, attribute: str, start: dt.date, end: dt.date) -> str:
    """ΔU_k per group with CIs: daily lines with bands (few groups) or the last
    published day's estimates with whiskers (many groups), one panel per arm."""
    sub = group.filter(pl.col("attribute") == attribute)
    arms = sorted(set(sub.get_column("arm")))
    groups = sorted(set(sub.get_column("group")))
    many = len(groups) > MAX_GROUP_LINES
    ncols = min(2, len(arms))  # at most two panels a row: the page width keeps the text readable
    nrows = -(-len(arms) // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(7.5, nrows * (0.28 * len(groups) + 1.2 if many else 2.6)),
        squeeze=False,
        sharey=True,
        layout="constrained",
    )
    for ax in axes.flat[len(arms) :]:
        ax.set_visible(False)
    for ax, arm in zip(axes.flat, arms):
        a = sub.filter(pl.col("arm") == arm)
        ax.axhline(0, color="black", lw=0.6) if not many else ax.axvline(0, color="black", lw=0.6)
        if many:
            last = a.filter(pl.col("ds") == a.get_column("ds").max()).sort("delta_U")
            y = range(last.height)
            lo = (last.get_column("delta_U") - last.get_column("ci_low")).to_numpy()
            hi = (last.get_column("ci_high") - last.get_column("delta_U")).to_numpy()
            ax.errorbar(last.get_column("delta_U").to_numpy(), list(y), xerr=[lo, hi], fmt="o", ms=3, capsize=2)
            ax.set_yticks(list(y), last.get_column("group").to_list())
            ax.set_xlabel("ΔU (relative utility)")
            ax.set_title(f"arm {arm}, {last.get_column('ds').max()}", loc="left")
        else:
            for g in groups:
                s = _daily(a.filter(pl.col("group") == g), start, end)
                x = s.get_column("ds").to_list()
                ax.fill_between(x, s.get_column("ci_low").to_numpy(), s.get_column("ci_high").to_numpy(), alpha=0.2)
                y = s.get_column("delta_U").to_numpy()
                (line,) = ax.plot(x, y, marker="o", ms=3, label=g)
                ax.errorbar(
                    x,
                    y,
                    yerr=[y - s.get_column("ci_low").to_numpy(), s.get_column("ci_high").to_numpy() - y],
                    fmt="none",
                    ecolor=line.get_color(),
                    elinewidth=0.8,
                    capsize=2,
                    alpha=0.7,
                )
            ax.set_title(f"arm {arm}", loc="left")
            ax.set_ylabel("ΔU (relative utility)")
            _date_axis(ax, start, end)
    if not many:
        axes.flat[ncols - 1].legend(
            title=attribute, fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0)
        )
    fig.suptitle(
        f"Relative utility ΔU_k = U_k/mean(U) − 1 by group, '{attribute}' (95% CI)", x=0.01, ha="left", fontsize=10
    )
    return _svg(fig)


def ab_figure(
    ab: pl.DataFrame, attribute: str, start: dt.date, end: dt.date, colors: dict[str, str] | None = None
) -> str:
    """D_REO = REO_T − REO_C per day and treatment with its CI (like seed 001
    Fig. 9), in the treatment arm's colour, as SVG with hover texts."""
    fig, ax = plt.subplots(figsize=(7.5, 3.0), layout="constrained")
    sub = ab.filter((pl.col("attribute") == attribute) & (pl.col("metric") == "reo"))
    method = sub.get_column("method").head(1).item() if sub.height else ""
    sub = sub.filter(pl.col("method") == method)
    colors = colors or arm_colors(sub.get_column("treatment"))
    tips: dict[str, str] = {}
    for (control, treatment), g in sorted(sub.group_by("control", "treatment"), key=lambda kv: kv[0]):
        s = _daily(g.select("ds", "diff", "ci_low", "ci_high", "p_value"), start, end)
        y = s.get_column("diff").to_numpy()
        x = s.get_column("ds").to_list()
        (line,) = ax.plot(x, y, marker="o", ms=3, label=f"{treatment} − {control}", color=colors.get(treatment))
        _point_tips(
            ax,
            x,
            y,
            [
                f"{d} · {treatment} − {control} · D_REO {_fmt(v)} [{_fmt(lo)}, {_fmt(hi)}] · p {_pfmt(p)}"
                for d, v, lo, hi, p in s.iter_rows()
            ],
            f"ab-{attribute}",
            tips,
        )
        ax.fill_between(
            s.get_column("ds").to_list(),
            s.get_column("ci_low").to_numpy(),
            s.get_column("ci_high").to_numpy(),
            alpha=0.2,
            color=line.get_color(),
        )
    ax.axhline(0, color="black", lw=0.6)
    ax.set_ylabel("D_REO")
    level = sub.get_column("level").drop_nulls()
    band = f"{100 * level[-1]:g}% CI" if level.len() else "CI"
    ax.set_title(f"D_REO = REO(treatment) − REO(control), '{attribute}' (band: {band}, method {method})", loc="left")
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _date_axis(ax, start, end)
    return _svg(fig, tips)


def model_threshold_figure(prev: pl.DataFrame) -> str:
    """Implied thresholds (= prevalence at the threshold, seed 002 eq. 6) by
    group with 95% CIs, latest published day, one panel per model threshold × attribute."""
    last = prev.filter((pl.col("ds") == prev.get_column("ds").max()) & pl.col("se").is_not_nan())
    keys = sorted(set(last.select("model", "t", "d", "attribute").iter_rows()))
    fig, axes = plt.subplots(1, len(keys), figsize=(3.8 * len(keys), 2.6), squeeze=False, layout="constrained")
    for ax, (model, t, d, attribute) in zip(axes[0], keys):
        sub = last.filter(
            (pl.col("model") == model) & (pl.col("t") == t) & (pl.col("d") == d) & (pl.col("attribute") == attribute)
        ).sort("group")
        y = sub.get_column("prevalence_at_threshold").to_numpy()
        x = range(sub.height)
        ax.errorbar(
            list(x),
            y,
            yerr=[y - sub.get_column("ci_low").to_numpy(), sub.get_column("ci_high").to_numpy() - y],
            fmt="o",
            capsize=3,
        )
        ax.set_xticks(list(x), sub.get_column("group").to_list(), rotation=30, ha="right", fontsize=8)
        ax.set_title(f"{model}, t = {t:g} ± {d:g}, by {attribute}", loc="left", fontsize=9)
        ax.set_ylabel("implied threshold P(Y=1 | s=t)")
    return _svg(fig)


def reach_group_figure(reach_group: pl.DataFrame, side: str, metrics: list[str], uniform: float | None = None) -> str:
    """Group means with their bootstrap CIs (reach_group rows of one day), one
    panel per attribute of ``side`` and one colour per metric; ``uniform``
    draws the availability of a uniform recommender as a reference line."""
    rows = reach_group.filter((pl.col("side") == side) & pl.col("metric").is_in(metrics))
    attrs = sorted(set(rows.get_column("attribute")))
    heights = [max(1, rows.filter(pl.col("attribute") == a).get_column("group").n_unique()) for a in attrs]
    fig, axes = plt.subplots(
        len(attrs), 1, figsize=(7, 0.9 + 0.22 * sum(heights) + 0.35 * len(attrs)), squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )  # fmt: skip
    colors = dict(zip(metrics, plt.get_cmap("tab10").colors, strict=False))
    for ax, a in zip(axes[:, 0], attrs, strict=True):
        sub = rows.filter(pl.col("attribute") == a)
        groups = sorted(set(sub.get_column("group")))
        for k, m in enumerate(metrics):
            r = sub.filter(pl.col("metric") == m)
            pos = {g: i for i, g in enumerate(groups)}
            y = [pos[g] + (k - (len(metrics) - 1) / 2) * 0.25 for g in r.get_column("group")]
            mean = r.get_column("mean").to_numpy()
            lo = mean - r.get_column("ci_low").fill_nan(None).fill_null(strategy="zero").to_numpy()
            hi = r.get_column("ci_high").fill_nan(None).to_numpy() - mean
            lo = [max(v, 0) if v == v else 0 for v in lo]
            hi = [max(v, 0) if v == v else 0 for v in hi]
            ax.errorbar(mean, y, xerr=[lo, hi], fmt="o", ms=3, color=colors[m], label=m if ax is axes[0, 0] else None)
        if uniform is not None:
            ax.axvline(uniform, color="0.5", ls="--", lw=0.8)
        ax.set_yticks(range(len(groups)), groups)
        ax.set_ylabel(a)
        ax.invert_yaxis()
    axes[0, 0].legend(fontsize=7, loc="lower right", frameon=False)
    if uniform is not None:
        axes[-1, 0].set_xlabel("mean over units (dashed: a uniform recommender's availability)")
    fig.tight_layout()
    svg = _svg(fig)
    plt.close(fig)
    return svg


def labeler_threshold_figure(sdt: pl.DataFrame) -> str:
    """Implied thresholds of the labeler pool (*) and each labeler by group,
    with 95% CIs, latest published day (seed 002 §5.3)."""
    last = sdt.filter((pl.col("ds") == sdt.get_column("ds").max()) & pl.col("cost_ratio").is_not_nan())
    attrs = sorted(set(last.get_column("attribute")))
    fig, axes = plt.subplots(1, len(attrs), figsize=(5.0 * len(attrs), 2.8), squeeze=False, layout="constrained")
    for ax, attribute in zip(axes[0], attrs):
        sub = last.filter(pl.col("attribute") == attribute)
        groups = sorted(set(sub.get_column("group")))
        labelers = sorted(set(sub.get_column("labeler_id")))
        width = 0.8 / max(1, len(labelers))
        for i, lab in enumerate(labelers):
            s = sub.filter(pl.col("labeler_id") == lab)
            xs = [groups.index(g) + (i - (len(labelers) - 1) / 2) * width for g in s.get_column("group")]
            y = s.get_column("implied_threshold").to_numpy()
            ax.errorbar(
                xs,
                y,
                yerr=[
                    y - s.get_column("implied_threshold_ci_low").to_numpy(),
                    s.get_column("implied_threshold_ci_high").to_numpy() - y,
                ],
                fmt="s" if lab == "*" else "o",
                ms=4,
                capsize=2,
                label="pool" if lab == "*" else lab,
            )
        ax.set_xticks(range(len(groups)), groups)
        ax.set_title(f"labelers by {attribute}", loc="left", fontsize=9)
        ax.set_ylabel("implied threshold")
    axes[0][-1].legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _svg(fig)


TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>fairmon report {{ d.start }} – {{ d.end }}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 62rem;
       color: #1d2433; line-height: 1.45; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; } h2 { font-size: 1.15rem; margin-top: 2rem;
border-bottom: 1px solid #dde; padding-bottom: .2rem; } .muted { color: #667; }
table { border-collapse: collapse; font-size: .85rem; margin: .5rem 0; }
td, th { border-bottom: 1px solid #e4e6ee; padding: .25rem .6rem; text-align: left; vertical-align: top; }
th { background: #f4f5f9; } .num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #17803d; } .bad { color: #b42318; font-weight: 600; } .warn { color: #a15c07; }
.kpi { display: inline-block; margin-right: 2rem; } .kpi b { font-size: 1.3rem; display: block; }
figure { margin: .8rem 0 1.4rem; } svg { max-width: 100%; height: auto; }
</style></head><body>
<h1>fairmon: fairness report</h1>
<p class="muted">Days {{ d.start }} to {{ d.end }} · built {{ built }} · config {{ config }}</p>
<div>
 <span class="kpi"><b>{{ d.published|length }}</b>days published</span>
 <span class="kpi"><b class="{{ 'bad' if d.excluded.height else 'ok' }}">{{ d.excluded.height }}</b>days excluded</span>
 {% if reo_figs %}<span class="kpi"><b class="{{ 'bad' if verdicts.exceeds else 'ok' }}">{{ verdicts.exceeds }}</b>day × arm × attribute
 whose whole {{ ci }} lies above the line</span>
 <span class="kpi"><b class="{{ 'warn' if verdicts.inconclusive else 'ok' }}">{{ verdicts.inconclusive }}</b>inconclusive</span>
 <span class="kpi"><b>{{ verdicts.within }}</b>within the line</span>{% endif %}
</div>
{% if reo_figs %}<p>REO = std(U)/mean(U) of the RTPR utilities U_k (Dong et al. 2024, eq. 19), estimated from default
traffic and a trailing window of random traffic, with {{ ci }} intervals that stay valid near parity. Only days
whose data passed every critical data-quality check are shown. Verdicts come from the interval, never from the
point estimate: <b>exceeds</b> when the whole interval lies above the line, <b>within</b> when it lies at or
below it, <b>inconclusive</b> otherwise or when a group has too few positives to trust the interval. The dashed
line is REO = 1/9 ≈ 11.1%, the 80% rule for two groups; attributes with more groups use the configured
<code>reo_threshold</code>, labeled as such.</p>{% endif %}

{% if verdict_paragraphs %}<h2>Verdicts in words ({{ latest_day }})</h2>
{% for v in verdict_paragraphs %}<p class="verdict verdict-{{ v.verdict }}"><b class="{{ {'exceeds': 'bad', 'within': 'ok', 'inconclusive': 'warn'}.get(v.verdict, 'muted') }}">{{ v.verdict }}</b> · {{ v.text }}</p>
{% endfor %}{% endif %}

{% if reo_figs or not (model_fig or labeler_fig or reach_findings) %}<h2>Daily REO</h2>
{% for attr, svg in reo_figs %}<figure>{{ svg }}</figure>{% else %}<p>No published REO in range.</p>{% endfor %}{% endif %}

{% if latest %}
<h3>Latest published day ({{ latest_day }})</h3>
<table><tr><th>arm</th><th>attribute</th><th class="num">K</th><th class="num">REO</th>
<th class="num">REO (bias-corrected)</th><th>{{ ci }}</th><th class="num">parity p</th><th class="num">n_rec</th>
<th class="num">n_rand</th><th class="num">line</th><th>verdict</th><th>note</th></tr>
{% for r in latest %}<tr><td>{{ r.arm }}</td><td>{{ r.attribute }}</td><td class="num">{{ r.K }}</td>
<td class="num">{{ fmt(r.reo) }}</td><td class="num">{{ fmt(r.reo_bc) }}</td>
<td>[{{ fmt(r.ci_low) }}, {{ fmt(r.ci_high) }}]</td><td class="num">{{ pfmt(r.parity_p_value) }}</td>
<td class="num">{{ r.n_rec }}</td><td class="num">{{ r.n_rand }}</td>
<td class="num">{{ fmt(r.reo_threshold) }}{% if r.K > 2 %} (reo_threshold){% else %} (80% rule){% endif %}</td>
<td class="{{ {'exceeds': 'bad', 'within': 'ok', 'inconclusive': 'warn'}.get(r.verdict_80pct, 'muted') }}">
{{ r.verdict_80pct }}</td><td class="muted">{% if r.look_ahead %}<span class="warn">random traffic from after
this day (pool_policy = overlap)</span> {% endif %}{{ r.reason or '' }}</td></tr>{% endfor %}
</table>{% endif %}

{% if ab_figs %}<h2>A/B tests: change in REO by treatment</h2>
<p>Below zero: the treatment is fairer than the control. Intervals use the joint delta method through the
shared random traffic unless configured otherwise.</p>
{% for attr, svg in ab_figs %}<figure>{{ svg }}</figure>{% endfor %}
{% if ab_latest %}<h3>Latest day ({{ ab_day }}): every A/B test, by q-value</h3>
<p class="muted">q = Benjamini–Hochberg q-value over the day's tests of the same method (all pairs, attributes
and metrics). Bold: q &lt; 0.05, a change that survives the multiple comparisons; a small p alone is not.</p>
<table><tr><th>attribute</th><th>control → treatment</th><th>metric</th><th>method</th><th class="num">difference</th>
<th>interval</th><th class="num">p</th><th class="num">q</th><th>note</th></tr>
{% for r in ab_latest %}<tr class="{{ 'bad' if r.q_value is not none and r.q_value == r.q_value and r.q_value < 0.05 else '' }}">
<td>{{ r.attribute }}</td><td>{{ r.control }} → {{ r.treatment }}</td><td>{{ r.metric }}</td><td>{{ r.method }}</td>
<td class="num">{{ fmt(r.diff) }}</td><td>[{{ fmt(r.ci_low) }}, {{ fmt(r.ci_high) }}]</td>
<td class="num">{{ pfmt(r.p_value) }}</td><td class="num">{{ pfmt(r.q_value) }}</td>
<td class="muted">{{ r.reason or '' }}</td></tr>{% endfor %}</table></details>{% endif %}{% endif %}

{% if du_figs %}<h2>Relative utility ΔU by group</h2>
{% for attr, svg in du_figs %}<figure>{{ svg }}</figure>{% endfor %}{% endif %}

{% if extras %}<h2>Where the disparity comes from (seed 001 App. H, I.4), latest published day</h2>
{% for title, rows in extras %}<h3>{{ title }}</h3>
{% for line in rows.readings %}<p>{{ line }}</p>{% endfor %}
<table><tr>{% for c in rows.columns %}<th>{{ c }}</th>{% endfor %}</tr>
{% for r in rows.rows %}<tr>{% for v in r %}<td class="num">{{ v }}</td>{% endfor %}</tr>{% endfor %}</table>
{% endfor %}{% endif %}

{% if envy_findings %}<h2>Envy-freeness: would users gain from other users' recommendations? (seed 004)</h2>
{% for line in envy_findings %}<p class="finding">{{ line }}</p>{% endfor %}
<h3>AUDIT by day (bounds accumulate from the audit's start; each day's verdict is valid on its own)</h3>
<table class="envy-audit"><tr><th>ds</th><th class="num">targets</th><th class="num">min donors</th><th>design</th>
<th class="num">envious</th><th class="num">certified ε-free</th><th class="num">undecided</th><th>verdict</th></tr>
{% for r in envy_days %}<tr><td>{{ r.ds }}</td><td class="num">{{ r.targets }} / {{ r.M_tilde }}</td>
<td class="num">{{ r.min_donors }} / {{ r.K }}</td><td class="{{ 'ok' if r.design_ok else 'warn' }}">{{ r.design_reason }}</td>
<td class="num">{{ r.n_envy }}</td><td class="num">{{ r.n_eps_no_envy }}</td><td class="num">{{ r.n_undecided }}</td>
<td class="{{ {'envy_free': 'ok', 'not_envy_free': 'bad'}.get(r.verdict, 'warn') }}">{{ r.verdict }}</td></tr>{% endfor %}</table>
{% if envy_groups %}<h3>Group envy, latest published day (App. B, eq. 6)</h3>
<table class="group-envy"><tr><th>attribute</th><th>group</th><th>served by</th><th class="num">U(g, g′)</th>
<th class="num">U(g, g)</th><th class="num">difference</th><th>day's CI</th><th class="num">q</th><th>anytime bounds</th>
<th>verdict</th></tr>
{% for r in envy_groups %}<tr><td>{{ r.attribute }}</td><td>{{ r.group }}</td><td>{{ r.donor_group }}</td>
<td class="num">{{ fmt(r.U_cross) }}</td><td class="num">{{ fmt(r.U_same) }}</td><td class="num">{{ fmt(r.diff) }}</td>
<td>[{{ fmt(r.ci_low) }}, {{ fmt(r.ci_high) }}]</td><td class="num">{{ pfmt(r.q_value) }}</td>
<td>[{{ fmt(r.anytime_lower) }}, {{ fmt(r.anytime_upper) }}]</td>
<td class="{{ {'eps_envy_free': 'ok', 'envy': 'bad'}.get(r.verdict, 'warn') }}">{{ r.verdict }}</td></tr>{% endfor %}
</table>{% endif %}{% endif %}

{% if reach_findings %}<h2>Reachability and stability of the recommender's model (seed 003)</h2>
<p class="muted">Can users make the model show an item by re-rating items (reachability), and do a user's
recommendations move when other users' data change (stability)? Computed from the day's model snapshot
(Curmei, Dean and Recht 2021; DESIGN §4.8). Every stability figure stands beside its training-noise floor.</p>
{% for line in reach_findings %}<p class="finding">{{ line }}</p>{% endfor %}
{% if reach_item_fig %}<h3>Items: availability by item attribute ({{ reach_day }}; 95 % bootstrap CIs over items)</h3>
<figure>{{ reach_item_fig }}</figure>{% endif %}
{% if reach_user_fig %}<h3>Users: discovery by user attribute</h3><figure>{{ reach_user_fig }}</figure>{% endif %}
{% if stability_fig %}<h3>Users: stability beside the training-noise floor</h3><figure>{{ stability_fig }}</figure>{% endif %}
{% if reach_rows %}<details><summary>Group table: each group against the other units (bootstrap CIs;
every metric is in the reach_group table)</summary>
<table class="reach-group"><tr><th>side</th><th>attribute</th><th>group</th><th>metric</th><th class="num">n</th>
<th class="num">mean</th><th>CI</th><th class="num">vs rest</th><th>its CI</th><th>note</th></tr>
{% for r in reach_rows %}<tr><td>{{ r.side }}</td><td>{{ r.attribute }}</td><td>{{ r.group }}</td><td>{{ r.metric }}</td>
<td class="num">{{ r.n }}</td><td class="num">{{ fmt(r.mean) }}</td><td>[{{ fmt(r.ci_low) }}, {{ fmt(r.ci_high) }}]</td>
<td class="num">{{ fmt(r.diff_vs_rest) }}</td><td>[{{ fmt(r.diff_ci_low) }}, {{ fmt(r.diff_ci_high) }}]</td>
<td class="muted">{{ r.reason or '' }}</td></tr>{% endfor %}</table></details>{% endif %}{% endif %}

{% if model_fig or labeler_fig %}<h2>Decision trade-offs by group (implied thresholds)</h2>
<p>The implied threshold is the outcome probability at which a decision maker acts; its cost ratio is
c = (1 − τ)/τ (Lum et al., seed 002, eq. 6 and eq. 12). Different thresholds for different groups mean
different trade-offs between false positives and false negatives. Latest published day.</p>
{% if model_fig %}<h3>Model decisions: prevalence at the threshold</h3>
{% for line in prevalence_findings %}<p class="finding">{{ line }}</p>{% endfor %}
<figure>{{ model_fig }}</figure>
<table class="prevalence"><tr><th>model</th><th>attribute</th><th>group</th><th class="num">t</th>
<th class="num">rows in window</th><th class="num">outcome rate at t</th><th>{{ prev_ci }}</th>
<th class="num">implied cost ratio</th><th>its CI</th><th>note</th></tr>
{% for r in prevalence_rows %}<tr><td>{{ r.model }}</td><td>{{ r.attribute }}</td><td>{{ r.group }}</td>
<td class="num">{{ r.t }}</td><td class="num">{{ r.n_window }}</td><td class="num">{{ fmt(r.prevalence_at_threshold) }}</td>
<td>[{{ fmt(r.ci_low) }}, {{ fmt(r.ci_high) }}]</td><td class="num">{{ fmt(r.implied_cost_ratio) }}</td>
<td>[{{ fmt(r.cost_ratio_ci_low) }}, {{ fmt(r.cost_ratio_ci_high) }}]</td><td class="muted">{{ r.reason or '' }}</td></tr>
{% endfor %}</table>
{% if prevalence_diffs %}<h4>Pairwise differences of the outcome rate at t</h4>
<table><tr><th>model</th><th>attribute</th><th>groups</th><th class="num">difference</th><th>interval</th>
<th class="num">p</th><th class="num">q</th><th>note</th></tr>
{% for r in prevalence_diffs %}<tr><td>{{ r.model }}</td><td>{{ r.attribute }}</td><td>{{ r.group_a }} − {{ r.group_b }}</td>
<td class="num">{{ fmt(r.diff) }}</td><td>[{{ fmt(r.ci_low) }}, {{ fmt(r.ci_high) }}]</td>
<td class="num">{{ pfmt(r.p_value) }}</td><td class="num">{{ pfmt(r.q_value) }}</td><td class="muted">{{ r.reason or '' }}</td></tr>
{% endfor %}</table>{% endif %}{% endif %}
{% if labeler_fig %}<h3>Human labelers (signal detection)</h3>
{% for line in labeler_findings %}<p class="finding">{{ line }}</p>{% endfor %}
<figure>{{ labeler_fig }}</figure>
<table class="labelers"><tr><th>labeler</th><th>attribute</th><th>group</th><th class="num">gold +/−</th>
<th class="num">FPR</th><th class="num">FNR</th><th class="num">d′</th><th class="num">criterion</th>
<th class="num">implied threshold</th><th>its CI</th><th class="num">cost ratio</th><th class="num">q vs pool</th><th>note</th></tr>
{% for r in labeler_rows %}<tr><td>{{ 'pool' if r.labeler_id == '*' else r.labeler_id }}</td><td>{{ r.attribute }}</td>
<td>{{ r.group }}</td><td class="num">{{ r.n_pos }} / {{ r.n_neg }}</td><td class="num">{{ fmt(r.fpr) }}</td>
<td class="num">{{ fmt(r.fnr) }}</td><td class="num">{{ fmt(r.d_prime) }}</td><td class="num">{{ fmt(r.criterion_t) }}</td>
<td class="num">{{ fmt(r.implied_threshold) }}</td><td>[{{ fmt(r.implied_threshold_ci_low) }}, {{ fmt(r.implied_threshold_ci_high) }}]</td>
<td class="num">{{ fmt(r.cost_ratio) }}</td><td class="num">{{ pfmt(r.q_value) }}</td><td class="muted">{{ r.reason or '' }}</td></tr>
{% endfor %}</table>
<h3>Labelers whose cost ratio for a group differs from the other labelers (q &lt; 0.05)</h3>
<p class="muted">q = Benjamini–Hochberg q-value over the day's labeler × group tests.</p>
{% if outliers %}<table><tr><th>attribute</th><th>group</th><th>labeler</th><th class="num">cost ratio</th>
<th>{{ sdt_ci }}</th><th class="num">pool cost ratio</th><th class="num">p</th><th class="num">q</th></tr>
{% for r in outliers %}<tr><td>{{ r.attribute }}</td><td>{{ r.group }}</td><td>{{ r.labeler_id }}</td>
<td class="num">{{ fmt(r.cost_ratio) }}</td><td>[{{ fmt(r.cost_ratio_ci_low) }}, {{ fmt(r.cost_ratio_ci_high) }}]</td>
<td class="num">{{ fmt(r.pool) }}</td><td class="num">{{ pfmt(r.p_vs_pool) }}</td>
<td class="num bad">{{ pfmt(r.q_value) }}</td></tr>{% endfor %}</table>
{% else %}<p class="ok">None.</p>{% endif %}{% endif %}{% endif %}

{% if releases %}<h2>Private audit releases (ε-differential privacy, seed 000 §5)</h2>
<p class="muted">Per-group score histograms of qualified individuals with discrete Laplace noise (OpenDP); the
decision is read from the interval for the fairness gap FG: fair only when it lies at or below α, unfair only
when above it, else inconclusive.</p>
<table class="releases"><tr><th>release</th><th>model</th><th>attribute</th><th>window</th><th class="num">ε</th>
<th class="num">budget spent / total</th><th>groups (sizes)</th><th class="num">EFG</th><th>FG interval</th>
<th class="num">α</th><th>decision</th></tr>
{% for r in releases %}<tr><td><a href="{{ r.href }}">{{ r.name }}</a></td><td>{{ r.model }}</td><td>{{ r.attribute }}</td>
<td>{{ r.window[0] }} … {{ r.window[1] }}</td><td class="num">{{ r.epsilon }}</td>
<td class="num">{{ r.budget_spent }} / {{ r.budget_total }}</td><td>{{ r.groups_text }}</td>
<td class="num">{{ fmt(r.efg) }}</td><td>[{{ fmt(r.fg_interval[0]) }}, {{ fmt(r.fg_interval[1]) }}]</td>
<td class="num">{{ r.alpha }}</td><td class="{{ {'fair': 'ok', 'unfair': 'bad'}.get(r.decision, 'warn') }}">{{ r.decision }}</td></tr>
{% endfor %}</table>{% endif %}

<h2>Excluded days</h2>
{% if d.excluded.height %}<table><tr><th>ds</th><th>reasons (failed critical expectations)</th></tr>
{% for r in d.excluded.iter_rows(named=True) %}<tr><td>{{ r.ds }}</td><td class="bad">{{ r.reasons }}</td></tr>
{% endfor %}</table>{% else %}<p class="ok">None: every day in range passed its checks.</p>{% endif %}

<h2>Data quality</h2>
<p class="dq-passed">{{ dq_passed }} of {{ d.dq_summary.height }} day × suite validations passed every expectation
(Great Expectations); failures and warnings are listed below. Warnings do not block publication.
{% if docs %}Full validation results: <a href="{{ docs_href }}">GX Data Docs</a>.{% endif %}</p>
{% if dq_problems %}<table><tr><th>ds</th><th>suite</th><th class="num">subjects</th><th>result</th>
<th class="num">expectations</th><th class="num">failed (critical)</th><th class="num">warnings</th><th>warning names</th></tr>
{% for r in dq_problems %}<tr><td>{{ r.ds }}</td><td>{{ r.suite }}</td>
<td class="num">{{ r.subjects }}</td><td class="{{ 'ok' if r.passed else 'bad' }}">{{ 'passed' if r.passed else 'FAILED' }}</td>
<td class="num">{{ r.expectations }}</td><td class="num">{{ r.failed_critical }}</td>
<td class="num {{ 'warn' if r.warnings else '' }}">{{ r.warnings }}</td><td class="warn">{{ r.warning_names }}</td></tr>
{% endfor %}</table>{% elif not d.dq_summary.height %}<p>No data-quality records in range.</p>{% endif %}

<h2>Data</h2>
<p class="muted">Every number above comes from these date-partitioned Parquet tables (one folder per table,
<code>ds=YYYY-MM-DD</code> partitions; columns in docs/tables.md), queryable with <code>fairmon sql</code>.</p>
<ul>{% for name, href in data_links %}<li><a href="{{ href }}">{{ name }}</a></li>{% endfor %}</ul>
</body></html>
"""


def _fmt(x) -> str:
    return "nan" if x is None or x != x else f"{x:.4f}"


def _pfmt(x) -> str:
    return "nan" if x is None or x != x else f"{x:.2g}"


def _ci(lo, hi) -> str:
    return f"[{_fmt(lo)}, {_fmt(hi)}]"


def stage_reading(recall: dict, ranking: dict) -> str:
    """One sentence on which stage creates the disparity, from the two stage
    rows of ``reo_stage`` (seed 001 App. I.4): a stage counts only when its
    REO interval excludes parity (ci_low > 0), never by point estimates alone."""
    both = f"REO {_fmt(recall['reo'])} {_ci(recall['reo_ci_low'], recall['reo_ci_high'])} at recall, " + (
        f"{_fmt(ranking['reo'])} {_ci(ranking['reo_ci_low'], ranking['reo_ci_high'])} at ranking"
    )
    if not all(r["reo_ci_low"] == r["reo_ci_low"] for r in (recall, ranking)):
        return both + ": a stage's interval is undefined (see the table's reasons); no reading."
    excl = [s for s, r in (("recall", recall), ("ranking", ranking)) if r["reo_ci_low"] > 0]
    if len(excl) == 1:
        other = "ranking" if excl[0] == "recall" else "recall"
        return both + f": the {excl[0]} stage creates the disparity; the {other} stage is consistent with parity."
    if len(excl) == 2:
        return both + ": both stages depart from parity (U^sys = U^recall · U^rank)."
    return both + ": neither stage is distinguishable from parity."


def extra_sections(extras: dict[str, pl.DataFrame]) -> list[tuple[str, dict]]:
    """Tables and one-line readings of reo_stage, rsp and user_precision for the
    latest published day (seed 001 App. I.4, H.1, H.2)."""
    out = []
    stage = extras.get("reo_stage")
    if stage is not None and not stage.is_empty():
        last = stage.filter(pl.col("ds") == stage.get_column("ds").max())
        per = last.unique(["arm", "attribute", "stage"]).sort("attribute", "arm", "stage")
        readings = []
        for (arm, attr), g in per.group_by(["arm", "attribute"], maintain_order=True):
            by = {r["stage"]: r for r in g.iter_rows(named=True)}
            if "recall" in by and "ranking" in by:
                readings.append(f"arm {arm}, {attr}: " + stage_reading(by["recall"], by["ranking"]))
        rows = [
            [r["arm"], r["attribute"], r["stage"], _fmt(r["reo"]), _ci(r["reo_ci_low"], r["reo_ci_high"])]
            for r in per.iter_rows(named=True)
        ]
        out.append(
            (
                "Stage-wise REO",
                {"columns": ["arm", "attribute", "stage", "REO", "CI"], "rows": rows, "readings": readings},
            )
        )
    rsp = extras.get("rsp")
    if rsp is not None and not rsp.is_empty():
        last = rsp.filter(pl.col("ds") == rsp.get_column("ds").max()).sort("attribute", "arm", "group")
        rows = [
            [
                r["arm"],
                r["attribute"],
                r["group"],
                _fmt(r["share_rec"]),
                _fmt(r["share_pool"]),
                _fmt(r["delta_U"]),
                _fmt(r["rsp"]),
                _ci(r["ci_low"], r["ci_high"]),
            ]
            for r in last.iter_rows(named=True)
        ]
        readings = [
            "RSP compares exposure shares with the candidate pool's, without labels: 0 is parity; it says who is shown, "
            "not whether they are shown to users who want them (that is REO)."
        ]
        out.append(
            (
                "Exposure parity (RSP)",
                {
                    "columns": [
                        "arm",
                        "attribute",
                        "group",
                        "share in recs",
                        "share in pool",
                        "ΔU (additive)",
                        "RSP",
                        "CI",
                    ],
                    "rows": rows,
                    "readings": readings,
                },
            )
        )
    prec = extras.get("user_precision")
    if prec is not None and not prec.is_empty():
        last = prec.filter(pl.col("ds") == prec.get_column("ds").max()).sort("attribute", "arm", "group")
        rows = [
            [
                r["arm"],
                r["attribute"],
                r["group"],
                str(r["n"]),
                _fmt(r["precision"]),
                _ci(r["ci_low"], r["ci_high"]),
                _fmt(r["disparity"]),
                _ci(r["disparity_ci_low"], r["disparity_ci_high"]),
            ]
            for r in last.iter_rows(named=True)
        ]
        readings = ["User-side precision: the share of recommended items each user group engages with."]
        out.append(
            (
                "User-side precision",
                {
                    "columns": ["arm", "attribute", "group", "n", "precision", "CI", "disparity", "CI"],
                    "rows": rows,
                    "readings": readings,
                },
            )
        )
    return out


def render_report(
    d: ReportData,
    config: str = "",
    docs: str | None = None,
    releases: list[dict] | None = None,
    data_links: list[tuple[str, str]] | None = None,
    prevalence_diff: pl.DataFrame | None = None,
) -> str:
    """The report's HTML text for prepared :class:`ReportData`; ``releases``
    are the audit releases' JSON documents (with ``name`` and ``href``),
    ``data_links`` (table, file URL) pairs and ``prevalence_diff`` the
    ``threshold_prevalence_diff`` rows of published days."""
    attrs = sorted(set(d.reo.get_column("attribute"))) if not d.reo.is_empty() else []
    excluded = d.excluded.get_column("ds").to_list()
    colors = arm_colors(
        (d.reo.get_column("arm").to_list() if attrs else [])
        + (d.reo_ab.get_column("treatment").to_list() if not d.reo_ab.is_empty() else [])
    )
    reo_figs = [(a, reo_figure(d.reo, a, excluded, d.start, d.end, colors)) for a in attrs]
    du_figs = [(a, delta_u_figure(d.reo_group, a, d.start, d.end)) for a in attrs] if not d.reo_group.is_empty() else []
    ab_figs = [
        (a, ab_figure(d.reo_ab, a, d.start, d.end, colors))
        for a in attrs
        if not d.reo_ab.is_empty() and a in set(d.reo_ab.get_column("attribute"))
    ]
    ab_day = d.reo_ab.get_column("ds").max() if not d.reo_ab.is_empty() else None
    ab_latest = (
        d.reo_ab.filter(pl.col("ds") == ab_day).sort("q_value", "p_value", nulls_last=True).to_dicts()
        if ab_day is not None and "q_value" in d.reo_ab.columns
        else []
    )
    latest_day = d.reo.get_column("ds").max() if attrs else None
    latest = d.reo.filter(pl.col("ds") == latest_day).sort("attribute", "arm").to_dicts() if attrs else []
    counts = d.reo.get_column("verdict_80pct").value_counts() if attrs else None
    verdicts = {v: 0 for v in ("exceeds", "within", "inconclusive", "undefined")}
    if counts is not None:
        verdicts.update({v: int(n) for v, n in counts.iter_rows()})
    model_fig = model_threshold_figure(d.threshold_prevalence) if not d.threshold_prevalence.is_empty() else None
    labeler_fig = labeler_threshold_figure(d.sdt) if not d.sdt.is_empty() else None
    outliers = []
    if not d.sdt.is_empty():
        last = d.sdt.filter(pl.col("ds") == d.sdt.get_column("ds").max())
        pool = last.filter(pl.col("labeler_id") == "*").select("attribute", "group", pl.col("cost_ratio").alias("pool"))
        outliers = (
            last.filter((pl.col("labeler_id") != "*") & (pl.col("q_value") < 0.05))
            .join(pool, on=["attribute", "group"], how="left")
            .sort("q_value")
            .to_dicts()
        )
    extras = extra_sections(d.extras or {})
    envy_audit = (d.extras or {}).get("envy_audit", pl.DataFrame())
    group_envy = (d.extras or {}).get("group_envy", pl.DataFrame())
    envy_days = envy_audit.sort("ds").to_dicts() if not envy_audit.is_empty() else []
    envy_groups = (
        group_envy.filter(pl.col("ds") == group_envy.get_column("ds").max())
        .sort("attribute", "group", "donor_group")
        .to_dicts()
        if not group_envy.is_empty()
        else []
    )
    reach = {
        t: (d.extras or {}).get(t, pl.DataFrame())
        for t in ("reach_item", "reach_user", "stability_user", "reach_group")
    }
    reach_day = reach["reach_group"].get_column("ds").max() if not reach["reach_group"].is_empty() else None
    reach_figs: dict[str, str | None] = {"item": None, "user": None, "stability": None}
    reach_rows = []
    if reach_day is not None:
        rg = reach["reach_group"].filter(pl.col("ds") == reach_day)
        ri = reach["reach_item"].filter(pl.col("ds") == reach_day) if not reach["reach_item"].is_empty() else None
        uniform = ri.get_column("availability_uniform").mean() if ri is not None and ri.height else None
        if rg.filter(pl.col("side") == "item").height:
            reach_figs["item"] = reach_group_figure(rg, "item", ["availability_base", "availability_max"], uniform)
        stab = sorted(
            (m for m in set(rg.get_column("metric")) if m.startswith("stability_lb_B")), key=lambda m: int(m[14:])
        )
        if rg.filter(pl.col("side") == "user").height:
            reach_figs["user"] = reach_group_figure(rg, "user", ["discovery_base", "discovery_max"])
            if stab:
                reach_figs["stability"] = reach_group_figure(rg, "user", [*stab, "noise_floor"])
        shown = ["availability_max", "unavailable", "discovery_max", *stab[-1:], "noise_floor"]
        reach_rows = rg.filter(pl.col("metric").is_in(shown)).sort("side", "attribute", "metric", "group").to_dicts()
    prev_day = d.threshold_prevalence.get_column("ds").max() if not d.threshold_prevalence.is_empty() else None
    prevalence_rows = (
        d.threshold_prevalence.filter(pl.col("ds") == prev_day).sort("model", "attribute", "group").to_dicts()
        if prev_day is not None
        else []
    )
    diffs = prevalence_diff if prevalence_diff is not None else pl.DataFrame()
    prevalence_diffs = (
        diffs.filter(pl.col("ds") == prev_day).sort("model", "attribute", "group_a", "group_b").to_dicts()
        if prev_day is not None and not diffs.is_empty()
        else []
    )
    sdt_day = d.sdt.get_column("ds").max() if not d.sdt.is_empty() else None
    labeler_rows = (
        d.sdt.filter(pl.col("ds") == sdt_day).sort("attribute", "labeler_id", "group").to_dicts()
        if sdt_day is not None
        else []
    )
    dq_rows = d.dq_summary.to_dicts() if d.dq_summary.height else []
    dq_problems = sorted(
        (r for r in dq_rows if not r["passed"] or r["warnings"]), key=lambda r: (r["passed"], str(r["ds"]))
    )
    env = Environment(autoescape=True)
    env.globals["fmt"] = _fmt
    env.globals["pfmt"] = _pfmt
    from markupsafe import Markup

    return env.from_string(TEMPLATE).render(
        d=d,
        built=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        config=config,
        reo_figs=[(a, Markup(s)) for a, s in reo_figs],
        du_figs=[(a, Markup(s)) for a, s in du_figs],
        ab_figs=[(a, Markup(s)) for a, s in ab_figs],
        model_fig=Markup(model_fig) if model_fig else None,
        labeler_fig=Markup(labeler_fig) if labeler_fig else None,
        outliers=outliers,
        latest=latest,
        latest_day=latest_day,
        verdicts=verdicts,
        ab_latest=ab_latest,
        sdt_ci=f"{100 * float(d.sdt.get_column('level').max()):g}% CI"
        if not d.sdt.is_empty() and "level" in d.sdt.columns
        else "CI",
        ab_day=ab_day,
        extras=extras,
        ci=ci_label(d.reo) if attrs else "CI",
        docs=docs,
        docs_href=Path(docs).resolve().as_uri() if docs else "",
        verdict_paragraphs=reo_verdict_paragraphs(d.reo, d.reo_group) if attrs else [],
        prevalence_findings=prevalence_finding(d.threshold_prevalence),
        prevalence_rows=prevalence_rows,
        prevalence_diffs=prevalence_diffs,
        prev_ci=ci_label(d.threshold_prevalence) if prevalence_rows else "CI",
        labeler_findings=labeler_finding(d.sdt),
        labeler_rows=labeler_rows,
        envy_findings=envy_findings(envy_audit, group_envy),
        envy_days=envy_days,
        envy_groups=envy_groups,
        reach_findings=reach_findings(
            reach["reach_item"], reach["reach_user"], reach["stability_user"], reach["reach_group"]
        ),
        reach_day=reach_day,
        reach_item_fig=Markup(reach_figs["item"]) if reach_figs["item"] else None,
        reach_user_fig=Markup(reach_figs["user"]) if reach_figs["user"] else None,
        stability_fig=Markup(reach_figs["stability"]) if reach_figs["stability"] else None,
        reach_rows=reach_rows,
        releases=releases or [],
        dq_passed=sum(1 for r in dq_rows if r["passed"] and not r["warnings"]),
        dq_problems=dq_problems,
        data_links=data_links or [],
    )


def audit_releases(folder: Path, start: dt.date, end: dt.date) -> list[dict]:
    """The audit releases (``fairmon audit-export`` JSON files in ``folder``)
    whose window ends in start..end, newest window first, each with ``name``,
    ``href`` (file URL) and ``groups_text``. Unreadable files are skipped."""
    import json

    out = []
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            r = json.loads(f.read_text())
            w_end = dt.date.fromisoformat(r["window"][1])
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            continue
        if start <= w_end <= end:
            sizes = r.get("n_q") or []
            r["groups_text"] = ", ".join(f"{g} ({n})" for g, n in zip(r.get("groups", []), sizes, strict=False)) + (
                f"; sizes {r['group_sizes']}" if r.get("group_sizes") else ""
            )
            out.append({**r, "name": f.name, "href": f.resolve().as_uri()})
    return sorted(out, key=lambda r: r["window"][1], reverse=True)


def build_report(
    cfg: FairmonConfig, start: dt.date, end: dt.date, out: Path | None = None, config_name: str = ""
) -> Path:
    """Write the report for start..end to ``out`` (default
    ``<warehouse>/../report_<start>_<end>.html``) atomically; return its path."""
    wh = cfg.warehouse_path
    d = report_data(
        read_table(wh, "reo"),
        read_table(wh, "reo_group"),
        read_table(wh, "dq_results"),
        start,
        end,
        reo_ab=read_table(wh, "reo_ab"),
        threshold_prevalence=read_table(wh, "threshold_prevalence"),
        sdt=read_table(wh, "sdt"),
        latest_runs=latest_runs(cfg.duckdb_path),
        extras={
            t: read_table(wh, t)
            for t in (
                "reo_stage",
                "rsp",
                "user_precision",
                "envy_audit",
                "group_envy",
                "reach_item",
                "reach_user",
                "stability_user",
                "reach_group",
            )
        },  # fmt: skip
    )
    docs = cfg.gx_root / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    diffs = read_table(wh, "threshold_prevalence_diff")
    if not diffs.is_empty() and d.published:
        diffs = diffs.filter(pl.col("ds").is_in(d.published))
    text = render_report(
        d,
        config_name,
        str(docs) if docs.exists() else None,
        releases=audit_releases(wh.parent / "releases", start, end),
        data_links=[
            (t.name, t.resolve().as_uri()) for t in sorted(wh.iterdir()) if t.is_dir() and not t.name.startswith("_")
        ]
        if wh.exists()
        else [],
        prevalence_diff=diffs,
    )
    out = out or wh.parent / f"report_{start}_{end}.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return out
