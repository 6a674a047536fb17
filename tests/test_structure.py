"""The package's structure (DESIGN §1, issue 12): one namespace, no import
cycle, no private name used across modules, pure transforms, and a config
loaded once per run."""

import ast
import datetime as dt
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = {"src/fairmon": "fairmon", "pipelines": "fairmon.pipelines", "transforms": "fairmon.transforms"}


def _modules() -> dict[str, Path]:
    """{dotted module name: file} of every module of the installed namespace."""
    out = {}
    for folder, dotted in PACKAGE_DIRS.items():
        for f in (REPO / folder).rglob("*.py"):
            rel = f.relative_to(REPO / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([dotted, *parts])] = f
    return out


def _imports(tree: ast.AST) -> list[tuple[str, list[str]]]:
    """(module, names) of every import statement, at any depth."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [a.name for a in node.names]))
    return found


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_no_import_cycle_among_fairmon_modules():
    mods = _modules()
    graph = {m: set() for m in mods}
    for m, f in mods.items():
        for target, names in _imports(ast.parse(f.read_text())):
            for cand in [f"{target}.{n}" for n in names] + [target]:
                if cand in mods and cand != m:
                    graph[m].add(cand)
                    break
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for n in graph[m]:
            if state.get(n) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(n) :] + [n]))
            if n not in state:
                visit(n)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_no_private_name_is_used_across_modules():
    files = [*_modules().values(), *(REPO / "tests").glob("*.py"), *(REPO / "bench").glob("*.py")]
    offences = []
    for f in files:
        tree = ast.parse(f.read_text())
        fairmon_aliases = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fairmon"):
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        offences.append(f"{f.name}: from {node.module} import {a.name}")
                    fairmon_aliases.add(a.asname or a.name)
            elif isinstance(node, ast.Import):
                fairmon_aliases |= {
                    (a.asname or a.name).split(".")[0] for a in node.names if a.name.startswith("fairmon")
                }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in fairmon_aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                offences.append(f"{f.name}: {node.value.id}.{node.attr}")
    assert offences == []


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_transforms_stay_pure():
    for m, f in _modules().items():
        if not m.startswith("fairmon.transforms"):
            continue
        for target, _ in _imports(ast.parse(f.read_text())):
            root = target.split(".")[0]
            assert root not in {"prefect", "duckdb", "great_expectations", "typer", "rich"}, (m, target)
            assert not target.startswith("fairmon.pipelines"), (m, target)


def test_the_installed_namespace_is_fairmon_alone():
    import tomllib

    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert {p.split(".")[0] for p in cfg["packages"]} == {"fairmon"}
    assert set(cfg["package-dir"]) <= set(cfg["packages"])
    # every folder of the namespace that is a package ships (a forgotten subpackage would be absent from the wheel)
    folders = {
        ".".join([dotted, *f.parent.relative_to(REPO / folder).parts])
        for folder, dotted in PACKAGE_DIRS.items()
        for f in (REPO / folder).rglob("__init__.py")
    }
    assert folders <= set(cfg["packages"]), sorted(folders - set(cfg["packages"]))


def test_no_two_modules_share_a_name_across_folders():
    """A module's name says what it is: `audit.py` in two rooms made a reader ask which one (DESIGN §1)."""
    seen: dict[str, list[str]] = {}
    for m in _modules():
        leaf = m.rsplit(".", 1)[-1]
        if not m.endswith("__init__") and leaf not in {"pipelines", "transforms", "fairmon"}:
            seen.setdefault(leaf, []).append(m)
    shared = {k: v for k, v in seen.items() if len(v) > 1 and all(not x.endswith(f".{k}.{k}") for x in v)}
    packages = {m.rsplit(".", 1)[-1] for m, f in _modules().items() if f.name == "__init__.py"}
    assert {k: v for k, v in shared.items() if k not in packages} == {}


#: pipelines' rooms from the ground up: a room may import only rooms listed before it (DESIGN §1 "one-way graph")
PIPELINE_FLOORS = (
    "core",
    "storage",
    "checks",
    "simulation",
    "ingest",
    "executor",
    "privacy",
    "orchestration",
    "report",
    "faces",
)


def test_pipelines_rooms_form_a_one_way_graph():
    mods = _modules()
    offences = []
    for m, f in mods.items():
        parts = m.split(".")
        if parts[:2] != ["fairmon", "pipelines"] or len(parts) < 4:
            continue
        here = PIPELINE_FLOORS.index(parts[2])
        for target, names in _imports(ast.parse(f.read_text())):
            for cand in [target, *(f"{target}.{n}" for n in names)]:
                tp = cand.split(".")
                in_floors = tp[:2] == ["fairmon", "pipelines"] and len(tp) >= 3 and tp[2] in PIPELINE_FLOORS
                if in_floors and PIPELINE_FLOORS.index(tp[2]) > here:
                    offences.append(f"{m} imports {cand}")
    assert offences == []


#: Size limits of a production module (issue 36 item 7): a reader holds a module and a function in view.
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 100


def _oversized() -> dict[str, list[str]]:
    """{file relative to the repository: what is over a limit} over the installed namespace."""
    out: dict[str, list[str]] = {}
    for f in _modules().values():
        text = f.read_text()
        found = [f"{text.count(chr(10))} lines"] if text.count(chr(10)) > MAX_MODULE_LINES else []
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{node.name}: {length} lines")
        if found:
            out[f.relative_to(REPO).as_posix()] = found
    return out


@pytest.mark.slow  # over a quarter second (runs days, GX or many draws): make test-fast skips it
def test_no_module_or_function_is_over_its_size_limit():
    assert _oversized() == {}


@pytest.mark.usefixtures("prefect_harness")
def test_a_backfill_reads_its_config_once_and_ignores_edits_mid_run(tmp_path, monkeypatch):
    from fairmon.pipelines.core import config as config_module
    from fairmon.pipelines.core.config import load_config
    from fairmon.pipelines.orchestration.runner import run_days
    from fairmon.pipelines.simulation.simulated import write_simulation
    from fairmon.transforms.simulators.impressions import SimulationSpec

    start = dt.date(2026, 5, 1)
    spec = SimulationSpec(start=start, days=3, rows_per_day=3000, random_rows_per_day=1500, random_pool_days=3, seed=2)
    path = write_simulation(spec, tmp_path / "sim", "csv")["config"]
    reads = []
    real = config_module.tomllib.loads
    # tomllib is one module: Prefect's settings read their own TOML (profiles, pyproject) through it too
    monkeypatch.setattr(
        config_module.tomllib,
        "loads",
        lambda text: (reads.append(1) if "[impressions]" in text else None) or real(text),
    )
    cfg = load_config(path)
    days = [start + dt.timedelta(days=i) for i in range(3)]

    def edit_after_first_day(summary):
        if summary["ds"] == days[0]:  # a user edits the config while the backfill runs
            path.write_text(path.read_text().replace("confidence_level = 0.95", "confidence_level = 0.5"))

    results = run_days(cfg, days, config_path=str(path), on_day=edit_after_first_day)
    assert [r["status"] for r in results] == ["published"] * 3
    assert len(reads) == 1  # loaded once, by the caller; no hop reads it again
    assert {row["level"] for r in results for row in r["reo"]} == {0.95}
