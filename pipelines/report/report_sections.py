"""The report's table sections: the custom ones of reo_stage, rsp and
user_precision (seed 001 App. H, I.4) and a generic one, from the table's
declaration, for every table without a custom section."""

from __future__ import annotations

import polars as pl

from fairmon.pipelines.report.report_figures import ci_text, fmt
from fairmon.transforms.registry import TABLES, Table


def own_section(name: str) -> bool:
    """Whether the report writes a section of its own for table ``name`` (its
    declaration's ``section``); every other table gets :func:`generic_section`.
    Raises KeyError for an unknown table."""
    return TABLES[name].section is not None


#: Columns that carry a verdict or decision, shown as they are.
VERDICT_COLUMNS = ("verdict", "verdict_80pct", "decision", "fits")
#: Rows a generic section shows at most (the rest is counted in a reading).
GENERIC_MAX_ROWS = 20


def stage_reading(recall: dict, ranking: dict) -> str:
    """One sentence on which stage creates the disparity, from the two stage
    rows of ``reo_stage`` (seed 001 App. I.4): a stage counts only when its
    REO interval excludes parity (ci_low > 0), never by point estimates alone."""
    both = f"REO {fmt(recall['reo'])} {ci_text(recall['reo_ci_low'], recall['reo_ci_high'])} at recall, " + (
        f"{fmt(ranking['reo'])} {ci_text(ranking['reo_ci_low'], ranking['reo_ci_high'])} at ranking"
    )
    if not all(r["reo_ci_low"] == r["reo_ci_low"] for r in (recall, ranking)):
        return both + ": a stage's interval is undefined (see the table's reasons); no reading."
    excl = [s for s, r in (("recall", recall), ("ranking", ranking)) if r["reo_ci_low"] > 0]
    if len(excl) == 1:
        other = "ranking" if excl[0] == "recall" else "recall"
        return both + f": the {excl[0]} stage creates the disparity; the {other} stage is consistent with parity."
    if len(excl) == 2:
        return both + ": both stages depart from parity (U^sys = U^recall · U^rank)."
    return both + ": neither stage is distinguishable from parity."


def extra_sections(extras: dict[str, pl.DataFrame]) -> list[tuple[str, dict]]:
    """Tables and one-line readings of reo_stage, rsp and user_precision for the
    latest published day (seed 001 App. I.4, H.1, H.2)."""
    out = []
    stage = extras.get("reo_stage")
    if stage is not None and not stage.is_empty():
        last = stage.filter(pl.col("ds") == stage.get_column("ds").max())
        per = last.unique(["arm", "attribute", "stage"]).sort("attribute", "arm", "stage")
        readings = []
        for (arm, attr), g in per.group_by(["arm", "attribute"], maintain_order=True):
            by = {r["stage"]: r for r in g.iter_rows(named=True)}
            if "recall" in by and "ranking" in by:
                readings.append(f"arm {arm}, {attr}: " + stage_reading(by["recall"], by["ranking"]))
        rows = [
            [r["arm"], r["attribute"], r["stage"], fmt(r["reo"]), ci_text(r["reo_ci_low"], r["reo_ci_high"])]
            for r in per.iter_rows(named=True)
        ]
        out.append(
            (
                "Stage-wise REO",
                {"columns": ["arm", "attribute", "stage", "REO", "CI"], "rows": rows, "readings": readings},
            )
        )
    rsp = extras.get("rsp")
    if rsp is not None and not rsp.is_empty():
        last = rsp.filter(pl.col("ds") == rsp.get_column("ds").max()).sort("attribute", "arm", "group")
        rows = [
            [
                r["arm"],
                r["attribute"],
                r["group"],
                fmt(r["share_rec"]),
                fmt(r["share_pool"]),
                fmt(r["delta_U"]),
                fmt(r["rsp"]),
                ci_text(r["ci_low"], r["ci_high"]),
            ]
            for r in last.iter_rows(named=True)
        ]
        readings = [
            "RSP compares exposure shares with the candidate pool's, without labels: 0 is parity; it says who is "
            "shown, not whether they are shown to users who want them (that is REO)."
        ]
        out.append(
            (
                "Exposure parity (RSP)",
                {
                    "columns": [
                        "arm",
                        "attribute",
                        "group",
                        "share in recs",
                        "share in pool",
                        "ΔU (additive)",
                        "RSP",
                        "CI",
                    ],
                    "rows": rows,
                    "readings": readings,
                },
            )
        )
    prec = extras.get("user_precision")
    if prec is not None and not prec.is_empty():
        last = prec.filter(pl.col("ds") == prec.get_column("ds").max()).sort("attribute", "arm", "group")
        rows = [
            [
                r["arm"],
                r["attribute"],
                r["group"],
                str(r["n"]),
                fmt(r["precision"]),
                ci_text(r["ci_low"], r["ci_high"]),
                fmt(r["disparity"]),
                ci_text(r["disparity_ci_low"], r["disparity_ci_high"]),
            ]
            for r in last.iter_rows(named=True)
        ]
        readings = ["User-side precision: the share of recommended items each user group engages with."]
        out.append(
            (
                "User-side precision",
                {
                    "columns": ["arm", "attribute", "group", "n", "precision", "CI", "disparity", "CI"],
                    "rows": rows,
                    "readings": readings,
                },
            )
        )
    return out


def _value_columns(t: Table) -> list[str]:
    """The columns a generic section shows beside the key: the estimate the
    interval (``ci_low``/``ci_high``) belongs to when there is one (the
    column just before ``se`` or ``ci_low``), else the numeric non-key
    columns (at most four, and a ``p_value``/``q_value`` after them: the
    labelers' fit test's p-value was cut off, with its ``fits`` verdict)."""
    names = [c.name for c in t.columns]
    if "ci_low" in names and "ci_high" in names:
        anchor = names.index("se") if "se" in names and names.index("se") < names.index("ci_low") else None
        anchor = names.index("ci_low") if anchor is None else anchor
        return [names[anchor - 1]] if anchor > 0 and names[anchor - 1] not in t.key else []
    numeric = [c.name for c in t.columns if c.name not in t.key and c.dtype.is_numeric()]
    tests = [c for c in ("p_value", "q_value") if c in numeric[4:]]  # a test's answer is never cut off
    return numeric[:4] + tests


def generic_section(t: Table, frame: pl.DataFrame) -> tuple[str, dict] | None:
    """A section for table ``t`` from its declaration alone: the latest day's
    rows of ``frame`` with the key columns (``ds`` aside), the estimate ± its
    interval (when declared) and the verdict columns (when present), at most
    :data:`GENERIC_MAX_ROWS` rows. None for an empty frame. Returns (title,
    {columns, rows, readings}) as :func:`extra_sections`."""
    if frame.is_empty():
        return None
    day = frame.get_column("ds").max()
    key = [k for k in t.key if k != "ds" and k in frame.columns]
    values = [c for c in _value_columns(t) if c in frame.columns]
    has_ci = {"ci_low", "ci_high"} <= set(frame.columns) and bool(values)
    verdicts = [c for c in VERDICT_COLUMNS if c in frame.columns]
    last = frame.filter(pl.col("ds") == day).sort(key) if key else frame.filter(pl.col("ds") == day)
    rows = []
    for r in last.head(GENERIC_MAX_ROWS).iter_rows(named=True):
        row = [str(r[k]) for k in key]
        row += [fmt(r[v]) if isinstance(r[v], float) else str(r[v]) for v in values]
        row += [ci_text(r["ci_low"], r["ci_high"])] if has_ci else []
        row += [str(r[v]) for v in verdicts]
        rows.append(row)
    readings = [f"{t.description} Latest published day {day}."]
    if last.height > GENERIC_MAX_ROWS:
        readings.append(f"First {GENERIC_MAX_ROWS} of {last.height} rows (by {', '.join(key)}).")
    columns = [*key, *values, *(["CI"] if has_ci else []), *verdicts]
    return t.name, {"columns": columns, "rows": rows, "readings": readings}


def generic_sections(frames: dict[str, pl.DataFrame]) -> list[tuple[str, dict]]:
    """:func:`generic_section` of every declared table in ``frames`` without a
    section of its own (:func:`own_section`), in registry order."""
    out = []
    for name, t in TABLES.items():
        if name not in frames or own_section(name):
            continue
        section = generic_section(t, frames[name])
        if section is not None:
            out.append(section)
    return out
