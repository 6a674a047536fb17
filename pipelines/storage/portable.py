"""Count-stage SQL written once, for every engine (DESIGN §1 "Engines").

The statements the count stage runs over raw rows (profiles, duplicate ids,
envy flags, cluster buckets) are written in DuckDB's dialect restricted to
what Spark SQL also has, with two kinds of holes:

- ``{{name}}``: a list of column identifiers, rendered as ``"a", "b"``;
- ``{{name:text}}``: the same columns cast to text, ``CAST("a" AS VARCHAR), …``;
- ``{{name:bool}}``: the same columns cast to BOOLEAN, ``CAST("a" AS BOOLEAN), …``;
- ``{{name:key}}``: at most one column as it is, ``"a"``, or the constant
  ``''`` when the list is empty: a grouping key that may have no column
  (``__file`` when the rows are one file). Not cast to text: the key is only
  grouped and joined on within one statement, so a file index is not cast
  on every row (sql/impressions_bucket.sql).

The identifiers come only from the validated config or the file's own
columns, and each must match ``[A-Za-z_][A-Za-z0-9_]*`` (:func:`ident`), so
rendering cannot inject SQL; values stay bound parameters (``$name``).
DuckDB runs the rendered text as it is; the Spark engine runs the same text
translated by sqlglot (DuckDB → Spark dialect, ``$name`` → ``:name``). There
is no second hand-written copy of the query logic to drift. One DuckDB idiom
has no Spark spelling that sqlglot knows: a hexadecimal number read from text,
``CAST('0x' || h AS BIGINT)``, which becomes ``CAST(conv(h, 16, 10) AS BIGINT)``
(the same integer for up to 15 hex digits; the cluster bucket,
sql/impressions_bucket.sql).
"""

from __future__ import annotations

import functools
import re

from fairmon.pipelines.storage.db import sql_text
from fairmon.pipelines.storage.ddl import ident

_HOLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*(text|bool|key))?\s*\}\}")


def render(name: str, **columns: list[str] | tuple[str, ...]) -> str:
    """The statement ``sql/<name>.sql`` with each ``{{key}}`` hole filled by
    the quoted identifiers ``columns[key]`` (``{{key:text}}``: each cast to
    VARCHAR; ``{{key:bool}}``: to BOOLEAN; ``{{key:key}}``: its one column,
    ``''`` for an empty list), in DuckDB's dialect.

    Raises KeyError when a hole has no list, ValueError when a list is empty
    (a ``:key`` list: longer than one) or a name is not a plain identifier (:func:`ident`).
    """

    def fill(m: re.Match) -> str:
        cols = columns[m.group(1)]
        if m.group(2) == "key":
            if len(cols) > 1:
                raise ValueError(f"sql/{name}.sql: the key {m.group(1)!r} takes at most one column, got {list(cols)}")
            return ident(cols[0]) if cols else "''"
        if not cols:
            raise ValueError(f"sql/{name}.sql: the column list {m.group(1)!r} is empty")
        quoted = [ident(c) for c in cols]
        if m.group(2):
            kind = "VARCHAR" if m.group(2) == "text" else "BOOLEAN"
            return ", ".join(f"CAST({q} AS {kind})" for q in quoted)
        return ", ".join(quoted)

    return _HOLE.sub(fill, sql_text(name))


def _hex_cast(node):
    """``CAST('0x' || h AS <integer>)`` (DuckDB reads ``h`` as hex digits) as
    ``CAST(conv(h, 16, 10) AS <integer>)``, Spark's reading of the same digits."""
    from sqlglot import exp

    if isinstance(node, exp.Cast) and node.to.is_type(*exp.DataType.INTEGER_TYPES):
        inner = node.this
        if isinstance(inner, exp.DPipe) and isinstance(inner.this, exp.Literal) and inner.this.this == "0x":
            conv = exp.Anonymous(
                this="conv", expressions=[inner.expression, exp.Literal.number(16), exp.Literal.number(10)]
            )
            return exp.Cast(this=conv, to=node.to)
    return node


@functools.cache
def _to_spark(text: str) -> str:
    import sqlglot  # only the Spark engine needs it (extra fairmon[spark])

    out = sqlglot.parse(text, read="duckdb")
    if len(out) != 1:
        raise ValueError(f"expected one statement, got {len(out)}")
    return out[0].transform(_hex_cast).sql(dialect="spark")


def render_spark(name: str, **columns: list[str] | tuple[str, ...]) -> str:
    """:func:`render`, translated to Spark SQL by sqlglot (``$p`` becomes
    ``:p``, bound by ``spark.sql(text, args=…)``). Same errors as
    :func:`render`; sqlglot's ParseError if the text leaves the portable subset."""
    return _to_spark(render(name, **columns))
