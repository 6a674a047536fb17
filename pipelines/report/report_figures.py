"""The report's figures: inline SVG plots (matplotlib, Agg) of REO, ΔU, A/B
differences, thresholds and reachability, with hover tips; no network."""

from __future__ import annotations

import datetime as dt
import html
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import polars as pl

from fairmon.pipelines.report.report_words import pfmt
from fairmon.transforms.reo.estimate import EIGHTY_PERCENT_RULE_REO

plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False, "axes.spines.right": False})
MAX_GROUP_LINES = 6


def fmt(x) -> str:
    return "nan" if x is None or x != x else f"{x:.4f}"


def ci_text(lo, hi) -> str:
    return f"[{fmt(lo)}, {fmt(hi)}]"


def svg_text(fig, tips: dict[str, str] | None = None) -> str:
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


def point_tips(ax, x: list, y, texts: list[str], prefix: str, tips: dict[str, str]) -> None:
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


def dodged(x: list, i: int, n: int, width_days: float = 0.45) -> list:
    """Day positions ``x`` shifted for series ``i`` of ``n`` drawn on the same
    days, so their points and whiskers sit side by side instead of on one x."""
    if n <= 1:
        return x
    shift = dt.timedelta(days=width_days * ((i + 0.5) / n - 0.5))
    return [dt.datetime.combine(d, dt.time()) + shift if d is not None else None for d in x]


def _span(d: dt.date, half_days: float = 0.5) -> tuple[dt.datetime, dt.datetime]:
    t = dt.datetime.combine(d, dt.time())
    return t - dt.timedelta(days=half_days), t + dt.timedelta(days=half_days)


def _date_axis(ax, start: dt.date, end: dt.date) -> None:
    """Day ticks (at most about 8 labels), a half-day margin either side."""
    n = (end - start).days + 1
    ax.xaxis.set_major_locator(mdates.DayLocator(interval=max(1, -(-n // 8))))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d"))
    ax.set_xlim(_span(start, 0.7)[0], _span(end, 0.7)[1])


def _whiskers(ax, x: list, y, frame: pl.DataFrame, color) -> None:
    """Each point's interval (``frame``'s ci_low..ci_high around ``y``) as a
    thin capped whisker in the colour of its line."""
    yerr = [y - frame.get_column("ci_low").to_numpy(), frame.get_column("ci_high").to_numpy() - y]
    ax.errorbar(x, y, yerr=yerr, fmt="none", ecolor=color, elinewidth=0.8, capsize=2, alpha=0.7)


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
    arms = sorted(set(sub.get_column("arm")))
    for i, arm in enumerate(arms):
        a = _daily(sub.filter(pl.col("arm") == arm), start, end)
        x = dodged(a.get_column("ds").to_list(), i, len(arms))
        c = colors.get(arm)
        ax.fill_between(
            x, a.get_column("ci_low").to_numpy(), a.get_column("ci_high").to_numpy(), alpha=0.2, color=c, lw=0
        )
        y = a.get_column("reo").to_numpy()
        (line,) = ax.plot(x, y, marker="o", ms=3, label=f"{arm}", color=c)
        point_tips(
            ax,
            x,
            y,
            [
                f"{d} · arm {arm} · REO {fmt(r)} [{fmt(lo)}, {fmt(hi)}] · {v}"
                for d, r, lo, hi, v in a.select("ds", "reo", "ci_low", "ci_high", "verdict_80pct").iter_rows()
            ],
            f"reo-{attribute}",
            tips,
        )
        _whiskers(ax, x, y, a, line.get_color())
    if "look_ahead" in sub.columns and sub.get_column("look_ahead").fill_null(False).any():
        ahead_x, ahead_y = [], []
        for i, arm in enumerate(arms):  # at the arm's dodged position
            a = _daily(sub.filter(pl.col("arm") == arm), start, end)
            mask = a.get_column("look_ahead").fill_null(False).to_list()
            xs = dodged(a.get_column("ds").to_list(), i, len(arms))
            ahead_x += [x for x, m in zip(xs, mask, strict=True) if m]
            ahead_y += [y for y, m in zip(a.get_column("reo").to_list(), mask, strict=True) if m]
        ax.scatter(
            ahead_x,
            ahead_y,
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
    return svg_text(fig, tips)


def delta_u_figure(group: pl.DataFrame, attribute: str, start: dt.date, end: dt.date) -> str:
    """ΔU_k per group with CIs: daily lines with bands (few groups) or the last
    published day's estimates with whiskers (many groups), one panel per arm."""
    sub = group.filter(pl.col("attribute") == attribute)
    arms = sorted(set(sub.get_column("arm")))
    groups = sorted(set(sub.get_column("group")))
    many = len(groups) > MAX_GROUP_LINES or sub.get_column("ds").n_unique() == 1  # one day: points, not series
    ncols = min(2, len(arms))  # at most two panels a row: the page width keeps the text readable
    nrows = -(-len(arms) // ncols)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(7.5, nrows * (0.28 * len(groups) + 1.6 if many else 2.6)),
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
            for i, g in enumerate(groups):
                s = _daily(a.filter(pl.col("group") == g), start, end)
                x = dodged(s.get_column("ds").to_list(), i, len(groups))
                ax.fill_between(x, s.get_column("ci_low").to_numpy(), s.get_column("ci_high").to_numpy(), alpha=0.2)
                y = s.get_column("delta_U").to_numpy()
                (line,) = ax.plot(x, y, marker="o", ms=3, label=g)
                _whiskers(ax, x, y, s, line.get_color())
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
    return svg_text(fig)


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
    pairs = sorted(sub.group_by("control", "treatment"), key=lambda kv: kv[0])
    for i, ((control, treatment), g) in enumerate(pairs):
        s = _daily(g.select("ds", "diff", "ci_low", "ci_high", "p_value"), start, end)
        y = s.get_column("diff").to_numpy()
        x = dodged(s.get_column("ds").to_list(), i, len(pairs))
        (line,) = ax.plot(x, y, marker="o", ms=3, label=f"{treatment} − {control}", color=colors.get(treatment))
        point_tips(
            ax,
            x,
            y,
            [
                f"{d} · {treatment} − {control} · D_REO {fmt(v)} [{fmt(lo)}, {fmt(hi)}] · p {pfmt(p)}"
                for d, v, lo, hi, p in s.iter_rows()
            ],
            f"ab-{attribute}",
            tips,
        )
        ax.fill_between(
            x,
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
    return svg_text(fig, tips)


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
    return svg_text(fig)


def reach_group_figure(reach_group: pl.DataFrame, side: str, metrics: list[str], uniform: float | None = None) -> str:
    """Group means with their bootstrap CIs (reach_group rows of one day), one
    panel per attribute of ``side`` and one colour per metric; ``uniform``
    draws the availability of a uniform recommender as a reference line."""
    rows = reach_group.filter((pl.col("side") == side) & pl.col("metric").is_in(metrics))
    attrs = sorted(set(rows.get_column("attribute")))
    heights = [max(1, rows.filter(pl.col("attribute") == a).get_column("group").n_unique()) for a in attrs]
    fig, axes = plt.subplots(
        len(attrs), 1, figsize=(7, 0.9 + 0.22 * sum(heights) + 0.35 * len(attrs)), squeeze=False,
        gridspec_kw={"height_ratios": heights}, sharex=True,  # one x scale: the facets compare
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
    svg = svg_text(fig)
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
    return svg_text(fig)
