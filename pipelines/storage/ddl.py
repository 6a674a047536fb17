"""SQL and documentation generated from the output-table registry
(:mod:`fairmon.transforms.registry`, DESIGN §1 "Tables are declared once").

The DuckDB file exposes the Parquet warehouse through views (one view per
table over its partitions, and ``<table>_published``): there is no second
copy of the outputs that could disagree with the files. Identifiers come only
from the registry and are checked against ``[A-Za-z_][A-Za-z0-9_]*`` (and
double-quoted); values are bound parameters, except the warehouse path inside
a view definition, which DuckDB cannot bind and which is quoted as a literal.
``python -m fairmon.pipelines.storage.ddl --markdown`` prints
the data dictionary that ``docs/tables.md`` holds (``make docs``); the
installed command ``fairmon tables [NAME] [--markdown]`` prints the same from
the registry, so it ships with the wheel.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import sys
from pathlib import Path

import polars as pl

from fairmon.transforms.registry import IDENTIFIER, TABLES, Column, Table, declaration, table

#: DuckDB type of each Polars dtype the registry uses.
DUCKDB_TYPES: dict[pl.DataType, str] = {
    pl.String: "VARCHAR",
    pl.Int64: "BIGINT",
    pl.Float64: "DOUBLE",
    pl.Boolean: "BOOLEAN",
    pl.Date: "DATE",
}


def ident(name: str) -> str:
    """``name`` double-quoted as an SQL identifier. Raises ValueError unless it
    matches ``[A-Za-z_][A-Za-z0-9_]*`` (so it needs no escaping)."""
    if not IDENTIFIER.fullmatch(name):
        raise ValueError(f"{name!r} is not an identifier [A-Za-z_][A-Za-z0-9_]*")
    return f'"{name}"'


def duckdb_type(dtype: pl.DataType) -> str:
    """The DuckDB column type for a registry dtype. Raises KeyError for a dtype the registry may not use."""
    try:
        return DUCKDB_TYPES[dtype]
    except KeyError:
        raise KeyError(f"no DuckDB type declared for {dtype}") from None


def sql_string(value: str) -> str:
    """``value`` as an SQL string literal (quotes doubled). Only for what DuckDB
    cannot bind: the warehouse path inside a view definition, a view's comment."""
    return "'" + value.replace("'", "''") + "'"


def parquet_glob(warehouse: Path, name: str) -> str:
    """The glob of every partition file of table ``name``: the warehouse's own
    path glob-escaped (``wh[1]*`` is a folder name, not a pattern; DuckDB's
    and Polars' globs take ``[[]`` as a literal ``[`` as Python's do)."""
    return str(Path(glob.escape(str(warehouse.resolve()))) / table(name).name / "ds=*" / "part-0.parquet")


def table_view_sql(name: str, warehouse: Path) -> str:
    """The DuckDB view ``name`` over the table's Parquet partitions (the one
    copy of the outputs, DESIGN §1), with the registry's columns, order and
    types (``ds`` from the partition path).

    The view's SQL depends on nothing but the registry and the warehouse
    path, so it never lags its files: it reads the glob with ``allow_empty``
    under a typed empty row set (``UNION ALL BY NAME``) each time it is
    queried, so a partition written after the view was created (a run
    killed between its publish and its refresh, a partition an older fairmon
    wrote without a later column, which reads as NULL) shows at once, and no
    partition reads as no rows of the declared columns, not DuckDB's "No
    files found"."""
    t = table(name)
    typed = ", ".join(f"NULL::{duckdb_type(c.dtype)} AS {ident(c.name)}" for c in t.stored_columns)
    cols = ", ".join(f"CAST({ident(c.name)} AS {duckdb_type(c.dtype)}) AS {ident(c.name)}" for c in t.stored_columns)
    rows = f"SELECT {typed} WHERE false UNION ALL BY NAME SELECT * FROM {read_parquet_sql(warehouse, name)}"
    return f"CREATE OR REPLACE VIEW {ident(t.name)} AS SELECT {cols} FROM ({rows})"


def read_parquet_sql(warehouse: Path, name: str) -> str:
    """``read_parquet(...)`` of table ``name``'s partitions, ``ds`` typed DATE from the path
    (no partition: no rows, of a single column ``empty``, DuckDB's ``allow_empty``)."""
    return (
        f"read_parquet({sql_string(parquet_glob(warehouse, name))}, hive_partitioning = true, "
        "hive_types = {'ds': DATE}, union_by_name = true, allow_empty = true)"
    )


def view_mark(sql: str) -> str:
    """The mark fairmon leaves on a view it created with ``sql`` (its comment,
    :func:`view_comment_sql`): a digest of the statement and of the DuckDB
    version that bound it. DuckDB stores a view's SQL in its own normal form,
    so the statement is compared through this mark: a view whose mark
    matches needs no ``CREATE`` again, and a DuckDB upgrade creates every
    view once more."""
    import duckdb  # here: the data dictionary (``fairmon tables``) needs no DuckDB

    return "fairmon view " + hashlib.sha256(f"{duckdb.__version__}\n{sql}".encode()).hexdigest()


def view_comment_sql(view: str, sql: str) -> str:
    """``COMMENT ON VIEW`` leaving :func:`view_mark` of ``sql`` on ``view``
    (``CREATE OR REPLACE`` clears a view's comment, so a view created
    otherwise carries no mark)."""
    return f"COMMENT ON VIEW {ident(view)} IS {sql_string(view_mark(sql))}"


def published_view_sql(name: str) -> str:
    """``<name>_published``: the rows of days whose latest run (by start time)
    published, and only the rows that run wrote (same ``run_id``): a day whose
    latest run failed, was quarantined or was killed is not published, and a
    day whose tables disagree on the run is not either (DESIGN §3).
    Raises ValueError for a table declared without a published view."""
    t = table(name)
    if not t.published_view:
        raise ValueError(f"table {name!r} has no published view")
    return (
        f"CREATE OR REPLACE VIEW {ident(t.name + '_published')} AS\n"
        f"SELECT t.* FROM {ident(t.name)} AS t JOIN {ident('published_runs')} AS r\n"
        "  ON t.ds = r.ds AND t.run_id = r.run_id"
    )


def column_checks(c: Column) -> str:
    """The generated checks of column ``c`` as the data dictionary (and
    ``fairmon tables``) shows them: ``not null``, a range."""
    parts = [] if c.nullable else ["not null"]
    if c.bounds is not None:
        b = c.bounds
        low = "−∞" if b.min_value is None else f"{b.min_value:g}"
        high = "∞" if b.max_value is None else f"{b.max_value:g}"
        opening = "(" if b.strict_min or b.min_value is None else "["
        parts.append(f"{opening}{low}, {high}{']' if b.max_value is not None else ')'}")
    return "; ".join(parts)


def _markdown_table(t: Table) -> list[str]:
    d = declaration(t.name)
    made_by = f"`{d.compute.__name__}` in " if d.compute is not None else ""
    out = [
        f"## `{t.name}`",
        "",
        t.description,
        "",
        f"- key: {', '.join(f'`{k}`' for k in t.key)}",
        f"- declared: {made_by}`{d.module}` (stage `{d.stage}`)",
        "- gate: generated checks (key unique, not null, ranges below)"
        + (f" and `expectations/{t.suite}.json`" if t.suite else ""),
        f"- published view: {'`' + t.name + '_published`' if t.published_view else 'none'}",
        f"- source: {t.source}",
        "",
        "| column | type | unit | checks | meaning |",
        "|---|---|---|---|---|",
    ]
    out += [
        f"| `{c.name}` | {duckdb_type(c.dtype)} | {c.unit} | {column_checks(c)} | {c.meaning.replace('|', '∣')} |"
        for c in t.stored_columns
    ]
    return [*out, ""]


def table_markdown(name: str) -> str:
    """Table ``name``'s section of the data dictionary, exactly as
    :func:`tables_markdown` writes it (``fairmon tables NAME --markdown``).
    Raises KeyError for a table the registry does not declare."""
    return "\n".join(_markdown_table(table(name))) + "\n"


def tables_markdown() -> str:
    """The data dictionary (``docs/tables.md``): every output table with its key,
    suite, view and source, and every column with type, unit and meaning."""
    lines = [
        "# Output tables",
        "",
        "Generated by `make docs` from the declarations the registry (`transforms/registry.py`) collects from",
        "the family modules that compute each table; do not edit by hand.",
        "Every table is Hive-partitioned Parquet, `<warehouse>/<table>/ds=YYYY-MM-DD/part-0.parquet`",
        "(the `ds` column lives in the path), one partition per run day (DESIGN §3).",
        "",
    ]
    for t in TABLES.values():
        lines += _markdown_table(t)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m fairmon.pipelines.storage.ddl --markdown``: print the data dictionary;
    ``--sql NAME``: print table NAME's generated view."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print docs/tables.md")
    ap.add_argument("--sql", metavar="TABLE", help="print the table's generated view")
    args = ap.parse_args(argv)
    if args.markdown:
        sys.stdout.write(tables_markdown())
    if args.sql:
        print(table_view_sql(args.sql, Path("<warehouse>")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
