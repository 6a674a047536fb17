"""The ProPublica COMPAS two-year recidivism data as a score log (pure, no I/O).

Mapping (the bundled data/compas): ds = screening_date, model = "compas",
item_id = person_id, score = decile_score (1-10), outcome = two_year_recid,
attributes race, sex, age_cat. The ProPublica filter keeps the 6,172 rows
of the usual analysis (|days_b_screening_arrest| <= 30, is_recid != -1,
charge degree != O, score_text != N/A), precomputed as ``propublica_filter``.
"""

from __future__ import annotations

import polars as pl


def compas_scores(raw: pl.DataFrame, *, propublica_filter: bool = True) -> pl.DataFrame:
    """COMPAS rows as a raw scores frame (DESIGN §2 columns, values still raw).

    Raises ValueError naming a missing source column.
    """
    need = ["person_id", "screening_date", "decile_score", "two_year_recid", "race", "sex", "age_cat"]
    if propublica_filter:
        need.append("propublica_filter")
    missing = [c for c in need if c not in raw.columns]
    if missing:
        raise ValueError(f"COMPAS file lacks column(s) {missing}")
    if propublica_filter:
        keep = raw.get_column("propublica_filter").cast(pl.String).str.to_lowercase().is_in(["true", "1"])
        raw = raw.filter(keep)
    return raw.select(
        pl.col("screening_date").alias("ds"),
        pl.lit("compas").alias("model"),
        pl.col("person_id").cast(pl.String).alias("item_id"),
        pl.col("decile_score").alias("score"),
        pl.col("two_year_recid").alias("outcome"),
        "race",
        "sex",
        "age_cat",
    )
