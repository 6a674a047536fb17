"""Whether a Prefect API is configured, read without importing Prefect
(pipelines/orchestration/prefect_guard.py ``api_url_without_prefect``): the environment, then the active
profile of the profiles file; None (ask Prefect) when a source fairmon does not read is present."""

import os
import subprocess
import sys

import pytest

from fairmon.pipelines.orchestration.prefect_guard import api_url_without_prefect

PROFILES = 'active = "team"\n[profiles.team]\nPREFECT_API_URL = "http://prefect.example:4200/api"\n[profiles.bare]\n'


@pytest.fixture
def env(tmp_path, monkeypatch):
    for k in ("PREFECT_API_URL", "PREFECT_PROFILE", "PREFECT_PROFILES_PATH"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "cwd").mkdir()
    return tmp_path


def test_the_environment_then_the_active_profile(env, monkeypatch):
    cwd = env / "cwd"
    assert api_url_without_prefect(cwd) == ""  # no file: Prefect's own ephemeral profile, no API
    (env / "home" / "profiles.toml").write_text(PROFILES)
    assert api_url_without_prefect(cwd) == "http://prefect.example:4200/api"
    monkeypatch.setenv("PREFECT_PROFILE", "bare")
    assert api_url_without_prefect(cwd) == ""
    monkeypatch.setenv("PREFECT_PROFILE", "unknown")
    assert api_url_without_prefect(cwd) is None  # a profile the file does not hold: Prefect answers
    monkeypatch.setenv("PREFECT_API_URL", "http://env:4200/api")
    assert api_url_without_prefect(cwd) == "http://env:4200/api"


def test_sources_fairmon_does_not_read_defer_to_prefect(env):
    cwd = env / "cwd"
    (cwd / "pyproject.toml").write_text("[tool.other]\nx = 1\n")
    assert api_url_without_prefect(cwd) == ""
    for name, text in (("pyproject.toml", "[tool.prefect]\napi.url = 'x'\n"), ("prefect.toml", ""), (".env", "")):
        (cwd / name).write_text(text)
        assert api_url_without_prefect(cwd) is None
        (cwd / name).unlink()


@pytest.mark.slow  # imports Prefect in a subprocess
def test_prefect_itself_agrees_on_a_profile(env):
    (env / "home" / "profiles.toml").write_text(PROFILES)
    code = "from prefect.settings import PREFECT_API_URL; print(PREFECT_API_URL.value() or '')"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=env / "cwd", env=os.environ, timeout=120
    )
    assert out.stdout.strip() == api_url_without_prefect(env / "cwd") == "http://prefect.example:4200/api"


@pytest.mark.slow  # stages a simulated day in a subprocess
def test_ingest_runs_in_process_without_importing_prefect(env, monkeypatch):
    """``fairmon ingest`` with no Prefect API configured stages its files in process, as ``run`` does."""
    from fairmon.pipelines.simulation.simulated import write_simulation
    from fairmon.transforms.simulators.impressions import SimulationSpec

    spec = SimulationSpec(days=1, rows_per_day=2000, random_rows_per_day=500, random_pool_days=1, seed=3)
    cfg = write_simulation(spec, env / "cwd" / "sim", "csv")["config"]
    script = (
        "import sys\nfrom typer.testing import CliRunner\nfrom fairmon.pipelines.faces.cli import app\n"
        f"r = CliRunner().invoke(app, ['ingest', '-c', {str(cfg)!r}, '--date', '{spec.start}'])\n"
        "print(r.exit_code, r.output.count(': staged'), 'prefect' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=env / "cwd", timeout=300)
    assert out.stdout.split() == ["0", "2", "False"], out.stderr
