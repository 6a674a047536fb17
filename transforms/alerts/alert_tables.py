"""The ``alerts`` table: one row per alert raised on a day, from the history of published days (DESIGN §4.9).

Pure: the pipeline hands in what the warehouse and the run records say
(the ``reo`` and ``reo_ab`` rows of published days, each day's latest run
status, the privacy ledger) and writes what comes out. Every series is read
in day order as a small state machine, so that an alert already raised for
an ongoing condition is not raised again the next day, and the same history
always gives the same rows with the same ``alert_id`` (a re-run or a
backfill replaces its days' alerts, never duplicates them):

* REO of one (arm, attribute): ``exceeds`` when the alert interval (level
  1 − 2α/H, :mod:`fairmon.transforms.alerts.horizon`) lies above the line and
  no ``exceeds`` is open; ``back_within`` when an open one's alert interval
  lies at or below the line. A day with a small group or an undefined
  interval changes nothing (its interval may under-cover).
* A/B REO difference of one (attribute, control, treatment): ``ab_change``
  when the day's p-value of no difference is at most α/H and no change in the
  same direction is open; the change closes, silently, on a day whose own
  interval holds 0.
* Runs: ``quarantined`` / ``failed`` on the first day of a run of
  consecutive days whose latest run ended so.
* Privacy: ``budget_low`` on the day a population's spent ε first reaches
  ``budget_low_share`` of the budget (seed 000 §5; the ledger of DESIGN §4.6).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from fairmon.transforms.alerts.horizon import alert_level, day_alpha
from fairmon.transforms.alerts.words import status_words
from fairmon.transforms.registry import ACROSS_DAYS_STAGE, ARM, ATTR, DS, B, Column, D, F, S, Table, declare

KINDS = ("exceeds", "back_within", "ab_change", "quarantined", "failed", "budget_low")

ALERTS = Table(
    "alerts",
    "Alerts raised on a day: REO crossing its line, A/B changes, days quarantined or failed, privacy budgets low.",
    "DESIGN §4.9; Bonferroni α-spending over a sliding horizon (Lan & DeMets 1983, eq. 1)",
    ("ds", "alert_id"),
    (
        DS,
        Column("alert_id", S, "-", "Stable id: a hash of project, kind, subject and day raised.", nullable=False),
        Column("kind", S, "-", "`exceeds`, `back_within`, `ab_change`, `quarantined`, `failed` or `budget_low`."),
        Column("subject", S, "-", "What the alert is about, in words (arm and attribute, A/B pair, runs, population)."),
        ARM,
        ATTR,
        Column("control", S, "-", "A/B control arm (`ab_change`)."),
        Column("treatment", S, "-", "A/B treatment arm (`ab_change`)."),
        Column("statistic", S, "-", "The evidence's statistic: `reo`, `diff_reo`, `status` or `epsilon_spent`."),
        Column("value", F, "as the statistic", "Its value on the day raised."),
        Column("ci_low", F, "as the statistic", "Lower bound of its interval at `level`."),
        Column("ci_high", F, "as the statistic", "Upper bound of its interval at `level`."),
        Column("level", F, "probability", "Level of the interval: 1 − 2α/H for REO and A/B alerts."),
        Column("line", F, "as the statistic", "The line crossed: REO's threshold, 0 for A/B, the ε share."),
        Column(
            "since",
            D,
            "date",
            "First day of the unbroken run the alert rests on: daily verdicts `exceeds` (or `within`) before its "
            "alert interval cleared the line on ds, or consecutive bad days; ds itself for the other kinds.",
        ),
        Column("message", S, "-", "The alert in words.", nullable=False),
        Column("first_seen_at", S, "ISO 8601 UTC", "When a run first wrote the alert (kept by later runs)."),
        Column("delivered", B, "-", "No notification of it is pending (false: one failed, sent again next run)."),
        Column("delivery", S, "JSON", "Each notification target's outcome, by its position `notify[i]` (never a URL)."),
    ),
    "alerts",
    published_view=False,
    section="alerts",
)

#: The alerts are computed by the pipeline after a run's days (fairmon.pipelines.executor.alerting).
declare(ALERTS, stage=ACROSS_DAYS_STAGE, inputs=("reo", "reo_ab", "runs", "ledger"))

ALERTS_SCHEMA: dict[str, pl.DataType] = ALERTS.schema


@dataclass(frozen=True)
class AlertRules:
    """What the alerts read from ``[alerts]``: ``alpha`` over any
    ``horizon_days`` days, the ``budget_low_share`` of ``total_epsilon``, the
    A/B ``ab_method`` whose rows are watched, and the ``project`` name that
    keeps alert ids apart between projects. Raises ValueError for an α/H
    outside (0, 1/2)."""

    alpha: float = 0.05
    horizon_days: int = 90
    budget_low_share: float = 0.8
    total_epsilon: float = 1.0
    ab_method: str = "delta"
    project: str = ""

    def __post_init__(self) -> None:
        alert_level(self.alpha, self.horizon_days)


def _finite(*xs) -> bool:
    return all(x is not None and math.isfinite(x) for x in xs)


def alert_id(project: str, kind: str, subject: str, ds: dt.date) -> str:
    """The stable id of an alert: 16 hex digits of SHA-256 over project,
    kind, subject and the day raised (the same history, the same ids)."""
    return hashlib.sha256(f"{project}\x1f{kind}\x1f{subject}\x1f{ds.isoformat()}".encode()).hexdigest()[:16]


def _streak(prev: dt.date | None, holds: bool, ds: dt.date) -> dt.date | None:
    """The first day of a run of days for which something holds, carried to day ``ds``."""
    return (prev or ds) if holds else None


def reo_alerts(reo: pl.DataFrame) -> list[dict]:
    """``exceeds`` and ``back_within`` alerts from ``reo`` rows of published
    days (columns ds, arm, attribute, reo, reo_threshold, verdict_80pct,
    n_small_groups, alert_level, alert_low, alert_high), one series per
    (arm, attribute) in day order (module docstring). Returns alert dicts
    without ids. Source: DESIGN §4.9."""
    out: list[dict] = []
    if reo.is_empty():
        return out
    for (arm, attribute), rows in reo.sort("ds").group_by(["arm", "attribute"], maintain_order=True):
        open_since = exceeding = within = None
        for r in rows.iter_rows(named=True):
            ds, line = r["ds"], r["reo_threshold"]
            exceeding = _streak(exceeding, r["verdict_80pct"] == "exceeds", ds)
            within = _streak(within, r["verdict_80pct"] == "within", ds)
            lo, hi = r["alert_low"], r["alert_high"]
            if not _finite(lo, hi, line, r["alert_level"]) or (r["n_small_groups"] or 0) > 0:
                continue
            where = f"REO of {attribute} (arm {arm})"
            evidence = f"REO {r['reo']:.4g}, interval at {r['alert_level']:.4%} [{lo:.4g}, {hi:.4g}]"
            if open_since is None and lo > line:
                kind, since, words = "exceeds", exceeding or ds, f"{where} exceeds the line {line:.4g}"
                verdict = "exceeds"
                open_since = ds
            elif open_since is not None and hi <= line:
                kind, since, words = "back_within", within or ds, f"{where} is back within the line {line:.4g}"
                verdict = "within"
                words += f" (exceeding since {open_since})"
                open_since = None
            else:
                continue
            out.append(
                {
                    "ds": ds, "kind": kind, "subject": f"reo arm={arm} attribute={attribute}", "arm": arm,
                    "attribute": attribute, "statistic": "reo", "value": r["reo"], "ci_low": lo, "ci_high": hi,
                    "level": r["alert_level"], "line": line, "since": since,
                    "message": f"{words}: {evidence}; daily verdict {verdict} since {since}",
                }
            )  # fmt: skip
    return out


def ab_alerts(reo_ab: pl.DataFrame, alpha: float, horizon_days: int, method: str = "delta") -> list[dict]:
    """``ab_change`` alerts from ``reo_ab`` rows of published days (columns
    ds, attribute, control, treatment, metric, method, diff, se, p_value,
    df, ci_low, ci_high): the ``reo`` metric by ``method``, one series per
    (attribute, control, treatment) in day order. A change is raised when
    p ≤ α/H (:func:`fairmon.transforms.alerts.horizon.day_alpha`); its
    interval is diff ± q·se with q the normal (t_df when df is finite)
    quantile at 1 − α/(2H). Returns alert dicts without ids. Source: seed 001
    Algorithm 2 (the per-day test), DESIGN §4.9 (the spending)."""
    from fairmon.transforms.distributions import norm_ppf, t_ppf

    out: list[dict] = []
    if reo_ab.is_empty():
        return out
    a = day_alpha(alpha, horizon_days)
    level = 1.0 - a
    rows_of = reo_ab.filter((pl.col("metric") == "reo") & (pl.col("method") == method)).sort("ds")
    for (attribute, control, treatment), rows in rows_of.group_by(
        ["attribute", "control", "treatment"], maintain_order=True
    ):
        direction = 0
        for r in rows.iter_rows(named=True):
            diff, p, se = r["diff"], r["p_value"], r["se"]
            if not _finite(diff, p):
                continue
            sign = 1 if diff > 0 else -1
            if p <= a and direction != sign:
                direction = sign
                q = t_ppf(1 - a / 2, r["df"]) if _finite(r["df"]) else norm_ppf(1 - a / 2)
                lo, hi = (diff - q * se, diff + q * se) if _finite(se) else (math.nan, math.nan)
                way = "higher" if sign > 0 else "lower"
                out.append(
                    {
                        "ds": r["ds"], "kind": "ab_change", "control": control, "treatment": treatment,
                        "subject": f"reo_ab attribute={attribute} control={control} treatment={treatment}",
                        "attribute": attribute, "statistic": "diff_reo", "value": diff, "ci_low": lo, "ci_high": hi,
                        "level": level, "line": 0.0, "since": r["ds"],
                        "message": f"REO of {attribute} is {way} in {treatment} than in {control}: "
                        f"D = {diff:.4g}, {p_against(p, a)} ≤ α/H = {_positional(a)}, interval at {level:.4%} "
                        f"[{lo:.4g}, {hi:.4g}]",
                    }
                )  # fmt: skip
            elif _finite(r["ci_low"], r["ci_high"]) and r["ci_low"] <= 0.0 <= r["ci_high"]:
                direction = 0
    return out


def _positional(x: float) -> str:
    """``x`` with 3 significant digits in plain decimals (0.000556, never 5.56e-04)."""
    return np.format_float_positional(x, precision=3, unique=False, fractional=False, trim="-")


def p_against(p: float, line: float) -> str:
    """A p-value beside the line it is compared with (``line`` > 0), in plain decimals as the report writes
    p-values: ``p < 0.0001`` below the line's decade (0.0001 for a line of 0.000556), else ``p = `` with 3
    significant digits, enough to read it against the line (a p of 1e-12 printed so beside tables saying
    "< 0.001"). Raises nothing."""
    decade = 10.0 ** math.floor(math.log10(line)) if line > 0 else 0.0
    return f"p < {_positional(decade)}" if p < decade else f"p = {_positional(p)}"


def run_alerts(runs: pl.DataFrame) -> list[dict]:
    """``quarantined`` / ``failed`` alerts from the days' spells of bad runs
    (columns ds, status, detail, and bad_from, fixed_at: when the spell's
    first run started and when the day next published, null while it has not;
    ``sql/alerts_runs.sql``): one alert per run of consecutive days whose
    spells have the same status and overlap in time, on its first day (an
    ongoing condition is not raised again), with the detail of its first
    spell. A day that fails after the day before it was mended starts an
    alert of its own: the condition before had ended; so does a day that
    fails again after it was mended, its subject "runs again from <when>" (a
    new id: announced anew). Without the time columns every spell is taken as
    still open (consecutive days chain). Returns alert dicts without ids, by
    day."""
    runs = runs.filter(pl.col("status").is_in(["quarantined", "failed"]))
    if runs.is_empty():
        return []
    for col in ("bad_from", "fixed_at"):
        if col not in runs.columns:
            runs = runs.with_columns(pl.lit(None, pl.Datetime("us")).alias(col))
    spells = runs.sort("ds", "bad_from", nulls_last=False).to_dicts()
    first = list(range(len(spells)))  # union-find over spells: each spell's component

    def root(i: int) -> int:
        while first[i] != i:
            first[i] = first[first[i]]
            i = first[i]
        return i

    by_day: dict[dt.date, list[int]] = {}
    for i, r in enumerate(spells):
        for j in by_day.get(r["ds"] - dt.timedelta(days=1), []):
            if spells[j]["status"] == r["status"] and _overlap(spells[j], r):
                first[max(root(i), root(j))] = min(root(i), root(j))
        by_day.setdefault(r["ds"], []).append(i)
    out, seen = [], set()
    for i in sorted({root(i) for i in range(len(spells))}):  # each alert's first spell, by day and time
        r = spells[i]
        ds, status = r["ds"], r["status"]
        again = (ds, status) in seen and r["bad_from"] is not None  # failed again after it was mended
        seen.add((ds, status))
        out.append(
            {
                "ds": ds, "kind": status, "statistic": "status", "since": ds,
                "subject": f"runs again from {r['bad_from']:%Y-%m-%d %H:%M:%S}" if again else "runs",
                "message": f"day {ds} {status}{status_words(ds, status, r['detail'], 1000)}",
            }
        )  # fmt: skip
    return out


def _overlap(a: dict, b: dict) -> bool:
    """Whether two spells of bad runs (bad_from, fixed_at; null: unbounded) overlap in time."""
    return (a["fixed_at"] is None or b["bad_from"] is None or b["bad_from"] < a["fixed_at"]) and (
        b["fixed_at"] is None or a["bad_from"] is None or a["bad_from"] < b["fixed_at"]
    )


def budget_alerts(ledger: pl.DataFrame, share: float, total_epsilon: float) -> list[dict]:
    """``budget_low`` alerts from the privacy ledger (columns dataset,
    released_at (datetime), epsilon): per population, on the day of the
    release that first brings its spent ε to ``share`` × ``total_epsilon``
    or more (spent ε never goes down: raised once). Returns alert dicts
    without ids. Source: seed 000 §5 (basic composition), DESIGN §4.6."""
    out: list[dict] = []
    line = share * total_epsilon
    if ledger.is_empty():
        return out
    for (dataset,), rows in ledger.sort("released_at").group_by(["dataset"], maintain_order=True):
        spent = 0.0
        for r in rows.iter_rows(named=True):
            before, spent = spent, spent + r["epsilon"]
            if before < line <= spent + 1e-12:
                ds = r["released_at"].date()
                out.append(
                    {
                        "ds": ds, "kind": "budget_low", "subject": f"privacy budget of {dataset[:60]}",
                        "statistic": "epsilon_spent", "value": spent, "line": line, "since": ds,
                        "message": f"privacy budget low: ε {spent:g} of {total_epsilon:g} spent "
                        f"(alert at {share:.0%}); {max(total_epsilon - spent, 0.0):g} left",
                    }
                )  # fmt: skip
                break
    return out


def alerts_table(
    reo: pl.DataFrame, reo_ab: pl.DataFrame, runs: pl.DataFrame, ledger: pl.DataFrame, rules: AlertRules
) -> pl.DataFrame:
    """Every alert the history raises, in (ds, kind, subject) order, as a
    frame of :data:`ALERTS_SCHEMA` (``first_seen_at``, ``delivered`` and
    ``delivery`` null: the pipeline fills them when it writes and sends).
    Inputs as :func:`reo_alerts`, :func:`ab_alerts`, :func:`run_alerts`,
    :func:`budget_alerts` (empty frames for what the project lacks).
    Raises polars' ColumnNotFoundError for an input without a needed column."""
    rows = [
        *reo_alerts(reo),
        *ab_alerts(reo_ab, rules.alpha, rules.horizon_days, rules.ab_method),
        *run_alerts(runs),
        *budget_alerts(ledger, rules.budget_low_share, rules.total_epsilon),
    ]
    for r in rows:
        r["alert_id"] = alert_id(rules.project, r["kind"], r["subject"], r["ds"])
    frame = pl.DataFrame([{k: r.get(k) for k in ALERTS_SCHEMA} for r in rows], schema=ALERTS_SCHEMA)
    return frame.sort(["ds", "kind", "subject"])


def open_alerts(
    alerts: pl.DataFrame, until: dt.date, published: dict[dt.date, dt.datetime], bad: dict[dt.date, dt.datetime]
) -> list[dict]:
    """The alerts still open on day ``until`` (an ``alerts`` frame, raised
    on or before it), newest first: an ``exceeds`` not followed by a
    ``back_within`` of its subject; the latest ``ab_change`` of each A/B
    pair; a ``quarantined`` / ``failed`` alert while a day of its episode
    is not among the ``published`` days (day -> when its latest run, which
    published, started) and no day after the episode, up to ``until``,
    published after the episode's days failed; every ``budget_low`` (spent
    ε never comes back). An episode is the alert's day and the consecutive
    days after it that had a run quarantined or failed (``bad``: day -> when
    the latest such run started), up to the next such alert's day and
    ``until``: re-running its first day alone does not close it while the
    days after it are still refused, and days published before it failed
    (a past day re-run and refused) do not either. An open quarantined /
    failed alert carries ``waiting``: its episode's days not published yet,
    so a reader is told which days still need a run, not only the first.
    Raises polars' errors for a frame without the ``alerts`` columns."""
    if alerts.is_empty():
        return []
    rows = alerts.filter(pl.col("ds") <= until).sort("ds", "subject").to_dicts()  # a day's "runs again" last
    latest: dict[tuple[str, str], dict] = {}
    for r in rows:
        family = "reo" if r["kind"] in ("exceeds", "back_within") else r["kind"]
        latest[(family, r["subject"] if r["kind"] not in ("quarantined", "failed") else str(r["ds"]))] = r
    starts = sorted(r["ds"] for r in rows if r["kind"] in ("quarantined", "failed"))
    keep = []
    for r in latest.values():
        if r["kind"] in ("quarantined", "failed"):
            waiting = _episode_waiting(r["ds"], until, published, bad, starts)
            if waiting:
                keep.append({**r, "waiting": waiting})
        elif r["kind"] in ("exceeds", "ab_change", "budget_low"):
            keep.append(r)
    return sorted(keep, key=lambda r: (r["ds"], r["kind"], r["subject"]), reverse=True)


def _episode_waiting(
    start: dt.date, until: dt.date, published: dict, bad: dict, starts: list[dt.date]
) -> list[dt.date]:
    """The days of the episode starting at ``start`` not published yet, in
    order; empty once they all are or a later day published after they failed."""
    stop = min((d for d in starts if d > start), default=until + dt.timedelta(days=1))
    days = [start]
    while (nxt := days[-1] + dt.timedelta(days=1)) in bad and nxt < stop and nxt <= until:
        days.append(nxt)
    failed_at = max((bad[d] for d in days if d in bad), default=None)
    recovered = any(days[-1] < d <= until and (failed_at is None or t > failed_at) for d, t in published.items())
    return [] if recovered else [d for d in days if d not in published]
