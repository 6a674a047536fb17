"""The output-table registry: the machinery that collects each table's
declaration from the family module that computes it (DESIGN §1, "A table is
declared once, with its computation").

A family module declares a table next to the pure function that produces it::

    REO = Table("reo", "…", "seed 001 eq. 19", ("ds", "arm", "attribute"), (DS, ARM, …), "reo")

    @declares(REO_GROUP, stage="impressions", inputs=("counts", "ds"), enabled=has_impressions, output=0)
    @declares(REO, stage="impressions", inputs=("counts", "ds"), enabled=has_impressions, output=1)
    def reo_tables(counts, ds, *, …): …

Everything else is derived from the collected declarations: the Polars
schemas the estimators build their frames with, the DuckDB DDL, day
replacement and ``<table>_published`` views
(:mod:`fairmon.pipelines.storage.ddl`), the generated data-quality checks
(:func:`generated_checks`: key unique, not null, value ranges), the frame
check at write (:func:`check_frame`), the report's generic section and the
data dictionary ``docs/tables.md``.

Pure declarations (no I/O), so transforms may import it. Column order is the
order the frames and files have. ``run_id`` (:data:`RUN_ID`) is added to every
table's rows at publish time by the flow, not by the estimators.

Discovery (:func:`discover`) is lazy: the first lookup imports every module
that declares tables. :data:`TABLES` keeps the order of
:data:`FAMILY_MODULES`, then of declaration within a module, whatever order
the modules were imported in.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from fairmon.transforms.blas import single_blas_thread
from fairmon.transforms.column_bounds import Bounds, non_negative, positive, probability  # noqa: F401 (declarations import them here)

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Column:
    """One column: ``name`` (an SQL identifier), Polars ``dtype``, ``unit``
    (``-`` for labels and flags) and ``meaning`` (one sentence).

    ``nullable=False`` makes the gate check ``<name>_not_null`` (critical);
    ``bounds`` makes it check the value range (:class:`Bounds`)."""

    name: str
    dtype: pl.DataType
    unit: str
    meaning: str
    nullable: bool = True
    bounds: Bounds | None = None


@dataclass(frozen=True)
class Table:
    """One output table, Hive-partitioned by ``ds`` (DESIGN §3).

    ``columns`` are those the estimators produce (``ds`` first); ``key`` is
    the set of columns that identify a row within the whole table; ``suite``
    names the JSON suite in ``expectations/`` with the domain checks column
    metadata cannot express (None: only the generated checks). The gate runs
    them under the table's name (:func:`generated_checks`).
    ``published_view`` says whether DuckDB exposes ``<name>_published``;
    ``summary`` puts the day's rows in a run's result (``--json``, the terminal summary).
    ``section`` names the report section written for the table (None: the
    report shows it in a generic section built from this declaration).
    ``check_frame(frame, day)`` builds the frame its suite validates when the
    suite needs columns derived across rows (None: the frame as it is);
    ``day`` holds the day's other inputs (``totals``: rows staged per traffic
    and arm, or None).
    """

    name: str
    description: str
    source: str
    key: tuple[str, ...]
    columns: tuple[Column, ...]
    suite: str | None
    published_view: bool = True
    summary: bool = False
    section: str | None = None
    check_frame: Callable[[pl.DataFrame, dict], pl.DataFrame] | None = None

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        for ident in (self.name, *names):
            if not IDENTIFIER.fullmatch(ident):
                raise ValueError(f"table {self.name!r}: {ident!r} is not an identifier [A-Za-z_][A-Za-z0-9_]*")
        if len(set(names)) != len(names):
            raise ValueError(f"table {self.name!r}: duplicate column names")
        if names[:1] != ["ds"]:
            raise ValueError(f"table {self.name!r}: the first column must be ds (the partition)")
        if not set(self.key) <= set(names):
            raise ValueError(f"table {self.name!r}: key {self.key} names unknown columns")

    @property
    def schema(self) -> dict[str, pl.DataType]:
        """{column: Polars dtype} of the rows the estimators produce (without ``run_id``)."""
        return {c.name: c.dtype for c in self.columns}

    @property
    def stored_columns(self) -> tuple[Column, ...]:
        """The columns as stored: the estimators' columns plus :data:`RUN_ID`."""
        return (*self.columns, RUN_ID)


def always(cfg: Any) -> bool:
    """The default ``enabled``: the table is computed whatever the config."""
    return True


@dataclass(frozen=True)
class Declaration:
    """A table with how it is computed: the ``stage`` of the day that computes
    it, the named ``inputs`` the stage hands to ``compute`` (as keyword
    arguments), ``enabled(cfg)`` (whether the config asks for the table) and
    ``output`` (the index of the table in ``compute``'s returned tuple; None
    when it returns the frame itself). ``compute`` is None for a table
    computed outside the transforms (SQL counts, the gate's own results).

    An input ``"param=name"`` hands the stage's input ``name`` to parameter
    ``param`` (two tables of a stage naming different frames alike); an
    input ``<table>.<name>`` of the stage, when present, takes precedence
    over ``name`` for that table. ``options(cfg)`` gives the config-derived
    keyword arguments (None: none), so that the executor holds no per-table
    list. ``omit_empty``: a day whose frame has no rows publishes no
    partition of the table (a stage of traffic the day lacks)."""

    table: Table
    stage: str
    inputs: tuple[str, ...] = ()
    enabled: Callable[[Any], bool] = always
    compute: Callable | None = None
    output: int | None = None
    module: str = ""
    order: int = field(default=0, compare=False)
    options: Callable[[Any], dict] | None = field(default=None, compare=False)
    omit_empty: bool = False

    def config_options(self, cfg: Any) -> dict:
        """The keyword arguments config ``cfg`` gives ``compute`` ({} without ``options``)."""
        return {} if self.options is None or cfg is None else dict(self.options(cfg))

    def arguments(self, available: dict[str, Any]) -> dict[str, Any]:
        """{parameter: value} of the declared inputs, taken from ``available``.
        Raises KeyError naming the missing inputs."""
        args, missing = {}, []
        for spec in self.inputs:
            param, _, name = spec.partition("=")
            name = name or param
            own = f"{self.table.name}.{name}"
            if own in available:
                args[param] = available[own]
            elif name in available:
                args[param] = available[name]
            else:
                missing.append(name)
        if missing:
            raise KeyError(f"table {self.table.name!r} needs inputs {missing} of stage {self.stage!r}")
        return args

    def run(self, available: dict[str, Any], **options: Any) -> pl.DataFrame:
        """The table's frame: ``compute`` called with the declared inputs taken
        from ``available`` plus ``options`` (config-derived keyword arguments).
        Raises KeyError naming a missing input, TypeError without ``compute``."""
        if self.compute is None:
            raise TypeError(f"table {self.table.name!r} is computed outside the transforms (stage {self.stage!r})")
        out = self.compute(**self.arguments(available), **options)
        return out if self.output is None else out[self.output]


#: The family modules holding declarations, in the order of :data:`TABLES`: the order a stage computes its
#: tables in (:func:`run_stage`: a table may take an earlier one of its stage) and of a day's ``dq_results``.
FAMILY_MODULES: tuple[str, ...] = (
    "fairmon.transforms.reo.reo_tables",
    "fairmon.transforms.reo.stage",
    "fairmon.transforms.reo.ab_tables",
    "fairmon.transforms.decisions.decision_tables",
    "fairmon.transforms.decisions.sdt_tables",
    "fairmon.transforms.decisions.sdt_fit",
    "fairmon.transforms.envy.group",
    "fairmon.transforms.envy.envy_tables",
    "fairmon.transforms.envy.envy_summary",
    "fairmon.transforms.reach.reach_tables",
    "fairmon.transforms.reach.reach_beta",
    "fairmon.transforms.reach.stability_tables",
    "fairmon.transforms.reach.reach_groups",
    "fairmon.transforms.gate_frames",
    "fairmon.transforms.alerts.alert_tables",
)

#: Suites of input tables (validated at ingest; not output declarations).
INPUT_SUITES: tuple[str, ...] = (
    "impressions_raw",
    "impressions_day",
    "labels_raw",
    "scores_raw",
    "snapshot_factors",
    "snapshot_ratings",
    "snapshot_global",
)


class _Tables(Mapping):
    """{name: Table} of every declared table, in registry order. Iterating it
    (or asking for a name not yet declared) first imports every family module
    (:func:`discover`), so a caller always sees every table."""

    def __getitem__(self, name: str) -> Table:
        if name not in _DECLARATIONS:
            discover()
        return _DECLARATIONS[name].table

    def __iter__(self) -> Iterator[str]:
        discover()
        return iter(list(_DECLARATIONS))

    def __len__(self) -> int:
        discover()
        return len(_DECLARATIONS)

    def __contains__(self, name: object) -> bool:
        if name not in _DECLARATIONS:
            discover()
        return name in _DECLARATIONS


_DECLARATIONS: dict[str, Declaration] = {}
TABLES: Mapping[str, Table] = _Tables()
_DISCOVERED: list[bool] = []  # [True] once every family module was imported


def _rank(d: Declaration) -> tuple[int, int]:
    pos = FAMILY_MODULES.index(d.module) if d.module in FAMILY_MODULES else len(FAMILY_MODULES)
    return pos, d.order


def register(decl: Declaration) -> Declaration:
    """Add ``decl`` to the registry (keeping :data:`TABLES` in family order).
    Raises ValueError when another module already declared the table."""
    name = decl.table.name
    known = _DECLARATIONS.get(name)
    if known is not None and (known.module, known.table) != (decl.module, decl.table):
        raise ValueError(f"table {name!r} is declared twice: in {known.module} and {decl.module}")
    decl = Declaration(**{**decl.__dict__, "order": len(_DECLARATIONS) if known is None else known.order})
    _DECLARATIONS[name] = decl
    ordered = sorted(_DECLARATIONS.values(), key=_rank)
    _DECLARATIONS.clear()
    _DECLARATIONS.update((d.table.name, d) for d in ordered)
    return decl


def unregister(name: str) -> None:
    """Forget table ``name``'s declaration (a test's toy table, a module
    reloaded). Unknown names are ignored."""
    _DECLARATIONS.pop(name, None)


def declare(
    table: Table,
    *,
    stage: str,
    inputs: tuple[str, ...] = (),
    enabled: Callable[[Any], bool] = always,
    compute: Callable | None = None,
    output: int | None = None,
    module: str | None = None,
    options: Callable[[Any], dict] | None = None,
    omit_empty: bool = False,
) -> Table:
    """Declare ``table`` at module level (for a table computed in SQL or by the
    pipeline, ``compute`` None). ``module`` defaults to ``compute``'s module or
    the caller's; ``options`` and ``omit_empty`` as in :class:`Declaration`.
    Returns the table."""
    if module is None:
        module = compute.__module__ if compute is not None else _caller_module()
    register(
        Declaration(
            table, stage, tuple(inputs), enabled, compute, output, module, options=options, omit_empty=omit_empty
        )
    )
    return table


def declares(
    *tables: Table,
    stage: str,
    inputs: tuple[str, ...] = (),
    enabled: Callable[[Any], bool] = always,
    options: Callable[[Any], dict] | None = None,
    omit_empty: bool = False,
) -> Callable[[Callable], Callable]:
    """Decorator: the pure function computes ``tables`` (see :class:`Declaration`);
    with several, it returns a tuple of frames in that order. ``options(cfg)``:
    its config-derived keyword arguments. Returns the function unchanged."""

    def mark(fn: Callable) -> Callable:
        for i, t in enumerate(tables):
            output = i if len(tables) > 1 else None
            declare(
                t, stage=stage, inputs=inputs, enabled=enabled, compute=fn, output=output, module=fn.__module__,
                options=options, omit_empty=omit_empty,
            )  # fmt: skip
        return fn

    return mark


def _caller_module() -> str:
    import sys

    return sys._getframe(2).f_globals.get("__name__", "")


def declared(stage: str | None = None, cfg: Any = None) -> list[Declaration]:
    """The declarations of ``stage`` (every stage when None), in registry
    order; with ``cfg``, only those the config enables. The executor calls
    :meth:`Declaration.run` on each (one call per distinct ``compute`` is
    enough: :func:`run_stage`)."""
    discover()
    return [
        d
        for d in list(_DECLARATIONS.values())
        if (stage is None or d.stage == stage) and (cfg is None or d.enabled(cfg))
    ]


@single_blas_thread
def run_stage(stage: str, cfg: Any, available: dict[str, Any], options: dict[str, dict] | None = None) -> dict:
    """Every table of ``stage`` that config ``cfg`` enables, computed from
    ``available`` (the stage's named inputs) in registry order: {table:
    frame}, without the empty frames of ``omit_empty`` tables. A function
    declaring several tables runs once. Each table's keyword arguments are
    ``options[table]`` when given, else its declaration's ``options(cfg)``.
    A computed table is an input of the later tables of the stage, under
    its name. Runs with one BLAS thread (:mod:`fairmon.transforms.blas`: the
    same last bits on every run). Raises as :meth:`Declaration.run`."""
    options = options or {}
    available = dict(available)
    done: dict[int, Any] = {}
    out: dict[str, pl.DataFrame] = {}
    for d in declared(stage, cfg):
        if d.compute is None:
            continue
        key = id(d.compute)
        if key not in done:
            whole = Declaration(d.table, d.stage, d.inputs, d.enabled, d.compute, None, d.module)
            kwargs = options[d.table.name] if d.table.name in options else d.config_options(cfg)
            done[key] = whole.run(available, **kwargs)
        frame = done[key] if d.output is None else done[key][d.output]
        available[d.table.name] = frame
        if not (d.omit_empty and frame.is_empty()):
            out[d.table.name] = frame
    return out


#: The stage of tables computed over a project's history after its days run, not by a day (``alerts``).
ACROSS_DAYS_STAGE = "alerts"


def across_days(name: str) -> bool:
    """Whether table ``name`` is computed over the history (stage :data:`ACROSS_DAYS_STAGE`), not by a day's run."""
    return declaration(name).stage == ACROSS_DAYS_STAGE


def declaration(name: str) -> Declaration:
    """The declaration of table ``name``. Raises KeyError naming the known tables."""
    if name not in _DECLARATIONS:
        discover()
    try:
        return _DECLARATIONS[name]
    except KeyError:
        raise KeyError(f"no output table {name!r}; known: {', '.join(TABLES)}") from None


def table(name: str) -> Table:
    """The registry entry of ``name``. Raises KeyError naming the known tables."""
    return declaration(name).table


def polars_schema(name: str) -> dict[str, pl.DataType]:
    """{column: dtype} of the rows the estimators produce for table ``name``
    (without ``run_id``). Raises KeyError for an unknown table."""
    return table(name).schema


def generated_checks(t: Table) -> list[dict]:
    """The checks column metadata implies, as suite entries (the format of
    ``expectations/*.json``): ``key_unique`` on the key, then per column in
    order ``<column>_not_null`` (``nullable=False``) and its :class:`Bounds`.
    All critical. Types are not GX checks: :func:`check_frame` enforces them
    where frames are written."""
    out = [
        {
            "name": "key_unique",
            "type": "ExpectCompoundColumnsToBeUnique",
            "severity": "critical",
            "kwargs": {"column_list": list(t.key)},
        }
    ]
    for c in t.columns:
        if not c.nullable:
            out.append(
                {
                    "name": f"{c.name}_not_null",
                    "type": "ExpectColumnValuesToNotBeNull",
                    "severity": "critical",
                    "kwargs": {"column": c.name},
                }
            )
        if c.bounds is not None:
            out.append(
                {
                    "name": c.bounds.name,
                    "type": "ExpectColumnValuesToBeBetween",
                    "severity": "critical",
                    "kwargs": c.bounds.kwargs(c.name),
                }
            )
    return out


class SchemaMismatch(TypeError):
    """A frame's columns or dtypes differ from its table's declaration."""


def check_frame(name: str, frame: pl.DataFrame, *, extra: tuple[str, ...] = ("run_id",)) -> None:
    """Raise :class:`SchemaMismatch` naming table and column when ``frame``
    lacks a declared column, has an undeclared one (besides ``extra``) or a
    dtype other than declared (a Null-typed column, all nulls, passes)."""
    t = table(name)
    declared_schema = t.schema
    for col in declared_schema:
        if col not in frame.columns:
            raise SchemaMismatch(f"table {name!r}: column {col!r} is declared but missing from the frame")
    for col, dtype in frame.schema.items():
        if col in extra:
            continue
        if col not in declared_schema:
            raise SchemaMismatch(f"table {name!r}: column {col!r} is not declared (declared: {list(declared_schema)})")
        if dtype != declared_schema[col] and dtype != pl.Null:
            raise SchemaMismatch(f"table {name!r}: column {col!r} has dtype {dtype}, declared {declared_schema[col]}")


S, I, F, B, D = pl.String, pl.Int64, pl.Float64, pl.Boolean, pl.Date

#: Added to every row at publish time: the run that wrote it.
RUN_ID = Column(
    "run_id", S, "-", "The run that wrote the row; a day is consistent when every table carries the same run_id."
)

# Columns shared by several families' tables (their meaning is the same everywhere).
DS = Column("ds", D, "date (UTC)", "The log day the row describes (the partition).")
ARM = Column("arm", S, "-", "Experiment arm of default traffic; `all` without an experiment.")
ATTR = Column("attribute", S, "-", "Sensitive attribute defining the grouping (a configured attribute column).")
GROUP = Column(
    "group",
    S,
    "-",
    "Value of the attribute. Rows whose value is null are the group `(missing)` in `group_counts`; the estimates "
    "leave it out of their groups (its rows stay in the traffic totals).",
)
REASON = Column("reason", S, "-", "Why a value is NaN or flagged (null when every value is defined).")
CI_LOW = Column("ci_low", F, "as the estimate", "Lower bound of the confidence interval at `level`.")
CI_HIGH = Column("ci_high", F, "as the estimate", "Upper bound of the confidence interval at `level`.")
LEVEL = Column("level", F, "probability", "Confidence level of the interval (config `estimation.confidence_level`).")


def discover() -> None:
    """Import once every module that declares tables (DESIGN §1): :data:`FAMILY_MODULES` in order, then any other
    module of ``fairmon.transforms`` that declares one, so a new family module needs no edit here. Lazy (on first
    lookup): a family module imports this one and may look up its own tables meanwhile."""
    if _DISCOVERED:
        return
    _DISCOVERED.append(True)
    from fairmon.transforms.declaring_modules import declaring_modules

    for mod in (*FAMILY_MODULES, *(m for m in declaring_modules() if m not in FAMILY_MODULES)):
        importlib.import_module(mod)


def __getattr__(name: str):
    if name == "GATED_TABLES":
        #: Tables with a ``<table>_published`` view (days whose data-quality results all passed).
        return tuple(n for n, t in TABLES.items() if t.published_view)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
