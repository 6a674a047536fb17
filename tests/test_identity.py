"""Published numbers come from exactly the current inputs (issue 13; DESIGN §1 "one copy of
the outputs", §2 "Input identity", §3 last paragraph). Each case runs real files through the
CLI: what is published must be a function of the current files and the config alone."""

import datetime as dt
import shutil

import duckdb
import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from fairmon.pipelines.core.config import load_config
from fairmon.pipelines.faces.cli import app
from fairmon.pipelines.orchestration.ops import days_to_run, detect_stale
from fairmon.pipelines.orchestration.prefect_guard import temporary_servers
from fairmon.pipelines.simulation.simulated import write_labeling_simulation, write_simulation
from fairmon.pipelines.storage.warehouse import partition_path, read_table
from fairmon.transforms.simulators.impressions import SimulationSpec
from fairmon.transforms.simulators.labelers import LabelingSpec

pytestmark = pytest.mark.usefixtures("prefect_harness")

D0 = dt.date(2026, 3, 1)


def _cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def _published(db_path, table, ds):
    con = duckdb.connect(str(db_path), read_only=True)
    try:
        return con.sql(f"SELECT * FROM {table}_published WHERE ds = $d", params={"d": ds}).pl()
    finally:
        con.close()


def _sim(tmp_path, days=3, pool_days=3, fmt="csv", arms=None):
    spec = SimulationSpec(
        start=D0,
        days=days,
        rows_per_day=3000,
        random_rows_per_day=1500,
        random_pool_days=pool_days,
        arms=arms or {"all": {}},
        seed=5,
    )
    return write_simulation(spec, tmp_path / "sim", fmt)["config"]


def test_a_deleted_random_pool_is_never_counted(tmp_path):
    cfg = _sim(tmp_path, days=3, pool_days=3)
    assert _cli("run", "-c", cfg, "--date", D0).exit_code == 0
    pool = next((tmp_path / "sim" / "random").iterdir())
    pool.unlink()
    r = _cli("run", "-c", cfg, "--date", D0)
    assert r.exit_code != 0  # quarantined, as on a fresh warehouse with the same files
    assert "random_traffic_present" in r.output
    assert _published(tmp_path / "sim" / "fairmon.duckdb", "reo", D0).is_empty()
    # late-data detection selects the day and its re-run does not clear the flag by publishing staged rows
    detect_stale(load_config(cfg))
    assert D0 in days_to_run(load_config(cfg), D0, D0, only_failed=True)


def test_a_day_split_over_files_keeps_every_file(tmp_path):
    root = tmp_path / "p"
    (root / "default").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for arm in ("control", "treatment"):
        n = 800
        pl.DataFrame(
            {
                "ds": [D0] * n,
                "traffic": ["default"] * (n - 300) + ["random"] * 300,
                "arm": arm,
                "s1": (rng.random(n) < 0.3).astype(int),
                "grp": rng.choice(["a", "b"], n),
            }
        ).write_csv(root / "default" / f"{D0}_{arm}.csv")
    (root / "f.toml").write_text(
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\n'
        'path = "default/{ds}_*.csv"\nsignals = ["s1"]\nattributes = ["grp"]\nrandom_window_days = 1\n'
        "[quality]\nsufficiency_epsilon = 0.9\n"
    )
    assert _cli("run", "-c", root / "f.toml", "--date", D0).exit_code == 0
    before = read_table(root / "wh", "group_counts").sort("traffic", "arm", "group")
    f = root / "default" / f"{D0}_control.csv"
    f.write_text(f.read_text())  # touched: same rows, new mtime
    for extra in ([], ["--force-ingest"]):
        assert _cli("run", "-c", root / "f.toml", "--date", D0, *extra).exit_code == 0
        after = read_table(root / "wh", "group_counts").sort("traffic", "arm", "group")
        assert after.drop("run_id").equals(before.drop("run_id"))
        assert set(after.get_column("arm")) == {"control", "treatment", "all"}


def test_moving_the_project_folder_changes_nothing(tmp_path):
    paths = write_labeling_simulation(LabelingSpec(start=D0, days=2, items_per_day=2000, seed=1), tmp_path / "a")
    last = D0 + dt.timedelta(days=1)
    assert _cli("run", "-c", paths["config"], "--date", last).exit_code == 0
    before = read_table(tmp_path / "a" / "warehouse", "sdt").sort("attribute", "group", "labeler_id")
    shutil.move(tmp_path / "a", tmp_path / "b")
    assert _cli("run", "-c", tmp_path / "b" / paths["config"].name, "--date", last).exit_code == 0
    after = read_table(tmp_path / "b" / "warehouse", "sdt").sort("attribute", "group", "labeler_id")
    assert after.select("n_pos", "n_neg").equals(before.select("n_pos", "n_neg"))


def test_a_new_file_a_pattern_now_matches_makes_the_day_stale(tmp_path):
    cfg = _sim(tmp_path, days=4, pool_days=2)
    days = [D0 + dt.timedelta(days=i) for i in range(4)]
    assert _cli("backfill", "-c", cfg, "--start", days[0], "--end", days[-1]).exit_code == 0
    pools = sorted((tmp_path / "sim" / "random").iterdir())
    late = pools[0].with_name(f"random_{days[3]}_{days[3]}.csv")
    pl.read_csv(pools[0]).head(500).write_csv(late)  # a late pool for day 4
    detect_stale(load_config(cfg))
    assert days_to_run(load_config(cfg), days[0], days[-1], only_stale=True) == [days[3]]


def test_a_file_changed_with_its_size_and_time_kept_is_stale_and_its_rerun_publishes_the_new_rows(tmp_path):
    """A corrected file restored with ``cp -p`` or ``rsync -a`` keeps its size and modification time: with
    files fingerprinted by those, --only-stale said "nothing to run" and a re-run republished the old REO."""
    import os

    cfg = _sim(tmp_path, days=1)
    assert _cli("run", "-c", cfg, "--date", D0).exit_code == 0
    before = _published(tmp_path / "sim" / "fairmon.duckdb", "reo", D0)["reo"].item()
    day = tmp_path / "sim" / "default" / f"{D0}.csv"
    st = day.stat()
    header, *rows = day.read_text().splitlines()
    like, group = header.split(",").index("like_video"), header.split(",").index("young_adult")
    for i, r in enumerate(rows):  # every young adult likes nothing now (0 for 1: the same bytes long)
        cells = r.split(",")
        if cells[group] == "1":
            rows[i] = ",".join(
                [*cells[:like], *("0" if c == "1" else c for c in cells[like : like + 6]), *cells[like + 6 :]]
            )
    day.write_text("\n".join([header, *rows]) + "\n")
    os.utime(day, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert day.stat().st_size == st.st_size and day.stat().st_mtime_ns == st.st_mtime_ns
    # the report says so at its top, before anyone looks for stale days
    res = _cli("report", "-c", cfg, "--start", D0, "--end", D0, "--out", tmp_path / "r.html")
    assert res.exit_code == 0 and "1 published day(s) were computed from inputs that changed since" in res.output
    html = (tmp_path / "r.html").read_text()
    assert '<h2 id="stale">Stale days</h2>' in html and f"<li>{D0}: default/{D0}.csv changed</li>" in html
    detect_stale(load_config(cfg))
    assert days_to_run(load_config(cfg), D0, D0, only_stale=True) == [D0]
    assert _cli("run", "-c", cfg, "--date", D0).exit_code == 0
    after = _published(tmp_path / "sim" / "fairmon.duckdb", "reo", D0)
    assert after["reo"].item() != before and after["reo"].item() > 0.5  # one group's utility is 0: REO = 1
    assert days_to_run(load_config(cfg), D0, D0, only_stale=True) == []
    _cli("report", "-c", cfg, "--start", D0, "--end", D0, "--out", tmp_path / "r.html")
    assert "Stale days" not in (tmp_path / "r.html").read_text()


def test_a_failed_latest_run_unpublishes_the_day(tmp_path):
    cfg = _sim(tmp_path, days=1, fmt="parquet")
    assert _cli("run", "-c", cfg, "--date", D0).exit_code == 0
    (tmp_path / "sim" / "default" / f"{D0}.parquet").write_bytes(b"not parquet")
    r = _cli("run", "-c", cfg, "--date", D0)
    assert r.exit_code != 0
    db = tmp_path / "sim" / "fairmon.duckdb"
    assert _published(db, "reo", D0).is_empty()
    assert D0 in days_to_run(load_config(cfg), D0, D0, only_failed=True)


def test_tables_the_latest_run_did_not_write_are_removed(tmp_path):
    cfg = _sim(tmp_path, days=1, arms={"control": {}, "boost": {1: 2.0}})
    assert _cli("run", "-c", cfg, "--date", D0).exit_code == 0
    assert partition_path(tmp_path / "sim" / "warehouse", "reo_ab", D0).exists()
    text = cfg.read_text()
    cfg.write_text(text[: text.index("[ab]")])
    assert _cli("run", "-c", cfg, "--date", D0).exit_code == 0
    assert not partition_path(tmp_path / "sim" / "warehouse", "reo_ab", D0).exists()
    assert _published(tmp_path / "sim" / "fairmon.duckdb", "reo_ab", D0).is_empty()


def test_a_path_template_with_an_unknown_field_is_a_config_error(tmp_path):
    cfg = _sim(tmp_path, days=1)
    cfg.write_text(cfg.read_text().replace('path = "default/{ds}.csv"', 'path = "default/{ds}_{hour}.csv"'))
    r = _cli("run", "-c", cfg, "--date", D0)
    assert r.exit_code == 2
    assert "{hour}" in r.output and "Traceback" not in r.output


# --- process hygiene ----------------------------------------------------------------------


def _holder(lock_file):
    """Another process holding ``lock_file`` (flock) until killed."""
    import subprocess
    import sys

    code = (
        "import fcntl, sys, time\n"
        f"f = open({str(lock_file)!r}, 'a+')\n"
        "fcntl.flock(f.fileno(), fcntl.LOCK_EX)\n"
        'f.write(\'{"pid": 1, "command": "other fairmon"}\'); f.flush()\n'
        "print('held', flush=True)\n"
        "time.sleep(60)\n"
    )
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_two_configs_sharing_a_warehouse_never_run_at_once(tmp_path):
    from fairmon.pipelines.storage.locking import warehouse_lock_path

    cfg = _sim(tmp_path, days=1)
    holder = _holder(warehouse_lock_path(tmp_path / "sim" / "warehouse"))
    try:
        r = _cli("run", "-c", cfg, "--date", D0)
        assert r.exit_code == 5 and "another fairmon run holds" in r.output and "Traceback" not in r.output
        r = _cli("backfill", "-c", cfg, "--start", D0, "--end", D0, "--only-failed", "--wait", "0.5")
        assert r.exit_code == 5 and "another fairmon run holds" in r.output and "Traceback" not in r.output
    finally:
        holder.kill()
        holder.wait()
    assert not (tmp_path / "sim" / "warehouse" / "reo").exists()  # the refused runs wrote nothing


def test_a_killed_runs_temporary_files_are_removed_by_the_next_run(tmp_path):
    cfg = _sim(tmp_path, days=1)
    junk = tmp_path / "sim" / "warehouse" / "_tmp" / "reo-2026-03-01-dead.parquet"
    junk.parent.mkdir(parents=True)
    junk.write_bytes(b"left by a killed run a minute ago")
    assert _cli("run", "-c", cfg, "--date", D0).exit_code == 0
    assert not junk.exists()


def test_a_killed_run_leaves_no_prefect_server_behind(tmp_path):
    import os
    import subprocess
    import sys
    import time

    cfg = _sim(tmp_path, days=1)
    home = tmp_path / "prefect-home"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(
        {"PREFECT_HOME": str(home), "FAIRMON_FAULT": "publish_record", "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    )
    run = subprocess.run(
        [sys.executable, "-m", "fairmon", "run", "-c", str(cfg), "--date", str(D0), "--prefect"],  # its own server
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == -9, run.stderr  # killed itself at the fault point, after its server started

    deadline = time.monotonic() + 20
    while temporary_servers(home) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert temporary_servers(home) == []


_LAUNCH = """
import sys
from prefect import flow
from fairmon.pipelines.orchestration.prefect_guard import launch_temporary_server, temporary_servers
from fairmon.pipelines.orchestration.runner import start_api

@flow
def one():
    return 1

url = launch_temporary_server()
start_api()  # waits until it answers
assert one() == 1
SERVER = "prefect.server" + ".api.server"  # split: this script's own command line must not look like a server
print(url, len(temporary_servers(sys.argv[1])), SERVER in sys.modules, flush=True)
"""


def test_the_temporary_server_runs_without_prefects_server_package_here(tmp_path):
    """fairmon starts Prefect's temporary API itself (same command as
    Prefect's launcher) without importing prefect.server into its own
    process; flows run against it, its logs reach it to the end, and it
    stops when the process exits."""
    import os
    import subprocess
    import sys

    home = tmp_path / "prefect-home"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update({"PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"})
    # Deterministic under any load (issue 37 item 5): no wall-clock bound a busy machine can break. The wait
    # for the server follows Prefect's setting (a day here), its requests likewise; the process is not timed.
    env.update({"PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "86400", "PREFECT_API_REQUEST_TIMEOUT": "86400"})
    run = subprocess.run([sys.executable, "-c", _LAUNCH, str(home)], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    url, servers, imported = run.stdout.split()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/api")
    assert (servers, imported) == ("1", "False")
    assert "Error logging to API" not in run.stderr  # stopped after Prefect's workers sent their last logs
    assert temporary_servers(home) == []


_SLOW_SERVER = """
import sys
from fairmon.pipelines.orchestration import prefect_guard
from fairmon.pipelines.faces.cli import app

# a busy machine, made deterministic: the server process starts but never answers
prefect_guard.server_command = lambda port: [sys.executable, "-c", "import time; time.sleep(3600)"]
app(sys.argv[1:], prog_name="fairmon")
"""


def test_a_temporary_server_that_never_answers_ends_the_run_with_an_error_line_naming_the_setting(tmp_path):
    """``fairmon run --prefect`` with no API configured starts Prefect's
    temporary server and waits for it as long as Prefect's
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS says (1 s here); a
    server that never answers (a stub: the machine "busy" forever) ends the
    command with one ``error:`` line naming the setting, exit code 4, no
    traceback, nothing published, and the stub stopped."""
    import os
    import subprocess
    import sys

    cfg = _sim(tmp_path, days=1)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update({"PREFECT_HOME": str(tmp_path / "home"), "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "1"})
    args = ["run", "-c", str(cfg), "--date", str(D0), "--prefect"]
    run = subprocess.run([sys.executable, "-c", _SLOW_SERVER, *args], env=env, capture_output=True, text=True)
    assert run.returncode == 4, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=1" in errors[0], run.stderr
    assert "did not answer within 1 s" in errors[0] and "Traceback" not in run.stderr
    assert not list(cfg.parent.glob("warehouse/*/ds=*/part-0.parquet"))
    stubs = [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).endswith(b"time.sleep(3600)")]
    assert stubs == []  # stopped at exit


_NO_SERVER = """
import os, subprocess, sys
started = []
popen = subprocess.Popen
def recording(cmd, *args, **kwargs):
    started.append(" ".join(map(str, cmd)))
    return popen(cmd, *args, **kwargs)
subprocess.Popen = recording
from fairmon.pipelines.faces.cli import app
try:
    app(sys.argv[1:], prog_name="fairmon")
except SystemExit as e:
    code = e.code
SERVER = "prefect.server" + ".api.server"
print(code, SERVER in sys.modules, "FAIRMON_RUN_TOKEN" in os.environ, len(started))
"""


def test_without_an_api_fairmon_run_starts_no_prefect_server(tmp_path):
    """With no Prefect API configured, ``fairmon run`` (and backfill) runs the
    day in process: no temporary server, no guard, no process at all is
    started and Prefect's server package is never imported; it publishes."""
    import os
    import subprocess
    import sys

    cfg = _sim(tmp_path, days=2)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "home")
    for args in (["run", "--date", str(D0)], ["backfill", "--start", str(D0), "--end", str(D0 + dt.timedelta(1))]):
        cmd = [sys.executable, "-c", _NO_SERVER, *args, "-c", str(cfg)]
        run = subprocess.run(cmd, env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        assert run.stdout.splitlines()[-1].split() == ["0", "False", "False", "0"], run.stdout
    assert len(list(cfg.parent.glob("warehouse/reo/ds=*/part-0.parquet"))) == 2


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").strip()
    except OSError:
        return b""


def test_no_second_temporary_server_where_prefects_launcher_is_loaded(tmp_path):
    """Where Prefect's server package is imported (its own launcher may run a
    temporary server in this process), fairmon starts none and leaves
    PREFECT_API_URL unset, so Prefect keeps using its own."""
    import os
    import subprocess
    import sys

    script = (
        "import importlib, os\n"
        "importlib.import_module('prefect.server' + '.api.server')\n"
        "from fairmon.pipelines.orchestration.prefect_guard import launch_temporary_server\n"
        "print(launch_temporary_server(), os.environ.get('PREFECT_API_URL'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update({"PREFECT_HOME": str(tmp_path / "home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"})
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["None", "None"]
    assert temporary_servers(tmp_path / "home") == []


_PORT_RACE = """
import os, subprocess
import httpx
from fairmon.pipelines.orchestration import prefect_guard as g

class Proc:  # a server that lost its port (Prefect's exit code 3), then one that starts
    def __init__(self, code):
        self.code, self.returncode = code, code
    def poll(self):
        return self.code
    def terminate(self):
        pass
    def wait(self, timeout=None):
        return 0

codes = [g._PORT_TAKEN, None]
ports = []
def popen(cmd, **kwargs):
    ports.append(cmd[cmd.index("--port") + 1])
    assert "PREFECT_API_URL" not in kwargs["env"]  # the server never points at an API
    return Proc(codes.pop(0))

class Response:
    status_code = 200

subprocess.Popen = popen
g.guard_temporary_server = lambda: None

def get(self, url, **kwargs):  # only the server started last answers
    if ports[-1] not in url:
        raise httpx.ConnectError("refused")
    return Response()

def port(url):
    return url.split(":")[-1].split("/")[0]

httpx.Client.get = get
first = g.launch_temporary_server()
g.wait_for_api(5)
print(len(ports), port(first) == ports[0], port(os.environ["PREFECT_API_URL"]) == ports[1])
"""


def test_a_temporary_server_that_lost_its_port_is_started_again_on_another():
    """Between choosing a free port and the server binding it another process
    may take it (Prefect's server then exits with code 3): fairmon starts the
    server again on a new port and points PREFECT_API_URL there, as
    Prefect's own launcher does."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    run = subprocess.run([sys.executable, "-c", _PORT_RACE], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["2", "True", "True"]


def test_an_ab_control_that_matches_no_arm_is_a_named_warning(tmp_path):
    cfg = _sim(tmp_path, days=1, arms={"a": {}, "b": {1: 1.5}})
    text = cfg.read_text()
    cfg.write_text(
        text[: text.index("[ab]")] + '[ab]\ncontrol = "ctl"\n' if "[ab]" in text else text + '\n[ab]\ncontrol = "ctl"\n'
    )
    r = _cli("run", "-c", cfg, "--date", D0)
    assert r.exit_code == 0  # a warning: the day still publishes its REO
    dq = read_table(tmp_path / "sim" / "warehouse", "dq_results")
    row = dq.filter(pl.col("suite") == "ab_config").row(0, named=True)
    assert row["failed_warning"] == "ab_arm_present" and row["success"]
    assert "ctl" in row["details"]
    assert not partition_path(tmp_path / "sim" / "warehouse", "reo_ab", D0).exists()


def test_a_group_value_equal_to_the_missing_sentinel_is_refused(tmp_path):
    root = tmp_path / "p"
    (root / "in").mkdir(parents=True)
    n = 600
    rng = np.random.default_rng(4)
    pl.DataFrame(
        {
            "ds": [D0] * n,
            "traffic": ["default"] * 400 + ["random"] * 200,
            "arm": "all",
            "s1": (rng.random(n) < 0.3).astype(int),
            "grp": ["(missing)" if i % 7 == 0 else ("a" if i % 2 else None) for i in range(n)],
        }
    ).write_csv(root / "in" / f"{D0}.csv")
    (root / "f.toml").write_text(
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\n'
        'path = "in/{ds}.csv"\nsignals = ["s1"]\nattributes = ["grp"]\nrandom_window_days = 1\n'
    )
    r = _cli("run", "-c", root / "f.toml", "--date", D0)
    assert r.exit_code == 1 and "attribute_not_reserved[grp]" in r.output  # quarantined, named


def test_labels_without_any_gold_label_give_nan_rows_with_a_reason(tmp_path):
    paths = write_labeling_simulation(LabelingSpec(start=D0, days=1, items_per_day=2000, seed=1), tmp_path / "a")
    f = next((tmp_path / "a" / "labels").iterdir())
    pl.read_csv(f).with_columns(pl.lit(None, dtype=pl.String).alias("gold_label")).write_csv(f)
    assert _cli("run", "-c", paths["config"], "--date", D0).exit_code == 0
    sdt = read_table(tmp_path / "a" / "warehouse", "sdt")
    assert sdt.height > 0  # a row per group and labeler, not an empty partition
    assert sdt.get_column("cost_ratio").is_nan().all()
    assert sdt.get_column("reason").str.contains("n_pos = 0, n_neg = 0").all()


def test_an_attribute_added_to_the_config_is_counted_from_then_on(tmp_path):
    root = tmp_path / "p"
    (root / "in").mkdir(parents=True)
    n = 900
    rng = np.random.default_rng(8)
    pl.DataFrame(
        {
            "ds": [D0] * n,
            "traffic": ["default"] * 600 + ["random"] * 300,
            "arm": "all",
            "s1": (rng.random(n) < 0.4).astype(int),
            "grp": rng.choice(["a", "b"], n),
            "region": rng.choice(["n", "s"], n),
        }
    ).write_csv(root / "in" / f"{D0}.csv")
    text = (
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\n'
        'path = "in/{ds}.csv"\nsignals = ["s1"]\nattributes = ATTRS\nrandom_window_days = 1\n'
        "[quality]\nsufficiency_epsilon = 0.9\n"
    )
    (root / "f.toml").write_text(text.replace("ATTRS", '["grp"]'))
    assert _cli("run", "-c", root / "f.toml", "--date", D0).exit_code == 0
    (root / "f.toml").write_text(text.replace("ATTRS", '["grp", "region"]'))
    r = _cli("run", "-c", root / "f.toml", "--date", D0)
    assert r.exit_code == 0, r.output
    gc = read_table(root / "wh", "group_counts").filter(pl.col("attribute") == "region")
    assert sorted(gc.filter(pl.col("traffic") == "default").get_column("group").to_list()) == ["n", "s"]
    assert gc.filter(pl.col("traffic") == "default").get_column("n").sum() == 600  # no '(missing)' left over


def test_no_raw_input_value_reaches_the_data_docs_html(tmp_path):
    root = tmp_path / "p"
    (root / "in").mkdir(parents=True)
    n = 300
    traffic = ["default"] * 200 + ["random"] * 99 + ["<script>alert(1)</script>"]
    for ds, last in ((D0, traffic[-1]), (D0 + dt.timedelta(days=1), "random")):  # the second day is good
        pl.DataFrame(
            {
                "ds": [ds] * n,
                "traffic": [*traffic[:-1], last],
                "arm": "all",
                "s1": [i % 3 == 0 for i in range(n)],
                "grp": ["<img src=x onerror=alert(2)>" if i % 2 else "b" for i in range(n)],
            }
        ).write_csv(root / "in" / f"{ds}.csv")
    (root / "f.toml").write_text(
        'warehouse = "wh"\nduckdb = "f.duckdb"\n[impressions]\nformat = "contract"\n'
        'path = "in/{ds}.csv"\nsignals = ["s1"]\nattributes = ["grp"]\nrandom_window_days = 1\n'
    )
    # a range with a good day runs past the pre-flight (a warning for D0), so the gate writes its Data Docs
    r = _cli("backfill", "-c", root / "f.toml", "--start", D0, "--end", D0 + dt.timedelta(days=1))
    assert r.exit_code == 1 and "traffic_known" in r.output  # the bad value is caught and named
    pages = list((root / "gx" / "uncommitted" / "data_docs").rglob("*.html"))
    assert pages
    for page in pages:
        html = page.read_text(errors="replace")
        assert "<script>alert(1)" not in html and "<img src=x" not in html, page
