"""``fairmon demo``: 14 simulated days, Coat and COMPAS end to end; ``--full`` adds every audit family."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.table import Table
from rich.text import Text

from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.faces.demo_notes import coverage_lines, dp_edge_note, undefined_methods_note
from fairmon.pipelines.faces.fitting import Fit
from fairmon.pipelines.faces.views import (
    drop_empty_columns,
    fmt,
    prevalence_table,
    reo_table,
    run_days_with_progress,
    run_summary,
    sdt_view,
)
from fairmon.pipelines.ingest.snapshots import write_coat_reach_project
from fairmon.pipelines.privacy.audit_release import export_release
from fairmon.pipelines.report.report import build_report
from fairmon.pipelines.report.report_data import envy_findings, reach_findings
from fairmon.pipelines.report.report_words import pfmt
from fairmon.pipelines.simulation.simulated import write_envy_simulation, write_labeling_simulation, write_simulation
from fairmon.pipelines.storage.warehouse import read_table
from fairmon.resources import data_dir
from fairmon.transforms.simulators.impressions import SimulationSpec
from fairmon.transforms.simulators.labelers import LabelingSpec

DEMO_START = dt.date(2026, 1, 1)
COAT_DS = dt.date(2016, 6, 19)  # Coat has no dates; the demo assigns this one day

COMPAS_DS = dt.date(2014, 12, 31)  # the last screening day; a 730-day window covers 2013-2014
COMPAS_CONFIG = """# fairmon config for the COMPAS score log (ProPublica, Broward County 2013-2014)
warehouse = "warehouse"
duckdb = "fairmon.duckdb"

[scores]
format = "compas"
path = "{compas}"
attributes = ["race", "sex", "age_cat"]
window_days = 730
propublica_filter = true

[[scores.thresholds]]
model = "compas"
t = 5
d = 3

[audit]                      # differentially private audit release (seed 000 §5)
total_epsilon = 1.0
qualified_outcome = false    # qualified = not re-arrested within two years
alpha = 0.3
delta = 0.05
score_values = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]   # the declared score set Y: COMPAS deciles
groups = {{ sex = ["Female", "Male"] }}          # group sizes released with noise (epsilon/2)
"""

COAT_CONFIG = """# fairmon config for the Coat data set (Schnabel et al., ICML 2016)
warehouse = "warehouse"
duckdb = "fairmon.duckdb"

[impressions]
format = "coat"
path = "{coat_dir}"
ds = {ds}
min_rating = 4
signals = ["liked"]
attributes = ["gender", "jackettype", "user_gender"]
intersections = [["gender", "user_gender"]]   # coat gender × shopper gender: small cells, flagged as such
random_window_days = 1

[estimation]
rsp = true                         # exposure parity (seed 001 App. H.1)
user_attributes = ["user_gender"]  # user-side precision (App. H.2); not an item attribute for rsp
"""


#: Seed 001 §4.4: the control favours young adults (group 1); treatments reweight exposure.
ARMS = {"control": {}, "deboost_1.25": {0: 1.25}, "deboost_2": {0: 2.0}, "boost_2": {1: 2.0}}
EXPECTED = {"deboost_1.25": "lower", "deboost_2": "higher", "boost_2": "higher"}  # seed 001 Fig. 9


def ab_table(rows: list[dict], truth: dict) -> Table:
    """Seed 001 §4.4 table: D_REO per treatment, its CI by each method, expected and observed direction."""
    t = Table(title="A/B: D_REO = REO(treatment) − REO(control), last day (seed 001 §4.4)", title_justify="left")
    for col in (
        "treatment",
        "truth",
        "D_REO",
        "CI delta",
        "p",
        "q",
        "CI paper",
        "CI partition",
        "CI bootstrap",
        "expected",
        "observed",
    ):
        t.add_column(col, justify="left" if col in ("treatment", "expected", "observed") else "right")
    reo_rows = [r for r in rows if r["metric"] == "reo"]
    for treatment in [a for a in ARMS if a != "control"]:
        by = {r["method"]: r for r in reo_rows if r["treatment"] == treatment}
        if "delta" not in by:
            continue
        d = by["delta"]

        def ci(m, by=by):
            return f"[{fmt(by[m]['ci_low'])}, {fmt(by[m]['ci_high'])}]" if m in by else "-"

        observed = "lower" if d["ci_high"] < 0 else "higher" if d["ci_low"] > 0 else "no change"
        ok = "green" if observed == EXPECTED[treatment] else "red"
        t.add_row(
            treatment,
            fmt(truth[treatment]),
            fmt(d["diff"]),
            ci("delta"),
            pfmt(d["p_value"]),
            pfmt(d["q_value"]) if d.get("q_value") is not None else "-",
            ci("delta_paper"),
            ci("partition"),
            ci("bootstrap"),
            EXPECTED[treatment],
            f"[{ok}]{observed}[/{ok}]",
        )
    return t


def stage_lines(cfg, ds, truth_path: Path) -> str:
    """One line per stage of the control arm on day ``ds``: the published
    stage REO with its CI (reo_stage, seed 001 App. I.4) beside the truth, and
    which stage's interval excludes parity."""
    from fairmon.pipelines.storage.warehouse import read_table

    t = read_table(cfg.warehouse_path, "reo_stage")
    t = t.filter((pl.col("ds") == ds) & (pl.col("arm") == "control")).unique("stage")
    truth = {
        r["stage"]: r["reo"] for r in pl.read_csv(truth_path).filter(pl.col("arm") == "control").iter_rows(named=True)
    }
    lines = [f"Stage-wise REO of the control arm on {ds} (post-recall traffic, seed 001 App. I.4):"]
    for stage in ("recall", "ranking", "system"):
        r = t.filter(pl.col("stage") == stage).row(0, named=True) if stage in t.get_column("stage") else None
        if r is None:
            lines.append(f"  {stage:8s} not published")
            continue
        side = "excludes parity" if r["reo_ci_low"] > 0 else "consistent with parity"
        lines.append(
            f"  {stage:8s} REO {r['reo']:.3f} [{r['reo_ci_low']:.3f}, {r['reo_ci_high']:.3f}] "
            f"(truth {truth[stage]:.3f}): {side}"
        )
    return "\n".join(lines)


def section(console: Console, title: str) -> None:
    """A rule headed by ``title``; a title longer than the line goes under a bare rule, whole."""
    if Text(title).cell_len + 6 <= console.width:
        console.rule(title)
    else:
        console.rule()
        console.print(title, style="bold", markup=False)


def _run(console: Console, config_path: Path, days: list[dt.date]):
    """Load one demo config once, run its days under a progress bar that
    follows the run's stages (elapsed time, reachability's users solved),
    print the run summary. Returns (config, summaries)."""
    from fairmon.pipelines.orchestration.prefect_settings import api_configured

    cfg = load_config(config_path)
    options = dict(
        show_progress=True, follow_log=True, prefect=api_configured()
    )  # no Prefect server the demo does not need
    results = run_days_with_progress(console, cfg, days, config_path=str(config_path), **options)
    console.print(Fit(run_summary(results)))
    return cfg, results


def _report(console: Console, cfg, start: dt.date, end: dt.date, config_name: str = "") -> Path:
    """:func:`build_report` under a status line (a report with many figures takes seconds)."""
    with console.status(f"writing the report for {start}..{end}"):
        return build_report(cfg, start, end, config_name=config_name)


def envy_cfg_table(cfg, name: str) -> pl.DataFrame:
    """A published table of the demo's envy project (all days)."""
    return read_table(cfg.warehouse_path, name)


def run_demo(out: Path, console: Console, full: bool = False) -> None:
    """Write and run the demo under ``out``; print REO tables and output paths.

    By default three parts (:data:`DEFAULT_PARTS`: simulated A/B traffic,
    Coat, COMPAS), the REO family a first user starts with; ``full`` adds
    :data:`FULL_PARTS` (labelers, envy-freeness, Coat's reachability), every
    audit family. Each part has its own folder, config, DuckDB file and
    warehouse. Says first how long the run takes and last how long it took;
    exits 1 (SystemExit) when any day of any part did not publish, so a
    broken demo never looks like a working one."""
    console.print(duration_note(full), markup=False)
    started = time.perf_counter()
    parts = [part(out, console) for part in (*DEFAULT_PARTS, *(FULL_PARTS if full else ()))]
    section(console, "outputs")
    for folder, _, _ in parts:
        console.print(
            f"{PART_NAMES[folder.name]}: tables under {folder / 'warehouse'} (ds=YYYY-MM-DD partitions), "
            f"DuckDB file {folder / 'fairmon.duckdb'}"
        )
    console.print("reports (open offline in a browser): " + "  ".join(str(r) for _, _, r in parts), markup=False)
    sim = parts[0][0]
    console.print(
        f"data-quality Data Docs: {sim / 'gx' / 'uncommitted' / 'data_docs' / 'local_site' / 'index.html'}",
        markup=False,
    )
    console.print(took_line(time.perf_counter() - started, cpu_seconds(), full), markup=False)
    failed = [r for _, results, _ in parts for r in results if r["status"] != "published"]
    if failed:
        raise SystemExit(1)


def duration_note(full: bool) -> str:
    """What the demo runs and roughly how long it takes, printed before anything else, so a
    user knows whether to wait. Rough on purpose (the measured figures, with the machine's load, are in
    bench/README.md "Demo cost"): the default parts simulate and count a few hundred thousand rows; the
    reachability part trains a grid of matrix factorisations and solves a program per user."""
    if full:
        return (
            "fairmon demo --full: six parts (simulated A/B traffic, Coat, COMPAS, labelers, envy-freeness, "
            "Coat reachability); about a minute on two idle cores, half of it the reachability audit."
        )
    return (
        "fairmon demo: three parts (simulated A/B traffic, Coat, COMPAS); well under a minute on two idle "
        "cores. fairmon demo --full adds labelers (SDT), an envy-freeness audit and Coat's reachability audit, "
        "two to three times as long."
    )


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of the child processes it waited for: the whole
    demo's cost on a busy machine, where the elapsed time says more about the other processes."""
    cpu = time.process_time()
    try:
        import resource
    except ImportError:  # Windows: this process only
        return cpu
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return cpu + children.ru_utime + children.ru_stime


def took_line(elapsed: float, cpu: float, full: bool) -> str:
    """The demo's last line: how long it took, elapsed and in CPU seconds, and what ``--full`` would add."""
    minutes, seconds = divmod(round(elapsed), 60)
    wall = f"{minutes} min {seconds} s" if minutes else f"{seconds} s"
    more = "" if full else "; fairmon demo --full adds labelers, envy-freeness and Coat reachability"
    return f"the demo took {wall} ({cpu:.0f} CPU-s, this process and the ones it started){more}"


def _simulated_part(out: Path, console: Console) -> tuple[Path, list[dict], Path]:
    """Part 1: 14 simulated days, a control and three treatment arms (seed 001 §4.4): daily REO
    beside the truth, the A/B table and the stage table. Returns (folder, day results, report)."""
    # A post-recall stage at parity (recall U = 1.1 for both groups): the ranking stage creates the
    # disparity, and the reo_stage table (seed 001 App. I.4) says so.
    spec = SimulationSpec(
        start=DEMO_START,
        days=14,
        arms=ARMS,
        seed=7,
        post_recall_rows_per_day=20_000,
        recall_share=(0.5, 0.5),
        recall_rate=(0.275, 0.308),
    )
    sim = out / "sim"
    section(console, "1. simulated TikTok-format traffic: 14 days, a control arm and three treatments (seed 001 §4.4)")
    # pools of 7 days, as in the published TikTok data set: every pool meeting a day's window counts
    # (DESIGN §2 "Random-traffic windows"; reo.look_ahead marks the days whose pool reaches past them)
    with console.status("writing 14 simulated days (4 arms, 50,000 rows each) and their random pools"):
        paths = write_simulation(spec, sim, "parquet", pool_policy="overlap")
    days = [spec.start + dt.timedelta(days=i) for i in range(spec.days)]
    sim_cfg, results = _run(console, paths["config"], days)
    truth = {
        (str(r["ds"]), r["arm"], r["attribute"]): r["reo"]
        for r in pl.read_csv(paths["truth_reo"]).iter_rows(named=True)
    }
    rows = [row for r in results if r["status"] == "published" for row in r["reo"] if row["arm"] == "control"]
    console.print(
        Fit(
            drop_empty_columns(
                reo_table(
                    rows,
                    "Daily REO of the control arm (random traffic: the 7-day pools meeting each day's 7-day window)",
                    truth,
                )
            )
        )
    )
    every_arm = [row for r in results if r["status"] == "published" for row in r["reo"]]
    with console.status("simulating days with independent random pools for the coverage reference"):
        lines = coverage_lines(every_arm, paths["truth_groups"])
    for line in lines:
        console.print(line)
    last = [r for r in results if r["status"] == "published"][-1]
    true_d = {
        a: truth[(str(last["ds"]), a, "young_adult")] - truth[(str(last["ds"]), "control", "young_adult")]
        for a in ARMS
        if a != "control"
    }
    console.print(Fit(drop_empty_columns(ab_table(last["reo_ab"], true_d))))
    reo_ab = [r for r in last["reo_ab"] if r["metric"] == "reo"]
    note = undefined_methods_note(
        reo_ab, {"delta_paper": "CI paper", "partition": "CI partition", "bootstrap": "CI bootstrap"}
    )
    if note:
        console.print(f"[dim]{note}[/dim]")
    console.print(stage_lines(sim_cfg, last["ds"], paths["truth_stages"]))
    sim_report = _report(console, sim_cfg, days[0], days[-1], config_name=str(paths["config"]))
    return sim, results, sim_report


def _coat_part(out: Path, console: Console) -> tuple[Path, list[dict], Path]:
    """Part 2: Coat, self-selected ratings as default traffic and random ratings as random traffic."""
    section(console, "2. Coat: self-selected ratings = default traffic, random ratings = random traffic")
    coat = out / "coat"
    coat.mkdir(parents=True, exist_ok=True)
    cfg = coat / "fairmon.toml"
    cfg.write_text(COAT_CONFIG.format(coat_dir=data_dir("coat").as_posix(), ds=COAT_DS.isoformat()))
    coat_cfg, coat_results = _run(console, cfg, [COAT_DS])
    if coat_results[0]["status"] == "published":
        console.print(Fit(drop_empty_columns(reo_table(coat_results[0]["reo"], "Coat REO (label: rating >= 4)"))))
    coat_report = _report(console, coat_cfg, COAT_DS, COAT_DS, config_name=str(cfg))
    return coat, coat_results, coat_report


def _compas_part(out: Path, console: Console) -> tuple[Path, list[dict], Path]:
    """Part 3: COMPAS, prevalence at the threshold and an ε-DP audit release (seeds 002, 000);
    a fresh folder each time, so the demo never exhausts its privacy ledger."""
    section(console, "3. COMPAS: prevalence at the threshold t = 5 (d = 3), ProPublica filter on (seed 002 §5.1)")
    compas = out / "compas"
    if compas.exists():  # a fresh privacy ledger per demo run: the demo spends ε = 0.5 of COMPAS' 1.0 each time
        shutil.rmtree(compas)
        console.print(
            "[dim]the COMPAS part starts from a fresh folder, so its privacy ledger is new (public data; "
            "never reset a real data set's ledger)[/dim]"
        )
    compas.mkdir(parents=True, exist_ok=True)
    ccfg = compas / "fairmon.toml"
    ccfg.write_text(COMPAS_CONFIG.format(compas=(data_dir("compas") / "compas_two_year.csv").as_posix()))
    compas_cfg, compas_results = _run(console, ccfg, [COMPAS_DS])
    if compas_results[0]["status"] == "published":
        rows = [r for r in compas_results[0]["threshold_prevalence"] if r["attribute"] in ("race", "sex")]
        console.print(
            Fit(
                drop_empty_columns(
                    prevalence_table(
                        rows,
                        "COMPAS: outcome rate at the decision threshold and implied cost "
                        "ratio c = (1 - p)/p, screenings 2013-2014",
                    )
                )
            )
        )
    if compas_results[0]["status"] == "published":
        rel = export_release(compas_cfg, COMPAS_DS, "sex", "compas", 0.5, out=compas / "releases" / "compas_sex.json")
        console.print(
            f"ε-DP audit release (ε = 0.5 of 1.0): score histograms of qualified people by sex, "
            f"EFG = {rel['efg']:.4f}, FG in [{rel['fg_interval'][0]:.3f}, {rel['fg_interval'][1]:.3f}] "
            f"-> decision at α = {rel['alpha']}: [bold]{rel['decision']}[/bold]; {compas / 'releases'}"
        )
        edge = dp_edge_note(rel)
        if edge:
            console.print(edge)
    compas_report = _report(console, compas_cfg, COMPAS_DS, COMPAS_DS, config_name=str(ccfg))  # with the release
    return compas, compas_results, compas_report


def _labels_part(out: Path, console: Console) -> tuple[Path, list[dict], Path]:
    """Part 4: simulated labelers with known d' and criteria per content group (seed 002 §5.3)."""
    section(console, "4. simulated labelers: known d' and criteria per content group (seed 002 §5.3)")
    labels = out / "labels"
    lspec = LabelingSpec(start=DEMO_START, days=7, items_per_day=20_000, gold_rate=0.8, seed=3)
    with console.status("writing 7 days of simulated labels"):
        lpaths = write_labeling_simulation(lspec, labels)
    lds = DEMO_START + dt.timedelta(days=6)
    labels_cfg, label_results = _run(console, lpaths["config"], [lds])
    if label_results[0]["status"] == "published":
        truth_l = {
            (r["labeler_id"], r["group"]): r["cost_ratio"] for r in pl.read_csv(lpaths["truth"]).iter_rows(named=True)
        }
        console.print(
            Fit(
                drop_empty_columns(
                    sdt_view(
                        label_results[0]["sdt"],
                        "Labelers over 7 days (q: Benjamini–Hochberg; red = q < 0.05, differs from the other labelers)",
                    )
                )
            )
        )
        console.print("true cost ratios: " + ", ".join(f"{lab}/{g} {c:.2f}" for (lab, g), c in sorted(truth_l.items())))
    labels_report = _report(console, labels_cfg, lds, lds, config_name=str(lpaths["config"]))
    return labels, label_results, labels_report


def _envy_part(out: Path, console: Console) -> tuple[Path, list[dict], Path]:
    """Part 5: an envy-freeness audit of simulated swap traffic with a known verdict (seed 004)."""
    section(console, "5. envy-freeness audit: swap traffic from a recommender with known preferences (seed 004)")
    envy = out / "envy"
    with console.status("writing 4 days of simulated swap traffic"):
        epaths = write_envy_simulation(envy, scenario="envious", days=4, start=DEMO_START, seed=0)
    etruth = json.loads(epaths["truth"].read_text())
    edays = [DEMO_START + dt.timedelta(days=i) for i in range(4)]
    envy_cfg, envy_results = _run(console, epaths["config"], edays)
    console.print(
        f"true verdict (truth_envy.json): {etruth['verdict']}; the run summary above shows fairmon's", markup=False
    )
    envy_report = _report(console, envy_cfg, edays[0], edays[-1], config_name=str(epaths["config"]))
    for line in envy_findings(envy_cfg_table(envy_cfg, "envy_audit"), envy_cfg_table(envy_cfg, "group_envy"))[1:-1]:
        console.print(line)
    return envy, envy_results, envy_report


def _reach_part(out: Path, console: Console) -> tuple[Path, list[dict], Path]:
    """Part 6: reachability and stability of a biased MF trained on Coat, audited as a snapshot (seed 003)."""
    section(
        console, "6. reachability and stability: a biased MF trained on Coat, audited as a model snapshot (seed 003)"
    )
    reach = out / "coat-reach"
    with console.status("training a biased matrix factorisation on Coat (a grid of ranks and ridges)"):
        summary = write_coat_reach_project(reach, COAT_DS, data_dir("coat"))
    console.print(
        f"trained rank {summary['rank']}, ridge {summary['lam']} (test RMSE {summary['test_rmse']:.3f} on Coat's "
        f"random-exposure ratings); snapshot {reach / 'snapshots' / COAT_DS.isoformat()}"
    )
    reach_cfg, reach_results = _run(console, Path(summary["config"]), [COAT_DS])
    reach_report = _report(console, reach_cfg, COAT_DS, COAT_DS, config_name=summary["config"])
    wh = reach_cfg.warehouse_path
    for line in reach_findings(
        read_table(wh, "reach_item"), read_table(wh, "reach_user"), read_table(wh, "stability_user"),
        read_table(wh, "reach_group"),
    ):  # fmt: skip
        console.print(line)
    return reach, reach_results, reach_report


#: The default demo's parts, in order: the REO family (daily REO, A/B, Coat) and COMPAS with a private release.
DEFAULT_PARTS = (_simulated_part, _coat_part, _compas_part)
#: What ``fairmon demo --full`` adds: the other audit families (seeds 002 §5.3, 004, 003).
FULL_PARTS = (_labels_part, _envy_part, _reach_part)
#: Each part's folder under the demo's ``--out`` and the name the outputs list gives it.
PART_NAMES = {
    "sim": "simulation", "coat": "coat", "compas": "compas", "labels": "labels", "envy": "envy",
    "coat-reach": "coat-reach",
}  # fmt: skip
