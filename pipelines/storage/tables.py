"""SQL and documentation generated from the output-table registry
(:mod:`fairmon.transforms.tables`, DESIGN §1 "Tables are declared once").

Identifiers come only from the registry and are checked against
``[A-Za-z_][A-Za-z0-9_]*`` (and double-quoted); every value is a bound
parameter. ``python -m fairmon.pipelines.storage.tables --markdown`` prints
the data dictionary that ``docs/tables.md`` holds (``make docs``).
"""

from __future__ import annotations

import argparse
import sys

import polars as pl

from fairmon.transforms.tables import IDENTIFIER, TABLES, Table, table

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


def create_sql(name: str) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for table ``name``: its columns plus ``run_id``."""
    t = table(name)
    cols = ",\n    ".join(f"{ident(c.name)} {duckdb_type(c.dtype)}" for c in t.stored_columns)
    return f"CREATE TABLE IF NOT EXISTS {ident(t.name)} (\n    {cols}\n)"


def delete_day_sql(name: str) -> str:
    """Delete one day of table ``name`` (bind ``$ds``) before its new rows are inserted."""
    return f"DELETE FROM {ident(table(name).name)} WHERE ds = $ds"


def insert_sql(name: str, frame: str = "new_rows") -> str:
    """Insert the rows of the registered frame ``frame`` into table ``name``, matched by column name."""
    return f"INSERT INTO {ident(table(name).name)} BY NAME SELECT * FROM {ident(frame)}"


def published_view_sql(name: str) -> str:
    """``<name>_published``: the table restricted to days whose data-quality
    results (``dq_results``) are all successful. Raises ValueError for a table
    declared without a published view."""
    t = table(name)
    if not t.published_view:
        raise ValueError(f"table {name!r} has no published view")
    return (
        f"CREATE OR REPLACE VIEW {ident(t.name + '_published')} AS\n"
        f"SELECT t.* FROM {ident(t.name)} AS t\n"
        f"WHERE t.ds IN (SELECT ds FROM {ident('dq_results')} GROUP BY ds HAVING bool_and(success))"
    )


def _markdown_table(t: Table) -> list[str]:
    out = [
        f"## `{t.name}`",
        "",
        t.description,
        "",
        f"- key: {', '.join(f'`{k}`' for k in t.key)}",
        f"- gate suite: `expectations/{t.suite}.json`",
        f"- published view: {'`' + t.name + '_published`' if t.published_view else 'none'}",
        f"- source: {t.source}",
        "",
        "| column | type | unit | meaning |",
        "|---|---|---|---|",
    ]
    out += [
        f"| `{c.name}` | {duckdb_type(c.dtype)} | {c.unit} | {c.meaning.replace('|', '∣')} |" for c in t.stored_columns
    ]
    return [*out, ""]


def tables_markdown() -> str:
    """The data dictionary (``docs/tables.md``): every output table with its key,
    suite, view and source, and every column with type, unit and meaning."""
    lines = [
        "# Output tables",
        "",
        "Generated from the registry in `transforms/tables.py` by `make docs`; do not edit by hand.",
        "Every table is Hive-partitioned Parquet, `<warehouse>/<table>/ds=YYYY-MM-DD/part-0.parquet`",
        "(the `ds` column lives in the path), one partition per run day (DESIGN §3).",
        "",
    ]
    for t in TABLES.values():
        lines += _markdown_table(t)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m fairmon.pipelines.storage.tables --markdown``: print the data dictionary;
    ``--sql NAME``: print table NAME's generated DDL."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--markdown", action="store_true", help="print docs/tables.md")
    ap.add_argument("--sql", metavar="TABLE", help="print the table's generated DDL")
    args = ap.parse_args(argv)
    if args.markdown:
        sys.stdout.write(tables_markdown())
    if args.sql:
        print(create_sql(args.sql))
    return 0


if __name__ == "__main__":
    sys.exit(main())
