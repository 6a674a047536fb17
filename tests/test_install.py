"""The lean install (issue 41 item 4): ``pip install fairmon`` is the estimators,
the Python API and the command line; Prefect, GX, pandas, PyArrow (extra
``pipeline``), Jinja and Matplotlib (``report``), OpenDP (``audit``) and
PySpark (``spark``) are extras, and a command or function whose extra is
missing says which, with its ``pip install`` line (fairmon/extras.py,
pipelines/faces/cli_extras.py). A core install is simulated by hiding the
extras' modules (``sys.modules[name] = None``: importing them then fails as
if they were not installed); .ci/wheel-check installs the core wheel for real.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fairmon import extras
from fairmon.pipelines.faces import cli_extras
from fairmon.pipelines.faces.cli import app

REPO = Path(__file__).resolve().parents[1]
#: Every module an extra installs, hidden in the "core install" subprocesses.
EXTRA_MODULES = sorted(m for mods in extras.EXTRA_MODULES.values() for m in mods)
HIDE = f"import sys\nfor _m in {EXTRA_MODULES!r}:\n    sys.modules[_m] = None\n"


def _core(code: str, *args: str) -> subprocess.CompletedProcess:
    """``code`` run by a fresh interpreter that cannot import any extra's module."""
    return subprocess.run(
        [sys.executable, "-c", HIDE + textwrap.dedent(code), *args], capture_output=True, text=True, cwd=REPO
    )


def test_extras_in_pyproject_are_the_modules_fairmon_names():
    """The extras of pyproject.toml install the modules :data:`fairmon.extras.EXTRA_MODULES` checks,
    and the core dependencies hold none of them."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    optional = project["optional-dependencies"]
    pip_name = {"great_expectations": "great_expectations", "jinja2": "jinja2"}

    def names(reqs: list[str]) -> set[str]:
        return {r.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip().lower() for r in reqs}

    for extra, modules in extras.EXTRA_MODULES.items():
        assert {pip_name.get(m, m) for m in modules} <= names(optional[extra]), extra
    assert not names(project["dependencies"]) & {m for mods in extras.EXTRA_MODULES.values() for m in mods}
    assert optional["all"] == ["fairmon[pipeline,report,audit,spark]"]


@pytest.mark.slow
def test_the_api_computes_an_reo_without_any_extra():
    """REO by hand: default traffic Q = (20, 10)/100, random P = (10, 10)/100, so U = Q/P = (2, 1) and
    REO = std/mean = 0.5/1.5 = 1/3 (seed 001 eq. 19); the delta-method SE with g = ∂REO/∂log U = (4/9, −4/9)
    is sqrt(16/81 · (1/20 + 1/10 + 1/10 + 1/10)). The cluster buckets (sql/impressions_bucket.sql on DuckDB)
    need no PyArrow either: with more ids than cluster_exact_max (here 0) each id's bucket is
    int(sha1(id)[:8], 16) % 128."""
    out = _core(
        """
        import json, polars as pl, fairmon
        from fairmon.api.counting import cluster_bucket
        rows = pl.DataFrame({
            "traffic": ["default"] * 100 + ["random"] * 100,
            "g": (["a"] * 50 + ["b"] * 50) * 2,
            "y": [1] * 20 + [0] * 30 + [1] * 10 + [0] * 40 + [1] * 10 + [0] * 40 + [1] * 10 + [0] * 40,
            "uid": [f"u{i}" for i in range(200)],
        })
        r = fairmon.reo(rows, group="g", label="y").row(0, named=True)
        c = fairmon.reo(rows, group="g", label="y", cluster="uid").row(0, named=True)
        buckets = cluster_bucket(rows.get_column("uid"), exact=0).to_list()
        heavy = sorted(m for m in ("pandas", "pyarrow", "prefect", "great_expectations", "opendp", "matplotlib",
                                   "jinja2", "pyspark", "typer", "rich") if sys.modules.get(m) is not None)
        print(json.dumps({"reo": r["reo"], "se": r["se"], "reo_c": c["reo"], "buckets": buckets, "heavy": heavy}))
        """
    )
    assert out.returncode == 0, out.stderr
    got = __import__("json").loads(out.stdout)
    assert got["reo"] == pytest.approx(1 / 3, rel=1e-12)
    assert got["se"] == pytest.approx((16 / 81 * 0.35) ** 0.5, rel=1e-12)
    assert got["reo_c"] == pytest.approx(1 / 3, rel=1e-12)
    assert got["buckets"] == [int(hashlib.sha1(f"u{i}".encode()).hexdigest()[:8], 16) % 128 for i in range(200)]
    assert got["heavy"] == []


@pytest.mark.slow
def test_the_command_line_names_the_missing_extra_without_a_traceback():
    main = "from fairmon.pipelines.faces.cli import main\nsys.argv = ['fairmon', *sys.argv[1:]]\nmain()\n"
    ran = _core(main, "run", "--date", "2026-01-01")
    assert ran.returncode == 2
    assert ran.stderr.strip() == (
        "error: 'fairmon run' needs the pipeline extra: pip install 'fairmon[pipeline]' "
        "(not installed: prefect, great_expectations, pandas, pyarrow)"
    )
    assert ran.stdout == ""
    assert _core(main, "--help").returncode == 0
    assert _core(main, "run", "--help").returncode == 0
    sized = _core(main, "sample-size", "--json")  # an estimator's command needs no extra
    assert sized.returncode == 0 and '"ratio"' in sized.stdout, sized.stderr


@pytest.mark.parametrize(
    ("argv", "extras_named"),
    [
        (["run", "--date", "2026-01-01"], "the pipeline extra: pip install 'fairmon[pipeline]'"),
        (["schedule", "show"], "the pipeline extra: pip install 'fairmon[pipeline]'"),
        (["report", "--start", "2026-01-01", "--end", "2026-01-02"], "the pipeline and report extras: "),
        (["demo", "--out", "d"], "the pipeline, report and audit extras: pip install 'fairmon[pipeline,report,audit]'"),
    ],
)
def test_each_command_checks_its_extras_before_it_runs(monkeypatch, tmp_path, argv, extras_named):
    monkeypatch.setattr(extras, "_installed", lambda module: module not in {"prefect", "jinja2", "opendp"})
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    assert f"error: 'fairmon {' '.join(argv[:2] if argv[0] == 'schedule' else argv[:1])}' needs {extras_named}" in (
        result.output.replace("\n", " ")
    )
    assert list(tmp_path.iterdir()) == []  # nothing written before the check


def test_every_command_needing_an_extra_is_guarded():
    guarded = {}
    for prefix, typer_app in [("", app)] + [(f"{g.name} ", g.typer_instance) for g in app.registered_groups]:
        for info in typer_app.registered_commands:
            name = prefix + cli_extras.command_name(info)
            guarded[name] = getattr(info.callback, "fairmon_extras", ())
    assert {k: v for k, v in guarded.items() if v} == cli_extras.COMMAND_EXTRAS


def test_an_import_that_fails_later_names_its_extra(capsys):
    error = ModuleNotFoundError("No module named 'pyarrow'", name="pyarrow.parquet")
    assert cli_extras.missing_module_exit(error, app, ["plan", "--start", "2026-01-01"]) == 2
    assert capsys.readouterr().err.strip() == (
        "error: 'fairmon plan' needs the pipeline extra: pip install 'fairmon[pipeline]' (not installed: pyarrow)"
    )
    other = ModuleNotFoundError("No module named 'numpy'", name="numpy")
    with pytest.raises(ModuleNotFoundError):  # not an extra's module: a broken install keeps its traceback
        cli_extras.missing_module_exit(other, app, ["run"])


def test_read_table_and_run_day_name_the_pipeline_extra(monkeypatch, tmp_path):
    import fairmon

    monkeypatch.setattr(extras, "_installed", lambda module: module != "pyarrow")
    with pytest.raises(extras.MissingExtraError, match=r"^fairmon.read_table needs the pipeline extra: pip install"):
        fairmon.read_table(tmp_path / "fairmon.toml", "reo")
    with pytest.raises(ImportError, match=r"fairmon.run_day needs the pipeline extra: .*\(not installed: pyarrow\)$"):
        fairmon.run_day(tmp_path / "fairmon.toml", "2026-01-01")


def test_the_lock_pins_every_requirement_within_its_range():
    """requirements.lock (what `make` installs and the tests ran with) holds a version of every core and
    extra requirement of pyproject.toml inside its declared range, so `pip install -c requirements.lock
    '.[pipeline,report,audit]'` (make demo) and `-r requirements.lock` (make test) agree with the wheel."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [*project["dependencies"]]
    reqs += [r for extra, rs in project["optional-dependencies"].items() if extra != "all" for r in rs]
    outside = []
    for r in map(Requirement, reqs):
        version = pins.get(canonicalize_name(r.name))
        if version is None or not r.specifier.contains(version, prereleases=True):
            outside.append(f"{r} (lock: {version})")
    assert outside == []
