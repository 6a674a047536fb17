"""The pre-flight check (issue 41 item 2): a newcomer's file mistakes found
from listings and headers before Prefect or GX start, and the gate's
failures naming what to act on (columns, groups, traffic, keys)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import fairmon
from fairmon.pipelines.checks.suites import DQResult, dq_frame
from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.executor.alerting import update_alerts_logged
from fairmon.pipelines.executor.day_checks import explain_groups
from fairmon.pipelines.executor.publishing import finish_record, publish, start_record
from fairmon.pipelines.faces.cli import EXIT_QUARANTINED, app
from fairmon.pipelines.ingest.preflight import duplicated_keys, explain_raw, preflight, read_header
from fairmon.pipelines.storage.warehouse import latest_runs, read_table

D1, D2 = dt.date(2026, 1, 1), dt.date(2026, 1, 2)
HEADER = "request_id,item_id,young_adult,like_video,share"
ROWS = ["r1,v1,1,1,0", "r2,v2,0,0,1", "r3,v3,1,0,0"]

TIKTOK = """warehouse = "warehouse"
duckdb = "f.duckdb"
[impressions]
format = "tiktok"
path = "default/{ds}.csv"
random_path = "random/random_{start}_{end}.csv"
signals = ["like_video", "share"]
attributes = ["young_adult"]
random_window_days = 1
"""


def _project(root: Path, extra: str = "") -> Path:
    """A TikTok-layout project of days D1 and D2, written by hand: a default file per day, a random pool per day."""
    for d in (D1, D2):
        for path in (root / "default" / f"{d}.csv", root / "random" / f"random_{d}_{d}.csv"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join([HEADER, *ROWS]) + "\n")
    (root / "fairmon.toml").write_text(TIKTOK + extra)
    return root / "fairmon.toml"


def _only(found, ds=D1):
    (f,) = found[ds]
    return f


def test_a_good_project_has_no_findings(tmp_path):
    assert preflight(load_config(_project(tmp_path)), [D1, D2]) == {}


def test_a_misnamed_column_lists_the_files_columns_the_key_and_a_close_match(tmp_path):
    cfg = load_config(_project(tmp_path))
    (tmp_path / "default" / f"{D1}.csv").write_text(HEADER.replace("like_video", "like") + "\n" + ROWS[0] + "\n")
    found = preflight(cfg, [D1, D2])
    assert list(found) == [D1]  # D2's files are fine
    f = _only(found)
    assert (f.check, f.file, f.source) == ("column_exists[like_video]", f"default/{D1}.csv", "impressions")
    assert "has no column 'like_video' (did you mean 'like'?), named by [impressions] signals" in f.message
    assert "its columns: request_id, item_id, young_adult, like, share" in f.message


def test_a_missing_attribute_names_its_key_and_a_contract_column_its_format(tmp_path):
    cfg = load_config(_project(tmp_path))
    (tmp_path / "default" / f"{D1}.csv").write_text("request_id,item_id,like_video,share\nr1,v1,1,0\n")
    assert "'young_adult', named by [impressions] attributes" in _only(preflight(cfg, [D1])).message
    contract = tmp_path / "c"
    (contract / "in").mkdir(parents=True)
    (contract / "in" / f"{D1}.csv").write_text("ds,arm,s1,grp\n2026-01-01,a,1,x\n")  # no traffic column
    (contract / "f.toml").write_text(
        'warehouse = "w"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\npath = "in/{ds}.csv"\n'
        'signals = ["s1"]\nattributes = ["grp"]\n'
    )
    f = _only(preflight(load_config(contract / "f.toml"), [D1]))
    assert f.check == "column_exists[traffic]"
    assert 'a fixed column of [impressions] format = "contract"' in f.message and "add the column" in f.message


def test_a_file_without_the_configured_cluster_id_is_found_before_ingest(tmp_path):
    # cluster_by = "user_id" needs the column in every impressions file; ingest would stop on it (exit 4)
    cfg = load_config(_project(tmp_path, '[estimation]\ncluster_by = "user_id"\n'))
    found = preflight(cfg, [D1])
    assert {f.check for f in found[D1]} == {"cluster_column"} and len(found[D1]) == 2  # default file and pool
    assert "has no column 'user_id', which [estimation] cluster_by = 'user_id'" in found[D1][0].message
    assert "its columns: request_id, item_id, young_adult, like_video, share" in found[D1][0].message
    assert preflight(load_config(_project(tmp_path, '[estimation]\ncluster_by = "request_id"\n')), [D1]) == {}


def test_a_semicolon_delimited_file_is_named_as_such(tmp_path):
    cfg = load_config(_project(tmp_path))
    (tmp_path / "default" / f"{D1}.csv").write_text(HEADER.replace(",", ";") + "\n" + ROWS[0].replace(",", ";"))
    f = _only(preflight(cfg, [D1]))
    assert f.check == "column_exists[like_video], column_exists[share], column_exists[young_adult]"
    assert f"default/{D1}.csv looks ';'-delimited: its header is one column, 'request_id;item_id;" in f.message
    assert "re-export it with ','" in f.message


def test_latin1_utf16_and_empty_files(tmp_path):
    cfg = load_config(_project(tmp_path))
    day = tmp_path / "default" / f"{D1}.csv"
    day.write_bytes((HEADER + "\nr1,v1,caf\xe9,1,0\n").encode("latin-1"))
    f = _only(preflight(cfg, [D1]))
    assert f.check == "readable" and "not UTF-8 (byte 0xe9 on line 2" in f.message
    day.write_bytes((HEADER + "\n" + ROWS[0]).encode("utf-16"))
    assert "UTF-16" in _only(preflight(cfg, [D1])).message
    day.write_bytes(b"")
    assert _only(preflight(cfg, [D1])).check == "has_rows"
    day.write_bytes(("\ufeff" + HEADER + "\n" + ROWS[0]).encode("utf-8"))  # a UTF-8 byte-order mark is fine
    assert read_header(day)[0] == HEADER.split(",") and preflight(cfg, [D1]) == {}


def test_a_missing_day_file_names_the_path_and_key_unless_made_a_warning(tmp_path):
    toml = _project(tmp_path)
    (tmp_path / "default" / f"{D2}.csv").unlink()
    f = _only(preflight(load_config(toml), [D1, D2]), D2)
    assert f.check == "default_traffic_present"
    assert f.message == (
        f"no default-traffic file for {D2}: default/{D2}.csv does not exist "
        f"([impressions] path = 'default/{{ds}}.csv', {{ds}} = {D2})"
    )
    toml.write_text(TIKTOK + '[quality]\nseverity = { default_traffic_present = "warning" }\n')
    assert preflight(load_config(toml), [D2]) == {}  # the gate would not stop the day: neither does this


def test_a_scores_log_names_its_attribute_key(tmp_path):
    toml = _project(tmp_path)
    (tmp_path / "scores").mkdir()
    (tmp_path / "scores" / f"{D1}.csv").write_text("ds,model,item_id,score,outcome\n2026-01-01,m,a,0.3,1\n")
    toml.write_text(
        TIKTOK + '[scores]\npath = "scores/{ds}.csv"\nattributes = ["race"]\n'
        'thresholds = [{model = "m", t = 0.5, d = 0.1}]\n'
    )
    f = _only(preflight(load_config(toml), [D1]))
    assert f.source == "scores" and "'race', named by [scores] attributes" in f.message


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_run_and_backfill_stop_in_preflight_with_exit_1(tmp_path):
    toml = _project(tmp_path)
    for d in (D1, D2):
        (tmp_path / "default" / f"{d}.csv").write_text(HEADER.replace("like_video", "like") + "\n" + ROWS[0] + "\n")
    res = CliRunner().invoke(app, ["run", "-c", str(toml), "-d", str(D1), "--no-prefect"])
    assert res.exit_code == EXIT_QUARANTINED
    assert res.stderr.startswith(f"error: default/{D1}.csv has no column 'like_video' (did you mean 'like'?)")
    assert "pre-flight: nothing ran" in res.stderr
    assert f"alert {D1} quarantined at pre-flight: default/{D1}.csv has no column" in res.stdout  # its alert, at once
    res = CliRunner().invoke(app, ["backfill", "-c", str(toml), "--start", str(D1), "--end", str(D2), "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == doc["exit_code"] == EXIT_QUARANTINED
    assert [(d["ds"], d["status"], d["stage"]) for d in doc["days"]] == [
        (str(D1), "quarantined", "preflight"),
        (str(D2), "quarantined", "preflight"),
    ]
    assert doc["days"][1]["preflight"][0]["check"] == "column_exists[like_video]"
    # nothing ran: the partitions written are each refused day's dq_results (why) and the alert of the refused
    # days (one, the first of two in a row)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("warehouse/*/ds=*")) == [
        f"warehouse/alerts/ds={D1}", f"warehouse/dq_results/ds={D1}", f"warehouse/dq_results/ds={D2}"
    ]  # fmt: skip
    dq = read_table(tmp_path / "warehouse", "dq_results").sort("ds")
    assert dq.select("suite", "subject", "success", "failed_critical").rows() == [
        ("preflight", f"default/{d}.csv", False, "column_exists[like_video]") for d in (D1, D2)
    ]
    assert doc["alerts"] == []  # D2 continues D1's run of refused days: not raised again
    runs = latest_runs(tmp_path / "f.duckdb")  # ...but each refused attempt is recorded
    assert sorted(zip(runs["ds"], runs["status"], strict=True)) == [(D1, "quarantined"), (D2, "quarantined")]
    assert "column_exists" not in runs["detail"][0] and "like_video" in runs["detail"][0]
    # `fairmon alerts` lists the alert as open while a day of its run is refused, closed once both published
    cfg = load_config(toml)
    for ds, closed in ((None, False), (D1, False), (D2, True)):
        if ds is not None:
            recorded, _ = start_record(cfg, "", f"r-{ds}", ds, {"ds": ds})
            finish_record(cfg, f"r-{ds}", ds, recorded, "published", "", {"reo": 2}, {})
        listed = CliRunner().invoke(app, ["alerts", "-c", str(toml)], env={"COLUMNS": "200"})
        assert listed.stdout.startswith(f"{D1} quarantined at pre-flight: default/{D1}.csv has no column")
        assert ("(closed)" in listed.stdout) == closed, (ds, listed.stdout)
        waiting = ", ".join(str(d) for d in (D1, D2) if ds is None or d > ds)  # the run's days still refused
        assert (f"(not published yet: {waiting})" if not closed else "(closed)") in listed.stdout.replace("\n", " ")
        now = CliRunner().invoke(app, ["alerts", "-c", str(toml), "--open"], env={"COLUMNS": "200"}).stdout
        assert now.startswith("no alert open now" if closed else f"{D1} quarantined at pre-flight"), now
        if ds == D1:  # the report's top names the day still refused, not only the alert's first day
            from fairmon.pipelines.report.report import build_report

            page = build_report(cfg, D1, D2, out=tmp_path / "r.html").read_text()
            assert f"raised {D1}; not published yet: {D2}. On {D1}:" in page
            # ...and why that day is refused now, not only the first day's reason (mended since)
            assert f". Now {D2} quarantined at pre-flight: default/{D2}.csv has no column" in page
    # an alert older than the default 30 days is listed while it is open: a failed day 40 days later does not
    # end D1's run of refused days (no day after it published), and hides nothing
    later = D1 + dt.timedelta(days=40)
    for ds, status in ((D1, "quarantined"), (later, "failed")):
        recorded, _ = start_record(cfg, "", f"r2-{ds}", ds, {"ds": ds})
        finish_record(cfg, f"r2-{ds}", ds, recorded, status, "x", {}, {})
    update_alerts_logged(cfg)
    listed = CliRunner().invoke(app, ["alerts", "-c", str(toml)], env={"COLUMNS": "200"}).stdout
    assert [line[:22] for line in listed.splitlines()[:2]] == [f"{D1} quarantined", f"{later} failed: x ("]
    assert f"{later} failed: x (not published yet: {later})" in listed
    assert "(closed)" not in listed


def test_a_day_published_before_and_refused_now_leaves_the_published_views(tmp_path):
    """The worst bug is a stale "passing": a day whose file went missing after it published
    must not stay published because the pre-flight check stopped the run before the gate."""
    cfg = load_config(_project(tmp_path))
    recorded, _ = start_record(cfg, "", "r-old", D1, {"ds": D1})
    passed = dq_frame(D1, [DQResult("impressions", "impressions_raw", f"default/{D1}.csv", 30)])
    publish(cfg, D1, {"dq_results": passed.with_columns(pl.lit("r-old").alias("run_id"))}, False)
    finish_record(cfg, "r-old", D1, recorded, "published", "", {"reo": 2}, {})
    assert latest_runs(cfg.duckdb_path)["status"].to_list() == ["published"]
    (tmp_path / "default" / f"{D1}.csv").unlink()
    day = fairmon.run_day(cfg, D1)
    assert (day["status"], day["stage"]) == ("quarantined", "preflight")
    runs = latest_runs(cfg.duckdb_path)
    assert runs["status"].to_list() == ["quarantined"]
    assert runs["run_id"][0] != "r-old" and f"default/{D1}.csv does not exist" in runs["detail"][0]
    # and its dq_results say why, in place of the earlier run's passing rows
    dq = read_table(cfg.warehouse_path, "dq_results")
    cols = ["ds", "table", "suite", "subject", "success", "n_expectations", "n_failed", "failed_critical", "run_id"]
    assert dq.select(cols).rows() == [
        (D1, "impressions", "preflight", f"default/{D1}.csv", False, 1, 1, "default_traffic_present", runs["run_id"][0])
    ]
    (failure,) = json.loads(dq["details"][0])
    assert failure["note"] == day["preflight"][0]["message"] and f"default/{D1}.csv does not exist" in failure["note"]


@pytest.mark.slow
@pytest.mark.parametrize("alerts", [False, True])
def test_preflight_answers_without_importing_prefect_or_gx(tmp_path, alerts):
    """In a fresh process: the CLI's and fairmon.run_day's pre-flight errors come before Prefect or GX is imported.
    With alerts on, the refused day's quarantined alert is gated (GX) after the error lines are printed."""
    toml = _project(tmp_path)
    if not alerts:
        toml.write_text(toml.read_text() + "\n[alerts]\nenabled = false\n")
    (tmp_path / "default" / f"{D2}.csv").unlink()
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from fairmon.pipelines.faces.cli import app\n"
        f"res = CliRunner().invoke(app, ['run', '-c', {str(toml)!r}, '-d', '{D2}'])\n"
        "import fairmon\n"
        f"day = fairmon.run_day({str(toml)!r}, '{D2}')\n"
        "heavy = sorted(m for m in ('prefect', 'great_expectations') if m in sys.modules)\n"
        "print(res.exit_code, day['status'], day['stage'], heavy)\n"
        "print(res.stderr + res.stdout)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    first, message, *rest = out.stdout.splitlines()
    assert first == ("1 quarantined preflight ['great_expectations']" if alerts else "1 quarantined preflight []")
    assert message.startswith(f"error: no default-traffic file for {D2}: default/{D2}.csv does not exist")
    assert any(line.startswith(f"alert {D2} quarantined") for line in rest) == alerts


def test_raw_failures_name_the_files_columns_and_duplicated_keys(tmp_path):
    cfg = load_config(_project(tmp_path))
    day = tmp_path / "default" / f"{D1}.csv"
    day.write_text("\n".join([HEADER.replace("like_video", "like"), *ROWS, ROWS[1], ROWS[1], ROWS[0]]) + "\n")
    assert duplicated_keys(day) == (["request_id", "item_id"], [("r2", "v2", 3), ("r1", "v1", 2)])
    failures = [
        {"name": "column_exists[like_video]", "severity": "critical"},
        {"name": "column_exists[young_adult]", "severity": "critical"},
        {"name": "ids_unique", "severity": "critical", "unexpected_count": 5, "rows": [1, 2], "sample": [2, 3]},
    ]
    r = explain_raw(cfg, "impressions", day, DQResult("impressions", "impressions_raw", str(day), 9, failures))
    notes = [f["note"] for f in r.failures]
    assert notes == [
        "named by [impressions] signals (did you mean 'like'?); "
        "the file's columns: request_id, item_id, young_adult, like, share",
        "named by [impressions] attributes",
        # ROWS[1] comes back right after ROWS: the first row whose key an earlier row has
        f"key (request_id, item_id) repeated: (r2, v2) ×3, (r1, v1) ×2; first repeat at row {len(ROWS) + 1}",
    ]
    assert "ids_unique (5 unexpected, rows 1, 2: [2, 3]): key (request_id, item_id) repeated" in r.summary()
    assert json.loads(r.row(D1)["details"])[2]["note"] == notes[2]  # in dq_results.details too


def test_day_failures_name_traffic_arm_attribute_and_group():
    frame = pl.DataFrame(
        {
            "traffic": ["default", "default", "random", "random"],
            "arm": ["all"] * 4,
            "attribute": ["young_adult"] * 4,
            "group": ["0", "1", "0", "1"],
            "n": [500, 523, 300, 310],
            "n_pos": [120, 0, 40, 0],
        }
    )
    failures = [
        {"name": "group_has_positives", "severity": "critical", "unexpected_count": 2, "rows": [2, 4], "sample": [0, 0]}
    ]
    r = explain_groups(frame, DQResult("impressions", "impressions_day", "impressions", 5, failures))
    assert r.failures[0]["note"] == (
        "default traffic, arm all, young_adult = 1: n_pos 0 of n 523; "
        "random traffic, arm all, young_adult = 1: n_pos 0 of n 310"
    )
    assert (
        "group_has_positives (2 unexpected, rows 2, 4: [0, 0]): default traffic, arm all, young_adult = 1"
        in r.summary()
    )


def test_rate_and_sufficiency_failures_name_the_rate_and_the_rows_needed():
    frame = pl.DataFrame(
        {
            "traffic": ["default", "random"],
            "arm": ["all", "all"],
            "attribute": ["g", "g"],
            "group": ["a", "b"],
            "n": [10, 290],
            "n_pos": [10, 3],
            "rate": [1.0, 3 / 290],
            "rand_required": [None, 1841.7],
        }
    )
    failures = [
        {"name": "positive_rate_in_bounds", "severity": "critical", "rows": [1]},
        {"name": "random_traffic_sufficient", "severity": "warning", "rows": [2]},
    ]
    r = explain_groups(frame, DQResult("impressions", "impressions_day", "impressions", 5, failures))
    assert [f["note"] for f in r.failures] == [
        "default traffic, arm all, g = a: n_pos 10 of n 10 (rate 1)",
        "random traffic, arm all, g = b: n_pos 3 of n 290 (the window needs 1,842 random rows, seed 001 Thm E.1)",
    ]


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_a_parquet_file_is_checked_from_its_schema_and_a_long_range_prints_twenty_lines(tmp_path):
    root = tmp_path / "p"
    (root / "in").mkdir(parents=True)
    pl.DataFrame({"ds": [str(D1)], "traffic": ["default"], "s1": [True], "group": ["x"]}).write_parquet(
        root / "in" / f"{D1}.parquet"
    )
    (root / "f.toml").write_text(
        'warehouse = "w"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\npath = "in/{ds}.parquet"\n'
        'signals = ["s1"]\nattributes = ["grp"]\n'
    )
    f = _only(preflight(load_config(root / "f.toml"), [D1]))
    assert f.check == "column_exists[grp]" and "(did you mean 'group'?)" in f.message
    assert "its columns: ds, traffic, s1, group" in f.message
    res = CliRunner().invoke(app, ["backfill", "-c", str(root / "f.toml"), "--start", str(D1), "--end", "2026-03-01"])
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert res.exit_code == EXIT_QUARANTINED and len(errors) == 21  # 60 days: 1 column, 59 missing files
    assert errors[-1] == "error: ... and 40 more of the same kind"


def test_ingest_stops_in_preflight_with_exit_1_and_records_nothing(tmp_path):
    toml = _project(tmp_path)
    (tmp_path / "default" / f"{D1}.csv").write_text(HEADER.replace("like_video", "like") + "\n" + ROWS[0] + "\n")
    res = CliRunner().invoke(app, ["ingest", "-c", str(toml), "-d", str(D1)])
    assert res.exit_code == EXIT_QUARANTINED
    assert res.stderr.startswith(f"error: default/{D1}.csv has no column 'like_video' (did you mean 'like'?)")
    assert "pre-flight: nothing ran (1 day(s) checked" in res.stderr
    assert not (tmp_path / "f.duckdb").exists()  # ingesting publishes nothing: no refused run is recorded


def test_serve_checks_each_inputs_latest_day(tmp_path):
    """D2 is the latest day with files: its file is what the next scheduled run reads;
    D1's is left to the run that recomputes it. A date in a folder name is not a day."""
    from fairmon.pipelines.ingest.preflight import latest_day, preflight_inputs

    root = tmp_path / "2027-05-05"  # the project's folder names a later date than any file
    toml = _project(root)
    cfg = load_config(toml)
    assert latest_day(cfg, cfg.impressions.path) == D2
    assert preflight_inputs(cfg) == ({}, [])
    bad = HEADER.replace("like_video", "like") + "\n" + ROWS[0] + "\n"
    (root / "default" / f"{D1}.csv").write_text(bad)
    assert preflight_inputs(cfg) == ({}, [])  # an older day's file: not what serve runs next
    (root / "default" / f"{D2}.csv").write_text(bad)
    found, empty = preflight_inputs(cfg)
    assert list(found) == [D2] and empty == []
    assert found[D2][0].check == "column_exists[like_video]" and found[D2][0].file == f"default/{D2}.csv"
    for d in (D1, D2):
        (root / "default" / f"{d}.csv").unlink()
    found, (line,) = preflight_inputs(cfg)
    assert found == {} and line.startswith("no file matches [impressions] path = 'default/{ds}.csv'")


def test_serve_stops_in_preflight_with_exit_1(tmp_path):
    import signal

    toml = _project(tmp_path)
    (tmp_path / "default" / f"{D2}.csv").write_text(HEADER.replace(",share", "") + "\n" + "r1,v1,1,1\n")
    before = signal.getsignal(signal.SIGTERM)
    try:  # serve installs its own SIGTERM handler: this process's is put back
        res = CliRunner().invoke(app, ["serve", "-c", str(toml)])
    finally:
        signal.signal(signal.SIGTERM, before)
    assert res.exit_code == EXIT_QUARANTINED, res.output
    assert res.stderr.startswith(f"error: default/{D2}.csv has no column 'share', named by [impressions] signals")
    assert f"pre-flight: serve not started (latest input files of {D2} checked" in res.stderr
    assert "serving deployment" not in res.stdout and not (tmp_path / "f.duckdb").exists()


@pytest.mark.slow
def test_ingest_and_serve_preflight_import_neither_prefect_nor_gx(tmp_path):
    """In a fresh process, ingest's and serve's pre-flight errors come before Prefect or GX is imported."""
    toml = _project(tmp_path)
    (tmp_path / "default" / f"{D2}.csv").write_text(HEADER.replace("like_video", "like") + "\n" + ROWS[0] + "\n")
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from fairmon.pipelines.faces.cli import app\n"
        f"a = CliRunner().invoke(app, ['ingest', '-c', {str(toml)!r}, '-d', '{D2}'])\n"
        f"b = CliRunner().invoke(app, ['serve', '-c', {str(toml)!r}])\n"
        "heavy = sorted(m for m in ('prefect', 'great_expectations') if m in sys.modules)\n"
        "print(a.exit_code, b.exit_code, heavy)\n"
        "print(a.stderr.splitlines()[0])\n"
        "print(b.stderr.splitlines()[0])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    first, ingest_line, serve_line, *_ = out.stdout.splitlines()
    assert first == "1 1 []", out.stderr
    expected = f"error: default/{D2}.csv has no column 'like_video' (did you mean 'like'?)"
    assert ingest_line.startswith(expected) and serve_line.startswith(expected)


#: Imported after a command's first line: the readers, the checks and the orchestrator.
HEAVY = ("numpy", "duckdb", "pyarrow", "pandas", "great_expectations", "prefect")


@pytest.mark.slow  # a fresh process per command
@pytest.mark.parametrize("command", ["run", "backfill"])
def test_the_first_line_comes_after_the_headers_and_before_the_readers(tmp_path, command):
    """In a fresh process, run's and backfill's first line (what they do) is printed once the headers pass,
    before the value scan loads NumPy, DuckDB or PyArrow, and before GX or Prefect: the process stops there."""
    toml = _project(tmp_path)
    args = ["-d", str(D1)] if command == "run" else ["--start", str(D1), "--end", str(D2)]
    script = (
        "import os, sys\n"
        "from fairmon.pipelines.faces import cli, cli_common\n"
        "def first(text, **kw):\n"
        f"    print(text, [m for m in {HEAVY!r} if m in sys.modules], flush=True)\n"
        "    os._exit(0)\n"
        "cli_common.err.print = first\n"
        f"sys.argv = ['fairmon', {command!r}, '-c', {str(toml)!r}, *{args!r}, '--no-prefect']\n"
        "cli.main()\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    days = f"run {D1}" if command == "run" else f"backfill {D1}..{D2}"
    counted = "" if command == "run" else "2 day(s), "
    assert out.stdout == f"fairmon {days} ({toml}): {counted}checking inputs, then counts and estimators []\n", out
    assert not (tmp_path / "f.duckdb").exists()  # nothing was opened yet


@pytest.mark.slow  # runs a backfill (GX)
def test_a_day_without_its_file_in_a_range_is_quarantined_saying_so(tmp_path):
    """In a range, a day whose default-traffic file does not exist is a pre-flight warning and the day
    runs to its gate, which quarantines it; its reason (summary, runs and alert) now carries the
    pre-flight's sentence, not only the expectation's name, while a day whose file exists but holds no
    default row keeps the name alone."""
    toml = _project(tmp_path)
    (tmp_path / "default" / f"{D2}.csv").unlink()
    res = CliRunner().invoke(app, ["backfill", "-c", str(toml), "--start", str(D1), "--end", str(D2), "--json"])
    doc = json.loads(res.stdout)
    day2 = next(d for d in doc["days"] if d["ds"] == str(D2))
    missing = f"no default-traffic file for {D2}: default/{D2}.csv does not exist ([impressions] path = "
    assert day2["status"] == "quarantined" and f"default_traffic_present: {missing}" in day2["error"]
    runs = latest_runs(tmp_path / "f.duckdb")
    assert missing in dict(zip(runs["ds"], runs["detail"], strict=True))[D2]


@pytest.mark.slow  # runs a day (GX)
def test_a_bad_file_of_a_days_random_window_is_named_as_such(tmp_path):
    """A contract file of another day that the day's random window pools, refused by the raw suite,
    quarantines the day too; the reason now says why that file matters to the day."""
    import numpy as np

    rng = np.random.default_rng(3)
    (tmp_path / "logs").mkdir()
    for d in (D1, D2):
        n = 2000
        rows = pl.DataFrame(
            {
                "ds": [str(d)] * n,
                "traffic": rng.choice(["default", "random"], n, p=[0.6, 0.4]),
                "request_id": [f"{d}-{i // 4}" for i in range(n)],
                "item_id": [f"i{i}" for i in range(n)],
                "click": (rng.random(n) < 0.3).astype(int).astype(str),
                "grp": rng.choice(["a", "b"], n),
            }
        )
        if d == D1:
            rows = rows.with_columns(
                pl.when(pl.int_range(pl.len()) == 4).then(pl.lit("maybe")).otherwise(pl.col("click")).alias("click")
            )
        rows.write_csv(tmp_path / "logs" / f"{d}.csv")
    toml = tmp_path / "fairmon.toml"
    toml.write_text(
        'warehouse = "warehouse"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\npath = "logs/{ds}.csv"\n'
        'signals = ["click"]\nattributes = ["grp"]\nrandom_window_days = 2\n'
    )
    res = CliRunner().invoke(app, ["run", "-c", str(toml), "-d", str(D2), "--no-prefect"], env={"COLUMNS": "400"})
    assert res.exit_code == EXIT_QUARANTINED, res.output
    flat = " ".join(res.output.split())
    assert f"logs/{D1}.csv: signal_is_boolean[click]" in flat
    assert f"(a file of {D2}'s random window, random_window_days = 2)" in flat


def test_findings_are_described_in_the_order_of_their_days():
    """The value scan finds days in any order (the header check first); the lines come in the days' order."""
    from fairmon.pipelines.ingest.preflight import Finding, describe

    def one(ds, message):
        return [Finding(ds, "impressions", "has_rows", f"default/{ds}.csv", message)]

    found = {D2: one(D2, "b"), D1: one(D1, "a"), D1 + dt.timedelta(days=2): one(D1, "a")}
    assert describe(found) == ["a [2 days, 2026-01-01..2026-01-03]", f"b [{D2}]"]


def test_a_row_with_more_fields_than_the_header_quarantines_its_day(tmp_path):
    """An unquoted comma in a value (row 2 of D1's default file has 6 fields, the header 5): the value scan
    names the file and row as it does an unreadable header; a run of D1 alone stops there (exit 1, its
    dq_results row saying why), and in a run of D1 and D2, where the pre-flight only warns, the reader's refusal
    quarantines D1 at its stage (suite ``reader``), as the docs say. D1 used to fail (exit 4)."""
    from fairmon.pipelines.ingest.preflight_values import value_findings

    toml = _project(tmp_path)
    bad = tmp_path / "default" / f"{D1}.csv"
    bad.write_text("\n".join([HEADER, ROWS[0], "r2,v2,0,0,1,x", ROWS[2]]) + "\n")
    why = "cannot read file: row 2 has 6 fields where the header has 5 (quote a value that holds a comma)"
    (finding,) = value_findings(load_config(toml), [D1, D2])[D1]
    assert (finding.check, finding.file, finding.message) == (
        "readable",
        f"default/{D1}.csv",
        f"default/{D1}.csv: {why}",
    )
    res = CliRunner().invoke(app, ["run", "-c", str(toml), "-d", str(D1), "--no-prefect"])
    assert res.exit_code == EXIT_QUARANTINED and f"error: default/{D1}.csv: {why}" in res.stderr, res.stderr
    res = CliRunner().invoke(app, ["backfill", "-c", str(toml), "--start", str(D1), "--end", str(D2), "--json"])
    doc = json.loads(res.stdout)
    assert doc["days"][0]["status"] == "quarantined", doc["days"][0]
    assert doc["days"][0]["error"] == f"{D1}: quarantined at stage impressions: reader on {bad}: readable: {why}"
    dq = read_table(tmp_path / "warehouse", "dq_results").filter(pl.col("ds") == D1)
    assert dq.select("suite", "subject", "success", "failed_critical").rows() == [
        ("reader", str(bad), False, "readable")
    ]


def test_runs_record_the_config_file_absolute_whatever_folder_ran_it(tmp_path, monkeypatch):
    import duckdb

    toml = _project(tmp_path)
    cfg = load_config(toml)
    monkeypatch.chdir(tmp_path)
    start_record(cfg, "fairmon.toml", "r-rel", D1, {"ds": D1})
    start_record(cfg, str(toml), "r-abs", D2, {"ds": D2})
    with duckdb.connect(str(tmp_path / "f.duckdb"), read_only=True) as con:
        paths = con.sql("select run_id, config_path from runs order by run_id").fetchall()
    assert paths == [("r-abs", str(toml.resolve())), ("r-rel", str(toml.resolve()))]


def test_a_closed_alert_whose_day_never_published_says_so(tmp_path):
    """D1 refused, then D2 published: the run of refused days is over (the alert closes, as documented), but
    D1 itself is still not published; `fairmon alerts` said only "(closed)", which read as mended."""
    toml = _project(tmp_path)
    cfg = load_config(toml)
    (tmp_path / "default" / f"{D1}.csv").write_text(HEADER.replace("like_video", "like") + "\n" + ROWS[0] + "\n")
    assert CliRunner().invoke(app, ["run", "-c", str(toml), "-d", str(D1), "--no-prefect"]).exit_code == 1
    recorded, _ = start_record(cfg, "", "r-d2", D2, {"ds": D2})
    finish_record(cfg, "r-d2", D2, recorded, "published", "", {"reo": 2}, {})
    listed = CliRunner().invoke(app, ["alerts", "-c", str(toml)], env={"COLUMNS": "300"}).stdout.splitlines()
    assert listed[0].startswith(f"{D1} quarantined") and listed[0].endswith(
        f"(closed: a later day published; {D1} itself is still not published)"
    ), listed
    recorded, _ = start_record(cfg, "", "r-d1", D1, {"ds": D1})  # D1 mended: plainly closed
    finish_record(cfg, "r-d1", D1, recorded, "published", "", {"reo": 2}, {})
    listed = CliRunner().invoke(app, ["alerts", "-c", str(toml)], env={"COLUMNS": "300"}).stdout.splitlines()
    assert listed[0].endswith(" (closed)"), listed


def test_a_day_refused_after_the_day_before_was_fixed_raises_a_new_alert(tmp_path):
    """D1 refused (alert), then published; D2 refused later: D2's own alert, printed by its run (it was folded
    into D1's closed alert: no line, no notification, and `fairmon alerts` blamed D1's fixed file)."""
    toml = _project(tmp_path)
    cfg = load_config(toml)
    for d in (D1, D2):
        (tmp_path / "default" / f"{d}.csv").write_text(HEADER.replace("like_video", "like") + "\n" + ROWS[0] + "\n")
    res = CliRunner().invoke(app, ["run", "-c", str(toml), "-d", str(D1), "--no-prefect"])
    assert res.exit_code == EXIT_QUARANTINED and f"alert {D1} quarantined at pre-flight" in res.stdout
    recorded, _ = start_record(cfg, "", "r-fixed", D1, {"ds": D1})  # D1 mended and published
    finish_record(cfg, "r-fixed", D1, recorded, "published", "", {"reo": 2}, {})
    res = CliRunner().invoke(app, ["run", "-c", str(toml), "-d", str(D2), "--no-prefect"])
    assert res.exit_code == EXIT_QUARANTINED and f"alert {D2} quarantined at pre-flight: default/{D2}.csv" in res.stdout
    listed = CliRunner().invoke(app, ["alerts", "-c", str(toml)], env={"COLUMNS": "200"}).stdout.splitlines()
    assert [line[:22] for line in listed[:2]] == [f"{D1} quarantined", f"{D2} quarantined"]
    assert listed[0].endswith("(closed)") and listed[1].endswith(f"(not published yet: {D2})"), listed
    doc = json.loads(CliRunner().invoke(app, ["alerts", "-c", str(toml), "--json"]).stdout)  # the same, for scripts
    assert [(a["ds"], a["open"], a["waiting"]) for a in doc["alerts"]] == [
        (str(D1), False, []),
        (str(D2), True, [str(D2)]),
    ]
    # D1 refused again after it was mended: a new condition, announced anew (it reopened the old alert silently)
    res = CliRunner().invoke(app, ["run", "-c", str(toml), "-d", str(D1), "--no-prefect"])
    assert f"alert {D1} quarantined at pre-flight" in res.stdout, res.stdout
    doc = json.loads(CliRunner().invoke(app, ["alerts", "-c", str(toml), "--json"]).stdout)
    got = [(a["ds"], a["subject"][:10], a["open"], a["waiting"]) for a in doc["alerts"]]  # D2, refused meanwhile,
    assert got == [(str(D1), "runs", False, []), (str(D1), "runs again", True, [str(D1), str(D2)])], got  # joins it


@pytest.mark.slow  # runs a day through GX
def test_a_file_the_gate_refuses_is_said_once_in_a_backfill(tmp_path):
    """D1's label 'yes' in a backfill of D1..D2: the pre-flight warns, the gate quarantines D1 and its line says
    why; the staging's "ingest ...: not staged" said it a third time on stderr."""
    toml = _project(tmp_path)
    (tmp_path / "default" / f"{D1}.csv").write_text("\n".join([HEADER, ROWS[0], "r2,v2,0,yes,1", ROWS[2]]) + "\n")
    res = CliRunner().invoke(app, ["backfill", "-c", str(toml), "--start", str(D1), "--end", str(D2), "--no-prefect"])
    out = " ".join(res.output.split())
    assert res.exit_code == EXIT_QUARANTINED and "warning: pre-flight:" in out and "'yes'" in out, out
    assert f"{D1} quarantined at stage impressions" in out and "not staged" not in out, out


def test_blank_lines_at_the_end_of_a_file_are_no_rows(tmp_path):
    """An editor's or an export's trailing blank line: Polars read it as a row of nulls, which the value scan
    refused as "row 4: the cluster id is empty"."""
    from fairmon.pipelines.ingest.preflight_values import value_findings

    toml = _project(tmp_path)
    (tmp_path / "default" / f"{D1}.csv").write_text("\n".join([HEADER, *ROWS]) + "\n\n\n")
    assert value_findings(load_config(toml), [D1, D2]) == {}


def test_a_csv_with_a_header_and_no_rows_is_said_in_words(tmp_path):
    """It passed the pre-flight and was quarantined later as only "impressions_raw on …: has_rows"."""
    toml = _project(tmp_path)
    (tmp_path / "default" / f"{D1}.csv").write_text(HEADER + "\n\n")
    ((finding,),) = [v for d, v in preflight(load_config(toml), [D1]).items() if d == D1]
    assert (finding.check, finding.message) == (
        "has_rows",
        f"default/{D1}.csv: the file is empty: a header and no rows",
    )


def test_a_blank_line_before_a_row_is_named_as_a_blank_line(tmp_path):
    """A blank line in the middle of a file: Polars read it as a row of nulls, and the value scan refused
    "row 2: the cluster id is empty ... fill it, or set cluster_by = "none"", advice about a value the author
    never wrote (with cluster_by = "none" every signal of row 2 was refused instead)."""
    from fairmon.pipelines.ingest.preflight_values import value_findings

    toml = _project(tmp_path)
    (tmp_path / "default" / f"{D1}.csv").write_text("\n".join([HEADER, ROWS[0], "", *ROWS[1:]]) + "\n")
    (finding,) = value_findings(load_config(toml), [D1, D2])[D1]
    assert (finding.check, finding.message) == (
        "readable",
        f"default/{D1}.csv: cannot read file: row 2 is a blank line (delete it: a row needs the header's 5 fields)",
    )
