"""Whether a Prefect API is configured, read without importing Prefect
(pipelines/orchestration/prefect_settings.py ``api_url_without_prefect``): the environment, then the active
profile of the profiles file; None (ask Prefect) when a source fairmon does not read is present. Prefect's own
settings, in a process of their own, agree on every case the reader answers."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fairmon.pipelines.orchestration.prefect_settings import api_url_without_prefect

PROFILES = 'active = "team"\n[profiles.team]\nPREFECT_API_URL = "http://prefect.example:4200/api"\n[profiles.bare]\n'
#: No ``active`` key, and an "ephemeral" profile of the user's own that sets a URL: Prefect uses its shipped one.
NO_ACTIVE = '[profiles.team]\nPREFECT_API_URL = "http://team:4200/api"\n[profiles.ephemeral]\nPREFECT_API_URL = "x"\n'
TEAM = "http://prefect.example:4200/api"


def _clean_env(monkeypatch):
    for k in list(os.environ):
        if k.upper().startswith("PREFECT_"):
            monkeypatch.delenv(k)


@pytest.fixture
def env(tmp_path, monkeypatch):
    _clean_env(monkeypatch)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "cwd").mkdir()
    return tmp_path


def test_the_environment_then_the_active_profile(env, monkeypatch):
    cwd = env / "cwd"
    assert api_url_without_prefect(cwd) == ""  # no file: Prefect's own ephemeral profile, no API
    (env / "home" / "profiles.toml").write_text(PROFILES)
    assert api_url_without_prefect(cwd) == TEAM
    monkeypatch.setenv("PREFECT_PROFILE", "bare")
    assert api_url_without_prefect(cwd) == ""
    monkeypatch.setenv("PREFECT_PROFILE", "unknown")
    assert api_url_without_prefect(cwd) == ""  # a profile the file does not hold: Prefect's shipped default
    monkeypatch.setenv("PREFECT_API_URL", "http://env:4200/api")
    assert api_url_without_prefect(cwd) == "http://env:4200/api"
    monkeypatch.setenv("PREFECT_API_URL", "")
    assert api_url_without_prefect(cwd) == ""  # set empty in the environment: no API, whatever the profile says
    monkeypatch.setenv("prefect_api_url", "http://lower:4200/api")
    assert api_url_without_prefect(cwd) is None  # the name twice, in two cases: Prefect answers


def test_sources_fairmon_does_not_read_defer_to_prefect(env):
    cwd = env / "cwd"
    (cwd / "pyproject.toml").write_text("[tool.other]\nx = 1\n")
    assert api_url_without_prefect(cwd) == ""
    for name, text in (("pyproject.toml", "[tool.prefect]\napi.url = 'x'\n"), ("prefect.toml", ""), (".env", "")):
        (cwd / name).write_text(text)
        assert api_url_without_prefect(cwd) is None
        (cwd / name).unlink()
    (env / "home" / "profiles.toml").write_text("active = [")  # not TOML: Prefect warns and reads no profile
    assert api_url_without_prefect(cwd) is None


#: (name, environment, profiles file in $PREFECT_HOME or None for no PREFECT_HOME, the URL both must give).
CASES = [
    ("nothing set", {}, "", ""),
    ("environment only", {"PREFECT_API_URL": "http://env/api"}, "", "http://env/api"),
    ("profile only", {}, PROFILES, TEAM),
    ("environment over profile", {"PREFECT_API_URL": "http://env/api"}, PROFILES, "http://env/api"),
    ("empty environment over profile", {"PREFECT_API_URL": ""}, PROFILES, ""),
    ("lower-case name", {"prefect_api_url": "http://lower/api"}, "", "http://lower/api"),
    ("PREFECT_PROFILE without URL", {"PREFECT_PROFILE": "bare"}, PROFILES, ""),
    ("PREFECT_PROFILE not in the file", {"PREFECT_PROFILE": "nope"}, PROFILES, ""),
    ("empty PREFECT_PROFILE", {"PREFECT_PROFILE": ""}, PROFILES, TEAM),
    ("no active key", {}, NO_ACTIVE, ""),
    ("no file: PREFECT_PROFILE ignored", {"PREFECT_PROFILE": "local"}, "", ""),
    ("test mode reads no profile", {"PREFECT_TEST_MODE": "1"}, PROFILES, ""),
    ("PREFECT_PROFILES_PATH", {"PREFECT_PROFILES_PATH": "elsewhere.toml"}, "", TEAM),
    ("shipped profiles", {}, None, ""),
    ("shipped 'local' profile", {"PREFECT_PROFILE": "local"}, None, "http://127.0.0.1:4200/api"),
]

#: Prefect's own answer per case (``Settings()`` reads its sources when built; the profiles file's path is fixed
#: when ``prefect.settings`` is imported, from ``$HOME``, which each process sets before).
PREFECT_ANSWERS = """
import json, os, sys
from prefect.settings.models.root import Settings
base = dict(os.environ)
for env, cwd in json.loads(sys.argv[1]):
    os.environ.clear()
    os.environ.update({**base, **env})
    os.chdir(cwd)
    print(json.dumps(Settings().api.url or ""))
"""


def _case_dirs(tmp_path, i: int, env: dict, profiles: str | None) -> tuple[dict, str]:
    """Case ``i``'s folders: a working directory and, unless ``profiles`` is None, a PREFECT_HOME holding
    ``profiles`` as profiles.toml (when not empty); PREFECT_PROFILES_PATH is made absolute, holding PROFILES."""
    root = tmp_path / f"case{i}"
    (root / "cwd").mkdir(parents=True)
    env = dict(env)
    if profiles is not None:
        (root / "home").mkdir()
        env["PREFECT_HOME"] = str(root / "home")
        if profiles:
            (root / "home" / "profiles.toml").write_text(profiles)
    if "PREFECT_PROFILES_PATH" in env:
        (root / env["PREFECT_PROFILES_PATH"]).write_text(PROFILES)
        env["PREFECT_PROFILES_PATH"] = str(root / env["PREFECT_PROFILES_PATH"])
    return env, str(root / "cwd")


@pytest.mark.slow  # imports Prefect in a subprocess
@pytest.mark.parametrize("user_file", [False, True])
def test_prefect_itself_agrees_on_every_case(tmp_path, monkeypatch, user_file):
    """Each case answered by the reader and by Prefect's settings, with and without ~/.prefect/profiles.toml
    (``active = "team"``: it is read when no PREFECT_HOME or PREFECT_PROFILES_PATH is set)."""
    _clean_env(monkeypatch)
    home = tmp_path / "user"
    (home / ".prefect").mkdir(parents=True)
    if user_file:
        (home / ".prefect" / "profiles.toml").write_text(PROFILES)
    monkeypatch.setenv("HOME", str(home))
    runs = [_case_dirs(tmp_path, i, env, profiles) for i, (_, env, profiles, _) in enumerate(CASES)]
    out = subprocess.run(
        [sys.executable, "-c", PREFECT_ANSWERS, json.dumps(runs)],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.upper().startswith("PREFECT_")},
        timeout=120,
    )
    prefect = [json.loads(line) for line in out.stdout.splitlines()]
    mine = []
    for env, cwd in runs:
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            mine.append(api_url_without_prefect(Path(cwd)))
    expected = [url for *_, url in CASES]
    if user_file:  # the two cases without PREFECT_HOME read the user's file: its active profile, and no "local" one
        expected[-2:] = [TEAM, ""]
    names = [name for name, *_ in CASES]
    assert dict(zip(names, prefect, strict=True)) == dict(zip(names, expected, strict=True)), out.stderr
    assert dict(zip(names, mine, strict=True)) == dict(zip(names, expected, strict=True))


@pytest.mark.slow  # imports Prefect in a subprocess
def test_prefect_itself_agrees_on_a_profile(env):
    (env / "home" / "profiles.toml").write_text(PROFILES)
    code = "from prefect.settings import PREFECT_API_URL; print(PREFECT_API_URL.value() or '')"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=env / "cwd", env=os.environ, timeout=120
    )
    assert out.stdout.strip() == api_url_without_prefect(env / "cwd") == TEAM


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
