"""The commands that size and release audits: ``plan`` (traffic for a given
accuracy, seed 001 App. E), ``audit-export`` (an ε-DP release, seed 000),
``sample-size`` and ``envy-plan`` (seed 004); they register on
:data:`fairmon.pipelines.faces.cli_common.app` in this order."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from fairmon.pipelines.faces.cli_common import (
    EXIT_REFUSED,
    EXIT_USAGE,
    ConfigOpt,
    JsonOpt,
    app,
    console,
    dump_json,
    err,
    load_or_exit,
    parse_date,
    parse_floats,
)


@app.command()
def plan(
    config: ConfigOpt = Path("fairmon.toml"),
    start: Annotated[str | None, typer.Option(help="First day of counts to plan from.")] = None,
    end: Annotated[str | None, typer.Option(help="Last day of counts to plan from.")] = None,
    epsilon: Annotated[
        float, typer.Option(help="Accuracy ε (relative for E.1 and the union bound, else absolute).")
    ] = 0.1,
    delta: Annotated[float, typer.Option(help="Failure probability δ.")] = 0.05,
    target_se: Annotated[float | None, typer.Option(help="Also solve for this SE of REO.")] = None,
    rec_rate: Annotated[
        float | None, typer.Option(help="Overall recommendation rate P(R = 1), needed by seed 001 Theorem E.2.")
    ] = None,
    p: Annotated[str | None, typer.Option("--P", help="Given rates instead of counts: P_k, e.g. 0.01,0.05.")] = None,
    q: Annotated[str | None, typer.Option("--Q", help="Given rates: Q_k, e.g. 0.1,0.25.")] = None,
    n_rec: Annotated[int | None, typer.Option(min=1, help="Given rates: default rows per day.")] = None,
    rand_per_day: Annotated[int | None, typer.Option(min=1, help="Given rates: random rows per day.")] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='An object {"epsilon", "delta", "volumes": [per method (and arm, attribute): "method", '
            '"target", "n_rec", "n_rand" (rows), "rec_days", "rand_days" (days of current traffic), "note", '
            '"eq13_holds" (true, false or null), "eq13_reason"]}. From counts also "summary": [per arm × '
            'attribute of the latest day: "ds", "groups", "n_rec", "n_rand_window" (rows), "rand_span_days", '
            '"rand_per_day", "se_reo_now", "rand_for_target_se", "days_for_target_se", "target_se_note", '
            '"verdict" (that day\'s), "settles" (true where it is inconclusive), "rand_to_settle" (random rows '
            'in the window), "rec_to_settle" (default rows a day), "days_to_settle", "settle_note" (why, in '
            'words)]. From --P/--Q with --n-rec and --rand-per-day also "se_reo", with --target-se '
            '"rand_for_target_se". NaN and infinity are null.',
            metavar="",
        ),
    ] = False,
) -> None:
    """How much random (and default) traffic a given accuracy needs (seed 001 App. E).

    Methods: thm_e1 (each P_k and Q_k within relative ε: random and default rows),
    thm_e2 (each U_k within ε; needs --rec-rate), thm_e3 / thm_e4 (every ΔU_k / REO
    within ε, as printed) and their corrected constants, and fairmon's own union
    bound. E.3/E.4 carry eq. 13's check at the observed U (a note only where it
    fails; eq13_holds in --json). Uses the published group counts of START..END,
    or rates given with --P/--Q.

    From counts, the rows whose verdict on the latest day is inconclusive
    are marked ◀, with the random rows (and days) that would bring the
    interval to one side of the line, and why in words below the table.
    """
    from fairmon.pipelines.privacy.audit_release import plan_from_counts

    _check_plan_options(epsilon, delta, target_se, rec_rate)
    if p and q:
        _plan_from_rates(p, q, epsilon, delta, target_se, rec_rate, n_rec, rand_per_day, as_json)
        return
    cfg = load_or_exit(config)
    a = parse_date(start, "--start") if start else dt.date.min
    b = parse_date(end, "--end") if end else dt.date.max
    try:
        table, volumes = plan_from_counts(cfg, a, b, epsilon, delta, target_se, rec_rate)
    except ValueError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_USAGE) from None
    if as_json:
        dump_json({"epsilon": epsilon, "delta": delta, "volumes": volumes, "summary": table.to_dicts()})
        return
    console.print(_traffic_now_table(table, target_se is not None))
    _print_settling(table)
    for r in table.iter_rows(named=True):
        if r["target_se_note"]:
            console.print(
                f"[yellow]{escape(r['arm'])} / {escape(r['attribute'])}: {escape(r['target_se_note'])}[/yellow]"
            )
    console.print(_volumes_table(volumes, f"Volumes needed (ε = {epsilon}, δ = {delta})", by_arm=True))
    _print_eq13_failures(volumes)


def _check_plan_options(epsilon: float, delta: float, target_se: float | None, rec_rate: float | None) -> None:
    """Raise typer.BadParameter (exit 2, naming the option) for an accuracy or probability the theorems of
    seed 001 App. E do not take: ε or a target SE not a positive number, δ outside (0, 1), a recommendation
    rate outside (0, 1]. NaN fails each (it was a traceback, and a negative SE was read as its size)."""
    checks = [
        ("--epsilon", epsilon, 0 < epsilon < math.inf, "a positive number"),
        ("--delta", delta, 0 < delta < 1, "a probability in (0, 1)"),
        ("--target-se", target_se, target_se is None or 0 < target_se < math.inf, "a positive number"),
        ("--rec-rate", rec_rate, rec_rate is None or 0 < rec_rate <= 1, "a rate in (0, 1]"),
    ]
    for name, value, ok, what in checks:
        if not ok:
            raise typer.BadParameter(f"{value!r} is not {what}", param_hint=name)


def _plan_from_rates(
    p: str,
    q: str,
    epsilon: float,
    delta: float,
    target_se: float | None,
    rec_rate: float | None,
    n_rec: int | None,
    rand_per_day: int | None,
    as_json: bool,
) -> None:
    """``plan --P … --Q …``: volumes from given per-group rates rather than
    published counts (a planner's what-if before any traffic exists), with
    SE(REO) at the given daily volumes and the random rows a target SE needs.
    Raises typer.BadParameter when --P and --Q differ in length."""
    import numpy as np

    from fairmon.transforms.planning.traffic import plan_volumes, random_volume_for_reo_se, reo_se_for_volume

    P, Q = np.array(parse_floats(p, "--P")), np.array(parse_floats(q, "--Q"))
    if P.shape != Q.shape:
        raise typer.BadParameter("--P and --Q need one value per group", param_hint="--Q")
    for name, rates in (("--P", P), ("--Q", Q)):
        bad = [str(x) for x in rates.tolist() if not 0 <= x <= 1]  # NaN too
        if bad:
            raise typer.BadParameter(f"{', '.join(bad)}: a rate is a number in [0, 1]", param_hint=name)
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero rate: what needs U_k = Q_k/P_k is not finite
        volumes = plan_volumes(P, Q, epsilon, delta, rec_rate)
        extra = {}
        if n_rec and rand_per_day:
            extra["se_reo"] = reo_se_for_volume(Q, P, n_rec, rand_per_day)[0]
            if target_se:
                extra["rand_for_target_se"] = random_volume_for_reo_se(Q, P, n_rec, target_se)
    for v in volumes:
        v["rand_days"] = v["n_rand"] / rand_per_day if rand_per_day and v["n_rand"] is not None else None
        v["rec_days"] = v["n_rec"] / n_rec if n_rec and v["n_rec"] is not None else None
    if as_json:
        dump_json({"epsilon": epsilon, "delta": delta, "volumes": volumes, **extra})
        return
    console.print(_volumes_table(volumes, f"Traffic plan (ε = {epsilon}, δ = {delta}) for P = {p}, Q = {q}"))
    _print_eq13_failures(volumes)
    zero = [str(k + 1) for k in range(P.size) if not (P[k] > 0 and Q[k] > 0)]
    if zero:
        console.print(
            f"[yellow]P_k or Q_k is 0 for group(s) {', '.join(zero)}: U_k = Q_k/P_k is not finite there, so the "
            "volumes and SE that need it show '-' or nan[/yellow]"
        )
    if "se_reo" in extra:
        console.print(
            f"SE(REO) with {n_rec} default and {rand_per_day} random rows: {extra['se_reo']:.5f}", markup=False
        )
    if "rand_for_target_se" in extra:
        need = extra["rand_for_target_se"]
        console.print(
            f"random rows for SE(REO) = {target_se}: {need:.0f} ({need / rand_per_day:.1f} days)"
            if np.isfinite(need)
            else f"SE(REO) = {target_se} is out of reach with {n_rec} default rows: add default traffic"
        )


def _print_eq13_failures(volumes: list[dict]) -> None:
    """One line per arm × attribute whose observed U fails seed 001 eq. 13's
    bound (the E.3/E.4 rows' eq13_reason); nothing where it holds."""
    seen = dict.fromkeys(
        (v.get("arm"), v.get("attribute"), v["eq13_reason"]) for v in volumes if v.get("eq13_holds") is False
    )
    for arm, attribute, reason in seen:
        where = f"{arm} / {attribute}: " if arm is not None else ""
        console.print(f"[yellow]{escape(where + reason)}[/yellow]")


def _rows_or_reach(need) -> str:
    """Rows as a number, "-" when not asked (NaN, None), "out of reach" when infinite."""
    return "-" if need is None or need != need else (f"{need:,.0f}" if need != float("inf") else "out of reach")


def _traffic_now_table(table, with_target: bool) -> Table:
    """Rich table of the traffic the published counts show now, per arm ×
    attribute: the day's verdict (an inconclusive one marked ◀ with the
    random rows and days that settle it), random rows a day, window span,
    SE(REO) now and, with ``with_target`` (--target-se), the random rows
    (and days) that SE needs, "out of reach" when none suffice."""
    day = table["ds"][0]
    settling = bool(table["settles"].any())
    t = Table(title=f"Traffic now (counts of {day})", title_justify="left")
    cols = [""] if settling else []
    cols += ["arm", "attribute", f"verdict of {day}", "random rows/day", "window span (days)", "SE(REO) now"]
    cols += ["random rows to settle it", "days to settle it"] if settling else []
    cols += ["random rows for target SE", "days to collect them"] if with_target else []
    for c in cols:
        t.add_column(c, justify="left" if c in ("", "arm", "attribute") or c.startswith("verdict") else "right")
    for r in table.iter_rows(named=True):
        cells = ["◀" if r["settles"] else ""] if settling else []
        cells += [
            r["arm"],
            r["attribute"],
            r["verdict"] or "-",
            f"{r['rand_per_day']:,.0f}",
            str(r["rand_span_days"]),
            f"{r['se_reo_now']:.4f}",
        ]
        if settling:
            need, days = r["rand_to_settle"], r["days_to_settle"]
            if need is not None and need <= r["n_rand_window"]:  # settled by default traffic or not by traffic
                cells += ["enough now", "-"]
            else:
                cells += [_rows_or_reach(need), "-" if days is None or days == float("inf") else f"{days:.1f}"]
        if with_target:
            need = r["rand_for_target_se"]
            cells += [
                _rows_or_reach(need),
                "-" if need != need or need == float("inf") else f"{r['days_for_target_se']:.1f}",
            ]
        t.add_row(*cells, style="yellow" if r["settles"] else None)
    return t


def _print_settling(table) -> None:
    """Under the table, the rows marked ◀ in words: which arm × attribute
    has an inconclusive verdict on the counts' day, why, and the traffic
    that settles it (the answer to the report's "fairmon plan says how
    much"); a line saying there is none when the day has verdicts."""
    day = table["ds"][0]
    rows = [r for r in table.iter_rows(named=True) if r["settles"]]
    if not rows:
        if table["verdict"].drop_nulls().len():
            console.print(f"No verdict of {day} is inconclusive: nothing to settle.", markup=False)
        return
    console.print(
        f"◀ These rows settle the inconclusive verdicts of {day} (what 'fairmon plan says how much' means):",
        markup=False,
    )
    for r in rows:
        text = f"{r['arm']} / {r['attribute']}: {r['settle_note'] or 'inconclusive'}"
        days, span = r["days_to_settle"], r["rand_span_days"]
        if days is not None and days != float("inf") and r["rand_to_settle"] > r["n_rand_window"]:
            text += f". The random rows needed are {days:.1f} days of today's random traffic"
            if days > span:  # more than the window holds: a larger share of random traffic, or a longer window
                spans = f"{span} day" + ("s" if span != 1 else "")
                text += (
                    f" (the window spans {spans}: serve {days / span:.1f}× today's random traffic, "
                    f"or set random_window_days = {math.ceil(days)})"
                )
        console.print(f"  [yellow]{escape(text)}.[/yellow]")


def _volumes_table(volumes: list[dict], title: str, by_arm: bool = False) -> Table:
    """Rich table of planner volumes (one row per method, and arm × attribute)."""
    t = Table(title=title, title_justify="left")
    cols = (["arm", "attribute"] if by_arm else []) + [
        "method",
        "ε bounds",
        "default rows",
        "days of default",
        "random rows",
        "days of random",
        "note",
    ]
    for c in cols:
        t.add_column(c, justify="right" if "rows" in c or "days" in c else "left")

    def num(x, fmt="{:.0f}"):
        return "-" if x is None else fmt.format(x)

    for v in volumes:
        t.add_row(
            *([v["arm"], v["attribute"]] if by_arm else []),
            v["method"],
            v["target"],
            num(v["n_rec"]),
            num(v.get("rec_days"), "{:.1f}"),
            num(v["n_rand"]),
            num(v.get("rand_days"), "{:.1f}"),
            v["note"],
        )
    return t


@app.command("audit-export")
def audit_export(
    date: Annotated[str, typer.Option("--date", "-d", help="Last day of the score window, YYYY-MM-DD.")],
    attribute: Annotated[str, typer.Option(help="Group attribute of the release.")],
    config: ConfigOpt = Path("fairmon.toml"),
    model: Annotated[str | None, typer.Option(help="Model (default: the first configured threshold's).")] = None,
    epsilon: Annotated[float, typer.Option(help="Privacy budget of this release.")] = 0.5,
    survival: Annotated[
        bool,
        typer.Option(
            "--survival", help="Also show the survival form P*(a, >= y) (eq. 5; not used in the decision).", metavar=""
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Release file (JSON; refused when it exists), or a folder for <model>_<attribute>_<date>_<id>.json "
            "(default: releases/ beside the warehouse).",
        ),
    ] = None,
) -> None:
    """Release per-group histograms of qualified individuals' scores over the
    declared score set ([audit] score_values, bins or edges) with discrete
    Laplace noise from OpenDP, ε-differentially private (seed 000 §4.3.3, §5.1;
    DESIGN §4.6). Group sizes are declared public ([audit] public_group_sizes)
    or released with noise at ε/2 ([audit] groups). Prints P* (eq. 4), the
    empirical fairness gap, the interval for FG and the decision: fair only
    when the interval lies at or below α, unfair only when above, else
    inconclusive. Refused when it would overspend the data set's budget."""
    from fairmon.pipelines.privacy.audit_release import BudgetExceeded, export_release

    cfg = load_or_exit(config)
    ds = parse_date(date, "--date")
    if cfg.scores is None:
        err.print("[red]error:[/red] audit-export needs a [scores] section in the config")
        raise typer.Exit(EXIT_USAGE)
    model = model or cfg.scores.thresholds[0].model
    try:
        r = export_release(
            cfg, ds, attribute, model, epsilon, survival=survival, out=out or cfg.warehouse_path.parent / "releases"
        )
    except BudgetExceeded as e:
        err.print(f"[red]refused:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_REFUSED) from None
    except ValueError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_USAGE) from None
    colour = {"fair": "green", "unfair": "red"}.get(r["decision"], "yellow")
    console.print(
        f"release {r['release_id']} of {r['model']} by {r['attribute']} ({r['window'][0]}..{r['window'][1]}),"
        f" ε = {epsilon} (spent {r['budget_spent']:g} of {r['budget_total']:g})"
    )
    console.print(
        f"groups {r['groups']}, sizes {r['group_sizes']} {r['n_q']}; |Y| = {len(r['score_bins'])} declared bins"
    )
    lo, hi = r["fg_interval"]
    console.print(
        f"EFG = {r['efg']:.4f}, per-cell error t = {r['cell_error_t']:.4f} (δ = {r['delta']}) -> "
        f"FG in [{lo:.4f}, {hi:.4f}] vs α = {r['alpha']} -> decision: [{colour}]{r['decision']}[/{colour}]"
    )
    for c in ([r["efg_reason"]] if r["efg_reason"] else []) + r["seed_conditions_failed"]:
        console.print(f"  [yellow]{escape(c)}[/yellow]")
    p = r["platform_only"]
    console.print(
        f"platform only (not in the release): {p['duplicate_rows_dropped']} duplicate item rows dropped "
        f"(latest kept), {p['qualified_rows_outside_declared_groups']} qualified rows outside the declared groups"
    )
    console.print(f"written: {r['file']}", markup=False)


@app.command("sample-size")
def sample_size(
    alpha: Annotated[float, typer.Option(help="Fairness tolerance α.")] = 0.2,
    groups: Annotated[int, typer.Option(min=1, help="|A|, number of groups.")] = 2,
    levels: Annotated[int, typer.Option(min=1, help="|Y|, number of score levels.")] = 100,
    delta: Annotated[float, typer.Option(help="Failure probability δ.")] = 0.05,
    epsilon: Annotated[float, typer.Option(help="Privacy ε of the release, for fairmon's decision.")] = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """Minimum qualified individuals per group for an audit, private (seed 000
    eqs. 6, 8) and non-private (eq. 7), and their ratio (at most 4·ln3/ln2 ≈ 6.34);
    then the group size fairmon's own decision needs to call a release "fair"
    at EFG 0, α/4, α/2 and 3α/4 (its interval EFG ± 2t must lie below α, at
    the noise of an ε-DP release; docs "Traffic planning and private audits")."""
    from fairmon.transforms.private.release import (
        decision_sample_size,
        min_sample_nonprivate,
        min_sample_private,
        sample_size_ratio,
    )

    if not epsilon > 0:
        raise typer.BadParameter(f"epsilon must be > 0, got {epsilon}", param_hint="--epsilon")
    try:
        a, b = min_sample_private(alpha, groups, levels, delta), min_sample_nonprivate(alpha, groups, levels, delta)
    except ValueError as e:  # α or δ outside (0, 1), NaN: exit 2 naming the option
        raise typer.BadParameter(str(e), param_hint="--alpha" if "alpha" in str(e) else "--delta") from None
    efgs = [round(alpha * f, 12) for f in (0.0, 0.25, 0.5, 0.75)]
    decision = {efg: decision_sample_size(alpha, groups, levels, delta, epsilon, efg) for efg in efgs}
    if as_json:
        dump_json(
            {
                "alpha": alpha,
                "groups": groups,
                "levels": levels,
                "delta": delta,
                "private": a,
                "nonprivate": b,
                "ratio": sample_size_ratio(groups, levels, delta),
                "epsilon": epsilon,
                "decision": [{"efg": efg, "n": n} for efg, n in decision.items()],
            }
        )
        return
    console.print(
        f"private (eqs. 6, 8): {a}   non-private (eq. 7): {b}   ratio {a / b:.2f} "
        f"(unrounded {sample_size_ratio(groups, levels, delta):.3f}; supremum 6.34)"
    )
    console.print(
        f"fairmon's 'fair' decision at ε = {epsilon:g} (EFG + 2t ≤ α): "
        + ", ".join(f"EFG {efg:g}: {n:,}" if n else f"EFG {efg:g}: none" for efg, n in decision.items())
        + " per group",
        markup=False,
    )


@app.command("envy-plan")
def envy_plan(
    delta: Annotated[float, typer.Option(help="Failure probability δ of the whole audit.")] = 0.05,
    lam: Annotated[float, typer.Option("--lambda", help="λ: the share of users allowed to be (ε, γ)-envious.")] = 0.1,
    gamma: Annotated[float, typer.Option(help="γ: the share of other users a user may envy.")] = 0.1,
    as_json: JsonOpt = False,
) -> None:
    """What the platform must log for an envy-freeness audit (seed 004 Alg. 2,
    Th. 2): M_tilde target users drawn uniformly, each served by the policies of
    K donors drawn uniformly from the other users (swap traffic), each user's
    certificate run at δ/(3·M_tilde)."""
    from fairmon.transforms.envy.certify import audit_sizes

    try:
        m_tilde, k = audit_sizes(delta, lam, gamma)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    per_user = delta / (3 * m_tilde)
    if as_json:
        dump_json(
            {"delta": delta, "lambda": lam, "gamma": gamma, "M_tilde": m_tilde, "K": k, "delta_per_user": per_user}
        )
        return
    console.print(
        f"M_tilde = {m_tilde} target users, K = {k} donors each "
        f"({m_tilde * k} target-donor pairs to log as swap traffic); "
        f"each certificate at δ/(3·M_tilde) = {per_user:.3g}"
    )
