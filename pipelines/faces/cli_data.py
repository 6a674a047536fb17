"""The commands that make data and look at it: ``simulate``,
``simulate-labels``, ``simulate-envy``, ``train-snapshot``, ``demo``, ``sql``
``init`` and ``tables``; they register on :data:`fairmon.pipelines.faces.cli_common.app`
in this order."""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from fairmon.pipelines.faces.cli_common import (
    EXIT_LOCKED,
    EXIT_USAGE,
    ConfigOpt,
    JsonOpt,
    app,
    console,
    dump_json,
    err,
    load_or_exit,
    new_project_or_exit,
    out_or_exit,
    parse_date,
    parse_floats,
    prefect_env,
)


def _parse_arm(value: str) -> tuple[str, dict[int, float]]:
    name, _, weights = value.partition("=")
    out: dict[int, float] = {}
    try:
        for part in filter(None, weights.split(",")):
            k, _, w = part.partition(":")
            out[int(k)] = float(w)
    except ValueError:
        raise typer.BadParameter(f"{value!r}: expected NAME or NAME=GROUP:WEIGHT,...", param_hint="--arm") from None
    return name, out


@app.command()
def simulate(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write into.")] = Path("sim"),
    days: Annotated[int, typer.Option(min=1, help="Number of days.")] = 14,
    start: Annotated[str, typer.Option(help="First day, YYYY-MM-DD.")] = "2026-01-01",
    rows_per_day: Annotated[int, typer.Option(min=1, help="Default-traffic rows per day and arm.")] = 50_000,
    random_rows_per_day: Annotated[int, typer.Option(min=1, help="Random-traffic rows per day.")] = 6_000,
    rec_share: Annotated[str, typer.Option(help="Group shares in default traffic, e.g. 0.45,0.55.")] = "0.45,0.55",
    rec_rate: Annotated[str, typer.Option(help="Positive rates per group in default traffic.")] = "0.30,0.36",
    rand_share: Annotated[str, typer.Option(help="Group shares in random traffic.")] = "0.5,0.5",
    rand_rate: Annotated[str, typer.Option(help="Positive rates per group in random traffic.")] = "0.25,0.28",
    arm: Annotated[
        list[str] | None,
        typer.Option(
            help="Arm as NAME or NAME=GROUP:WEIGHT,... (seed 001 §4.4 boosting weights), e.g. "
            "'deboost=0:1.25'. Repeat for several arms. Default: one arm 'all'."
        ),
    ] = None,
    regime: Annotated[
        str | None,
        typer.Option(
            help="Seed 001 §4.1 regime: dense p=(0.01,0.05), sparse p=(0.001,0.005), very_sparse "
            "p=(0.0001,0.0005) (p = P(Y=1,S=k) in random traffic), q=(10p1,5p2), U∝(10,5), REO=1/3; "
            "overrides shares and rates; random traffic gets --rows-per-day rows per day, as default traffic."
        ),
    ] = None,
    pool_days: Annotated[int, typer.Option(min=1, help="Days per pooled random-traffic file.")] = 7,
    pool_policy: Annotated[
        str,
        typer.Option(
            help="pool_policy of the written config: overlap (every pool meeting a day's window, as for the "
            "published data set; reo.look_ahead marks pools reaching past the day) or contained (only pools "
            "inside the window: most days then have no random traffic unless the window is longer than a pool)."
        ),
    ] = "overlap",
    post_recall_rows_per_day: Annotated[
        int,
        typer.Option(
            min=0,
            help="Forced-inserted post-recall rows per day and arm (seed 001 App. I.4); 0: no post-recall "
            "stage. With it the config gets stage_paths and the run the reo_stage table.",
        ),
    ] = 0,
    recall_share: Annotated[str, typer.Option(help="Group shares after the recall stage.")] = "0.5,0.5",
    recall_rate: Annotated[str, typer.Option(help="Positive rates per group after the recall stage.")] = "0.27,0.33",
    request_size: Annotated[
        int, typer.Option(min=1, help="Rows per request (they share a request_id); 1 = independent rows.")
    ] = 1,
    icc: Annotated[
        float,
        typer.Option(min=0.0, max=0.99, help="Intra-class correlation of positives within a request (0 = none)."),
    ] = 0.0,
    group_per_request: Annotated[
        bool,
        typer.Option("--group-per-request", help="One group per request (a user attribute), not per row.", metavar=""),
    ] = False,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    fmt: Annotated[str, typer.Option("--format", help="csv or parquet.")] = "csv",
) -> None:
    """Write simulated TikTok-layout impressions with a known truth (truth_reo.csv: true U, ΔU, REO per day and
    arm; the default rates are unfair, REO 0.134 > 1/9) and a config to run fairmon on them."""
    from fairmon.pipelines.simulation.simulated import write_simulation
    from fairmon.transforms.simulators.impressions import SimulationSpec, regime_spec

    new_project_or_exit(out)

    arms = dict(_parse_arm(a) for a in arm) if arm else {"all": {}}
    common = dict(start=parse_date(start, "--start"), days=days, arms=arms, random_pool_days=pool_days, seed=seed)
    common |= dict(request_size=request_size, icc=icc, group_per_request=group_per_request)
    if post_recall_rows_per_day:
        common |= dict(
            post_recall_rows_per_day=post_recall_rows_per_day,
            recall_share=parse_floats(recall_share, "--recall-share"),
            recall_rate=parse_floats(recall_rate, "--recall-rate"),
        )
    try:
        if regime:
            spec = regime_spec(regime, rows_per_day=rows_per_day, **common)
        else:
            spec = SimulationSpec(
                rows_per_day=rows_per_day,
                random_rows_per_day=random_rows_per_day,
                rec_share=parse_floats(rec_share, "--rec-share"),
                rec_rate=parse_floats(rec_rate, "--rec-rate"),
                rand_share=parse_floats(rand_share, "--rand-share"),
                rand_rate=parse_floats(rand_rate, "--rand-rate"),
                **common,
            )
        with Progress(TextColumn("simulate"), BarColumn(), MofNCompleteColumn(), console=console) as p:
            job = p.add_task("files", total=None)
            paths = write_simulation(
                spec, out, fmt, progress=lambda i, n: p.update(job, completed=i, total=n), pool_policy=pool_policy
            )
    except ValueError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_USAGE) from None
    end = spec.start + dt.timedelta(days=spec.days - 1)
    wrote = f"wrote {spec.days} day{'s' * (spec.days != 1)} to {out}; config {paths['config']}"
    console.print(f"{wrote}; truth {paths['truth_reo']}", markup=False)
    console.print(f"next: fairmon backfill -c {paths['config']} --start {spec.start} --end {end}", markup=False)


@app.command("simulate-labels")
def simulate_labels(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write into.")] = Path("sim-labels"),
    days: Annotated[int, typer.Option(min=1, help="Number of days.")] = 7,
    start: Annotated[str, typer.Option(help="First day, YYYY-MM-DD.")] = "2026-01-01",
    items_per_day: Annotated[int, typer.Option(min=1, help="Labeled items per day.")] = 20_000,
    gold_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of items with an expert gold label.")] = 1.0,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """Write simulated labeling logs: content groups with known prevalence and
    labelers with known per-group d′ and criterion (seed 002 §5.3), the true
    implied thresholds and cost ratios (truth_labelers.csv), and a config."""
    from fairmon.pipelines.simulation.simulated import write_labeling_simulation
    from fairmon.transforms.simulators.labelers import LabelingSpec

    try:
        spec = LabelingSpec(
            start=parse_date(start, "--start"), days=days, items_per_day=items_per_day, gold_rate=gold_rate, seed=seed
        )
    except ValueError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_USAGE) from None
    new_project_or_exit(out)
    paths = write_labeling_simulation(spec, out)
    end = spec.start + dt.timedelta(days=days - 1)
    console.print(
        f"wrote {days} day{'s' * (days != 1)} of labels to {out}; config {paths['config']}; truth {paths['truth']}",
        markup=False,
    )
    console.print(f"next: fairmon run -c {paths['config']} --date {end}", markup=False)


@app.command("simulate-envy")
def simulate_envy(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write into.")] = Path("sim-envy"),
    scenario: Annotated[str, typer.Option(help="envious or envy-free.")] = "envious",
    days: Annotated[int, typer.Option(min=1, help="Number of days.")] = 14,
    start: Annotated[str, typer.Option(help="First day, YYYY-MM-DD.")] = "2026-01-01",
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
) -> None:
    """Write simulated swap and default traffic from a recommender with known
    preferences (seed 004 §5.1): AUDIT's target users, each served by its own
    policy and by K donors' policies every day, plus default and random
    traffic; the truth (truth_envy.json) and a config with [envy]. The
    envy-free scenario is certified after about nine days; the envious one
    (a minority the model knows nothing about) is found on the first."""
    from fairmon.pipelines.simulation.simulated import write_envy_simulation
    from fairmon.transforms.simulators.envy_world import SCENARIOS

    if scenario not in SCENARIOS:
        raise typer.BadParameter(f"{scenario!r}: one of {', '.join(SCENARIOS)}", param_hint="--scenario")
    first = parse_date(start, "--start")
    new_project_or_exit(out)
    with Progress(transient=True, console=err) as bar:
        task_id = bar.add_task("writing days", total=days)
        paths = write_envy_simulation(
            out,
            scenario=scenario,
            days=days,
            start=first,
            seed=seed,
            progress=lambda i, n: bar.update(task_id, completed=i),
        )
    end = first + dt.timedelta(days=days - 1)
    console.print(
        f"wrote {days} day{'s' * (days != 1)} of swap and default traffic to {out}; config {paths['config']}; "
        f"truth {paths['truth']}"
    )
    console.print(f"next: fairmon backfill -c {paths['config']} --start {first} --end {end}", markup=False)


@app.command("train-snapshot")
def train_snapshot(
    out: Annotated[Path, typer.Option("--out", "-o", help="Project folder to write into.")] = Path("coat-reach"),
    date: Annotated[str, typer.Option("--date", "-d", help="The day the snapshot is for, YYYY-MM-DD.")] = "2016-06-19",
    coat: Annotated[
        Path | None, typer.Option(help="Coat folder (train.ascii, test.ascii, features); default: the bundled copy.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the ALS initial factors.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Train a biased matrix factorisation on Coat's self-selected ratings
    (rank and ridge chosen by RMSE on its random-exposure ratings), write it as
    a model snapshot (DESIGN §2) with a config whose [reach] audits it:
    reachability, discovery, availability and stability (seed 003)."""
    from fairmon.pipelines.ingest.snapshots import write_coat_reach_project
    from fairmon.resources import data_dir

    ds = parse_date(date, "--date")
    folder = coat or data_dir("coat")
    if not (folder / "train.ascii").is_file():
        raise typer.BadParameter(f"{folder} has no train.ascii", param_hint="--coat")
    out_or_exit(out)
    with err.status("training the biased MF (grid of ranks and ridges)"):
        summary = write_coat_reach_project(out, ds, folder, seed=seed)
    if as_json:
        dump_json(summary)
        return
    for rank, lam, rmse in summary["grid"]:
        mark = "  <- chosen" if (rank, lam) == (summary["rank"], summary["lam"]) else ""
        console.print(f"rank {rank:>3}  lambda {lam:>5}  test RMSE {rmse:.4f}{mark}", markup=False)
    console.print(f"snapshot: {Path(summary['files']['users']).parent}; config {summary['config']}", markup=False)
    console.print(f"next: fairmon run -c {summary['config']} --date {ds}", markup=False)


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the demo's data and outputs.")] = Path(
        "fairmon-demo"
    ),
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Also the labelers (SDT), envy-freeness and Coat reachability audits: every audit family, "
            "two to three times as long.",
        ),
    ] = False,
) -> None:
    """Run fairmon on bundled and simulated data: 14 simulated days with a
    control and three treatment arms (daily REO with CIs beside the truth, and
    the A/B table of seed 001 §4.4), Coat (item attribute gender, rating >= 4)
    and COMPAS (prevalence at the threshold t = 5 and a private audit
    release); well under a minute on two idle cores. With --full also simulated
    labelers (SDT cost ratios), an envy-freeness audit of swap traffic, and
    the reachability and stability of a model trained on Coat. Prints how long
    it takes, then where tables and reports went."""
    prefect_env()
    from fairmon.pipelines.faces.demo import run_demo

    out_or_exit(out)
    run_demo(out.resolve(), console, full=full)


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help='A SELECT over the output tables, e.g. "select * from reo".')],
    config: ConfigOpt = Path("fairmon.toml"),
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help='An object {"columns": [names], "rows": [{column: value}, ...]}; NaN as null.', metavar=""
        ),
    ] = False,
    csv: Annotated[bool, typer.Option("--csv", help="Rows as CSV.", metavar="")] = False,
    limit: Annotated[int, typer.Option(min=1, help="Rows shown in the table view.")] = 50,
) -> None:
    """Query the published outputs with DuckDB SQL, read-only. Works while a
    run holds the project's DuckDB file: the tables are read from the
    warehouse's Parquet files. Views: one per output table (reo, reo_group,
    reo_ab, group_counts, ...) and, for the estimate tables, <table>_published
    (days whose latest run published; `fairmon tables` names each table's
    view). Quote the reserved words group and table: "group"."""
    import duckdb
    import polars as pl

    from fairmon.pipelines.faces.fitting import Fit
    from fairmon.pipelines.storage.warehouse import query_warehouse

    cfg = load_or_exit(config)
    try:
        frame, note = query_warehouse(cfg.duckdb_path, cfg.warehouse_path, query)
    except (duckdb.Error, ValueError) as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        if isinstance(e, duckdb.ParserException) and re.search(r'(?<!["\w])group\b(?!\s+by\b)', query, re.I):
            err.print('hint: a column named group is written "group" in SQL (GROUP is a keyword)', markup=False)
        raise typer.Exit(EXIT_USAGE) from None
    if note:
        err.print(f"[yellow]note:[/yellow] {escape(note)}")
    if as_json:
        dump_json({"columns": frame.columns, "rows": frame.to_dicts()})
    elif csv:
        sys.stdout.write(frame.write_csv())
    else:
        # said under the table, not as its title: a split table leaves out key columns whose value its title holds
        caption = f"{frame.height} row(s); numbers to 6 significant digits (--csv or --json: every digit)"
        t = Table(caption=caption, caption_justify="left", title_justify="left")
        for c, dtype in frame.schema.items():  # text may wrap; a number or a date is printed whole
            t.add_column(c, overflow="fold" if dtype == pl.String else "ellipsis")
        for row in frame.head(limit).iter_rows():
            t.add_row(*(escape("" if v is None else f"{v:.6g}" if isinstance(v, float) else str(v)) for v in row))
        console.print(Fit(t))  # too wide: in parts that repeat the key columns, never a number cut
        if frame.height > limit:
            console.print(f"... {frame.height - limit} more (--limit, --csv or --json for all)", markup=False)


@app.command()
def alerts(
    config: ConfigOpt = Path("fairmon.toml"),
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="First day, YYYY-MM-DD (default: 30 days before the latest alert's day, and older ones still open).",
        ),
    ] = None,
    only_open: Annotated[
        bool, typer.Option("--open", help="Only the alerts open now, however old (what is alerting).", metavar="")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """List the alerts raised (exceeds, back_within, ab_change, quarantined,
    failed, budget_low), newest day last, each with its evidence and whether
    its notifications were delivered. Every run, backfill and audit release
    brings them up to date and sends the new ones to the URLs of [alerts]
    notify. Over any [alerts] horizon_days days (90), a system whose true
    REO stays at or below the line raises an exceeds alert with probability
    at most [alerts] alpha (0.05); docs "Alerts"."""
    from fairmon.api.published import read_table
    from fairmon.pipelines.executor.alerting import still_open_alerts
    from fairmon.pipelines.faces.views import alert_head

    cfg = load_or_exit(config)
    first = parse_date(since, "--since") if since else None
    try:
        frame = read_table(cfg, "alerts", first)
    except RuntimeError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(EXIT_USAGE) from None
    import polars as pl

    history = still_open_alerts(cfg, frame)
    still_open, published = history if history is not None else (None, None)
    if only_open and still_open is None:
        err.print("[red]error:[/red] which alerts are open needs the run history: a run holds the DuckDB file")
        raise typer.Exit(EXIT_LOCKED)
    is_open = pl.col("alert_id").is_in(sorted(still_open or ()))
    if only_open:
        frame = frame.filter(is_open)
    elif first is None and frame.height:  # the last 30 days, and what is still open from before them
        frame = frame.filter((pl.col("ds") >= frame["ds"].max() - dt.timedelta(days=30)) | is_open)
    rows = frame.drop("run_id").to_dicts() if frame.height else []
    if as_json:  # delivery as the object it is ({"notify[0]": true}), not its JSON text; open as the text says it
        dump_json({"alerts": [_alert_json(r, still_open) for r in rows]})
        return
    if not rows:
        said = (
            "no alert open now" if only_open
            else f"no alert raised since {first} (one raised before may still be open: --open)" if first
            else "no alerts"
        )  # fmt: skip
        console.print(said + ("" if cfg.alerts.enabled else "; alerts are off ([alerts] enabled = false)"))
        return
    for a in rows:
        sent = "" if a["delivered"] is not False else " [yellow](notification not delivered yet)[/yellow]"
        closed = still_open is not None and a["kind"] != "back_within" and a["alert_id"] not in still_open
        waiting = ", ".join(map(str, (still_open or {}).get(a["alert_id"], [])))
        state = " [green](closed)[/green]" if closed else f" [red](not published yet: {waiting})[/red]" * bool(waiting)
        if closed and a["kind"] in ("quarantined", "failed") and a["ds"] not in published:  # closed: history read
            state = f" [yellow](closed: a later day published; {a['ds']} itself is still not published)[/yellow]"
        console.print(f"{alert_head(a)}{sent}{state}", soft_wrap=True)
    off = "" if cfg.alerts.enabled else "; alerts are off now ([alerts] enabled = false)"
    console.print(
        f"{len(rows)} {'open ' if only_open else ''}alert(s){off}; fairmon sql -c {config} 'select * from alerts' "
        "for every column",
        markup=False,
    )


def _alert_json(row: dict, still_open: dict | None) -> dict:
    """An ``alerts`` row for ``--json``: ``delivery`` as an object; ``open`` (null for ``back_within``, which
    closes another, or when the run history is locked) and ``waiting``, the days of a quarantined or failed
    alert not published yet, as the text listing says them."""
    known = still_open is not None and row["kind"] != "back_within"
    waiting = [str(d) for d in (still_open or {}).get(row["alert_id"], [])]
    delivery = json.loads(row["delivery"]) if row["delivery"] else None
    return {**row, "delivery": delivery, "open": row["alert_id"] in still_open if known else None, "waiting": waiting}


@app.command()
def init(
    fmt: Annotated[str, typer.Option("--format", help="Input format: tiktok, contract or coat.")] = "tiktok",
    out: Annotated[Path, typer.Option("--out", "-o", help="Config file to write.")] = Path("fairmon.toml"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.", metavar="")] = False,
) -> None:
    """Write a commented starter config for an input format; edit its paths,
    signals and attributes, then `fairmon run --date YYYY-MM-DD`."""
    from fairmon.pipelines.faces.templates import FORMATS, config_template

    if fmt not in FORMATS:
        raise typer.BadParameter(f"{fmt!r}: choose one of {', '.join(FORMATS)}", param_hint="--format")
    if out.exists() and not force:
        err.print(f"[red]error:[/red] {out} exists (--force to overwrite)")
        raise typer.Exit(EXIT_USAGE)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(config_template(fmt))
    console.print(f"wrote {out} ({fmt} format); check it with: fairmon run --date YYYY-MM-DD -c {out}", markup=False)


@app.command()
def tables(
    name: Annotated[str | None, typer.Argument(help="One output table, e.g. reo (default: every table).")] = None,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Markdown, as docs/tables.md (NAME: its section).", metavar="")
    ] = False,
) -> None:
    """Print the data dictionary of the output tables from the installed
    registry: each table's key, gate, published view and source, and every
    column with its type, unit, checks and meaning. Unknown NAME: exit 2."""
    from fairmon.pipelines.storage.ddl import column_checks, duckdb_type, table_markdown, tables_markdown
    from fairmon.transforms.registry import TABLES

    if name is not None and name not in TABLES:
        err.print(f"[red]error:[/red] no output table {escape(name)!r}; known: {', '.join(TABLES)}")
        raise typer.Exit(EXIT_USAGE)
    if markdown:
        sys.stdout.write(tables_markdown() if name is None else table_markdown(name))
        return
    for t in TABLES.values() if name is None else [TABLES[name]]:
        view = f"{t.name}_published" if t.published_view else "none"
        gate = "generated checks" + (f" and expectations/{t.suite}.json" if t.suite else "")
        caption = f"key: {', '.join(t.key)}; gate: {gate}; published view: {view}; source: {t.source}"
        rows = [(c.name, duckdb_type(c.dtype), c.unit, column_checks(c), c.meaning) for c in t.stored_columns]
        heads = ("column", "type", "unit", "checks")  # each column's widest cell or header, its border and padding
        fixed = sum(max(len(heads[i]), *(len(r[i]) for r in rows)) + 3 for i in range(4)) + 4
        if console.width - fixed < MEANING_WIDTH:  # a narrow terminal: each column's meaning under its line
            _dictionary_list(f"{t.name}: {t.description}", caption, rows)
            continue
        rt = Table(title=f"{t.name}: {t.description}", title_justify="left", caption=caption, caption_justify="left")
        for col, kw in (("column", {}), ("type", {}), ("unit", {}), ("checks", {}), ("meaning", {"ratio": 1})):
            rt.add_column(col, no_wrap=col != "meaning", **kw)
        for row in rows:
            rt.add_row(*row[:2], escape(row[2]), row[3], escape(row[4]))
        console.print(rt)


#: Fewest characters a line of ``fairmon tables`` leaves a column's meaning before it lists instead of tabulating.
MEANING_WIDTH = 40


def _dictionary_list(title: str, caption: str, rows: list[tuple[str, str, str, str, str]]) -> None:
    """``fairmon tables`` for a narrow terminal: the table's title and caption, then per column a
    line of its name, type, unit and checks and its meaning indented below, wrapped to the width."""
    from rich.padding import Padding
    from rich.text import Text

    console.print(Text(title, style="bold"))
    console.print(Text(caption, style="italic"))
    for name, dtype, unit, checks, meaning in rows:
        head = Text(name, style="bold")
        head.append(f"  {dtype}" + (f"  unit: {unit}" if unit != "-" else ""))
        head.append(f"  checks: {checks}" if checks else "")
        console.print(head)
        console.print(Padding(Text(meaning), (0, 0, 0, 4)))
