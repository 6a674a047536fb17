"""Alerts end to end, in process (DESIGN §4.9): written after every run, idempotent across re-runs, sent once to a
json:// endpoint (a local HTTP server), recorded as not delivered when the endpoint is dead and retried by the next
run; a URL, which may hold a token, is written nowhere."""

import datetime as dt
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.faces.cli import app
from fairmon.pipelines.simulation.simulated import write_simulation
from fairmon.transforms.simulators.impressions import SimulationSpec

# true U ∝ (0.8, 2.0): REO 0.43, far above the 1/9 line, so day 1's alert interval lies above it
SPEC = SimulationSpec(
    days=2, rows_per_day=3000, random_rows_per_day=1500, random_pool_days=2, rec_rate=(0.2, 0.5),
    rand_rate=(0.25, 0.25), rand_share=(0.5, 0.5), rec_share=(0.5, 0.5), seed=5,
)  # fmt: skip
D0, D1 = SPEC.start, SPEC.start + dt.timedelta(days=1)
SECRET = "tok3n-not-to-be-written"


class _Receiver(BaseHTTPRequestHandler):
    bodies: list = []

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        type(self).bodies.append(json.loads(self.rfile.read(n)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    _Receiver.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], _Receiver.bodies
    server.shutdown()


def _closed_port() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _project(tmp_path: Path, port: int) -> Path:
    cfg = write_simulation(SPEC, tmp_path / "sim", "csv")["config"]
    _notify(cfg, port)
    return cfg


def _notify(cfg: Path, port: int) -> None:
    text = cfg.read_text().split("\n[alerts]")[0]
    cfg.write_text(text + f'\n[alerts]\nnotify = ["json://127.0.0.1:{port}/{SECRET}"]\n')


def _alerts(cfg: Path) -> pl.DataFrame:
    from fairmon.api.published import read_table

    return read_table(str(cfg), "alerts")


def _run(cfg: Path, days: list[dt.date]) -> list[dict]:
    from fairmon.pipelines.executor.days import run_days

    updates: list = []
    out = run_days(load_config(cfg), days, config_path=str(cfg), on_alerts=updates.append)
    return out, updates[0]


@pytest.mark.slow  # runs days in process (DuckDB, GX)
def test_alerts_are_sent_once_recorded_and_retried(tmp_path, receiver, caplog):
    port, bodies = receiver
    caplog.set_level(logging.INFO, logger="fairmon")
    cfg = _project(tmp_path, port)
    (day,), update = _run(cfg, [D0])
    assert day["status"] == "published" and day["reo"][0]["alert_low"] > 1 / 9
    first = _alerts(cfg)
    assert first.select("ds", "kind", "since", "delivered").rows() == [(D0, "exceeds", D0, True)]
    assert [a["alert_id"] for a in update.new] == first["alert_id"].to_list()
    assert len(bodies) == 1 and first["alert_id"][0] in bodies[0]["message"] and "exceeds" in bodies[0]["title"]

    (day,), update = _run(cfg, [D0])  # a re-run: the same alert, not again
    again = _alerts(cfg)
    assert update.new == [] and len(bodies) == 1
    assert again.drop("run_id").equals(first.drop("run_id"))  # first_seen_at and delivery kept

    (SPEC_DIR := cfg.parent / "default" / f"{D1}.csv").rename(SPEC_DIR.with_suffix(".gone"))
    _notify(cfg, _closed_port())
    (day,), update = _run(cfg, [D1])  # D1 is quarantined (its file is gone): a new alert, its endpoint dead
    bad = day["status"]
    assert bad == "quarantined"
    rows = _alerts(cfg).filter(pl.col("ds") == D1)
    assert rows["kind"].to_list() == [bad] and rows["delivered"].to_list() == [False]
    assert json.loads(rows["delivery"][0]) == {"notify[0]": False} and update.undelivered == 1
    assert len(bodies) == 1 and [a["kind"] for a in update.new] == [bad]
    said = (
        f"alerts: 1 not delivered to notify[0] (json) ({rows['alert_id'][0]}): A Connection error occurred "
        "sending JSON notification to …; each will be sent again"
    )  # Apprise's reason, its host masked as every part of the URL is
    assert caplog.text.count(said + " on the next run") == 1

    _notify(cfg, port)
    (day,), update = _run(cfg, [D0])  # the next run retries the undelivered alert
    assert len(bodies) == 2 and bad in bodies[1]["title"] and update.undelivered == 0 and update.new == []
    assert _alerts(cfg).filter(pl.col("ds") == D1)["delivered"].to_list() == [True]
    assert caplog.text.count("alerts: 1 whose notification had failed delivered now") == 1
    listed = CliRunner().invoke(app, ["alerts", "-c", str(cfg), "--json"])  # delivery as an object, not JSON text
    by_id = {a["alert_id"]: a["delivery"] for a in json.loads(listed.stdout)["alerts"]}
    assert by_id[rows["alert_id"][0]] == {"notify[0]": True}, listed.stdout

    written = [p.read_bytes() for p in (cfg.parent / "warehouse").rglob("*") if p.is_file()]
    written.append((cfg.parent / "fairmon.duckdb").read_bytes())
    assert not any(SECRET.encode() in b for b in written)
    assert SECRET not in caplog.text


@pytest.mark.slow  # runs days in process (DuckDB, GX)
def test_alerts_off_write_nothing(tmp_path):
    cfg = write_simulation(SPEC, tmp_path / "sim", "csv")["config"]
    cfg.write_text(cfg.read_text() + "\n[alerts]\nenabled = false\n")
    (day,), update = _run(cfg, [D0])
    assert day["status"] == "published" and update.new == []
    assert not (cfg.parent / "warehouse" / "alerts").exists()
    assert day["reo"][0]["alert_level"] is None


@pytest.mark.slow  # runs days in process (DuckDB, GX)
def test_a_release_that_spends_the_budget_raises_budget_low_once(tmp_path):
    """The privacy ledger's releases (DESIGN §4.6) reach budget_low_share of total_epsilon: one alert, on the
    day of the release that crossed it; a second update raises nothing new."""
    from fairmon.pipelines.executor.alerting import update_alerts
    from fairmon.pipelines.storage.ledger_store import RELEASE_SCHEMA, record_release

    cfg_path = write_simulation(SPEC, tmp_path / "sim", "csv")["config"]
    cfg = load_config(cfg_path)
    members = pl.DataFrame({"item_id": ["a", "b"]})
    for i, eps in enumerate([0.5, 0.35, 0.1]):  # the ledger's record, as audit-export writes it
        part = [("population:p", f"r{i}:bins", eps, dt.datetime(2026, 2, 1 + i, 9), "test")]
        record_release(
            cfg.warehouse_path, pl.DataFrame(part, schema=RELEASE_SCHEMA, orient="row"), "population:p", members
        )
    update = update_alerts(cfg)
    assert [(a["ds"], a["kind"], a["value"]) for a in update.new] == [
        (dt.date(2026, 2, 2), "budget_low", pytest.approx(0.85))
    ]
    assert update_alerts(cfg).new == [] and _alerts(cfg_path).height == 1


@pytest.mark.slow  # runs days in process (DuckDB, GX)
def test_alerts_that_fail_their_checks_are_neither_sent_nor_written(tmp_path, monkeypatch, receiver):
    """The gate (generated checks and expectations/alerts.json) runs before anything goes out."""
    from fairmon.pipelines.executor import alerting
    from fairmon.transforms.alerts.alert_tables import ALERTS_SCHEMA

    port, bodies = receiver
    cfg_path = _project(tmp_path, port)
    row = {c: None for c in ALERTS_SCHEMA} | {
        "ds": D0,
        "alert_id": "x",
        "kind": "bogus",
        "subject": "s",
        "message": "m",
    }
    monkeypatch.setattr(alerting, "alerts_table", lambda **_: pl.DataFrame([row], schema=ALERTS_SCHEMA))
    update = alerting.update_alerts(load_config(cfg_path))
    assert update.new == [] and update.days == [] and bodies == []
    assert not (cfg_path.parent / "warehouse" / "alerts").exists()


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_who_gets_what(receiver):
    """A new alert goes to every target; an old one only to the targets that failed it (a URL fixed at its
    position); a target added later gets no old alert; a removed target is forgotten."""
    from fairmon.pipelines.executor.notify import NOT_A_URL, send

    port, bodies = receiver
    live, dead = f"json://127.0.0.1:{port}/{SECRET}", f"json://127.0.0.1:{_closed_port()}/x"
    alert = {"ds": D0, "since": D0, "alert_id": "a1", "kind": "exceeds", "message": "REO of g (arm all) exceeds: e"}
    assert send([live, dead], alert, "p", {}, new=True) == {"notify[0]": True, "notify[1]": False}
    assert len(bodies) == 1 and bodies[0]["title"] == "fairmon p: REO of g (arm all) exceeds"
    assert send([live, live, live], alert, "p", {"notify[0]": True, "notify[1]": False}, new=False) == {
        "notify[0]": True,
        "notify[1]": True,
    }  # position 1 retried at its fixed URL; position 2, added later, gets nothing
    assert len(bodies) == 2
    assert send([live], alert, "p", {"notify[0]": True, "notify[1]": False}, new=False) == {"notify[0]": True}
    causes: dict = {}  # why each failed: a URL Apprise cannot read is never sent until the config is mended
    assert send(["nosuch://x", dead], alert, "p", {}, new=True, causes=causes) == {
        "notify[0]": False,
        "notify[1]": False,
    }
    assert causes["notify[0]"] == NOT_A_URL and "Connection error" in causes["notify[1]"]


def test_apprises_reason_is_kept_with_every_part_of_the_url_masked():
    from fairmon.pipelines.executor.notify import CAUSE_CHARS, masked

    url = "slack://TokenA1/TokenB2/Token%2FC3?user=bob&pass=s3cret"
    said = "Failed to send to TokenA1/TokenB2 (Token/C3, bob, s3cret): 403 Forbidden"
    assert masked(said, url) == "Failed to send to …/… (…, …, …): 403 Forbidden"  # parts of 3+ characters
    assert masked("mail to user@example.com failed", "mailto://user:pw@example.com") == "mail to …@… failed"
    assert masked("x" * 500, url) == "x" * (CAUSE_CHARS - 1) + "…"


def test_days_run_out_of_order_announce_a_condition_once():
    """An exceeds raised on day 4, then day 2 run: the recomputed alert (raised on day 2, same episode)
    takes over the first one's first-seen time and delivery, so nothing is sent twice."""
    from fairmon.pipelines.executor.alerting import carried_over
    from fairmon.transforms.alerts.alert_tables import ALERTS_SCHEMA

    def row(day: int, kind: str = "exceeds", subject: str = "reo arm=all attribute=g", **kw) -> dict:
        ds = D0 + dt.timedelta(days=day)
        base = {c: None for c in ALERTS_SCHEMA} | {"ds": ds, "kind": kind, "subject": subject, "message": "m"}
        return base | {"alert_id": f"{kind}-{subject}-{day}"} | kw

    old = pl.DataFrame(
        [row(4, first_seen_at="T0", delivered=True, delivery='{"notify[0]": true}'), row(9, subject="other")],
        schema=ALERTS_SCHEMA,
    )
    fresh = pl.DataFrame([row(2), row(6, "back_within"), row(8, subject="other")], schema=ALERTS_SCHEMA)
    merged, taken = carried_over(fresh, old, "T1")
    got = {r["alert_id"]: (r["first_seen_at"], r["delivered"]) for r in merged.iter_rows(named=True)}
    assert taken == {row(2)["alert_id"], row(8, subject="other")["alert_id"]}
    assert got[row(2)["alert_id"]] == ("T0", True)
    assert got[row(6, "back_within")["alert_id"]] == ("T1", None)
